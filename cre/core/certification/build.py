"""Build one category's Workflow from the catalog, purely: options, discovery, rendering.

A Certification's category is ``<domain>/<variant>`` of the catalog. Its options are the
global ones (inline in the spec) with the category's own ``options`` laid over field by field
(a set value wins; ``workloadMetadata.labels`` merge per key). The Workflow it gets carries the
resolved, rendered spec: ``cre.render`` renders the entry for the detected platform and GPU
architecture (the template the Workflow re-pins per group), the rendered runtime and DRA
objects become its dependencies, and ``testScale`` becomes its orchestration (``intra-node``:
one node per Job; ``intra-rack``: one group per topology domain, ``topologyKey`` or
``nvidia.com/gpu.clique``; ``diagnose``: orchestration.diagnose with ``minGroupSize``).
"""

from __future__ import annotations

import hashlib
import math
from typing import Any, Final

import attrs

from cre.api import labels as L
from cre.api.certification import CategoryOptions, Certification, CertificationCategory
from cre.api.common import TestScale, WorkloadMetadata
from cre.api.converter import unstructure
from cre.catalog.errors import CatalogError
from cre.catalog.model import Catalog, CatalogEntry, RuntimeShape
from cre.catalog.template import Scalar
from cre.core.common.observed import NodeView
from cre.core.workflow.discovery import Discovery, DiscoveryFailure, capped, discover
from cre.render.job import entry_job_fields, job_object
from cre.render.options import GangScheduler, RenderError, RenderOptions
from cre.render.workload import MAX_JOB_NAME, render_workload

CATEGORY_DOMAIN: Final = "cre.dev/category-domain"
CATEGORY_VARIANT: Final = "cre.dev/category-variant"
CLIQUE_KEY: Final = "nvidia.com/gpu.clique"
DEFAULT_TIMEOUT: Final = "1h"
# Under testScale diagnose (as the reference): shorter runs, many of them.
DIAGNOSE_TIMEOUT: Final = "15m"
DIAGNOSE_PARAMETERS: Final = {"iterations": 5, "cycles": 1}
DIAGNOSE_MIN_GROUP_SIZE: Final = 2
#: Options that act only under these test scales (set elsewhere, they would be ignored).
SCALE_OPTIONS: Final = {"min_group_size": (TestScale.DIAGNOSE,),
                        "topology_key": (TestScale.INTRA_RACK, TestScale.DIAGNOSE)}
# Option name -> catalog parameter name, used when the entry declares the parameter.
PARAMETERS: Final = {"max_bytes": "maxBytes", "num_iterations": "iterations",
                     "num_cycles": "cycles", "max_steps": "maxSteps",
                     "save_interval": "saveInterval", "exit_duration_mins": "exitDurationMins"}
CHECKPOINT_SUFFIX: Final = "-checkpoint"


class BuildError(ValueError):
    """The category cannot be turned into a Workflow; the message names the field."""


def entry_name(category: CertificationCategory) -> str:
    """``<domain>/<variant>``."""
    return f"{category.domain}/{category.variant}"


def shorten(name: str, limit: int = MAX_JOB_NAME) -> str:
    """``name`` cut to ``limit`` characters with a hash of the whole, when too long."""
    if len(name) <= limit:
        return name
    digest = hashlib.sha256(name.encode()).hexdigest()[:8]
    return f"{name[:limit - 9].rstrip('-')}-{digest}"


def workflow_name(cert: Certification, index: int) -> str:
    """Category ``index``'s Workflow name (a DNS-1035 label Trainer's names still fit
    under); a category that repeats an earlier one (with other options) gets its index."""
    category = cert.spec.categories[index]
    name = f"{cert.metadata.name or ''}-{category.domain}-{category.variant}"
    earlier = any(entry_name(c) == entry_name(category) for c in cert.spec.categories[:index])
    return shorten(f"{name}-{index}" if earlier else name)


def merged_options(cert: Certification, index: int) -> CategoryOptions:
    """Global options with category ``index``'s options laid over (set fields win)."""
    base = {f.name: getattr(cert.spec, f.name) for f in attrs.fields(CategoryOptions)}
    own = cert.spec.categories[index].options
    if own is not None:
        for f in attrs.fields(CategoryOptions):
            value = getattr(own, f.name)
            if value is not None and value != ():
                base[f.name] = value
        glob, mine = cert.spec.workload_metadata, own.workload_metadata
        if glob is not None and mine is not None:
            base["workload_metadata"] = WorkloadMetadata(labels={**glob.labels, **mine.labels})
    return CategoryOptions(**base)


def _resources(options: CategoryOptions) -> dict[str, dict[str, str]]:
    """The cpu / memory quantities of ``options.resources`` as RenderOptions takes them."""
    out: dict[str, dict[str, str]] = {}
    given = options.resources
    for kind in ("limits", "requests"):
        values = getattr(given, kind) if given is not None else None
        if values is not None:
            pairs = {k: v for k, v in (("cpu", values.cpu), ("memory", values.memory)) if v}
            if pairs:
                out[kind] = pairs
    return out


def _where(index: int, field: str) -> str:
    return f"spec.categories[{index}].options.{field}"


def precheck(cert: Certification, catalog: Catalog) -> tuple[str, ...]:
    """Problems found before anything is created: unknown categories, unsupported options."""
    problems = []
    for i, category in enumerate(cert.spec.categories):
        name = entry_name(category)
        if name not in catalog.entries:
            problems.append(f"spec.categories[{i}]: unknown category {name!r} (known: "
                            f"{', '.join(sorted(catalog.entries))})")
            continue
        options = merged_options(cert, i)
        if options.test_scale == TestScale.DIAGNOSE and (options.repeat_count or 1) > 1:
            problems.append(f"{_where(i, 'repeatCount')}: testScale diagnose runs its rounds "
                            "once; repeatCount must be 1")
        entry = catalog.entries[name]
        own = category.options
        for option, scales in SCALE_OPTIONS.items():
            if own is not None and getattr(own, option) is not None and \
                    options.test_scale not in scales:
                problems.append(f"{_where(i, _camel(option))}: {_scale_note(scales, options)}")
        for option, param in PARAMETERS.items():
            if getattr(options, option) is not None and param not in entry.parameters:
                problems.append(f"{_where(i, _camel(option))}: {name} takes no {param} "
                                "parameter")
        if options.enable_checkpoint and (entry.training is None
                                          or entry.training.checkpoint is None):
            problems.append(f"{_where(i, 'enableCheckpoint')}: {name} does not checkpoint "
                            "(only training entries do)")
    for option, scales in SCALE_OPTIONS.items():
        if getattr(cert.spec, option) is not None and not any(
                merged_options(cert, i).test_scale in scales
                for i in range(len(cert.spec.categories))):
            problems.append(f"spec.{_camel(option)}: {_scale_note(scales, None)}")
    return tuple(problems)


def _scale_note(scales: tuple[TestScale, ...], options: CategoryOptions | None) -> str:
    """Why an option that acts only under ``scales`` is refused where it stands."""
    only = " or ".join(str(s) for s in scales)
    if options is None:
        return f"applies only with testScale {only}, and no category runs at that scale"
    return (f"applies only with testScale {only}; the category's testScale is "
            f"{options.test_scale or TestScale.FULL_SCALE}")


def checkpoint_pvc(*, name: str, namespace: str, entry: CatalogEntry,
                   options: CategoryOptions) -> dict[str, Any] | None:
    """The ReadWriteMany PVC ``<workflow>-checkpoint`` a category with ``enableCheckpoint``
    gets as a Workflow dependency (``None`` without checkpointing)."""
    ckpt = entry.training.checkpoint if entry.training is not None else None
    if not options.enable_checkpoint or ckpt is None:
        return None
    spec: dict[str, Any] = {"accessModes": ["ReadWriteMany"], "resources": {
        "requests": {"storage": options.storage_size or ckpt.storage_size}}}
    if options.storage_class_name:
        spec["storageClassName"] = options.storage_class_name
    return {"apiVersion": "v1", "kind": "PersistentVolumeClaim",
            "metadata": {"name": f"{name}{CHECKPOINT_SUFFIX}", "namespace": namespace,
                         "labels": {L.MANAGED_BY: L.MANAGED_BY_VALUE, "app": entry.variant}},
            "spec": spec}


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(p.title() for p in rest)


def discover_for(cert: Certification, index: int, nodes: tuple[NodeView, ...],
                 catalog: Catalog) -> Discovery | DiscoveryFailure:
    """Discovery for category ``index``, with the capacity filter at its GPUs per node."""
    first = discover(target=cert.spec.target, nodes=nodes)
    if isinstance(first, DiscoveryFailure):
        return first
    options = merged_options(cert, index)
    gpus = options.gpus_per_node
    if gpus is None:
        platform = catalog.platforms.get(first.platform)
        arch = platform.architectures.get(first.architecture) if platform else None
        gpus = arch.gpus_per_node if arch else None
    found = discover(target=cert.spec.target, nodes=nodes, gpus_per_node=gpus)
    return found if isinstance(found, DiscoveryFailure) else capped(found, cert.spec.max_nodes)


def single_node(entry: CatalogEntry) -> bool:
    """Whether ``entry`` is a single-node test: ``runtime: single-pod`` (one pod per node that
    runs the whole test on that node: NCCL loopback, NVSwitch loopback, DCGM diagnostics)."""
    return entry.runtime is RuntimeShape.SINGLE_POD


def nodes_per_job_for(cert: Certification, index: int, *, found: Discovery,
                      catalog: Catalog) -> int:
    """The nodes of each of category ``index``'s Jobs: 1 for ``intra-node`` and for a
    single-node entry whose ``nodesPerJob`` is unset (one result per node), else
    ``nodesPerJob`` clamped to the eligible nodes (unset: all of them; under ``diagnose``,
    screening groups of ``ceil(sqrt(N))``, at least 2, so that a failed group has known-good
    peers to be bisected with)."""
    options = merged_options(cert, index)
    available = len(found.nodes)
    scale = options.test_scale or TestScale.FULL_SCALE
    if scale == TestScale.INTRA_NODE:
        return 1
    entry = catalog.entries[entry_name(cert.spec.categories[index])]
    if options.nodes_per_job is None:
        if single_node(entry):
            return 1 if scale in (TestScale.FULL_SCALE, TestScale.DIAGNOSE) else available
        if scale == TestScale.DIAGNOSE:
            return min(available, max(2, math.isqrt(available - 1) + 1))
        return available
    return min(options.nodes_per_job, available)


def clamp_note(cert: Certification, index: int, *, found: Discovery) -> str | None:
    """The sentence saying category ``index``'s ``nodesPerJob`` was clamped to the eligible
    nodes, or ``None`` when it fits (or is unset)."""
    options = merged_options(cert, index)
    wanted, available = options.nodes_per_job, len(found.nodes)
    if wanted is None or wanted <= available or options.test_scale == TestScale.INTRA_NODE:
        return None
    return (f"{_where(index, 'nodesPerJob')}: {wanted} is more than the {available} eligible "
            f"node(s); clamped to {available}")


def _check_min_gpus(entry: CatalogEntry, *, index: int, nodes: int, gpus_per_node: int) -> None:
    """A training entry's model needs ``training.minGpus`` GPUs: fewer is a BuildError naming
    the node count that would do (the reference's ``minGPUs``)."""
    needed = entry.training.min_gpus if entry.training is not None else 1
    if nodes * gpus_per_node < needed:
        enough = -(-needed // gpus_per_node)
        raise BuildError(f"{_where(index, 'nodesPerJob')}: {entry.name} needs at least "
                         f"{needed} GPUs, {nodes} node(s) x {gpus_per_node} GPUs give "
                         f"{nodes * gpus_per_node}; run it on {enough} node(s) or more")


def build_workflow(
    cert: Certification, index: int, *, found: Discovery, catalog: Catalog
) -> dict[str, Any]:
    """The Workflow manifest of category ``index`` (``BuildError`` naming the field)."""
    category = cert.spec.categories[index]
    options = merged_options(cert, index)
    name = workflow_name(cert, index)
    namespace = cert.metadata.namespace or ""
    entry = catalog.entries[entry_name(category)]
    per_job = nodes_per_job_for(cert, index, found=found, catalog=catalog)
    scale = options.test_scale or TestScale.FULL_SCALE
    params: dict[str, Scalar] = {}
    for option, param in PARAMETERS.items():
        value = getattr(options, option)
        if value is not None and param in entry.parameters:
            default = entry.parameters[param].default
            params[param] = str(value) if isinstance(default, str) else value
    if scale == TestScale.DIAGNOSE:
        for param, value in DIAGNOSE_PARAMETERS.items():
            if param in entry.parameters and param not in params:
                default = entry.parameters[param].default
                params[param] = str(value) if isinstance(default, str) else value
    gang = GangScheduler.from_spec(cert.spec.gang_scheduler) if cert.spec.gang_scheduler \
        else None
    pvc = checkpoint_pvc(name=name, namespace=namespace, entry=entry, options=options)
    claim = pvc["metadata"]["name"] if pvc is not None else None
    try:
        resolved = catalog.resolve(entry.name, platform=found.platform,
                                   arch=found.architecture, num_nodes=per_job,
                                   parameters=params)
        rendered = render_workload(
            job_name=name, namespace=namespace, resolved=resolved,
            nodes=found.names[:per_job],
            options=RenderOptions(image=options.image, gang_scheduler=gang,
                                  nic_resource_name=options.nic_resource_name,
                                  image_pull_secrets=tuple(
                                      s.name for s in options.image_pull_secrets),
                                  priority_class_name=cert.spec.priority_class_name,
                                  resources=_resources(options),
                                  checkpoint_claim=claim))
    except (CatalogError, RenderError) as exc:
        raise BuildError(f"spec.categories[{index}] ({entry.name}): {exc}") from exc
    _check_min_gpus(entry, index=index, nodes=per_job, gpus_per_node=resolved.gpus_per_node)
    job = job_object(job_name=name, namespace=namespace, rendered=rendered,
                     nodes=found.names[:per_job],
                     fields=entry_job_fields(entry, checkpoint_claim=claim,
                                             max_restarts=options.max_restarts))
    job_spec = job["spec"]
    if options.startup_stall_timeout_seconds is not None:
        job_spec["startupStallTimeoutSeconds"] = options.startup_stall_timeout_seconds
    if options.workload_metadata is not None and options.workload_metadata.labels:
        labels = {**dict(options.workload_metadata.labels),
                  **job_spec.get("workloadMetadata", {}).get("labels", {})}
        job_spec["workloadMetadata"] = {"labels": labels}
    if options.scheduling_stall_timeout:
        job_spec["schedulingStallTimeout"] = options.scheduling_stall_timeout
    if options.image_pull_grace_seconds is not None:
        job_spec["imagePullGraceSeconds"] = options.image_pull_grace_seconds
    orchestration: dict[str, Any] = {
        "target": unstructure(cert.spec.target),
        "iterations": options.repeat_count or 1,
        "execution": {"timeoutPerJob": options.timeout_per_job or (
            DIAGNOSE_TIMEOUT if scale == TestScale.DIAGNOSE else DEFAULT_TIMEOUT)},
    }
    if options.max_concurrent:
        orchestration["execution"]["maxConcurrent"] = options.max_concurrent
    if scale == TestScale.INTRA_RACK:
        orchestration["topology"] = {"topologyKey": options.topology_key or CLIQUE_KEY,
                                     "strictDomain": True}
    if scale == TestScale.DIAGNOSE:
        # Screening, bisection, confirmation, cross-boundary over NVLink domains
        # (docs/design/024); the rounds run once.
        orchestration["diagnose"] = {
            "minGroupSize": options.min_group_size or DIAGNOSE_MIN_GROUP_SIZE,
            "topologyKey": options.topology_key or CLIQUE_KEY}
        orchestration["iterations"] = 1
    spec: dict[str, Any] = {
        "namespace": namespace,
        "jobTemplate": {"spec": job_spec},
        "orchestration": orchestration,
        "dependencies": [dict(d) for d in (*rendered.dependencies(),
                                           *([pvc] if pvc is not None else []))],
    }
    # A Certification that names no thresholds gets the entry's defaults for the detected
    # platform and architecture (an explicit empty map opts out).
    thresholds, sources = ((dict(options.thresholds), ()) if options.thresholds is not None
                           else entry.default_thresholds(found.platform, found.architecture))
    if thresholds or options.measurement_timeout or options.relative_threshold:
        perf: dict[str, Any] = {"enabled": True}
        if thresholds:
            perf["thresholds"] = {"thresholds": thresholds}
        if options.relative_threshold is not None:
            perf["relativeThreshold"] = unstructure(options.relative_threshold)
        if options.measurement_timeout:
            perf["measurementTimeout"] = options.measurement_timeout
        spec["validation"] = {"performance": perf}
    if cert.spec.gang_scheduler is not None:
        spec["gangScheduler"] = unstructure(cert.spec.gang_scheduler)
    if options.failure_policy is not None:
        spec["failurePolicy"] = unstructure(options.failure_policy)
    if options.node_health_monitor is not None:
        spec["nodeHealthMonitor"] = unstructure(options.node_health_monitor)
    if cert.spec.max_nodes is not None:
        spec["maxNodes"] = cert.spec.max_nodes
    annotations = {L.THRESHOLDS_SOURCE: "; ".join(sources)} if sources else {}
    return {
        "apiVersion": L.API_VERSION,
        "kind": "Workflow",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": {L.MANAGED_BY: L.MANAGED_BY_VALUE,
                       L.CERTIFICATION: cert.metadata.name or "",
                       CATEGORY_DOMAIN: category.domain, CATEGORY_VARIANT: category.variant},
            **({"annotations": annotations} if annotations else {}),
            "ownerReferences": [{
                "apiVersion": L.API_VERSION, "kind": "Certification",
                "name": cert.metadata.name or "", "uid": cert.metadata.uid or "",
                "controller": True, "blockOwnerDeletion": True}],
        },
        "spec": spec,
    }
