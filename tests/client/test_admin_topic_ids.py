"""AdminClient.describe_topics gives each topic's id (Metadata v10+); a topic deleted and created
again under the same name gets a new one, which the Spark source relies on."""

from __future__ import annotations

from onceflow.client.admin import AdminClient, NewTopic


def test_describe_topics_gives_topic_ids_new_after_recreation(broker):
    with AdminClient({"bootstrap.servers": broker.bootstrap}) as admin:
        admin.create_topics([NewTopic("again", 1, 1)])
        first = admin.describe_topics(["again", "nope"])
        assert first["again"].topic_id is not None
        assert first["nope"].topic_id is None
        assert admin.delete_topics(["again"])["again"].ok
        assert admin.create_topics([NewTopic("again", 1, 1)])["again"].ok
        again = admin.describe_topics(["again"])["again"].topic_id
    assert again not in (None, first["again"].topic_id)
