"""The same scenarios driven by kubectl, a client nobody here wrote (it must be on PATH)."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from cre.testing.apiserver import Emulator

pytestmark = pytest.mark.anyio

KUBECTL = shutil.which("kubectl")
if KUBECTL is None:  # pragma: no cover - the machines this suite targets all have kubectl
    raise RuntimeError("kubectl must be on PATH for the emulator conformance suite")

POD = """
apiVersion: v1
kind: Pod
metadata:
  name: web
  labels: {app: web}
spec:
  containers:
  - name: c
    image: nginx
"""

JOBSET = """
apiVersion: jobset.x-k8s.io/v1alpha2
kind: JobSet
metadata:
  name: js
spec:
  replicatedJobs:
  - name: w
    template:
      spec:
        template:
          spec:
            restartPolicy: Never
            containers:
            - name: c
              image: x
"""


class Kubectl:
    def __init__(self, emu: Emulator, home: Path) -> None:
        self.env = {**os.environ, "KUBECONFIG": str(emu.kubeconfig_path), "HOME": str(home)}
        self.home = home

    async def run(self, *args: str, stdin: str | None = None, ok: bool = True) -> tuple[int, str,
                                                                                        str]:
        assert KUBECTL is not None
        proc = await asyncio.create_subprocess_exec(
            KUBECTL, *args, env=self.env, stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
        out, err = await proc.communicate(stdin.encode() if stdin else None)
        code = proc.returncode or 0
        if ok:
            assert code == 0, f"kubectl {' '.join(args)} failed: {err.decode()}"
        return code, out.decode(), err.decode()

    async def json(self, *args: str) -> Any:
        _, out, _ = await self.run(*args, "-o", "json")
        return json.loads(out)

    async def apply(self, manifest: str, *extra: str) -> str:
        path = self.home / "m.yaml"
        path.write_text(manifest)
        _, out, _ = await self.run("apply", "-f", str(path), *extra)
        return out


@pytest.fixture
async def kubectl(emu_crds: Emulator, tmp_path: Path) -> Kubectl:
    return Kubectl(emu_crds, tmp_path)


async def test_apply_client_side_and_get(kubectl: Kubectl) -> None:
    """kubectl apply -f creates, re-applies unchanged, and get -o json / -l see the pod."""
    assert "pod/web created" in await kubectl.apply(POD)
    assert "pod/web unchanged" in await kubectl.apply(POD)
    pods = await kubectl.json("get", "pods", "-l", "app=web")
    assert [p["metadata"]["name"] for p in pods["items"]] == ["web"]
    assert (await kubectl.json("get", "pods", "-l", "app!=web"))["items"] == []


async def test_apply_server_side(kubectl: Kubectl) -> None:
    """kubectl apply --server-side records an Apply manager named kubectl."""
    assert "serverside-applied" in await kubectl.apply(POD, "--server-side")
    pod = await kubectl.json("get", "pod", "web", "--show-managed-fields")
    managers = {(m["manager"], m["operation"]) for m in pod["metadata"]["managedFields"]}
    assert ("kubectl", "Apply") in managers


async def test_patch_types(kubectl: Kubectl) -> None:
    """kubectl patch --type merge/json/strategic reach the right patch implementation."""
    await kubectl.apply(POD)
    await kubectl.run("patch", "pod", "web", "--type", "merge", "-p",
                      '{"metadata":{"labels":{"x":"1"}}}')
    await kubectl.run("patch", "pod", "web", "--type", "json", "-p",
                      '[{"op":"add","path":"/metadata/labels/y","value":"2"}]')
    await kubectl.run("patch", "pod", "web", "-p",
                      '{"spec":{"containers":[{"name":"c","image":"nginx:2"}]}}')
    pod = await kubectl.json("get", "pod", "web")
    assert pod["metadata"]["labels"] == {"app": "web", "x": "1", "y": "2"}
    assert pod["spec"]["containers"] == [{"name": "c", "image": "nginx:2"}] or \
        pod["spec"]["containers"][0]["image"] == "nginx:2"


async def test_strategic_patch_on_custom_resource_is_415(kubectl: Kubectl) -> None:
    """kubectl's default strategic patch on a CR is refused as the real server refuses it."""
    await kubectl.apply(JOBSET)
    code, _, err = await kubectl.run("patch", "jobset", "js", "-p",
                                     '{"metadata":{"labels":{"a":"b"}}}', ok=False)
    assert code != 0
    assert "application/strategic-merge-patch+json is not supported" in err


async def test_table_output_with_crd_printer_columns(kubectl: Kubectl, emu_crds: Emulator
                                                     ) -> None:
    """kubectl get prints the CRD's additionalPrinterColumns, JSONPath filters included."""
    await kubectl.apply(JOBSET)
    js = emu_crds.objects.get("jobset.x-k8s.io/v1alpha2", "JobSet", "js", "default")
    assert js is not None
    js["status"] = {"terminalState": "Completed", "restarts": 2,
                    "conditions": [{"type": "Completed", "status": "True", "reason": "AllDone",
                                    "message": "", "lastTransitionTime": "2026-01-01T00:00:00Z"}]}
    emu_crds.objects.put(js)
    _, out, _ = await kubectl.run("get", "jobsets")
    header, row = out.splitlines()[:2]
    assert header.split() == ["NAME", "TERMINALSTATE", "RESTARTS", "COMPLETED", "SUSPENDED",
                              "AGE"]
    assert row.split()[:4] == ["js", "Completed", "2", "True"]


async def test_get_watch_sees_changes(kubectl: Kubectl) -> None:
    """kubectl get -w prints the current table and then each change."""
    await kubectl.apply(POD)
    assert KUBECTL is not None
    proc = await asyncio.create_subprocess_exec(
        KUBECTL, "get", "pods", "-w", "--output-watch-events", env=kubectl.env,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    assert proc.stdout is not None
    try:
        lines = [(await proc.stdout.readline()).decode(), (await proc.stdout.readline()).decode()]
        await kubectl.run("label", "pod", "web", "x=1")
        lines.append((await proc.stdout.readline()).decode())
    finally:
        proc.kill()
        await proc.wait()
    assert lines[0].split()[:2] == ["EVENT", "NAME"]
    assert lines[1].split()[:2] == ["ADDED", "web"]
    assert lines[2].split()[:2] == ["MODIFIED", "web"]


async def test_delete_cascade_foreground_and_orphan(kubectl: Kubectl) -> None:
    """--cascade=foreground removes dependents first; --cascade=orphan keeps them unowned."""
    owner = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: owner\n"
    for cascade, survives in (("foreground", False), ("orphan", True)):
        await kubectl.apply(owner)
        uid = (await kubectl.json("get", "cm", "owner"))["metadata"]["uid"]
        dep = ("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: dep\n  ownerReferences:\n"
               f"  - {{apiVersion: v1, kind: ConfigMap, name: owner, uid: {uid}, "
               "blockOwnerDeletion: true}\n")
        await kubectl.apply(dep)
        await kubectl.run("delete", "cm", "owner", f"--cascade={cascade}")
        names = [c["metadata"]["name"] for c in (await kubectl.json("get", "cm"))["items"]]
        assert ("dep" in names) is survives
        if survives:
            left = await kubectl.json("get", "cm", "dep")
            assert "ownerReferences" not in left["metadata"]
            await kubectl.run("delete", "cm", "dep")


async def _bind(emu: Emulator, pod: str, node: str) -> None:
    """Schedule ``pod`` on ``node`` as kube-scheduler does (spec.nodeName is immutable to
    updates; only the pods/binding subresource sets it)."""
    async with aiohttp.ClientSession() as s, s.post(
            f"{emu.url}/api/v1/namespaces/default/pods/{pod}/binding",
            json={"apiVersion": "v1", "kind": "Binding", "metadata": {"name": pod},
                  "target": {"apiVersion": "v1", "kind": "Node", "name": node}}) as r:
        assert r.status == 201, await r.text()


async def test_logs(kubectl: Kubectl, emu_crds: Emulator) -> None:
    """kubectl logs reads what the control API appended, with --tail."""
    await kubectl.apply(POD)
    await _bind(emu_crds, "web", "n1")
    emu_crds.append_log("default", "web", "c", "one\ntwo\nthree\n")
    _, out, _ = await kubectl.run("logs", "web")
    assert out == "one\ntwo\nthree\n"
    _, out, _ = await kubectl.run("logs", "web", "--tail=1")
    assert out == "three\n"


async def test_logs_previous_and_follow(kubectl: Kubectl, emu_crds: Emulator) -> None:
    """kubectl logs --previous reads the rotated log; logs -f streams lines appended later."""
    await kubectl.apply(POD)
    await _bind(emu_crds, "web", "n1")
    emu_crds.append_log("default", "web", "c", "crashed\n")
    emu_crds.rotate_log("default", "web", "c")
    emu_crds.append_log("default", "web", "c", "restarted\n")
    _, out, _ = await kubectl.run("logs", "web", "--previous")
    assert out == "crashed\n"
    assert KUBECTL is not None
    proc = await asyncio.create_subprocess_exec(
        KUBECTL, "logs", "-f", "web", env=kubectl.env,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    assert proc.stdout is not None
    try:
        first = (await proc.stdout.readline()).decode()
        emu_crds.append_log("default", "web", "c", "streamed\n")
        second = (await proc.stdout.readline()).decode()
    finally:
        proc.kill()
        await proc.wait()
    assert (first, second) == ("restarted\n", "streamed\n")


async def test_delete_cascade_background(kubectl: Kubectl, emu_crds: Emulator) -> None:
    """--cascade=background deletes the owner at once; the GC then removes the dependent."""
    await kubectl.apply("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: owner\n")
    uid = (await kubectl.json("get", "cm", "owner"))["metadata"]["uid"]
    await kubectl.apply("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: dep\n"
                        f"  ownerReferences:\n  - {{apiVersion: v1, kind: ConfigMap, name: owner, "
                        f"uid: {uid}}}\n")
    _, out, _ = await kubectl.run("delete", "cm", "owner", "--cascade=background")
    assert out == 'configmap "owner" deleted\n'
    await emu_crds.settle()
    names = [c["metadata"]["name"] for c in (await kubectl.json("get", "cm"))["items"]]
    assert names == []


async def test_explain_custom_resource(kubectl: Kubectl) -> None:
    """kubectl explain renders a CRD's schema from /openapi/v3."""
    _, out, _ = await kubectl.run("explain", "trainjobs.spec.trainer")
    assert "KIND:       TrainJob" in out
    assert "numNodes" in out
    _, out, _ = await kubectl.run("explain", "pods.spec.containers.image")
    assert "FIELD: image <string>" in out


async def test_apply_rejects_unknown_fields_strictly(kubectl: Kubectl) -> None:
    """kubectl apply sends fieldValidation=Strict, so an unknown CR field is an error."""
    path = kubectl.home / "tj.yaml"
    path.write_text("apiVersion: trainer.kubeflow.org/v1alpha1\nkind: TrainJob\n"
                    "metadata: {name: tj}\nspec:\n  runtimeRef: {name: torch}\n  bogus: 1\n")
    code, _, err = await kubectl.run("apply", "-f", str(path), ok=False)
    assert code != 0
    assert 'unknown field "spec.bogus"' in err


SCHEDULE = """\
apiVersion: cre.dev/v1alpha1
kind: CertificationSchedule
metadata: {name: nightly, namespace: default}
spec:
  schedule: "0 2 * * *"
  certificationTemplate:
    spec:
      categories: [{domain: diagnostics, variant: dcgm-level1}]
"""


async def test_certification_schedule_columns(kubectl: Kubectl, emu_crds: Emulator) -> None:
    """kubectl get certsched prints schedule, interval, suspend, the active run, last and next
    run and age; -o wide adds the missed and skipped counts."""
    await kubectl.apply(SCHEDULE)
    obj = emu_crds.objects.get("cre.dev/v1alpha1", "CertificationSchedule", "nightly",
                               "default")
    assert obj is not None
    obj["status"] = {"lastScheduleTime": "2026-01-01T01:00:00Z",
                     "nextScheduleTime": "2026-01-02T01:00:00Z", "missedRuns": 2,
                     "skippedRuns": 1, "active": [{"apiVersion": "cre.dev/v1alpha1",
                                                   "kind": "Certification",
                                                   "name": "nightly-29433660"}]}
    emu_crds.objects.put(obj)
    _, out, _ = await kubectl.run("get", "certsched")
    header, row = out.splitlines()[:2]
    assert header.split() == ["NAME", "SCHEDULE", "INTERVAL", "SUSPEND", "ACTIVE", "LAST",
                              "RUN", "NEXT", "RUN", "AGE"]
    # The interval cell is empty (a cron schedule); Last Run is an age, Next Run a time.
    assert row.split()[:8] == ["nightly", "0", "2", "*", "*", "*", "false", "nightly-29433660"]
    assert "2026-01-02T01:00:00Z" in row
    _, wide, _ = await kubectl.run("get", "certificationschedules", "-o", "wide")
    assert wide.splitlines()[0].split()[-2:] == ["MISSED", "SKIPPED"]
    assert wide.splitlines()[1].split()[-2:] == ["2", "1"]
