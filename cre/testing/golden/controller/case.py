"""The ``type: controller`` case format, read and checked before anything starts.

A case names what to start (CRDs, Kubernetes version, the controller, an optional simulated
cluster), what exists first, what happens (``steps``) and what the golden records
(``output``). Reading it is pure: every problem is reported with the case file and the field
path (``input.yaml: steps[2].waitFor.timeout: expected a number``) before an emulator starts.
The reference page ``docs/reference/golden-cases.md`` documents every key.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any, Final

import attrs

from cre._vendor.crds import ALL as BUNDLED_CRD_DIRS
from cre._vendor.crds import JOBSET_LATEST, TRAINER_LATEST
from cre.testing.golden.jsonpath import JsonPathError
from cre.testing.golden.jsonpath import parse as parse_jsonpath

#: ``crds:`` entries that name a vendored upstream set instead of a path.
BUNDLED_CRDS: Final[dict[str, Path]] = {
    "trainer": TRAINER_LATEST, "jobset": JOBSET_LATEST,
    **{d.name: d for d in BUNDLED_CRD_DIRS},
}
KEYS: Final = frozenset({"type", "kubernetesVersion", "crds", "timeScale", "controller",
                         "cluster", "namespaces", "objects", "steps", "settle", "output"})
CONTROLLER_KEYS: Final = frozenset({"factory", "kopf", "args", "namespaces"})
CLUSTER_KEYS: Final = frozenset({"profile", "nodes", "scale"})
#: Step verb -> the keys its argument may have (None: a scalar or a whole manifest).
STEPS: Final[dict[str, frozenset[str] | None]] = {
    "apply": None,
    "patch": frozenset({"apiVersion", "kind", "name", "namespace", "patch"}),
    "delete": frozenset({"apiVersion", "kind", "name", "namespace"}),
    "podPhase": frozenset({"pod", "namespace", "phase", "reason", "message"}),
    "containerExit": frozenset({"pod", "namespace", "container", "exitCode", "reason", "log"}),
    "evict": frozenset({"pod", "namespace"}),
    "nodeCondition": frozenset({"node", "type", "status", "reason", "message"}),
    "advance": None,
    "fault": None,
    "waitFor": frozenset({"apiVersion", "kind", "name", "namespace", "jsonpath", "equals",
                          "exists", "absent", "timeout"}),
}
DEFAULT_TIME_SCALE: Final = 20.0
DEFAULT_WAIT: Final = 60.0
DEFAULT_SETTLE: Final = 2.0


class ControllerCaseError(ValueError):
    """The case is malformed; the message names the file and the field path."""


@attrs.frozen(kw_only=True)
class ControllerSpec:
    """What to start: a ``module:factory`` or kopf handler modules."""

    factory: str | None
    kopf: tuple[str, ...]
    args: Mapping[str, Any]
    namespaces: tuple[str, ...]


@attrs.frozen(kw_only=True)
class ClusterSpec:
    profile: str
    nodes: int
    scale: float | None


@attrs.frozen(kw_only=True)
class OutputKind:
    api_version: str
    kind: str
    namespace: str
    labels: Mapping[str, str]


@attrs.frozen(kw_only=True)
class Step:
    """One step: its verb, its argument and where it was written (for messages)."""

    verb: str
    arg: Any
    where: str


@attrs.frozen(kw_only=True)
class ControllerCase:
    case_dir: Path
    kubernetes_version: str
    crds: tuple[Path, ...]
    time_scale: float
    controller: ControllerSpec
    cluster: ClusterSpec | None
    namespaces: tuple[str, ...]
    objects: tuple[Mapping[str, Any], ...]
    steps: tuple[Step, ...]
    settle: float
    output_kinds: tuple[OutputKind, ...]
    output_events: bool


def _fail(where: str, what: str) -> ControllerCaseError:
    return ControllerCaseError(f"{where}: {what}")


def _mapping(value: Any, where: str, keys: frozenset[str] | None = None) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise _fail(where, f"expected a mapping, got {type(value).__name__}")
    if keys is not None:
        unknown = sorted(set(value) - keys)
        if unknown:
            raise _fail(where, f"unknown keys {unknown} (known: {sorted(keys)})")
    return value


def _strings(value: Any, where: str) -> tuple[str, ...]:
    if isinstance(value, str):
        return (value,)
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise _fail(where, "expected a string or a list of strings")
    return tuple(value)


def _number(value: Any, where: str, *, positive: bool = True) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or (
            positive and value <= 0):
        raise _fail(where, f"expected a {'positive ' if positive else ''}number, got {value!r}")
    return float(value)


def _manifest(value: Any, where: str) -> Mapping[str, Any]:
    obj = _mapping(value, where)
    for key in ("apiVersion", "kind"):
        if not isinstance(obj.get(key), str):
            raise _fail(f"{where}.{key}", "required (a string)")
    meta = obj.get("metadata")
    if not isinstance(meta, Mapping) or not (meta.get("name") or meta.get("generateName")):
        raise _fail(f"{where}.metadata", "needs a name (or generateName)")
    return obj


def _crds(value: Any, where: str, case_dir: Path) -> tuple[Path, ...]:
    out = []
    for i, item in enumerate(_strings(value, where) if value is not None else ()):
        if item in BUNDLED_CRDS:
            out.append(BUNDLED_CRDS[item])
            continue
        path = (case_dir / item).resolve()
        if not path.exists():
            raise _fail(f"{where}[{i}]", f"{item!r} is neither a file or folder (relative to "
                        f"the case) nor a bundled set ({', '.join(sorted(BUNDLED_CRDS))})")
        out.append(path)
    return tuple(out)


def _controller(value: Any, where: str) -> ControllerSpec:
    spec = _mapping(value, where, CONTROLLER_KEYS)
    factory, kopf = spec.get("factory"), spec.get("kopf")
    if (factory is None) == (kopf is None):
        raise _fail(where, "give exactly one of 'factory' (module:callable) and 'kopf' "
                    "(the module(s) holding the kopf handlers)")
    if factory is not None and (not isinstance(factory, str) or ":" not in factory):
        raise _fail(f"{where}.factory", f"expected 'module:callable', got {factory!r}")
    args = _mapping(spec.get("args", {}), f"{where}.args")
    return ControllerSpec(factory=factory, kopf=_strings(kopf, f"{where}.kopf") if kopf else (),
                          args=dict(args),
                          namespaces=_strings(spec.get("namespaces", []),
                                              f"{where}.namespaces"))


def _step(value: Any, where: str) -> Step:
    item = _mapping(value, where)
    if len(item) != 1:
        raise _fail(where, f"one verb per step, got {sorted(item)} (verbs: {sorted(STEPS)})")
    ((verb, arg),) = item.items()
    at = f"{where}.{verb}"
    if verb not in STEPS:
        raise _fail(where, f"unknown step {verb!r} (verbs: {sorted(STEPS)})")
    keys = STEPS[verb]
    if verb == "apply":
        _manifest(arg, at)
    elif verb == "advance":
        _number(arg, at)
    elif verb == "fault":
        _mapping(arg, at)
    elif keys is not None:
        _mapping(arg, at, keys)
    if verb == "waitFor":
        for key in ("apiVersion", "kind", "name"):
            if not isinstance(arg.get(key), str):
                raise _fail(f"{at}.{key}", "required (a string)")
        conditions = [k for k in ("jsonpath", "absent") if k in arg]
        if len(conditions) != 1:
            raise _fail(at, "give 'jsonpath' (with 'equals' or 'exists') or 'absent: true'")
        if "jsonpath" in arg:
            try:
                parse_jsonpath(str(arg["jsonpath"]))
            except JsonPathError as exc:
                raise _fail(f"{at}.jsonpath", str(exc)) from None
        if "timeout" in arg:
            _number(arg["timeout"], f"{at}.timeout")
    if verb in ("patch", "delete"):
        for key in ("apiVersion", "kind", "name"):
            if not isinstance(arg.get(key), str):
                raise _fail(f"{at}.{key}", "required (a string)")
    if verb == "patch":
        _mapping(arg.get("patch"), f"{at}.patch")
    if verb in ("podPhase", "containerExit", "evict") and not isinstance(arg.get("pod"), str):
        raise _fail(f"{at}.pod", "required (the pod's name)")
    if verb == "containerExit" and not isinstance(arg.get("exitCode"), int):
        raise _fail(f"{at}.exitCode", "required (an integer)")
    if verb == "nodeCondition":
        for key in ("node", "type", "status"):
            if not isinstance(arg.get(key), str):
                raise _fail(f"{at}.{key}", "required (a string)")
    return Step(verb=verb, arg=arg, where=where)


def _output(value: Any, where: str) -> tuple[tuple[OutputKind, ...], bool]:
    spec = _mapping(value, where, frozenset({"kinds", "events"}))
    kinds = spec.get("kinds")
    if not isinstance(kinds, list) or not kinds:
        raise _fail(f"{where}.kinds", "expected a non-empty list of {apiVersion, kind}")
    out = []
    for i, item in enumerate(kinds):
        at = f"{where}.kinds[{i}]"
        k = _mapping(item, at, frozenset({"apiVersion", "kind", "namespace", "labels"}))
        for key in ("apiVersion", "kind"):
            if not isinstance(k.get(key), str):
                raise _fail(f"{at}.{key}", "required (a string)")
        out.append(OutputKind(api_version=k["apiVersion"], kind=k["kind"],
                              namespace=str(k.get("namespace", "")),
                              labels=dict(_mapping(k.get("labels", {}), f"{at}.labels"))))
    events = spec.get("events", True)
    if not isinstance(events, bool):
        raise _fail(f"{where}.events", "expected true or false")
    return tuple(out), events


def _with_cluster_crds(crds: tuple[Path, ...], cluster: ClusterSpec | None) -> tuple[Path, ...]:
    """The simulated cluster plays Trainer and JobSet: their CRDs must be served."""
    if cluster is None:
        return crds
    have = {p.name.split("-")[0] for p in crds if p in BUNDLED_CRDS.values()}
    extra = [d for d in (TRAINER_LATEST, JOBSET_LATEST) if d.name.split("-")[0] not in have]
    return (*crds, *extra)


def read_case(case_dir: Path, data: Mapping[str, Any]) -> ControllerCase:
    """The checked case; :class:`ControllerCaseError` names the first problem."""
    f = str(case_dir / "input.yaml")
    _mapping(data, f, KEYS)
    if "controller" not in data:
        raise _fail(f"{f}: controller", "required")
    cluster = None
    if data.get("cluster") is not None:
        c = _mapping(data["cluster"], f"{f}: cluster", CLUSTER_KEYS)
        cluster = ClusterSpec(profile=str(c.get("profile", "aws-h100")),
                              nodes=int(_number(c.get("nodes", 2), f"{f}: cluster.nodes")),
                              scale=_number(c["scale"], f"{f}: cluster.scale")
                              if "scale" in c else None)
    scale = _number(data.get("timeScale", DEFAULT_TIME_SCALE), f"{f}: timeScale")
    if cluster is not None and cluster.scale is not None:
        scale = cluster.scale
    kinds, events = _output(data.get("output"), f"{f}: output")
    objects = data.get("objects") or []
    steps = data.get("steps") or []
    if not isinstance(objects, list) or not isinstance(steps, list):
        raise _fail(f, "'objects' and 'steps' are lists")
    return ControllerCase(
        case_dir=case_dir,
        kubernetes_version=str(data.get("kubernetesVersion", "1.33")),
        crds=_with_cluster_crds(_crds(data.get("crds"), f"{f}: crds", case_dir), cluster),
        time_scale=scale,
        controller=_controller(data["controller"], f"{f}: controller"),
        cluster=cluster,
        namespaces=_strings(data.get("namespaces", []), f"{f}: namespaces"),
        objects=tuple(_manifest(o, f"{f}: objects[{i}]") for i, o in enumerate(objects)),
        steps=tuple(_step(s, f"{f}: steps[{i}]") for i, s in enumerate(steps)),
        settle=_number(data.get("settle", DEFAULT_SETTLE), f"{f}: settle", positive=False),
        output_kinds=kinds,
        output_events=events,
    )


__all__ = ["BUNDLED_CRDS", "ClusterSpec", "ControllerCase", "ControllerCaseError",
           "ControllerSpec", "OutputKind", "Step", "read_case"]
