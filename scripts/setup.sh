#!/usr/bin/env bash
# Installs everything onceflow needs on a fresh machine: a virtual environment in .venv with the
# package, its Spark extra and its test dependencies, a headless Java 17 runtime for PySpark
# when no `java` is on the PATH (the demo needs it), and, for the tests only, Debian's kcat and
# chromium and Apache Kafka's jars (scripts/fetch_kafka.sh, with Maven). Without apt and root or
# sudo, the test-only parts are skipped with a warning: the demo still runs, the kcat and
# console-browser tests are skipped and the Kafka tests fail saying what is missing. Safe to
# re-run.
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

if ! command -v java >/dev/null 2>&1; then
    echo "setup: installing a headless Java 17 runtime for PySpark" >&2
    apt_install openjdk-17-jre-headless
fi
# test-only tools: a host that cannot install them still gets a working onceflow
if ! command -v kcat >/dev/null 2>&1; then
    echo "setup: installing Debian's kcat (interop tests)" >&2
    apt_install kcat || echo "setup: could not install kcat; its interop tests will be skipped" >&2
fi
if ! command -v chromium >/dev/null 2>&1; then
    echo "setup: installing Debian's chromium (the console's browser tests)" >&2
    apt_install chromium || echo "setup: could not install chromium; the console's browser tests will be skipped" >&2
fi
if ! command -v mvn >/dev/null 2>&1; then
    echo "setup: installing Maven to fetch Apache Kafka for the peer tests" >&2
    apt_install maven || echo "setup: could not install Maven; the Kafka tests will fail" >&2
fi
if command -v mvn >/dev/null 2>&1; then
    bash scripts/fetch_kafka.sh || echo "setup: fetching Apache Kafka failed; the Kafka tests will fail" >&2
fi
