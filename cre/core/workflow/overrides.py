"""A Workflow's ``spec.overrides``: conditional patches applied, in list order, once the
platform and GPU architecture are known.

Each override whose ``when`` holds (``cre.core.workflow.deps.when_matches``) applies, in this order:

* ``jobTemplate``: a merge patch of the job template (a ``null`` deletes a key, objects merge,
  anything else, lists included, replaces: the reference's strategic merge keeps struct-tag
  list merges, which the opaque TrainJob spec does not have);
* ``jobTemplatePatch``: RFC 6902 operations on the job template;
* ``dependencies``: merged into the dependency with the same apiVersion, kind and name (objects
  merge, ``null`` deletes, lists of named objects merge by name keeping the base order, other
  values replace); a dependency that matches none is appended;
* ``orchestration``: every set field replaces the base value.

The result is the effective spec the rest of the core runs on (the overrides are computed again
on every pass from the spec and the detected platform, so the core stays a pure function).
An override that cannot apply is an ``OverrideError`` naming ``spec.overrides[i]...``.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

import attrs
import jsonpatch

from cre.api.converter import structure, unstructure
from cre.api.errors import ValidationError
from cre.api.workflow import AppliedOverride, Workflow, WorkflowSpec
from cre.core.workflow.deps import DependencyError, when_matches


class OverrideError(ValueError):
    """An override could not be applied; the message names the field."""


def merge_patch(base: Any, patch: Any) -> Any:
    """RFC 7386 merge of ``patch`` onto ``base`` (new values, inputs untouched)."""
    if not isinstance(patch, Mapping):
        return copy.deepcopy(patch)
    out = dict(base) if isinstance(base, Mapping) else {}
    for key, value in patch.items():
        if value is None:
            out.pop(key, None)
        else:
            out[key] = merge_patch(out.get(key), value)
    return out


def _named(items: Any) -> bool:
    return isinstance(items, list) and bool(items) and all(
        isinstance(i, Mapping) and "name" in i for i in items)


def merge_dependency(base: Any, patch: Any) -> Any:
    """The dependency merge: objects merge, ``null`` deletes, named lists merge by name."""
    if isinstance(patch, Mapping) and isinstance(base, Mapping):
        out = dict(base)
        for key, value in patch.items():
            if value is None:
                out.pop(key, None)
            else:
                out[key] = merge_dependency(out.get(key), value)
        return out
    if _named(base) and _named(patch):
        merged = [dict(i) for i in base]
        index = {i["name"]: n for n, i in enumerate(merged)}
        for item in patch:
            if item["name"] in index:
                merged[index[item["name"]]] = merge_dependency(merged[index[item["name"]]], item)
            else:
                merged.append(copy.deepcopy(dict(item)))
        return merged
    return copy.deepcopy(patch)


def _key(obj: Mapping[str, Any]) -> tuple[Any, Any, Any]:
    meta = obj.get("metadata")
    return obj.get("apiVersion"), obj.get("kind"), meta.get("name") if isinstance(meta, Mapping) \
        else None


def _when_summary(when: Mapping[str, Any]) -> str:
    parts = []
    for key in sorted(when):
        value = when[key]
        if isinstance(value, Mapping):
            inner = ",".join(f"{k}={v}" for k, v in sorted(value.items()))
            parts.append(f"{key}={inner}")
        else:
            parts.append(f"{key}={value}")
    return ", ".join(parts) or "always"


def apply_overrides(
    wf: Workflow, *, platform: str, arch: str, topology_mode: str = "simple",
    domain_count: int = 0,
) -> tuple[Workflow, tuple[AppliedOverride, ...]]:
    """The Workflow with its matching overrides applied (and removed), and what applied."""
    if not wf.spec.overrides:
        return wf, ()
    spec: dict[str, Any] = unstructure(attrs.evolve(wf.spec, overrides=()))
    applied: list[AppliedOverride] = []
    for i, override in enumerate(wf.spec.overrides):
        where = f"spec.overrides[{i}]"
        when = unstructure(override.when)
        try:
            if not when_matches(when, platform=platform, arch=arch,
                                topology_mode=topology_mode, domain_count=domain_count,
                                path=f"{where}.when"):
                continue
        except DependencyError as exc:
            raise OverrideError(str(exc)) from exc
        before = copy.deepcopy(spec)
        kinds = []
        if override.job_template is not None:
            spec["jobTemplate"] = merge_patch(spec["jobTemplate"], override.job_template)
            kinds.append("jobTemplate")
        if override.job_template_patch:
            try:
                spec["jobTemplate"] = jsonpatch.apply_patch(
                    spec["jobTemplate"], [dict(op) for op in override.job_template_patch])
            except (jsonpatch.JsonPatchException, jsonpatch.JsonPointerException) as exc:
                raise OverrideError(f"{where}.jobTemplatePatch: {exc}") from exc
            kinds.append("jobTemplatePatch")
        if override.dependencies:
            deps = [dict(d) for d in spec.get("dependencies", [])]
            for patch in override.dependencies:
                match = next((n for n, d in enumerate(deps) if _key(d) == _key(patch)), None)
                if match is None:
                    deps.append(copy.deepcopy(dict(patch)))
                else:
                    deps[match] = merge_dependency(deps[match], patch)
            spec["dependencies"] = deps
            kinds.append(f"{len(override.dependencies)} dependencies")
        if override.orchestration is not None:
            spec["orchestration"] = {**spec["orchestration"],
                                     **unstructure(override.orchestration)}
            kinds.append("orchestration")
        applied.append(AppliedOverride(index=i, when=_when_summary(when),
                                       patches=", ".join(kinds) or "none",
                                       no_op=spec == before))
    try:
        effective = structure(spec, WorkflowSpec)
    except ValidationError as exc:
        problems = "; ".join(str(e) for e in exc.errors)
        raise OverrideError(f"spec.overrides: the patched spec is invalid: {problems}") from exc
    return attrs.evolve(wf, spec=effective), tuple(applied)
