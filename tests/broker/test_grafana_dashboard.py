"""docs/examples/grafana-dashboard.json stays in step with the broker's metrics: every metric
its PromQL expressions name is a family a live broker's /metrics announces, and every label
they filter or group on is a label of that family's samples (or one Prometheus adds)."""

from __future__ import annotations

import json
import re
from pathlib import Path

from broker.broker_helpers import (
    api_versions_over_tcp,
    call,
    http,
    make_batch,
    offset_commit_request,
    partition_results,
    produce_request,
    run_broker_with_metrics,
)
from onceflow.protocol.api_keys import ApiKey
from onceflow.protocol.errors import ErrorCode
from onceflow.protocol.messages.find_coordinator import FindCoordinatorRequest
from onceflow.protocol.messages.init_producer_id import InitProducerIdRequest

DASHBOARD = Path(__file__).parents[2] / "docs" / "examples" / "grafana-dashboard.json"
TARGET_LABELS = {"instance", "job"}  # added by Prometheus to every scraped series
KEYWORDS = {"by", "without", "on", "ignoring", "group_left", "group_right", "bool", "and", "or",
            "unless", "offset", "inf", "nan"}  # fmt: skip
FUNCTIONS = {"sum", "max", "min", "avg", "count", "rate", "irate", "increase", "delta",
             "histogram_quantile", "topk", "bottomk", "label_values", "clamp_min", "abs",
             "max_over_time", "min_over_time", "avg_over_time", "deriv"}  # fmt: skip
_TOKEN = re.compile(
    r'"(?:[^"\\]|\\.)*"|\[[^\]]*\]|[a-zA-Z_:][a-zA-Z0-9_:]*|\$\w+|\d+(?:\.\d+)?|\S'
)  # a string, a range ([5m]), a name, a $variable, a number, or one other character
_GROUPING = {"by", "without", "on", "ignoring", "group_left", "group_right"}


def parse_promql(expr: str) -> tuple[dict[str, set[str]], set[str], set[str]]:
    """({metric: labels its selectors match on}, grouping labels, functions) of `expr`."""
    tokens = [t.group() for t in _TOKEN.finditer(expr)]
    metrics: dict[str, set[str]] = {}
    grouping: set[str] = set()
    functions: set[str] = set()
    i = 0
    while i < len(tokens):
        token, following = tokens[i], tokens[i + 1] if i + 1 < len(tokens) else ""
        i += 1
        if not re.fullmatch(r"[a-zA-Z_:][a-zA-Z0-9_:]*", token) or token in KEYWORDS - _GROUPING:
            if token == "{":
                raise AssertionError(f"a selector without a metric name in {expr!r}")
            continue
        if token in _GROUPING:
            if following == "(":
                end = tokens.index(")", i)
                grouping |= {t for t in tokens[i + 1 : end] if t != ","}
                i = end + 1
            continue
        if following == "(" or following in ("by", "without"):  # sum by (l) (...)
            functions.add(token)
            continue
        labels = metrics.setdefault(token, set())
        if following == "{":
            end = tokens.index("}", i)
            inside = tokens[i + 1 : end]
            labels.update(
                t
                for t, n in zip(inside, [*inside[1:], ""], strict=True)
                if n in ("=", "!") and (t[0].isalpha() or t[0] == "_")
            )
            i = end + 1
    return metrics, grouping, functions


def dashboard_expressions() -> list[str]:
    """Every PromQL expression of the dashboard: panel targets and template variable queries."""
    dashboard = json.loads(DASHBOARD.read_text())
    exprs = [t["expr"] for p in dashboard["panels"] for t in p.get("targets", [])]
    for variable in dashboard["templating"]["list"]:
        query = variable["query"]["query"]
        inner = re.fullmatch(r"label_values\((.+),\s*(\w+)\)", query)
        assert inner, query
        exprs.append(f"count by ({inner.group(2)}) ({inner.group(1)})")
    return exprs


def scrape_busy_broker(tmp_path) -> str:
    """/metrics of a broker that has a topic, a transactional id, a consumer group's
    committed offset, a fsynced produce, a Produce refused for a stale producer epoch and a
    request over TCP (so every labelled family has samples)."""
    commit = offset_commit_request("g", "orders", 0, 1)

    async def scenario(broker):
        state = broker.state
        state.logs.create_topic("orders", 2)
        for epoch, error in ((1, ErrorCode.NONE), (0, ErrorCode.INVALID_PRODUCER_EPOCH)):
            batch = make_batch([b"a", b"b"], producer_id=7, producer_epoch=epoch,
                               base_sequence=0)  # fmt: skip
            response = await call(state, ApiKey.PRODUCE, 9, produce_request("orders", {0: batch}))
            code = partition_results(response)[("orders", 0)].error_code
            assert code == error, code
        find = FindCoordinatorRequest(key="txn", key_type=1)  # loads the txn coordinator
        assert (await call(state, ApiKey.FIND_COORDINATOR, 3, find)).error_code == 0
        init = InitProducerIdRequest(transactional_id="txn", transaction_timeout_ms=60_000)
        assert (await call(state, ApiKey.INIT_PRODUCER_ID, 3, init)).error_code == 0
        response = await call(state, ApiKey.OFFSET_COMMIT, 2, commit)
        assert response.topics[0].partitions[0].error_code == 0
        await api_versions_over_tcp(broker.bound)  # a counted request
        _, body = await http(broker.metrics_server.bound, b"GET /metrics HTTP/1.1\r\n\r\n")
        return body

    return run_broker_with_metrics(tmp_path, scenario, **{"offsets.topic.num.partitions": "1"})


def families_and_labels(body: str) -> dict[str, set[str]]:
    """{family: labels seen on its samples}; a histogram's _bucket/_sum/_count samples are
    listed under their own names too, as PromQL names them."""
    kinds = dict(re.findall(r"^# TYPE (\S+) (\S+)$", body, re.MULTILINE))
    out: dict[str, set[str]] = {name: set() for name in kinds}
    for name, kind in kinds.items():
        if kind == "histogram":
            out.update({f"{name}_bucket": {"le"}, f"{name}_sum": set(), f"{name}_count": set()})
    for line in body.splitlines():
        if line and not line.startswith("#"):
            name, _, rest = line.partition("{")
            labels = set(re.findall(r'(\w+)="', rest)) if rest else set()
            out.setdefault(name.split(" ")[0], set()).update(labels)
    return out


def test_parse_promql_finds_metrics_labels_and_functions():
    metrics, grouping, functions = parse_promql(
        'histogram_quantile(0.99, sum by (le, topic) (rate(a_bucket{x=~"$v",y!="q{}"}[5m])))'
        " / ignoring(z) b_total - c"
    )
    assert metrics == {"a_bucket": {"x", "y"}, "b_total": set(), "c": set()}
    assert grouping == {"le", "topic", "z"}
    assert functions == {"histogram_quantile", "sum", "rate"}


def test_every_dashboard_metric_and_label_is_served_by_a_live_broker(tmp_path):
    served = families_and_labels(scrape_busy_broker(tmp_path))
    exprs = dashboard_expressions()
    assert len(exprs) >= 10
    for expr in exprs:
        metrics, grouping, functions = parse_promql(expr)
        assert metrics, expr
        assert functions <= FUNCTIONS, (expr, functions - FUNCTIONS)
        for name, labels in metrics.items():
            assert name in served, f"{name} (in {expr!r}) is not in the broker's /metrics"
            missing = labels - served[name] - TARGET_LABELS
            assert not missing, f"{name} has no label {missing} (in {expr!r})"
        labelled = set().union(*(served[name] for name in metrics)) | TARGET_LABELS
        assert grouping <= labelled, f"grouping by {grouping - labelled} in {expr!r}"
