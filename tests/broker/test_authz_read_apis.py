"""Authorization of Metadata, Fetch and the authorized-operations fields (issue 10 item 5):
topics the caller may not DESCRIBE are left out or refused by name, auto-creation needs CREATE,
Fetch needs READ, and `topic_authorized_operations` is what the ACLs grant."""

from __future__ import annotations

import asyncio

from broker.authz_helpers import ALICE, creation, grant, open_authz_state
from broker.broker_helpers import call, fetch_request
from onceflow.broker.authorized_ops import operations_in
from onceflow.protocol.api_keys import ApiKey
from onceflow.protocol.errors import ErrorCode
from onceflow.protocol.messages.metadata import MetadataRequest
from onceflow.security.acl import AclOperation, ResourceType

_Op = AclOperation


def metadata(state, names, version=12):
    topics = (
        None if names is None else [MetadataRequest.MetadataRequestTopic(name=n) for n in names]
    )
    request = MetadataRequest(
        topics=topics, allow_auto_topic_creation=True, include_topic_authorized_operations=True
    )
    response = asyncio.run(call(state, ApiKey.METADATA, version, request, principal=ALICE))
    return {t.name: (t.error_code, t.topic_authorized_operations) for t in response.topics}


def test_metadata_hides_and_refuses_topics_without_describe(tmp_path):
    state = open_authz_state(tmp_path / "data")
    for name in ("visible", "hidden"):
        state.logs.create_topic(name, 1)
    grant(state, creation(ResourceType.TOPIC, "visible", _Op.READ))
    everything = metadata(state, None)
    assert list(everything) == ["visible"]
    assert operations_in(everything["visible"][1]) == {_Op.READ, _Op.DESCRIBE}
    named = metadata(state, ["visible", "hidden", "fresh"])
    assert named["hidden"][0] == ErrorCode.TOPIC_AUTHORIZATION_FAILED
    assert named["fresh"][0] == ErrorCode.TOPIC_AUTHORIZATION_FAILED  # no DESCRIBE
    grant(state, creation(ResourceType.TOPIC, "fresh", _Op.DESCRIBE))
    assert metadata(state, ["fresh"])["fresh"][0] == ErrorCode.TOPIC_AUTHORIZATION_FAILED
    assert state.logs.topic("fresh") is None  # no CREATE: not auto-created
    grant(state, creation(ResourceType.TOPIC, "fresh", _Op.CREATE))
    assert metadata(state, ["fresh"])["fresh"][0] == ErrorCode.NONE
    asyncio.run(state.close())


def test_fetch_needs_read(tmp_path):
    state = open_authz_state(tmp_path / "data")
    for name in ("visible", "hidden"):
        state.logs.create_topic(name, 1)
    grant(state, creation(ResourceType.TOPIC, "visible", _Op.READ))

    def fetch(topic):
        response = asyncio.run(
            call(state, ApiKey.FETCH, 11, fetch_request(topic, {0: 0}), principal=ALICE)
        )
        return response.responses[0].partitions[0].error_code

    assert fetch("visible") == ErrorCode.NONE
    assert fetch("hidden") == ErrorCode.TOPIC_AUTHORIZATION_FAILED
    asyncio.run(state.close())
