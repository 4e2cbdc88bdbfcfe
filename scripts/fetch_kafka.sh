#!/usr/bin/env bash
# Fetches from Maven Central, for the tests that run Apache Kafka and Spark's own Kafka connector
# as peers: Apache Kafka (broker, tools, Java clients; version pinned in scripts/kafka/pom.xml)
# into .cache/kafka-VERSION/libs (tests/support/kafka_cluster.py), and Spark's built-in Kafka
# connector (scripts/kafka/spark-kafka-pom.xml) into .cache/spark-kafka-VERSION/libs. Needs
# Java 17+ and Maven (mvn). Safe to re-run: a complete fetch is kept and reused.
set -euo pipefail
cd "$(dirname "$0")/.."

# fetch POM VERSION_PROPERTY NAME [ARTIFACT_IDS]: copy POM's runtime dependencies (only
# ARTIFACT_IDS when given) into .cache/NAME-VERSION/libs
fetch() {
    local pom=$1 property=$2 name=$3 only=${4:-}
    local version dest
    version=$(sed -n "s:.*<$property>\(.*\)</$property>.*:\1:p" "$pom")
    dest=.cache/$name-$version/libs
    if [ -f "$dest/.complete" ]; then
        return 0
    fi
    rm -rf "$dest"
    mkdir -p "$dest"
    echo "setup: fetching $name $version jars into $dest" >&2
    local args=(-q -B -f "$pom" dependency:copy-dependencies -DincludeScope=runtime
        "-DoutputDirectory=$PWD/$dest")
    [ -z "$only" ] || args+=("-DincludeArtifactIds=$only")
    mvn "${args[@]}" >&2
    touch "$dest/.complete"
}

fetch scripts/kafka/pom.xml kafka.version kafka
fetch scripts/kafka/spark-kafka-pom.xml spark.version spark-kafka \
    spark-sql-kafka-0-10_2.13,spark-token-provider-kafka-0-10_2.13,kafka-clients,commons-pool2
