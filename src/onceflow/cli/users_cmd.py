"""`onceflow users add|list|remove`: SCRAM users over KIP-554's AlterUserScramCredentials and
DescribeUserScramCredentials, like `kafka-configs.sh --entity-type users --alter
--add-config 'SCRAM-SHA-512=[password=...]'`.

- `add NAME [--mechanism SCRAM-SHA-512|SCRAM-SHA-256] [--iterations N]` — sets the user's
  credential for the mechanism (default SCRAM-SHA-512, 4096 iterations), replacing one it
  has. The password is read from a prompt (typed twice) or, with `--password-stdin`, from the
  first line of standard input; never from the command line. The salt and salted password are
  computed here and only they are sent, as Kafka's admin clients do.
- `list [NAME ...]` — users with their mechanisms and iteration counts (never salts or keys);
  every user when no name is given.
- `remove NAME [--mechanism M]` — deletes the user's credential for M, or every credential
  the user has when no mechanism is given.

A new credential counts from the next login; sessions already open keep going. Needs ALTER
(add, remove) or DESCRIBE (list) on the CLUSTER when the broker checks ACLs. Output of `list`
is tab-separated with a header line. A refusal prints one line to stderr and exits 1; bad
usage exits 2.
"""

from __future__ import annotations

import argparse
import getpass
import secrets
import sys
from dataclasses import dataclass

from onceflow.cli.admin_request import Send, run_request
from onceflow.cli.namespace import Subparsers, from_args
from onceflow.cli.options import CommandError, add_action, add_command
from onceflow.protocol.errors import ErrorCode
from onceflow.protocol.messages.alter_user_scram_credentials import (
    AlterUserScramCredentialsRequest,
)
from onceflow.protocol.messages.describe_user_scram_credentials import (
    DescribeUserScramCredentialsRequest,
    DescribeUserScramCredentialsResponse,
)
from onceflow.security.scram import (
    DEFAULT_ITERATIONS,
    MAX_ITERATIONS,
    MIN_ITERATIONS,
    SALT_BYTES,
    ScramMechanism,
    salted_password,
)

NAME = "users"
MECHANISMS = {m.mechanism_name: m for m in ScramMechanism}
DEFAULT_MECHANISM = ScramMechanism.SCRAM_SHA_512.mechanism_name

_Deletion = AlterUserScramCredentialsRequest.ScramCredentialDeletion
_Upsertion = AlterUserScramCredentialsRequest.ScramCredentialUpsertion
_UserName = DescribeUserScramCredentialsRequest.UserName
_Result = DescribeUserScramCredentialsResponse.DescribeUserScramCredentialsResult


@dataclass(frozen=True)
class AddOptions:
    parser: argparse.ArgumentParser
    name: str
    mechanism: str
    iterations: int
    password_stdin: bool


@dataclass(frozen=True)
class ListOptions:
    names: list[str]


@dataclass(frozen=True)
class RemoveOptions:
    name: str
    mechanism: str | None


def add_parser(subparsers: Subparsers) -> None:
    """Register the `users` sub-command and its actions."""
    actions = add_command(
        subparsers, NAME, "add, list and remove SCRAM users (KIP-554)", __doc__.split("\n\n", 1)[1]
    )

    add = add_action(actions, "add", "set a user's SCRAM credential", run_add)
    add.add_argument("name", metavar="NAME")
    add.add_argument("--mechanism", choices=sorted(MECHANISMS), default=DEFAULT_MECHANISM)
    add.add_argument(
        "--iterations",
        type=int,
        default=DEFAULT_ITERATIONS,
        metavar="N",
        help=f"PBKDF2 iterations, {MIN_ITERATIONS}-{MAX_ITERATIONS} (default {DEFAULT_ITERATIONS})",
    )
    add.add_argument(
        "--password-stdin", action="store_true", help="read the password from standard input"
    )

    listing = add_action(actions, "list", "users, mechanisms and iterations", run_list)
    listing.add_argument("names", metavar="NAME", nargs="*", help="only these users")

    remove = add_action(actions, "remove", "delete a user's SCRAM credentials", run_remove)
    remove.add_argument("name", metavar="NAME")
    remove.add_argument(
        "--mechanism", choices=sorted(MECHANISMS), help="only this one (default: all)"
    )


def _read_password(args: AddOptions) -> str:
    if args.password_stdin:
        password = sys.stdin.readline().rstrip("\r\n")
    else:
        password = getpass.getpass(f"Password for {args.name}: ")
        if getpass.getpass("Retype the password: ") != password:
            raise CommandError("the passwords differ")
    if not password:
        raise CommandError("the password is empty")
    return password


def _describe(send: Send, names: list[str] | None) -> list[_Result]:
    users = None if names is None else [_UserName(name=n) for n in names]
    response = send(DescribeUserScramCredentialsRequest(users=users))
    if response.error_code != ErrorCode.NONE:
        raise CommandError(f"{ErrorCode(response.error_code).name}: {response.error_message}")
    return response.results


def _alter(send: Send, deletions: list[_Deletion], upsertions: list[_Upsertion]) -> None:
    request = AlterUserScramCredentialsRequest(deletions=deletions, upsertions=upsertions)
    for result in send(request).results:
        if result.error_code != ErrorCode.NONE:
            code = ErrorCode(result.error_code).name
            raise CommandError(f"user {result.user!r}: {code} ({result.error_message})")


def run_add(namespace: argparse.Namespace) -> int:
    args = from_args(AddOptions, namespace)
    if not MIN_ITERATIONS <= args.iterations <= MAX_ITERATIONS:
        args.parser.error(f"--iterations must be {MIN_ITERATIONS}-{MAX_ITERATIONS}")
    mechanism = MECHANISMS[args.mechanism]

    def action(send: Send) -> int:
        password = _read_password(args)
        salt = secrets.token_bytes(SALT_BYTES)
        upsertion = _Upsertion(
            name=args.name,
            mechanism=int(mechanism),
            iterations=args.iterations,
            salt=salt,
            salted_password=salted_password(mechanism, password, salt, args.iterations),
        )
        _alter(send, [], [upsertion])
        print(f"Set the {mechanism.mechanism_name} credential of user {args.name}.")
        return 0

    return run_request(namespace, NAME, action)


def run_list(namespace: argparse.Namespace) -> int:
    args = from_args(ListOptions, namespace)

    def action(send: Send) -> int:
        results = _describe(send, args.names or None)
        print("User\tMechanism\tIterations")
        failed = []
        for r in results:
            if r.error_code != ErrorCode.NONE:
                failed.append(f"{r.user}: {ErrorCode(r.error_code).name}")
            for info in r.credential_infos:
                mechanism = ScramMechanism(info.mechanism).mechanism_name
                print(f"{r.user}\t{mechanism}\t{info.iterations}")
        if failed:
            raise CommandError("; ".join(failed))
        return 0

    return run_request(namespace, NAME, action)


def run_remove(namespace: argparse.Namespace) -> int:
    args = from_args(RemoveOptions, namespace)

    def action(send: Send) -> int:
        if args.mechanism is not None:
            mechanisms = [MECHANISMS[args.mechanism]]
        else:
            (result,) = _describe(send, [args.name])
            if result.error_code == ErrorCode.RESOURCE_NOT_FOUND:
                raise CommandError(f"user {args.name!r} has no SCRAM credentials")
            mechanisms = [ScramMechanism(i.mechanism) for i in result.credential_infos]
        deletions = [_Deletion(name=args.name, mechanism=int(m)) for m in mechanisms]
        _alter(send, deletions, [])
        names = ", ".join(m.mechanism_name for m in mechanisms)
        print(f"Removed the {names} credential(s) of user {args.name}.")
        return 0

    return run_request(namespace, NAME, action)
