"""Golden-case runner ``type: controller``: any controller against the emulator, step by step.

One case: an in-process API emulator (the case's Kubernetes version and CRDs, simulated time),
optionally a simulated GPU cluster, the controller under test started in-process
(:mod:`.start`: a CRE runtime Controller, a plain asyncio program or a kopf operator), the
initial objects, the steps (:mod:`.steps`); then, once the cluster has come to rest (``settle``
simulated seconds without a write, faults cleared), the output: every object of the listed
kinds and the core/v1 Events about those kinds, normalised by the harness.

Output shape::

    {"objects": {"<Kind>": [<object>, ...]},       # per listed kind, by namespace and name
     "events": [{"involvedObject": {kind, namespace, name}, "type", "reason", "message"}]}

Events are grouped by the object they are about and keep the order they were written in (a
controller's events for one object follow its causal order; across objects the interleaving
is timing, so it is not recorded). A kind listed twice (other labels, other namespaces) is one
list; a kind name served by two API groups is keyed ``<Kind>.<group>``.
"""

from __future__ import annotations

import asyncio
import atexit
import shutil
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Final

import anyio

from cre.kube.client import KubeClient
from cre.testing.cluster.clock import DEFAULT_EPOCH, SimClock
from cre.testing.golden.controller.case import (
    ControllerCase,
    ControllerCaseError,
    OutputKind,
    read_case,
)
from cre.testing.golden.controller.start import started
from cre.testing.golden.controller.steps import WaitTimeout, put_object, run_step, settle

#: What this runner's output needs to be deterministic (the harness applies it first).
NORMALISE: Final[dict[str, Any]] = {
    "sort": [{"path": "$.objects.*", "by": ["$.metadata.namespace", "$.metadata.name"]},
             {"path": "$.events", "by": ["$.involvedObject.namespace",
                                         "$.involvedObject.kind", "$.involvedObject.name"]}],
}


def _group(api_version: str) -> str:
    return api_version.rpartition("/")[0] if "/" in api_version else ""


def _labels(selector: Mapping[str, str]) -> str:
    return ",".join(f"{k}={v}" for k, v in sorted(selector.items()))


def _collect(emu: Any, case: ControllerCase) -> dict[str, Any]:
    kinds = case.output_kinds
    groups: dict[str, set[str]] = {}
    for k in kinds:
        groups.setdefault(k.kind, set()).add(_group(k.api_version))
    objects: dict[str, list[dict[str, Any]]] = {}
    for k in kinds:
        key = k.kind if len(groups[k.kind]) == 1 else f"{k.kind}.{_group(k.api_version)}"
        try:
            items = emu.objects.list(k.api_version, k.kind, k.namespace,
                                     label_selector=_labels(k.labels))
        except KeyError as exc:
            raise ControllerCaseError(f"{case.case_dir / 'input.yaml'}: output.kinds: "
                                      f"{exc.args[0]}") from None
        objects.setdefault(key, []).extend(items)
    for items in objects.values():
        items.sort(key=lambda o: (o["metadata"].get("namespace", ""), o["metadata"]["name"]))
    out: dict[str, Any] = {"objects": objects}
    if case.output_events:
        out["events"] = _events(emu, kinds)
    return out


def _events(emu: Any, kinds: tuple[OutputKind, ...]) -> list[dict[str, Any]]:
    wanted = {(k.kind, _group(k.api_version)) for k in kinds}
    events = [e for e in emu.objects.list("v1", "Event")
              if ((e.get("involvedObject") or {}).get("kind"),
                  _group(str((e.get("involvedObject") or {}).get("apiVersion", "")))) in wanted]

    def order(e: dict[str, Any]) -> tuple[str, str, str, int]:
        ref = e.get("involvedObject") or {}
        rv = str(e["metadata"].get("resourceVersion", "0"))
        return (str(ref.get("namespace", "")), str(ref.get("kind", "")),
                str(ref.get("name", "")), int(rv) if rv.isdigit() else 0)

    return [{"involvedObject": {k: (e.get("involvedObject") or {}).get(k)
                                for k in ("kind", "namespace", "name")},
             "type": e.get("type"), "reason": e.get("reason"), "message": e.get("message")}
            for e in sorted(events, key=order)]


async def _run(case: ControllerCase) -> dict[str, Any]:
    from cre.testing.apiserver import serve
    from cre.testing.cluster.scenario import SimEmulatorClock

    clock = SimClock(scale=case.time_scale, start=DEFAULT_EPOCH, wall=time.monotonic)
    where = f"{case.case_dir / 'input.yaml'}: controller"
    async with serve(crds=list(case.crds), kubernetes_version=case.kubernetes_version,
                     clock=SimEmulatorClock(clock), kubeconfig_path=kubeconfig_path()) as emu:
        for ns in case.namespaces:
            emu.objects.put({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
        for i, obj in enumerate(case.objects):
            put_object(emu, obj, where=f"{case.case_dir / 'input.yaml'}: objects[{i}]")
        client = await KubeClient.from_kubeconfig(str(emu.kubeconfig_path))
        try:
            async with _cluster(case, emu, clock), started(case.controller, emu=emu,
                                                           clock=clock, where=where):
                for step in case.steps:
                    await run_step(step, emu=emu, client=client, clock=clock)
                emu.faults.reset()
                await settle(emu, clock, case.settle,
                             where=f"{case.case_dir / 'input.yaml'}: settle")
                output = _collect(emu, case)
        finally:
            await client.close()
    return output


_KUBECONFIG: list[Path] = []


def kubeconfig_path() -> Path:
    """One kubeconfig path for every case of this process, rewritten per case: clients that
    read ``$KUBECONFIG`` once (the ``kubernetes`` library does, at import) still find the
    current emulator."""
    if not _KUBECONFIG:
        folder = Path(tempfile.mkdtemp(prefix="cre-golden-"))
        atexit.register(shutil.rmtree, folder, True)
        _KUBECONFIG.append(folder / "kubeconfig")
    return _KUBECONFIG[0]


def _cluster(case: ControllerCase, emu: Any, clock: SimClock) -> Any:
    if case.cluster is None:
        return _nothing()
    from cre.testing.cluster.runtime import simulate

    return simulate(emu, profile=case.cluster.profile, nodes=case.cluster.nodes,
                    scale=clock.scale, clock=clock)


class _nothing:
    async def __aenter__(self) -> None:
        return None

    async def __aexit__(self, *exc: object) -> None:
        return None


def run(case_dir: Path, data: dict[str, Any]) -> dict[str, Any]:
    """Run the case in ``case_dir`` (``data``: its input.yaml) and return its record."""
    case = read_case(case_dir, data)
    try:
        result: dict[str, Any] = anyio.run(_run, case)
    except BaseExceptionGroup as group:
        leaves = _leaves(group)
        if len(leaves) == 1:  # one failure (a step, the controller): report it, not the group
            raise leaves[0] from None
        raise
    return result


def _leaves(group: BaseExceptionGroup[BaseException]) -> list[BaseException]:
    out: list[BaseException] = []
    for exc in group.exceptions:
        if isinstance(exc, BaseExceptionGroup):
            out.extend(_leaves(exc))
        elif not isinstance(exc, asyncio.CancelledError):
            out.append(exc)
    return out


run.golden_normalise = NORMALISE  # type: ignore[attr-defined]

__all__ = ["NORMALISE", "ControllerCaseError", "WaitTimeout", "read_case", "run"]
