#!/usr/bin/env bash
# Installs everything onceflow needs on a fresh machine: a virtual environment in .venv with the
# package, its Spark extra and its test dependencies, Debian's kcat for the interop tests, a
# headless Java 17 runtime for PySpark when no `java` is on the PATH, and Apache Kafka's jars
# (scripts/fetch_kafka.sh, with Maven) for the tests that run Kafka as a peer. Safe to re-run.
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
    "$PYTHON" -m venv .venv
fi
.venv/bin/python -m pip install --quiet --upgrade pip >/dev/null
.venv/bin/python -m pip install --quiet -e '.[test,spark,spark-connect]'  # spark-connect: Spark Connect tests

SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
apt_updated=""
apt_install() {
    if [ -z "$apt_updated" ]; then
        $SUDO apt-get update -qq >/dev/null || echo "setup: apt-get update failed; trying the install anyway" >&2
        apt_updated=1
    fi
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "$@" >/dev/null
}

if ! command -v kcat >/dev/null 2>&1; then
    echo "setup: installing Debian's kcat" >&2
    apt_install kcat
fi
if ! command -v java >/dev/null 2>&1; then
    echo "setup: installing a headless Java 17 runtime for PySpark" >&2
    apt_install openjdk-17-jre-headless
fi
if ! command -v mvn >/dev/null 2>&1; then
    echo "setup: installing Maven to fetch Apache Kafka for the peer tests" >&2
    apt_install maven
fi
bash scripts/fetch_kafka.sh
