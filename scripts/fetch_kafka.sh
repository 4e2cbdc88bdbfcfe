#!/usr/bin/env bash
# Fetches Apache Kafka (broker, tools, Java clients; the version pinned in scripts/kafka/pom.xml)
# with its dependencies from Maven Central into .cache/kafka-VERSION/libs, for the tests that run
# Apache Kafka as a peer (tests/support/kafka_cluster.py). Needs Java 17+ and Maven (mvn).
# Safe to re-run: a complete fetch is kept and reused.
set -euo pipefail
cd "$(dirname "$0")/.."

POM=scripts/kafka/pom.xml
VERSION=$(sed -n 's:.*<kafka.version>\(.*\)</kafka.version>.*:\1:p' "$POM")
DEST=.cache/kafka-$VERSION/libs
if [ -f "$DEST/.complete" ]; then
    exit 0
fi
rm -rf "$DEST"
mkdir -p "$DEST"
echo "setup: fetching Apache Kafka $VERSION jars into $DEST" >&2
mvn -q -B -f "$POM" dependency:copy-dependencies -DincludeScope=runtime \
    -DoutputDirectory="$PWD/$DEST" >&2
touch "$DEST/.complete"
