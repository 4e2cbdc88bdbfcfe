"""ACL lookup cost: `AclAuthorizer.authorize` with 10 000 random ACLs vs none.

The ACL set is half LITERAL, half PREFIXED topic ACLs (prefix lengths 3 to 20, so many distinct
lengths to probe) for 50 principals, ALLOW and DENY mixed. Requests are a fixed mix: a third hit
a literal name, a third a name under a stored prefix, a third a name no ACL applies to. Each
variant is timed in rounds, alternating the order, and the median round is kept. Appends the
run to bench/results/acl_lookup.json and prints one line.

    .venv/bin/python bench/acl_lookup.py
    .venv/bin/python bench/acl_lookup.py --acls 100000 --requests 20000 --rounds 7
"""

from __future__ import annotations

import argparse
import datetime
import random
import statistics
import string
import sys
import time
from pathlib import Path

from broker_throughput import append_result, machine

from onceflow.security.acl import (
    AccessControlEntry,
    AclBinding,
    AclOperation,
    PatternType,
    PermissionType,
    ResourcePattern,
    ResourceType,
)
from onceflow.security.authorizer import AclAuthorizer

RESULTS = Path(__file__).parent / "results" / "acl_lookup.json"
OPERATIONS = [AclOperation.READ, AclOperation.WRITE, AclOperation.DESCRIBE, AclOperation.ALL]
HOSTS = ["*", "10.0.0.1", "10.0.0.2"]


def random_name(rng: random.Random, length: int) -> str:
    return "".join(rng.choices(string.ascii_lowercase + "-.", k=length))


def random_acls(rng: random.Random, count: int, principals: list[str]) -> list[AclBinding]:
    acls = []
    for i in range(count):
        prefixed = i % 2 == 1
        name = random_name(rng, rng.randint(3, 20) if prefixed else rng.randint(5, 40))
        acls.append(
            AclBinding(
                ResourcePattern(
                    ResourceType.TOPIC,
                    name,
                    PatternType.PREFIXED if prefixed else PatternType.LITERAL,
                ),
                AccessControlEntry(
                    rng.choice(principals),
                    rng.choice(HOSTS),
                    rng.choice(OPERATIONS),
                    PermissionType.DENY if rng.random() < 0.2 else PermissionType.ALLOW,
                ),
            )
        )
    return acls


def requests_for(rng: random.Random, acls: list[AclBinding], count: int, principals: list[str]):
    """(principal, host, operation, resource type, name): literal hits, prefix hits, misses."""
    literal = [b.pattern.name for b in acls if b.pattern.pattern_type == PatternType.LITERAL]
    prefixes = [b.pattern.name for b in acls if b.pattern.pattern_type == PatternType.PREFIXED]
    requests = []
    for i in range(count):
        if i % 3 == 0 and literal:
            name = rng.choice(literal)
        elif i % 3 == 1 and prefixes:
            name = rng.choice(prefixes) + random_name(rng, rng.randint(0, 15))
        else:
            name = "miss-" + random_name(rng, rng.randint(5, 30))
        principal = rng.choice(principals)
        requests.append(
            (principal, "10.0.0.1", rng.choice(OPERATIONS[:3]), ResourceType.TOPIC, name)
        )
    return requests


def time_round(authorizer: AclAuthorizer, requests: list) -> float:
    """Seconds per authorize() call over one pass of `requests`."""
    authorize = authorizer.authorize
    start = time.perf_counter()
    for request in requests:
        authorize(*request)
    return (time.perf_counter() - start) / len(requests)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--acls", type=int, default=10_000)
    parser.add_argument("--requests", type=int, default=30_000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--seed", type=int, default=10)
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()

    rng = random.Random(args.seed)
    principals = [f"User:user{i}" for i in range(50)] + ["User:*"]
    acls = random_acls(rng, args.acls, principals)
    requests = requests_for(rng, acls, args.requests, principals[:-1])
    variants = {
        "no_acls": AclAuthorizer(allow_everyone_if_no_acl_found=True),
        "with_acls": AclAuthorizer(acls),
    }
    allowed = sum(variants["with_acls"].authorize(*r) for r in requests)
    timings: dict[str, list[float]] = {name: [] for name in variants}
    order = list(variants)
    for _ in range(args.rounds):
        for name in order:
            timings[name].append(time_round(variants[name], requests))
        order.reverse()
    median_us = {name: statistics.median(t) * 1e6 for name, t in timings.items()}
    ratio = median_us["with_acls"] / median_us["no_acls"]
    summary = (
        f"authorize(): {median_us['no_acls']:.2f} us with no ACLs, "
        f"{median_us['with_acls']:.2f} us with {len(variants['with_acls'])} ACLs "
        f"({ratio:.1f}x; {allowed}/{len(requests)} requests allowed)"
    )
    run = {
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "machine": machine(),
        "config": {
            "acls": len(variants["with_acls"]),
            "requests": len(requests),
            "rounds": args.rounds,
            "seed": args.seed,
            "mix": "1/3 literal hits, 1/3 prefix hits, 1/3 misses; ACLs half LITERAL, half "
            "PREFIXED (lengths 3-20), 20% DENY, 51 principals",
        },
        "median_us_per_authorize": median_us,
        "rounds_us": {name: [t * 1e6 for t in ts] for name, ts in timings.items()},
        "ratio_with_vs_without": ratio,
        "allowed": allowed,
        "summary": summary,
    }
    append_result(args.out, run)
    print(summary)
    return 0


if __name__ == "__main__":
    sys.exit(main())
