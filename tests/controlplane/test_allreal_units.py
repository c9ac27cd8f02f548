"""The all-real stack's pure pieces, without processes: scripting a rendered Job for KWOK,
unpinning it, the nodes that point kube-apiserver's log proxy at the fake kubelet, and the
timeline's summaries."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import pytest

from cre.api.labels import GROUP_NODES
from cre.testing.controlplane.allreal import (
    LauncherLogs,
    NodeScript,
    Timeline,
    log_node,
    node_log_fields,
    summary,
)
from cre.testing.controlplane.allreal_run import Rendered
from cre.testing.controlplane.build import REPO
from cre.testing.controlplane.kwok import EXIT_CODE, NODE_LABEL, RUN_SECONDS

GOLDEN = REPO / "goldens" / "render" / "all-reduce-aws-h100.json"


class _Logs:
    port = 4321

    def __init__(self) -> None:
        self.appended: list[tuple[str, str, str, str]] = []

    def node_status(self) -> dict[str, Any]:
        return {"addresses": [{"type": "InternalIP", "address": "127.0.0.1"}],
                "daemonEndpoints": {"kubeletEndpoint": {"Port": self.port}}}

    def append_log(self, namespace: str, pod: str, container: str, text: str) -> None:
        self.appended.append((namespace, pod, container, text))


def _launcher_meta(runtime: dict[str, Any]) -> dict[str, Any]:
    rjob = next(r for r in runtime["spec"]["template"]["spec"]["replicatedJobs"]
                if r["name"] == "launcher")
    return dict(rjob["template"]["spec"]["template"]["metadata"])


def test_scripted_moves_both_objects_and_annotates_only_the_launcher() -> None:
    rendered = Rendered.load(GOLDEN)
    job, runtime = rendered.scripted("ns-x", name="renamed",
                                     launcher={EXIT_CODE: "1", RUN_SECONDS: "3"})
    assert (job["metadata"]["namespace"], runtime["metadata"]["namespace"]) == ("ns-x", "ns-x")
    assert job["metadata"]["name"] == "renamed"
    assert _launcher_meta(runtime)["annotations"] == {EXIT_CODE: "1", RUN_SECONDS: "3"}
    node = runtime["spec"]["template"]["spec"]["replicatedJobs"][0]
    assert "annotations" not in node["template"]["spec"]["template"].get("metadata", {})
    assert rendered.runtime["metadata"]["namespace"] == "default"  # the golden is untouched


def test_unpinned_drops_group_nodes_and_affinity() -> None:
    rendered = Rendered.load(GOLDEN)
    assert GROUP_NODES in rendered.job["metadata"]["annotations"]
    free = rendered.unpinned()
    assert GROUP_NODES not in free.job["metadata"]["annotations"]
    assert "affinity" not in json.dumps(free.job["spec"])
    assert "affinity" in json.dumps(rendered.job["spec"])


def test_bad_rendered_files_name_the_problem(tmp_path: Path) -> None:
    path = tmp_path / "r.json"
    path.write_text(json.dumps({"objects": {}}))
    with pytest.raises(ValueError, match="expected one Job and one TrainingRuntime"):
        Rendered.load(path)
    rendered = Rendered.load(GOLDEN)
    runtime = json.loads(json.dumps(rendered.runtime))
    runtime["spec"]["template"]["spec"]["replicatedJobs"].pop()
    with pytest.raises(ValueError, match="has no 'launcher'"):
        Rendered(job=rendered.job, runtime=runtime).scripted("n", launcher={})


def test_log_node_points_the_log_proxy_at_the_fake_kubelet() -> None:
    node = log_node("aws-h100", 0, name="node-01", logs=_Logs())  # type: ignore[arg-type]
    assert node["metadata"]["name"] == node["metadata"]["labels"]["kubernetes.io/hostname"]
    assert node["metadata"]["labels"][NODE_LABEL[0]] == NODE_LABEL[1]
    assert node_log_fields(node) == (["127.0.0.1"], 4321)
    assert node["status"]["allocatable"]["nvidia.com/gpu"] == "8"


def test_launcher_logs_write_once_per_launcher_pod() -> None:
    logs = _Logs()
    writer = LauncherLogs(logs=logs, text_for=lambda pod: "boom\n")  # type: ignore[arg-type]
    launcher = {"metadata": {"name": "l-0", "namespace": "n", "labels": {
        "jobset.sigs.k8s.io/replicatedjob-name": "launcher"}}}
    worker = {"metadata": {"name": "w-0", "namespace": "n", "labels": {
        "jobset.sigs.k8s.io/replicatedjob-name": "node"}}}
    for obj in (launcher, worker, launcher):
        writer.handler(None, None, obj)
    writer.handler(None, launcher, None)
    assert logs.appended == [("n", "l-0", "node", "boom\n")]


class _Patches:
    def __init__(self, logs: _Logs) -> None:
        self.logs = logs
        self.calls: list[tuple[str, dict[str, Any], str | None, int]] = []

    async def patch(self, res: Any, name: str, body: dict[str, Any], *,
                    namespace: str | None = None) -> dict[str, Any]:
        # how many log lines were written when the patch went out: the log comes first
        self.calls.append((name, body, namespace, len(self.logs.appended)))
        return body


def _pod(name: str, node: str | None, *, deleting: bool = False) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": "ns"}
    if deleting:
        meta["deletionTimestamp"] = "2026-12-06T00:00:00Z"
    return {"metadata": meta, "spec": {"nodeName": node} if node else {}}


def test_node_script_scripts_each_bound_pod_once_by_its_node() -> None:
    """NodeScript writes a bound pod's log, then annotates it with its node's exit code, once;
    unbound and deleting pods are left alone."""
    logs = _Logs()
    client = _Patches(logs)
    script = NodeScript(logs=logs, exit_code=lambda n: 7 if n == "bad" else 0,  # type: ignore[arg-type]
                        log_text=lambda n: f"ran on {n}\n", run_seconds=1.5)

    async def scenario() -> None:
        for pod in (_pod("a", None), _pod("b", "bad"), _pod("c", "good"),
                    _pod("b", "bad"), _pod("d", "good", deleting=True)):
            await script._script(client, pod)  # type: ignore[arg-type]

    anyio.run(scenario)
    assert logs.appended == [("ns", "b", "node", "ran on bad\n"),
                             ("ns", "c", "node", "ran on good\n")]
    assert [(name, body["metadata"]["annotations"], ns, written)
            for name, body, ns, written in client.calls] == [
        ("b", {EXIT_CODE: "7", RUN_SECONDS: "1.5"}, "ns", 1),
        ("c", {EXIT_CODE: "0", RUN_SECONDS: "1.5"}, "ns", 2)]
    assert script.scripted == {"ns/b": "bad", "ns/c": "good"}


def test_timeline_records_changes_only() -> None:
    timeline = Timeline()
    handle = timeline.handler("Pod")
    pod: dict[str, Any] = {"metadata": {"name": "p", "namespace": "n"}, "spec": {},
                           "status": {"phase": "Pending"}}
    handle(None, None, pod)
    handle(None, pod, pod)
    failed = {**pod, "spec": {"nodeName": "x"}, "status": {"phase": "Failed"}}
    handle(None, pod, failed)
    handle(None, failed, None)
    assert [c.state for c in timeline.changes] == ["Pending", "Failed,bound", "deleted"]
    job = {"metadata": {"name": "j", "deletionTimestamp": "t"}, "status": {
        "failureLog": {"podName": "p"},
        "conditions": [{"type": "Failed", "status": "True"},
                       {"type": "Succeeded", "status": "False"}]}}
    assert summary("CREJob", job) == "Failed,failureLog,deleting"
    assert summary("JobSet", {"metadata": {}, "status": {}}) == "-"
