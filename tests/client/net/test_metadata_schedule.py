"""When the client refreshes metadata: retry.backoff.ms after any attempt, except that a topic
new since the last refresh (a producer's first send to it) is fetched at once after a
successful refresh, and only after the backoff when the last attempt failed."""

from __future__ import annotations

import pytest

from onceflow.client.net.metadata import Cluster, Metadata


def _refreshed(now: float) -> Metadata:
    metadata = Metadata(max_age_ms=300_000, retry_backoff_ms=100)
    metadata.update(Cluster(), now)
    return metadata


def test_a_new_topic_does_not_wait_for_the_backoff_of_a_successful_refresh():
    metadata = _refreshed(10.0)
    assert metadata.time_to_next_update(10.01) > 1  # nothing wanted: max age
    assert metadata.add_topics(["orders"])
    assert metadata.time_to_next_update(10.01) == 0.0


def test_a_plain_update_request_still_waits_for_the_backoff():
    metadata = _refreshed(10.0)
    metadata.request_update()
    assert metadata.time_to_next_update(10.01) == pytest.approx(0.09)


def test_after_a_failed_refresh_even_a_new_topic_waits():
    metadata = _refreshed(10.0)
    metadata.failed_update(OSError("down"), 10.05)
    metadata.add_topics(["orders"])
    assert metadata.time_to_next_update(10.06) == pytest.approx(0.09)
    metadata.update(Cluster(), 10.2)  # the topic's refresh succeeded: backoff as usual again
    metadata.request_update()
    assert metadata.time_to_next_update(10.21) == pytest.approx(0.09)
