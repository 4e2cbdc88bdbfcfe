"""The console's input checks and value formatting, without a cluster: the message browser's
query string, how keys and values are shown, and the reset-offsets form."""

from __future__ import annotations

import pytest

from onceflow.console.browse import (
    DEFAULT_LIMIT,
    MAX_SHOWN_BYTES,
    BadBrowse,
    BrowseQuery,
    ShownBytes,
    parse_browse_query,
    show_bytes,
)
from onceflow.console.reset import BadReset, ResetRequest, parse_reset_request


@pytest.mark.parametrize(
    ("params", "query"),
    [
        ({}, BrowseQuery("t", 0, "read_committed", None, None, DEFAULT_LIMIT, "text")),
        (
            {"partition": "2", "offset": "7", "limit": "5", "isolation": "read_uncommitted",
             "format": "hex"},
            BrowseQuery("t", 2, "read_uncommitted", 7, None, 5, "hex"),
        ),
        ({"timestamp": "1700000000000", "offset": ""},
         BrowseQuery("t", 0, "read_committed", None, 1_700_000_000_000, DEFAULT_LIMIT, "text")),
    ],
)  # fmt: skip
def test_browse_query(params: dict[str, str], query: BrowseQuery) -> None:
    assert parse_browse_query("t", params) == query


@pytest.mark.parametrize(
    ("params", "says"),
    [
        ({"offset": "abc"}, "offset 'abc' is not a whole number."),
        ({"offset": "-1"}, "offset -1 is negative."),
        ({"partition": "-3"}, "partition -3 is negative."),
        ({"offset": "1", "timestamp": "2"}, "Give an offset or a timestamp, not both."),
        ({"timestamp": "-5"}, "timestamp -5 is negative"),
        ({"limit": "0"}, "limit 0 is outside 1..500."),
        ({"limit": "501"}, "limit 501 is outside 1..500."),
        ({"isolation": "read_some"}, "isolation 'read_some' is not one of"),
        ({"format": "xml"}, "format 'xml' is not one of text, json, hex."),
    ],
)
def test_browse_query_refused(params: dict[str, str], says: str) -> None:
    with pytest.raises(BadBrowse) as refused:
        parse_browse_query("t", params)
    assert says in str(refused.value)


@pytest.mark.parametrize(
    ("data", "fmt", "shown"),
    [
        (None, "json", ShownBytes(None, "json", 0, False)),
        (b"plain", "text", ShownBytes("plain", "text", 5, False)),
        (b'{"a":[1,2]}', "json", ShownBytes('{\n  "a": [\n    1,\n    2\n  ]\n}', "json", 11,
                                            False)),
        (b"not json", "json", ShownBytes("not json", "text", 8, False)),
        (b"\xff\x00", "text", ShownBytes("ff 00", "hex", 2, False)),
        (b"\xff\x00", "json", ShownBytes("ff 00", "hex", 2, False)),
        (b"ab", "hex", ShownBytes("61 62", "hex", 2, False)),
        (b"a" + "é".encode() * MAX_SHOWN_BYTES, "text",  # cut inside an é: its half dropped
         ShownBytes("a" + "é" * (MAX_SHOWN_BYTES // 2 - 1), "text", 2 * MAX_SHOWN_BYTES + 1,
                    True)),
        (b"[" * (MAX_SHOWN_BYTES + 1), "json",  # too big to parse whole: the text, cut
         ShownBytes("[" * MAX_SHOWN_BYTES, "text", MAX_SHOWN_BYTES + 1, True)),
    ],
)  # fmt: skip
def test_show_bytes(data: bytes | None, fmt: str, shown: ShownBytes) -> None:
    assert show_bytes(data, fmt) == shown


@pytest.mark.parametrize(
    ("form", "request_or_error"),
    [
        ({"topic": "t", "strategy": "to-earliest"}, ResetRequest("g", "t", "to-earliest")),
        ({"topic": "t", "strategy": "to-offset", "value": " 12 "},
         ResetRequest("g", "t", "to-offset", "12")),
        ({"topic": "t", "strategy": "to-datetime", "value": "2026-01-31T12:00:00+01:00"},
         ResetRequest("g", "t", "to-datetime", "2026-01-31T12:00:00+01:00")),
        ({"strategy": "to-earliest"}, "Name the topic"),
        ({"topic": "t", "strategy": "to-current"}, "strategy 'to-current' is not one of"),
        ({"topic": "t", "strategy": "to-offset", "value": "x"}, "to-offset needs a whole number"),
        ({"topic": "t", "strategy": "to-offset", "value": "-2"}, "to-offset -2 is negative."),
        ({"topic": "t", "strategy": "to-datetime", "value": "yesterday"}, "needs an ISO 8601"),
        ({"topic": "t", "strategy": "to-datetime", "value": "1960-01-01"}, "is before 1970."),
    ],
)  # fmt: skip
def test_reset_form(form: dict[str, str], request_or_error: ResetRequest | str) -> None:
    if isinstance(request_or_error, ResetRequest):
        assert parse_reset_request("g", form) == request_or_error
        return
    with pytest.raises(BadReset) as refused:
        parse_reset_request("g", form)
    assert request_or_error in str(refused.value)
