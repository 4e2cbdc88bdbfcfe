"""The ACL recipe of docs/spark-operations.md ("ACLs for a query"), on onceflow's broker and on
Apache Kafka (its OIDC validator and StandardAuthorizer, support.oauth_kafka): a
streaming query (onceflow source and exactly-once sink) logged in with OAUTHBEARER (OIDC client
credentials from the local test issuer, passed as `kafka.`-prefixed Spark options) runs with
exactly the table's ACLs, and without any one of them fails with that ACL's authorization
error, leaving the output without committed rows. Names are the table's, with the topics and
the prefix made unique per run."""

from __future__ import annotations

import re
import shlex
import uuid
from dataclasses import dataclass
from pathlib import Path

import pytest
from security.acl_helpers import allow, binding_filter
from support.kafka_tools import ACLS, run_tool
from support.oauth_kafka import SIGNED, start_oauth_kafka
from support.oidc_issuer import AUDIENCE, ISSUER, OidcIssuer, oidc_config
from support.sasl_broker import start_sasl_broker
from support.topics import create_topics, produce

from onceflow.client.admin import AdminClient
from onceflow.security.acl import AclBinding, AclOperation, PatternType, ResourceType
from onceflow.spark.orders import read_committed

pytestmark = pytest.mark.timeout(900)

DOC = Path(__file__).resolve().parents[2] / "docs" / "spark-operations.md"
SECTION = "## ACLs for a query"
SECRET = "orders-secret"
ROWS = 12


@dataclass(frozen=True)
class Recipe:
    principal: str
    input: str
    output: str
    prefix: str
    acls: tuple[tuple[str, str, str, str], ...]  # resource, pattern, name, operation


def read_recipe() -> Recipe:
    text = DOC.read_text()
    start = text.index(SECTION)
    section = text[start : text.index("\n## ", start + 1)]
    principal = re.search(r"`(User:[^`]+)`", section)[1]
    names = re.findall(r"reading `([^`]+)`, writing `([^`]+)`", section)[0]
    prefix = re.search(r"`transactional\.id\.prefix=([^`]+)`", section)[1]
    rows = re.findall(r"^\| (\w+) \| (\w+) \| `([^`]+)` \| (\w+) \|", section, re.M)
    return Recipe(principal, names[0], names[1], prefix, tuple(rows))


RECIPE = read_recipe()


def renamed(name: str, run: str) -> str:
    """A table name with the run's unique topics and prefix."""
    for doc_name in (RECIPE.prefix, RECIPE.output, RECIPE.input):  # the longest first
        if doc_name in name:
            return name.replace(doc_name, f"{doc_name}-{run}")
    raise ValueError(name)


def bindings(run: str, without: int | None = None) -> list[AclBinding]:
    return [
        allow(
            AclOperation[op],
            renamed(name, run),
            pattern_type=PatternType[pattern],
            resource_type=ResourceType[r],
            principal=RECIPE.principal,
        )
        for i, (r, pattern, name, op) in enumerate(RECIPE.acls)
        if i != without
    ]


@pytest.fixture(scope="module")
def issuer(tmp_path_factory):
    client = RECIPE.principal.removeprefix("User:")
    with OidcIssuer(tmp_path_factory.mktemp("issuer"), {client: SECRET}) as it:
        yield it


@dataclass(frozen=True)
class KafkaPeer:
    """Apache Kafka as the query's cluster: setup on PLAINTEXT, the query on OAUTH_SIGNED."""

    bootstrap: str
    sasl_bootstrap: str


@pytest.fixture(scope="module", params=["onceflow", pytest.param("kafka", marks=pytest.mark.kafka)])
def broker(request, tmp_path_factory, issuer):
    directory = tmp_path_factory.mktemp(f"acl-{request.param}")
    if request.param == "kafka":
        cluster = start_oauth_kafka(directory, issuer)
        yield KafkaPeer(cluster.bootstrap, cluster.listener_bootstrap(SIGNED))
        cluster.stop()
        return
    broker = start_sasl_broker(
        directory / "data",
        **{
            "sasl.enabled.mechanisms": "OAUTHBEARER",
            "sasl.oauthbearer.jwks.endpoint.url": issuer.jwks_url,
            "sasl.oauthbearer.expected.audience": AUDIENCE,
            "sasl.oauthbearer.expected.issuer": ISSUER,
            "authorizer.class.name": "onceflow.security.authorizer.AclAuthorizer",
            "super.users": "User:ANONYMOUS",  # the PLAINTEXT setup listener
        },
    )
    yield broker
    broker.stop()


def run_query(session, broker, issuer, tmp_path, without: int | None) -> tuple[str, str | None]:
    """(the run's output topic, the query's error or None) with the recipe's ACLs, less one."""
    run = uuid.uuid4().hex[:6]
    source, output = renamed(RECIPE.input, run), renamed(RECIPE.output, run)
    create_topics(broker.bootstrap, [source, output], 2)
    produce(broker.bootstrap, source, [b"%d" % i for i in range(ROWS)], 2)
    with AdminClient({"bootstrap.servers": broker.bootstrap}) as admin:
        assert all(r.error_code == 0 for r in admin.create_acls(bindings(run, without)))
    client = RECIPE.principal.removeprefix("User:")
    login = oidc_config(broker.sasl_bootstrap, issuer, client, SECRET)
    options = {f"kafka.{k}": v for k, v in login.items()}
    reader = session.readStream.format("onceflow").options(**options)
    query = (
        reader.option("subscribe", source)
        .option("startingOffsets", "earliest")
        .load()
        .select("value")
        .writeStream.format("onceflow")
        .options(**options)
        .option("topic", output)
        .option("transactional.id.prefix", renamed(RECIPE.prefix, run))
        .option("kafka.transaction.timeout.ms", "60000")
        .option("checkpointLocation", str(tmp_path / f"checkpoint-{run}"))
        .trigger(availableNow=True)
        .start()
    )
    try:
        query.awaitTermination(300)
    except Exception as exc:  # StreamingQueryException: the error is also query.exception()
        return output, str(exc)
    finally:
        query.stop()
    error = query.exception()
    return output, None if error is None else str(error)


def test_the_recipe_is_enough(session, broker, issuer, tmp_path):
    output, error = run_query(session, broker, issuer, tmp_path, None)
    assert error is None
    assert len(read_committed(broker.bootstrap, output, 2)) == ROWS


EXPECTED_ERROR = {
    "TOPIC": "TOPIC_AUTHORIZATION_FAILED|TopicAuthorizationFailed",
    "GROUP": "GROUP_AUTHORIZATION_FAILED|GroupAuthorizationFailed",
    "TRANSACTIONAL_ID": "TRANSACTIONAL_ID_AUTHORIZATION_FAILED|TransactionalIdAuthorizationFailed",
}


@pytest.mark.parametrize(
    "without", range(len(RECIPE.acls)), ids=[f"{a[0]}-{a[3]}-{a[2]}" for a in RECIPE.acls]
)
def test_without_one_acl_the_query_fails_with_its_authorization_error(
    session, broker, issuer, tmp_path, without
):
    output, error = run_query(session, broker, issuer, tmp_path, without)
    assert error is not None, f"the query ran without {RECIPE.acls[without]}"
    assert re.search(EXPECTED_ERROR[RECIPE.acls[without][0]], error), error[-2000:]
    assert read_committed(broker.bootstrap, output, 2) == []


def doc_commands() -> list[list[str]]:
    """The arguments of each `kafka-acls.sh` command of the section's sh block."""
    text = DOC.read_text()
    start = text.index(SECTION)
    block = re.search(r"```sh\n(.*?)```", text[start:], re.DOTALL)[1]
    commands = block.replace("\\\n", " ").splitlines()
    return [shlex.split(command)[1:] for command in commands if command.strip()]


def test_the_kafka_acls_commands_create_exactly_the_table(broker, tmp_path):
    admin_properties = tmp_path / "admin.properties"
    admin_properties.write_text("security.protocol=PLAINTEXT\n")  # ANONYMOUS is a super user
    for args in doc_commands():
        args = [broker.bootstrap if a == "HOST:9092" else a for a in args]
        args = [str(admin_properties) if a == "admin.properties" else a for a in args]
        run_tool(ACLS, *args).check()
    with AdminClient({"bootstrap.servers": broker.bootstrap}) as admin:
        created = admin.describe_acls(binding_filter(principal=RECIPE.principal))
    table_names = {name for _, _, name, _ in RECIPE.acls}  # the query runs use other names
    ours = {
        (b.pattern.resource_type.name, b.pattern.pattern_type.name, b.pattern.name,
         b.entry.operation.name)
        for b in created
        if b.pattern.name in table_names
    }  # fmt: skip
    assert ours == set(RECIPE.acls)
