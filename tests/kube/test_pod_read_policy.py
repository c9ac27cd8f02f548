"""The pod-read policy: only cre/kube/pods.py lists or watches Pods, and never without a selector.

The static half walks the AST of every module of the CRE library (cre/, including cre/testing),
the manager (cre_manager/) and the benchmarks (bench/). The exemptions are narrow and listed in
``EXEMPT`` with the reason for each: the API emulator and the cluster simulator play the API
server, the kubelet and the scheduler, which do see every pod; two benchmarks measure a bare
watch as the floor the informer is compared to. The scanner flags:
a call to ``list`` / ``stream_lines`` / ``Informer`` / ``Reflector`` / ``scoped_pod_informer``
(or an informer factory's ``informer``) that mentions ``PODS``; ``PODS.path(...)`` without
``name=`` (a collection path); a string or f-string that ends in a ``/pods`` collection;
kubernetes-asyncio's ``list_*pod*`` calls.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from cre.core.common.projections import pod_view
from cre.kube.client import NODES, PODS
from cre.kube.guard import UnscopedPodRead, require_pod_scope
from cre.kube.informer import Informer
from cre.kube.pods import live_list_pods

ROOT = Path(__file__).resolve().parents[2]
ALLOWED = {"cre/kube/pods.py"}
#: path prefix -> why it may list or watch Pods. Keep this short: every entry is a hole.
EXEMPT: dict[str, str] = {
    "cre/testing/apiserver/": "the API emulator serves pod lists and watches",
    "cre/testing/cluster/": "the cluster simulator plays the kubelet and the scheduler",
    "bench/informer.py": "a bare aiohttp watch and kopf are the baselines the informer is "
                         "measured against",
    "bench/apiserver.py": "measures the emulator's own watch fan-out",
    "cre/testing/controlplane/scripts.py": "the differential scripts list and watch pods on "
                                           "the emulator and a real kube-apiserver",
    "cre/testing/controlplane/sequences.py": "the simulator-vs-real-controllers oracle records "
                                             "whole pod objects (their shapes as created), "
                                             "label-scoped to the Jobs' pods",
    "bench/_allreal_capture.py": "times the launcher exits CRE must capture on the all-real "
                                 "stack, and writes their logs; whole pods, label-scoped",
    "bench/kwok.py": "measures KWOK's pod lifecycle for one labelled Job",
    "cre/testing/controlplane/allreal.py": "NodeScript plays the kubelet's part on the all-real "
                                           "stack: it scripts each bound pod's exit and log by "
                                           "its node (label-scoped to the Jobs' pods)",
}
SCANNED = ("cre", "cre_manager", "bench")
_LIST_CALLS = {"list", "stream_lines", "Informer", "Reflector", "_Reflector", "request",
               "scoped_pod_informer", "watch", "informer"}
_COLLECTION = re.compile(r"/pods/?(\?.*)?$")


def _mentions_pods(node: ast.AST, names: frozenset[str] = frozenset({"PODS"})) -> bool:
    return any((isinstance(n, ast.Name) and n.id in names)
               or (isinstance(n, ast.Attribute) and n.attr in names) for n in ast.walk(node))


def _mentions_pod_collection(node: ast.AST, names: frozenset[str]) -> bool:
    """``node`` mentions PODS other than as ``PODS.path(..., name=...)`` (one named pod)."""
    named = {id(n.func.value) for n in ast.walk(node)
             if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
             and n.func.attr == "path" and any(k.arg == "name" for k in n.keywords)}
    return any(id(n) not in named
               and ((isinstance(n, ast.Name) and n.id in names)
                    or (isinstance(n, ast.Attribute) and n.attr in names))
               for n in ast.walk(node))


def _pod_names(tree: ast.AST) -> frozenset[str]:
    """``PODS`` plus any local alias of it (``from cre.kube.client import PODS as P``)."""
    names = {"PODS"}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            names.update(a.asname for a in node.names if a.name == "PODS" and a.asname)
        elif (isinstance(node, ast.Assign) and _mentions_pods(node.value, frozenset(names))
              and isinstance(node.value, ast.Name | ast.Attribute)):
            names.update(t.id for t in node.targets if isinstance(t, ast.Name))
    return frozenset(names)


def _call_name(call: ast.Call) -> str:
    f = call.func
    if isinstance(f, ast.Name):
        return f.id
    if isinstance(f, ast.Attribute):
        return f.attr
    return ""


def _string_value(node: ast.AST) -> str | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        return "".join(v.value if isinstance(v, ast.Constant) and isinstance(v.value, str)
                       else "{}" for v in node.values)
    return None


def offences(source: str, filename: str = "<src>") -> list[str]:
    """Where ``source`` lists or watches Pods (one line per offence)."""
    out: list[str] = []
    tree = ast.parse(source, filename=filename)
    # The literal pieces of an f-string are judged as part of the whole f-string only.
    pieces = {id(v) for n in ast.walk(tree) if isinstance(n, ast.JoinedStr) for v in n.values}
    pods = _pod_names(tree)
    for node in ast.walk(tree):
        where = f"{filename}:{getattr(node, 'lineno', 0)}"
        if isinstance(node, ast.Call):
            name = _call_name(node)
            args = [*node.args, *(k.value for k in node.keywords)]
            if name in _LIST_CALLS and any(_mentions_pod_collection(a, pods) for a in args):
                out.append(f"{where}: {name}() on PODS")
            if (name == "path" and isinstance(node.func, ast.Attribute)
                    and _mentions_pods(node.func.value, pods)
                    and not any(k.arg == "name" for k in node.keywords)):
                out.append(f"{where}: PODS.path() without name= (a collection path)")
            inline_pods = any(isinstance(a, ast.Constant) and a.value == "pods" for a in args)
            if name == "Resource" and inline_pods and filename != "cre/kube/client.py":
                out.append(f"{where}: a second Pod resource defined outside cre.kube.client")
            if re.fullmatch(r"list_(namespaced_pod|pod_for_all_namespaces)\w*", name):
                out.append(f"{where}: kubernetes client {name}()")
        text = None if id(node) in pieces else _string_value(node)
        if text is not None and _COLLECTION.search(text):
            out.append(f"{where}: pod collection path {text!r}")
    return out


def _modules() -> list[Path]:
    files: list[Path] = []
    for top in SCANNED:
        base = ROOT / top
        if base.is_dir():
            files.extend(sorted(base.rglob("*.py")))
    return files


def test_no_module_but_the_pod_read_module_lists_or_watches_pods() -> None:
    """Every library and manager module except cre/kube/pods.py is free of pod lists/watches."""
    found: list[str] = []
    for path in _modules():
        rel = path.relative_to(ROOT).as_posix()
        if rel in ALLOWED or rel.startswith(tuple(EXEMPT)):
            continue
        found.extend(offences(path.read_text(), rel))
    assert not found, "Pods may only be listed/watched in cre/kube/pods.py:\n" + "\n".join(found)


def test_the_scan_covers_controllers_core_kube_manager_and_bench() -> None:
    """Only the simulators, two baseline benchmarks, the differential's request scripts and
    the real-control-plane oracles (sequences, the all-real stack's NodeScript, the all-real and
    KWOK benchmarks) are exempt;
    everything else is scanned."""
    scanned = {p.relative_to(ROOT).as_posix() for p in _modules()}
    for must in ("cre/controller/", "cre/core/", "cre/kube/", "cre_manager/", "bench/",
                 "cre/testing/golden/"):
        assert any(p.startswith(must) for p in scanned), f"{must} is not scanned"
    exempt = {p for p in scanned if p.startswith(tuple(EXEMPT))}
    assert all(p.startswith(("cre/testing/apiserver/", "cre/testing/cluster/", "bench/informer",
                             "bench/apiserver", "cre/testing/controlplane/scripts.py",
                             "cre/testing/controlplane/sequences.py", "bench/_allreal_capture",
                             "bench/kwok", "cre/testing/controlplane/allreal.py"))
               for p in exempt)
    assert all(reason.strip() for reason in EXEMPT.values())


def test_the_pod_read_module_itself_is_seen_by_the_scanner() -> None:
    """The scanner does flag cre/kube/pods.py, so the allow-list is what lets it through."""
    assert offences((ROOT / "cre/kube/pods.py").read_text(), "cre/kube/pods.py")


@pytest.mark.parametrize("snippet", [
    "await client.list(PODS, namespace=ns)",
    "await client.list(resource=client_mod.PODS)",
    "inf = Informer(client, PODS, transform=f, label_selector='a')",
    "async with client.stream_lines(PODS.path(namespace=ns), query=q) as s: pass",
    "await client.request('GET', '/api/v1/pods')",
    "await client.request('GET', f'/api/v1/namespaces/{ns}/pods?watch=true')",
    "await core_v1.list_pod_for_all_namespaces(watch=True)",
    "await core_v1.list_namespaced_pod(ns)",
    "from cre.kube.client import PODS as P\n    await client.list(P)",
    "res = client_mod.PODS\n    await client.list(res)",
    "await client.list(Resource('', 'v1', 'pods'))",
], ids=lambda s: s[:40])
def test_scanner_catches_a_new_offender(snippet: str) -> None:
    """A synthetic module that lists or watches pods in any of the known ways is flagged."""
    src = f"async def f(client, client_mod, core_v1, ns, q, f):\n    {snippet}\n"
    assert offences(src), snippet


@pytest.mark.parametrize("snippet", [
    "await client.get(PODS, name, namespace=ns)",
    "await client.delete(PODS, name, namespace=ns, uid=u)",
    "p = PODS.path(namespace=ns, name=n, subresource='log')",
    "await client.list(NODES, query={'labelSelector': 'x'})",
    "s = f'/api/v1/namespaces/{ns}/pods/{name}'",
    "await client.request('POST', PODS.path(namespace=ns, name=n, subresource='eviction'))",
], ids=lambda s: s[:40])
def test_scanner_allows_single_object_reads(snippet: str) -> None:
    """Reading, deleting or logging one named pod and listing other kinds are not offences."""
    src = f"async def f(client, ns, name, n, u):\n    {snippet}\n"
    assert offences(src) == []


def test_unscoped_pod_informer_is_refused_naming_the_caller() -> None:
    """An Informer on Pods without a label selector raises and names this test as the caller."""
    with pytest.raises(UnscopedPodRead, match=r"test_pod_read_policy:test_unscoped_pod_informer"):
        Informer(object(), PODS, transform=pod_view)  # type: ignore[arg-type]
    with pytest.raises(UnscopedPodRead, match="my-controller"):
        Informer(object(), PODS, transform=pod_view, label_selector=" ",  # type: ignore[arg-type]
                 caller="my-controller")


def test_scoped_and_non_pod_informers_are_allowed() -> None:
    """A labelled Pod informer and an unlabelled Node informer are accepted."""
    Informer(object(), PODS, transform=pod_view, label_selector="cre.dev/job")  # type: ignore[arg-type]
    require_pod_scope(NODES, None)


@pytest.mark.anyio
async def test_unscoped_live_pod_list_is_refused() -> None:
    """live_list_pods with an empty selector raises before any request is made."""
    with pytest.raises(UnscopedPodRead, match="refusing an unscoped Pod list"):
        await live_list_pods(object(), label_selector="")  # type: ignore[arg-type]


#: Pod caches wider than CRE's own pods (built in cre/kube/pods.py only), with the reason.
WIDE_CACHES: dict[str, str] = {
    "gpu_pod_informer": "a CertificationSchedule leaves nodes whose GPUs others' pods hold "
                        "alone; no label says 'requests a GPU', so every pod CRE did not make "
                        "(!cre.dev/job,!cre.dev/launcher) is listed, each stored as the one "
                        "shared NO_GPU value unless it holds GPUs on a node",
}


def test_the_pod_read_module_builds_only_scoped_caches_and_the_listed_wide_one() -> None:
    """Every pod informer of cre/kube/pods.py uses CRE's worker or launcher selector, except
    the functions listed in WIDE_CACHES, which use the foreign-pods selector."""
    from cre.kube import pods

    tree = ast.parse((ROOT / "cre/kube/pods.py").read_text())
    found: dict[str, set[str]] = {}
    for fn in (n for n in tree.body if isinstance(n, ast.FunctionDef)):
        for call in (n for n in ast.walk(fn) if isinstance(n, ast.Call)):
            selector = next((k.value for k in call.keywords if k.arg == "label_selector"), None)
            if _call_name(call) == "informer" and isinstance(selector, ast.Name):
                found.setdefault(fn.name, set()).add(selector.id)
    wide = {name for name, sel in found.items() if sel != {"WORKER_SELECTOR"}
            and sel != {"LAUNCHER_SELECTOR"}}
    assert wide == set(WIDE_CACHES), found
    assert all(found[name] == {"FOREIGN_SELECTOR"} for name in wide)
    assert pods.FOREIGN_SELECTOR == "!cre.dev/job,!cre.dev/launcher"
    assert all(reason.strip() for reason in WIDE_CACHES.values())


def test_a_pod_holding_no_gpu_costs_no_object_of_its_own() -> None:
    """The wide cache's projection maps every pod that holds no GPU to one shared value."""
    from cre.core.schedule.nodes import NO_GPU, gpu_pod_view

    cpu = {"metadata": {"name": "a", "namespace": "x"},
           "spec": {"nodeName": "n", "containers": [{"name": "c"}]},
           "status": {"phase": "Running"}}
    assert gpu_pod_view(cpu) is NO_GPU
    assert gpu_pod_view({**cpu, "metadata": {"name": "b", "namespace": "y"}}) is NO_GPU
