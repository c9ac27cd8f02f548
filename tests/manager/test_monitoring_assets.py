"""deploy/monitoring's Grafana dashboard and PrometheusRule: parsed, every query's metric names
among those the manager really exposes, the rules and queries accepted by promtool and the
alerts firing as ``rules_test.yaml`` says (promtool from Debian's ``prometheus`` package,
installed by ``make test``; the promtool checks skip naming it when absent)."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import anyio
import pytest
from kubernetes_asyncio import client as k8s_client
from ruamel.yaml import YAML

from cre.controller.registry import CONTROLLERS, ControllerContext
from cre.kube.client import KubeClient
from cre.kube.factory import InformerFactory
from cre.kube.metrics import metrics_for
from cre_manager.registry import manager_registry

MONITORING = Path(__file__).resolve().parents[2] / "deploy" / "monitoring"
# Series Prometheus makes itself for every scrape target.
SCRAPE_SERIES = {"up"}
_SUFFIXES = {"counter": ("_total", "_created"), "histogram": ("_bucket", "_sum", "_count",
                                                              "_created"),
             "summary": ("_sum", "_count", "_created"), "gauge": ("",), "info": ("_info",)}
_KEYWORDS = {"by", "without", "on", "ignoring", "group_left", "group_right", "bool", "and",
             "or", "unless", "offset", "inf", "nan"}
# Grafana's own variables, replaced by a value PromQL accepts before promtool parses a query.
_GRAFANA_VARIABLES = {"$__rate_interval": "5m", "$category": ".*"}


def metric_names(expr: str) -> set[str]:
    """The metric names a PromQL expression selects (label matchers, strings, durations,
    grouping labels and function names left out)."""
    text = re.sub(r'"(?:[^"\\]|\\.)*"', '""', expr)
    text = re.sub(r"\{[^}]*\}", " ", text)
    text = re.sub(r"\[[^\]]*\]", " ", text)
    text = re.sub(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", " ", text)
    return {m.group(1) for m in re.finditer(r"(?<![\w:.])([a-zA-Z_:][\w:]*)\b(?!\s*\()", text)
            if m.group(1).lower() not in _KEYWORDS}


async def _build_every_controller() -> set[str]:
    registry = manager_registry()
    api = k8s_client.ApiClient(k8s_client.Configuration(host="http://127.0.0.1:9"))
    client = KubeClient(api)
    try:
        ctx = ControllerContext(client=client, registry=registry,
                                informers=InformerFactory(client, metrics=metrics_for(registry)),
                                clock=lambda: datetime.now(UTC))
        for entry in CONTROLLERS:
            entry.build(ctx)
    finally:
        await client.close()
    return {f"{family.name}{suffix}" for family in registry.collect()
            for suffix in _SUFFIXES[family.type]}


@pytest.fixture(scope="module")
def exposed() -> set[str]:
    """Every series name /metrics can serve: the manager's registry with every controller of
    the registry built on it (nothing started), plus what a scrape adds."""
    return anyio.run(_build_every_controller) | SCRAPE_SERIES


def _dashboard() -> dict[str, Any]:
    data: dict[str, Any] = json.loads((MONITORING / "dashboards" / "cre-fleet.json").read_text())
    return data


def _dashboard_queries() -> Iterator[tuple[str, str]]:
    for panel in _dashboard()["panels"]:
        for target in panel["targets"]:
            yield panel["title"], target["expr"]


def _rules() -> dict[str, Any]:
    data: dict[str, Any] = YAML(typ="safe").load(MONITORING / "prometheus_rule.yaml")
    return data


def _rule_exprs() -> Iterator[tuple[str, str]]:
    for group in _rules()["spec"]["groups"]:
        for rule in group["rules"]:
            yield rule["alert"], rule["expr"]


def test_metric_names_are_read_from_promql() -> None:
    """The name reader finds selectors inside functions and aggregations, and leaves out
    label names, label values, durations, functions and keywords."""
    expr = ('histogram_quantile(0.99, sum by (name, le) (rate(a_bucket{name="x:y"}[5m]))) > 1 '
            'or absent(up{job="j"} == 1) and on (node) b:rec unless vector(0)')
    assert metric_names(expr) == {"a_bucket", "up", "b:rec"}


def test_the_manager_exposes_the_documented_fleet_metrics(exposed: set[str]) -> None:
    """The manager's registry serves the tier and per-node gauges next to the runtime's."""
    assert {"cre_certification_phase", "cre_certification_verdict", "cre_workflow_phase",
            "cre_workflow_verdict", "cre_node_certification_state",
            "cre_node_last_pass_timestamp_seconds", "cre_node_bus_bandwidth_gbps",
            "controller_runtime_reconcile_errors_total",
            "workqueue_queue_duration_seconds_bucket", "cre_schedule_runs_total",
            "cre_schedule_missed_runs_total"} <= exposed


def test_every_dashboard_query_uses_exposed_metrics(exposed: set[str]) -> None:
    """The dashboard is Grafana JSON with a uid, a data-source variable and panels whose every
    query selects only metrics the manager exposes."""
    dashboard = _dashboard()
    assert dashboard["uid"] == "cre-fleet" and dashboard["panels"]
    assert any(v["type"] == "datasource" for v in dashboard["templating"]["list"])
    queries = list(_dashboard_queries())
    assert len(queries) >= 10
    unknown = {(title, name) for title, expr in queries for name in metric_names(expr)
               if name not in exposed}
    assert unknown == set()


def test_every_alert_uses_exposed_metrics(exposed: set[str]) -> None:
    """The PrometheusRule's alerts (failed node, failed certification, expired node, breaker
    holding taints back, schedule missed, manager down, reconcile errors, queue latency) select
    only metrics the manager exposes."""
    exprs = dict(_rule_exprs())
    assert {"CRENodeCertificationFailed", "CRECertificationFailed", "CRENodeCertificationExpired",
            "CRENodeTaintsHeldBack", "CRECertificationScheduleMissed", "CREManagerDown",
            "CREReconcileErrors", "CREWorkqueueLatencyHigh"} <= set(exprs)
    unknown = {(alert, name) for alert, expr in exprs.items() for name in metric_names(expr)
               if name not in exposed}
    assert unknown == set()


def _promtool() -> str:
    found = shutil.which("promtool")
    if found is None:
        pytest.skip("promtool not installed (Debian package `prometheus`; `make promtool`)")
    return found


def _run(args: list[str], cwd: Path) -> None:
    out = subprocess.run(args, cwd=cwd, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stdout + out.stderr


def test_promtool_accepts_the_rules_and_their_unit_tests_pass(tmp_path: Path) -> None:
    """``promtool check rules`` accepts the PrometheusRule's groups and ``promtool test
    rules`` fires (and holds back) each alert as rules_test.yaml expects."""
    promtool = _promtool()
    yaml = YAML(typ="safe")
    with (tmp_path / "rules.yaml").open("w") as f:
        yaml.dump(_rules()["spec"], f)
    shutil.copy(MONITORING / "rules_test.yaml", tmp_path / "rules_test.yaml")
    _run([promtool, "check", "rules", "rules.yaml"], tmp_path)
    _run([promtool, "test", "rules", "rules_test.yaml"], tmp_path)


def test_promtool_parses_every_dashboard_query(tmp_path: Path) -> None:
    """Every dashboard query (Grafana variables replaced by values) parses as PromQL: promtool
    checks them as recording rules."""
    promtool = _promtool()
    rules = []
    for i, (_, expr) in enumerate(_dashboard_queries()):
        for variable, value in _GRAFANA_VARIABLES.items():
            expr = expr.replace(variable, value)
        assert "$" not in expr, f"unreplaced Grafana variable in {expr}"
        rules.append({"record": f"dashboard:query_{i}", "expr": expr})
    with (tmp_path / "queries.yaml").open("w") as f:
        YAML(typ="safe").dump({"groups": [{"name": "dashboard", "rules": rules}]}, f)
    _run([promtool, "check", "rules", "queries.yaml"], tmp_path)
