"""CreateAcls, DescribeAcls and DeleteAcls handlers in-process: the switch, the CLUSTER ACL
they need, validation per entry, and durability across a restart."""

from __future__ import annotations

import asyncio
import json
import os

import pytest

from broker.authz_helpers import ADMIN, ALICE, creation, grant, open_authz_state
from broker.broker_helpers import call
from onceflow.protocol.api_keys import ApiKey
from onceflow.protocol.errors import ErrorCode
from onceflow.protocol.messages.create_acls import CreateAclsRequest
from onceflow.protocol.messages.delete_acls import DeleteAclsRequest
from onceflow.protocol.messages.describe_acls import DescribeAclsRequest
from onceflow.security.acl import AclOperation, PatternType, PermissionType, ResourceType

_Op = AclOperation
_R = ResourceType
ANY_FILTER = {
    "resource_type_filter": _R.ANY,
    "resource_name_filter": None,
    "pattern_type_filter": PatternType.ANY,
    "principal_filter": None,
    "host_filter": None,
    "operation": _Op.ANY,
    "permission_type": PermissionType.ANY,
}
VERSIONS = (1, 2, 3)


def describe(state, version=3, principal=ADMIN, **filters):
    request = DescribeAclsRequest(**{**ANY_FILTER, **filters})
    return asyncio.run(call(state, ApiKey.DESCRIBE_ACLS, version, request, principal=principal))


def listed(response) -> set:
    return {
        (r.resource_type, r.resource_name, r.pattern_type, a.principal, a.operation)
        for r in response.resources
        for a in r.acls
    }


@pytest.fixture
def authz_state(tmp_path):
    opened = []

    def factory():
        state = open_authz_state(tmp_path / "data")
        opened.append(state)
        return state

    yield factory
    for state in opened:
        asyncio.run(state.close())


@pytest.mark.parametrize("version", VERSIONS)
def test_without_an_authorizer_the_acl_apis_answer_security_disabled(state, version):
    create = CreateAclsRequest(creations=[creation(_R.TOPIC, "t", _Op.READ)])
    response = asyncio.run(call(state, ApiKey.CREATE_ACLS, version, create))
    assert [r.error_code for r in response.results] == [ErrorCode.SECURITY_DISABLED]
    assert describe(state, version).error_code == ErrorCode.SECURITY_DISABLED
    delete = DeleteAclsRequest(filters=[DeleteAclsRequest.DeleteAclsFilter(**ANY_FILTER)])
    response = asyncio.run(call(state, ApiKey.DELETE_ACLS, version, delete))
    assert [r.error_code for r in response.filter_results] == [ErrorCode.SECURITY_DISABLED]
    assert not os.path.exists(state.acl_store.path)


@pytest.mark.parametrize("version", VERSIONS)
def test_create_describe_delete_round_trip(authz_state, version):
    state = authz_state()
    create = CreateAclsRequest(
        creations=[
            creation(_R.TOPIC, "orders", _Op.READ),
            creation(_R.TOPIC, "", _Op.READ),  # empty name: refused alone
            creation(_R.GROUP, "app-", _Op.READ, pattern_type=PatternType.PREFIXED),
        ]
    )
    response = asyncio.run(call(state, ApiKey.CREATE_ACLS, version, create, principal=ADMIN))
    assert [r.error_code for r in response.results] == [0, ErrorCode.INVALID_REQUEST, 0]
    assert response.results[1].error_message == "Resource name should not be empty"
    assert listed(describe(state, version)) == {
        (_R.TOPIC, "orders", PatternType.LITERAL, ALICE, _Op.READ),
        (_R.GROUP, "app-", PatternType.PREFIXED, ALICE, _Op.READ),
    }
    matched = describe(
        state,
        version,
        resource_type_filter=_R.GROUP,
        resource_name_filter="app-1",
        pattern_type_filter=PatternType.MATCH,
    )
    assert listed(matched) == {(_R.GROUP, "app-", PatternType.PREFIXED, ALICE, _Op.READ)}
    delete = DeleteAclsRequest(
        filters=[
            DeleteAclsRequest.DeleteAclsFilter(**{**ANY_FILTER, "resource_type_filter": _R.TOPIC})
        ]
    )
    response = asyncio.run(call(state, ApiKey.DELETE_ACLS, version, delete, principal=ADMIN))
    [result] = response.filter_results
    assert result.error_code == 0
    assert [(m.resource_name, m.operation) for m in result.matching_acls] == [("orders", _Op.READ)]
    assert len(state.authorizer) == 1


def test_acls_survive_a_restart(authz_state):
    state = authz_state()
    grant(state, creation(_R.TOPIC, "orders", _Op.WRITE))
    asyncio.run(state.close())
    reopened = authz_state()
    assert listed(describe(reopened)) == {
        (_R.TOPIC, "orders", PatternType.LITERAL, ALICE, _Op.WRITE)
    }
    assert reopened.authorizer.authorize(ALICE, "h", _Op.WRITE, _R.TOPIC, "orders")


def test_a_corrupt_acl_file_stops_the_broker_from_starting(authz_state, tmp_path):
    state = authz_state()
    grant(state, creation(_R.TOPIC, "orders", _Op.WRITE))
    asyncio.run(state.close())
    path = state.acl_store.path
    document = json.loads(open(path, "rb").read())
    document["acls"][0]["operation"] = "READ"  # the checksum no longer matches
    with open(path, "w") as f:
        json.dump(document, f)
    with pytest.raises(OSError, match="corrupt"):
        authz_state()


@pytest.mark.parametrize("version", VERSIONS)
def test_acl_apis_need_the_cluster_acls(authz_state, version):
    state = authz_state()
    create = CreateAclsRequest(creations=[creation(_R.TOPIC, "t", _Op.ALL, principal=ALICE)])
    response = asyncio.run(call(state, ApiKey.CREATE_ACLS, version, create, principal=ALICE))
    assert [r.error_code for r in response.results] == [ErrorCode.CLUSTER_AUTHORIZATION_FAILED]
    assert len(state.authorizer) == 0
    assert not os.path.exists(state.acl_store.path)
    assert describe(state, version, principal=ALICE).error_code == (
        ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    )
    grant(state, creation(_R.CLUSTER, "kafka-cluster", _Op.DESCRIBE))
    assert describe(state, version, principal=ALICE).error_code == 0
    delete = DeleteAclsRequest(filters=[DeleteAclsRequest.DeleteAclsFilter(**ANY_FILTER)])
    response = asyncio.run(call(state, ApiKey.DELETE_ACLS, version, delete, principal=ALICE))
    assert [r.error_code for r in response.filter_results] == [
        ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    ]
    assert len(state.authorizer) == 1
