"""`onceflow users add|list|remove` against a broker process with a SASL_PLAINTEXT listener:
a user added by the CLI (password from stdin or the prompt) logs in with SCRAM through
confluent-kafka; removed, it cannot; `list` shows mechanisms and iterations and nothing
secret; refusals are one line and exit 1."""

from __future__ import annotations

import io
import os
import subprocess
import sys

import pytest
from support.sasl_broker import scram_login_works, start_sasl_broker

from onceflow.cli.main import main

pytestmark = pytest.mark.timeout(120)
SRC = os.path.join(os.path.dirname(__file__), "..", "..", "src")


@pytest.fixture(scope="module")
def sasl_broker(tmp_path_factory):
    broker = start_sasl_broker(tmp_path_factory.mktemp("cli-users") / "data")
    yield broker
    broker.stop()


def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def users(capsys, broker, *argv: str) -> tuple[int, str, str]:
    return run(capsys, "users", *argv, "--bootstrap-server", broker.bootstrap)


def stdin(monkeypatch, text: str) -> None:
    monkeypatch.setattr("sys.stdin", io.StringIO(text))


def test_add_list_log_in_remove(sasl_broker, capsys, monkeypatch):
    stdin(monkeypatch, "alice-Ω-secret\n")
    code, out, err = users(capsys, sasl_broker, "add", "alice", "--password-stdin")
    assert (code, out) == (0, "Set the SCRAM-SHA-512 credential of user alice.\n"), err
    stdin(monkeypatch, "alice-256\n")
    code, _, err = users(
        capsys, sasl_broker, "add", "alice", "--mechanism", "SCRAM-SHA-256",
        "--iterations", "8192", "--password-stdin",
    )  # fmt: skip
    assert code == 0, err
    code, out, _ = users(capsys, sasl_broker, "list", "alice")
    assert out.splitlines() == [
        "User\tMechanism\tIterations",
        "alice\tSCRAM-SHA-256\t8192",
        "alice\tSCRAM-SHA-512\t4096",
    ]
    assert scram_login_works(sasl_broker, "SCRAM-SHA-512", "alice", "alice-Ω-secret")
    assert scram_login_works(sasl_broker, "SCRAM-SHA-256", "alice", "alice-256")
    assert not scram_login_works(sasl_broker, "SCRAM-SHA-512", "alice", "alice-256")

    code, out, err = users(capsys, sasl_broker, "remove", "alice", "--mechanism", "SCRAM-SHA-512")
    assert (code, out) == (0, "Removed the SCRAM-SHA-512 credential(s) of user alice.\n"), err
    assert not scram_login_works(sasl_broker, "SCRAM-SHA-512", "alice", "alice-Ω-secret")
    assert scram_login_works(sasl_broker, "SCRAM-SHA-256", "alice", "alice-256")
    assert users(capsys, sasl_broker, "remove", "alice")[0] == 0  # every mechanism left
    assert not scram_login_works(sasl_broker, "SCRAM-SHA-256", "alice", "alice-256")
    code, out, err = users(capsys, sasl_broker, "list", "alice")
    assert code == 1
    assert err == "onceflow users: alice: RESOURCE_NOT_FOUND\n"


def test_the_prompt_asks_twice(sasl_broker, capsys, monkeypatch):
    answers = iter(["bob-pw", "bob-pw"])
    prompts = []
    monkeypatch.setattr("getpass.getpass", lambda prompt: prompts.append(prompt) or next(answers))
    code, _, err = users(capsys, sasl_broker, "add", "bob")
    assert code == 0, err
    assert prompts == ["Password for bob: ", "Retype the password: "]
    assert scram_login_works(sasl_broker, "SCRAM-SHA-512", "bob", "bob-pw")

    answers = iter(["one", "other"])
    code, _, err = users(capsys, sasl_broker, "add", "carol")
    assert (code, err) == (1, "onceflow users: the passwords differ\n")
    assert "carol" not in users(capsys, sasl_broker, "list")[1]


def test_list_every_user_shows_no_secret(sasl_broker, capsys, monkeypatch):
    stdin(monkeypatch, "dave-pw\n")
    assert users(capsys, sasl_broker, "add", "dave", "--password-stdin")[0] == 0
    code, out, _ = users(capsys, sasl_broker, "list")
    assert code == 0
    assert "dave\tSCRAM-SHA-512\t4096" in out.splitlines()
    assert "dave-pw" not in out
    credentials = (sasl_broker.data_dir / "scram-credentials.json").read_text()
    assert "dave-pw" not in credentials


@pytest.mark.parametrize(
    ("argv", "code", "message"),
    [
        (("add", "eve", "--iterations", "100", "--password-stdin"), 2, "--iterations must be"),
        (("add", "eve", "--mechanism", "PLAIN"), 2, "invalid choice: 'PLAIN'"),
        (("remove", "nobody"), 1, "user 'nobody' has no SCRAM credentials"),
        (
            ("remove", "nobody", "--mechanism", "SCRAM-SHA-256"),
            1,
            "user 'nobody': RESOURCE_NOT_FOUND (Attempt to delete a user credential that does not",
        ),
    ],
)
def test_refusals(sasl_broker, capsys, monkeypatch, argv, code, message):
    stdin(monkeypatch, "pw\n")
    if code == 2:
        with pytest.raises(SystemExit) as exited:
            users(capsys, sasl_broker, *argv)
        assert exited.value.code == 2
        assert message in capsys.readouterr().err
    else:
        exit_code, _, err = users(capsys, sasl_broker, *argv)
        assert exit_code == 1
        assert err.startswith(f"onceflow users: {message}")


def test_the_command_reads_the_password_from_a_real_stdin(sasl_broker):
    argv = ["users", "add", "frank", "--password-stdin", "--bootstrap-server"]
    done = subprocess.run(
        [sys.executable, "-m", "onceflow", *argv, sasl_broker.bootstrap],
        input=b"frank-pw\n",
        capture_output=True,
        env={**os.environ, "PYTHONPATH": SRC},
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert scram_login_works(sasl_broker, "SCRAM-SHA-512", "frank", "frank-pw")
