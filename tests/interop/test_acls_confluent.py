"""ACLs through confluent-kafka's AdminClient (librdkafka's CreateAcls/DescribeAcls/DeleteAcls)
against a broker with the ACL authorizer on; the ACLs survive kill -9."""

from __future__ import annotations

from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ResourcePatternType,
    ResourceType,
)

TIMEOUT = 30
AUTHZ = {
    "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
    "super.users": "User:ANONYMOUS",  # the PLAINTEXT client is the admin here
}


def _binding(name, operation, pattern=ResourcePatternType.LITERAL, rtype=ResourceType.TOPIC):
    return AclBinding(rtype, name, pattern, "User:alice", "*", operation, AclPermissionType.ALLOW)


def _all_topics() -> AclBindingFilter:
    return AclBindingFilter(
        ResourceType.TOPIC,
        None,
        ResourcePatternType.ANY,
        None,
        None,
        AclOperation.ANY,
        AclPermissionType.ANY,
    )


def test_create_describe_delete_acls_survive_kill_9(broker_factory):
    broker = broker_factory(extra_config=AUTHZ)
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    wanted = [
        _binding("orders", AclOperation.WRITE),
        _binding("orders-", AclOperation.READ, ResourcePatternType.PREFIXED),
        _binding("app", AclOperation.READ, rtype=ResourceType.GROUP),
    ]
    for future in admin.create_acls(wanted).values():
        assert future.result(TIMEOUT) is None
    assert set(admin.describe_acls(_all_topics()).result(TIMEOUT)) == set(wanted[:2])

    broker.restart(kill=True)
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    assert set(admin.describe_acls(_all_topics()).result(TIMEOUT)) == set(wanted[:2])
    [deleted] = admin.delete_acls([_all_topics()]).values()
    assert set(deleted.result(TIMEOUT)) == set(wanted[:2])
    assert admin.describe_acls(_all_topics()).result(TIMEOUT) == []
