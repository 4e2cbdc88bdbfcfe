"""The "Secure a broker in five minutes" walkthrough of docs/security.md runs as written.

Its ```` ```sh walkthrough ```` blocks are joined, in order, into one bash script (`set -euo
pipefail`, so any failing command fails the test) and run in an empty directory with `onceflow`
resolving to this checkout; the only change is the listener's port, 9093 in the docs, which
becomes a free one. The walkthrough starts the broker in the background and stops it in its
last block; the test kills what is left of the script's process group if a step fails.

Beyond every step succeeding: the ACLs it gives `User:app` are exactly the table of "The ACLs
of a consume-transform-produce application" (read by support/ctp_acls.py), the application's
write to its input is refused with TOPIC_AUTHORIZATION_FAILED, the record it wrote in a
transaction is read back, and the admin's bootstrap password left the broker's file.
"""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from support.ctp_acls import SECURITY_DOC, read_ctp_acls
from support.pki import OPENSSL

BLOCK = re.compile(r"^```sh walkthrough\n(.*?)^```$", re.M | re.S)
DOC_PORT = re.compile(r"\b9093\b")
SRC = Path(__file__).resolve().parents[2] / "src"
RUN_TIMEOUT_S = 90


def walkthrough_script(port: int) -> str:
    blocks = BLOCK.findall(SECURITY_DOC.read_text())
    assert len(blocks) >= 5, "docs/security.md lost its ```sh walkthrough blocks"
    lines = ["set -euo pipefail"]
    for step, block in enumerate(blocks, start=1):
        lines += [f"echo '>>> walkthrough block {step}'", DOC_PORT.sub(str(port), block)]
    return "\n".join(lines)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def run_walkthrough(directory: Path) -> subprocess.CompletedProcess:
    env = {
        **os.environ,
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
        "PYTHONPATH": str(SRC),
    }
    script = walkthrough_script(free_port())
    process = subprocess.Popen(
        ["bash", "-c", script],
        cwd=directory,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,  # its own process group: the background broker is in it
    )
    try:
        output, _ = process.communicate(timeout=RUN_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        output, _ = process.communicate()
        output += f"\n(killed after {RUN_TIMEOUT_S} s)"
    finally:
        try:  # a broker left running by a failed step
            os.killpg(process.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    return subprocess.CompletedProcess(process.args, process.returncode, output)


@pytest.mark.timeout(150)
@pytest.mark.skipif(OPENSSL is None, reason="openssl is not installed")
def test_security_walkthrough_runs_as_written(tmp_path):
    result = run_walkthrough(tmp_path)
    broker_log = (tmp_path / "broker.log").read_text() if (tmp_path / "broker.log").exists() else ""
    assert result.returncode == 0, f"{result.stdout[-4000:]}\nbroker log:\n{broker_log[-3000:]}"

    doc = read_ctp_acls()
    listed = set(re.findall(rf"^(\w+)\t(\S+)\tLITERAL\t{doc.principal}\t\*\t(\w+)\tALLOW$",
                            result.stdout, re.M))  # fmt: skip
    assert listed == {(a.resource_type, a.name, a.operation) for a in doc.acls}
    assert "TOPIC_AUTHORIZATION_FAILED" in result.stdout
    assert "refused, as it should be" in result.stdout
    assert "HELLO\nWORLD\n" in result.stdout
    assert "onceflow.sasl.bootstrap.users" not in (tmp_path / "broker.properties").read_text()
    assert "stopped" in broker_log
