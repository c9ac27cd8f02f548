"""A Workflow's ``spec.dependencies``: which apply, which live once per Job, in what order.

Dependencies are inline Kubernetes objects (a TrainingRuntime, a ComputeDomain, claim
templates...) with an optional ``when``. There is no scope field; scope is inferred, as the
reference does, from name references:

* job-scoped: the dependency's ``metadata.name`` occurs as a string value in the job template
  (metadata labels and annotations aside), or it is linked to a job-scoped dependency: one
  contains the other's name, or both contain the same name-like string that is nobody's name
  (a claim template name shared by a ComputeDomain and a TrainingRuntime). Kinds starting with
  ``Cluster`` are never job-scoped. Everything else is workflow-scoped (created once).
* order: "A contains B's name" creates B first (stable by index); deletion is the reverse.
* per-Job copies are renamed ``<name>-<hash5>-job`` (one group, one iteration) or
  ``<name>-<hash5>-<group>-iter-<n>``; every string equal to a renamed name or shared string is
  rewritten in the copies and in the Job spec, so the Job references its own copies. A
  ComputeDomain copy is sized to its group (``spec.numNodes``).

``when`` matches ``platform`` / ``gpuArchitecture`` (equals, in, notIn), ``workloadKind``,
``topology`` (mode, domainCount) and a CEL ``expression`` over the same values; all set
criteria must hold.
"""

from __future__ import annotations

import copy
import hashlib
import re
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, Final

import attrs

from cre.api.cel import CelError, compile_cel
from cre.api.workflow import DependencyScope

_NAME_LIKE: Final = re.compile(r"[a-z0-9]([-a-z0-9.]*[a-z0-9])?-[a-z0-9]([-a-z0-9.]*[a-z0-9])?")


class DependencyError(ValueError):
    """A dependency cannot be used (bad ``when``); the message names the field."""


@attrs.frozen(kw_only=True)
class Dependency:
    """One applicable dependency, its scope and its creation rank."""

    index: int
    obj: Mapping[str, Any]
    scope: DependencyScope

    @property
    def name(self) -> str:
        """``metadata.name``."""
        return str(self.obj["metadata"]["name"])

    @property
    def kind(self) -> str:
        """``kind``."""
        return str(self.obj["kind"])


def _strings(value: Any, *, skip_meta: bool = True) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, Mapping):
        for key, item in value.items():
            if skip_meta and key == "metadata" and isinstance(item, Mapping):
                yield from (s for k, v in item.items() if k not in ("labels", "annotations")
                            for s in _strings(v))
            else:
                yield from _strings(item, skip_meta=skip_meta)
    elif isinstance(value, list | tuple):
        for item in value:
            yield from _strings(item, skip_meta=skip_meta)


def _body_strings(obj: Mapping[str, Any]) -> set[str]:
    """Strings of a dependency outside its own name, labels and annotations."""
    return {s for k, v in obj.items() if k not in ("metadata", "when") for s in _strings(v)}


def _match_string(spec: Mapping[str, Any] | None, value: str) -> bool:
    if not spec:
        return True
    if spec.get("equals") is not None and value != spec["equals"]:
        return False
    if spec.get("in") and value not in spec["in"]:
        return False
    return not (spec.get("notIn") and value in spec["notIn"])


def _match_int(spec: Mapping[str, Any] | None, value: int) -> bool:
    if not spec:
        return True
    if spec.get("equals") is not None and value != spec["equals"]:
        return False
    if spec.get("greaterThan") is not None and not value > spec["greaterThan"]:
        return False
    return not (spec.get("lessThan") is not None and not value < spec["lessThan"])


def when_matches(when: Mapping[str, Any] | None, *, platform: str, arch: str,
                 workload_kind: str = "TrainJob", topology_mode: str = "simple",
                 domain_count: int = 0, path: str = "when") -> bool:
    """Whether every set criterion of ``when`` holds (``DependencyError`` on a bad CEL)."""
    if not when:
        return True
    topo = when.get("topology") or {}
    if not (_match_string(when.get("platform"), platform)
            and _match_string(when.get("gpuArchitecture"), arch)
            and when.get("workloadKind") in (None, workload_kind)
            and topo.get("mode") in (None, topology_mode)
            and _match_int(topo.get("domainCount"), domain_count)):
        return False
    expression = when.get("expression")
    if not expression:
        return True
    try:  # cre.api.cel: the one door to the CEL library (a library panic is a CelError too)
        result = compile_cel(expression).run({
            "platform": platform, "gpuArchitecture": arch, "workloadKind": workload_kind,
            "topologyMode": topology_mode, "domainCount": domain_count})
    except CelError as exc:
        raise DependencyError(f"{path}.expression: cannot evaluate {expression!r}: {exc}") \
            from exc
    if not isinstance(result, bool):
        raise DependencyError(f"{path}.expression: must be a bool, got {result!r}")
    return result


def applicable(deps: Sequence[Mapping[str, Any]], template: Mapping[str, Any], *,
               platform: str, arch: str, topology_mode: str = "simple",
               domain_count: int = 0) -> tuple[Dependency, ...]:
    """The dependencies whose ``when`` holds, scoped and in creation order."""
    chosen = [(i, {k: v for k, v in d.items() if k != "when"}) for i, d in enumerate(deps)
              if when_matches(d.get("when"), platform=platform, arch=arch,
                              topology_mode=topology_mode, domain_count=domain_count,
                              path=f"spec.dependencies[{i}].when")]
    names = {i: str(o["metadata"]["name"]) for i, o in chosen}
    bodies = {i: _body_strings(o) for i, o in chosen}
    in_template = set(_strings(template))
    job = {i for i, o in chosen if names[i] in in_template
           and not str(o["kind"]).startswith("Cluster")}
    changed = True
    while changed:
        changed = False
        for i, o in chosen:
            if i in job or str(o["kind"]).startswith("Cluster"):
                continue
            if any(names[i] in bodies[j] or names[j] in bodies[i]
                   or _shared(bodies[i], bodies[j], set(names.values())) for j in job):
                job.add(i)
                changed = True
    order = _topological([i for i, _ in chosen], names, bodies)
    objs = dict(chosen)
    return tuple(Dependency(index=i, obj=objs[i], scope=DependencyScope.JOB if i in job
                            else DependencyScope.WORKFLOW) for i in order)


def _shared(a: set[str], b: set[str], names: set[str]) -> bool:
    return any(_NAME_LIKE.fullmatch(s) and s not in names for s in a & b)


def _topological(indices: list[int], names: Mapping[int, str],
                 bodies: Mapping[int, set[str]]) -> list[int]:
    needs = {i: {j for j in indices if j != i and names[j] in bodies[i]} for i in indices}
    done: list[int] = []
    while len(done) < len(indices):
        ready = [i for i in indices if i not in done and needs[i] <= set(done)]
        # A cycle cannot be ordered by references: keep the spec order for the rest.
        done.append(ready[0] if ready else next(i for i in indices if i not in done))
    return done


def suffix(*, workflow_uid: str, group: str, iteration: int, single: bool) -> str:
    """The per-Job name suffix of job-scoped copies."""
    digest = hashlib.sha256(workflow_uid.encode()).hexdigest()[:5]
    return f"-{digest}-job" if single else f"-{digest}-{group}-iter-{iteration}"


def renames(deps: Sequence[Dependency], sfx: str) -> dict[str, str]:
    """Old string -> new string for every job-scoped name and shared name-like string."""
    job = [d for d in deps if d.scope == DependencyScope.JOB]
    out = {d.name: d.name + sfx for d in job}
    seen: dict[str, int] = {}
    for d in job:
        for s in _body_strings(d.obj):
            if _NAME_LIKE.fullmatch(s):
                seen[s] = seen.get(s, 0) + 1
    out.update({s: s + sfx for s, n in seen.items() if n >= 2 and s not in out})
    return out


def rewrite(value: Any, mapping: Mapping[str, str], *, skip_meta: bool = True) -> Any:
    """A deep copy of ``value`` with every string equal to a key of ``mapping`` replaced
    (metadata labels and annotations untouched)."""
    if isinstance(value, str):
        return mapping.get(value, value)
    if isinstance(value, Mapping):
        out: dict[str, Any] = {}
        for key, item in value.items():
            if skip_meta and key == "metadata" and isinstance(item, Mapping):
                out[key] = {k: copy.deepcopy(v) if k in ("labels", "annotations")
                            else rewrite(v, mapping) for k, v in item.items()}
            else:
                out[key] = rewrite(item, mapping, skip_meta=skip_meta)
        return out
    if isinstance(value, list | tuple):
        return [rewrite(v, mapping, skip_meta=skip_meta) for v in value]
    return copy.deepcopy(value)


def job_copy(dep: Dependency, mapping: Mapping[str, str], *, nodes: int) -> dict[str, Any]:
    """The per-Job copy of a job-scoped dependency (renamed, references rewritten)."""
    obj: dict[str, Any] = rewrite(dep.obj, mapping)
    obj["metadata"]["name"] = mapping[dep.name]
    if dep.kind == "ComputeDomain" and isinstance(obj.get("spec"), dict):
        obj["spec"]["numNodes"] = nodes
    return obj
