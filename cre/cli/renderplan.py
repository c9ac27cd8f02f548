"""``cre render FILE``: every object a Certification or Workflow would create, offline.

Nothing is re-implemented here: the pure cores decide, exactly as the controllers would on a
cluster whose GPU nodes are the ones given. For a Certification, each category is discovered
and built into its Workflow (``cre.core.certification.build``); for each Workflow,
``reconcile_workflow`` runs twice over an empty world: the first pass discovers and partitions
the nodes, the second launches the groups (the Jobs, and the per-Job copies of its
dependencies); each Job's TrainJob is ``cre.core.job.workload.manifest``. The nodes are given by
name (``--nodes``/``--node-count``, made GPU nodes of ``--platform``/``--arch``) or as real
Node objects (``--nodes-file``, e.g. ``kubectl get nodes -o yaml``).

What is shown is the first iteration with every group that can start at once (groups that
share a node with an earlier one wait for it on a cluster and are listed on stderr); retries,
later iterations and later categories' re-runs depend on results and are not rendered.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final

import attrs
from ruamel.yaml import YAML
from ruamel.yaml.error import YAMLError

from cre.api import labels as L
from cre.api.certification import Certification
from cre.api.converter import from_dict
from cre.api.errors import ValidationError
from cre.api.job import Job
from cre.api.workflow import Workflow
from cre.catalog import Catalog
from cre.cli.exitcodes import CliError, ExitCode
from cre.core.certification.build import BuildError, build_workflow, discover_for
from cre.core.common.observed import NodeView
from cre.core.common.projections import node_view
from cre.core.job.workload import manifest
from cre.core.workflow.discovery import DiscoveryFailure
from cre.core.workflow.reconcile import WorkflowObservation
from cre.core.workflow.run import reconcile_workflow

#: The UID the offline objects carry (names derived from a UID are stable across runs).
OFFLINE_UID: Final = "00000000-0000-4000-8000-000000000000"
NOW: Final = datetime(2026, 1, 1, tzinfo=UTC)
RENDERABLE: Final = ("Certification", "Workflow")
_PROVIDER: Final = {"aws": "aws:///us-east-1a/i-{i:017x}", "gcp": "gce://project/zone/{name}",
                    "azure": "azure:///subscriptions/s/virtualMachines/{name}",
                    "oci": "ocid1.instance.oc1.{name}", "nscale": "openstack:///{name}"}


@attrs.frozen(kw_only=True)
class Rendered:
    """The documents, in creation order, and notes for stderr."""

    documents: tuple[Mapping[str, Any], ...]
    notes: tuple[str, ...] = ()


def is_object_file(arg: str) -> bool:
    """Whether ``cre render``'s argument is a file (or ``-``) rather than a catalog entry."""
    return arg == "-" or arg.endswith((".yaml", ".yml", ".json")) or Path(arg).is_file()


def _product(arch: str) -> str:
    return "NVIDIA-RTX-PRO-6000" if arch == "rtxpro6000" else f"NVIDIA-{arch.upper()}"


def synthetic_nodes(*, catalog: Catalog, platform: str, arch: str,
                    names: Sequence[str]) -> tuple[NodeView, ...]:
    """Ready GPU nodes ``names`` that discovery sees as ``platform``/``arch``."""
    known = catalog.platforms.get(platform)
    if known is None:
        raise CliError(ExitCode.CATALOG, f"--platform {platform}: unknown; the catalog has "
                       f"{', '.join(sorted(catalog.platforms))}")
    defaults = known.architectures.get(arch)
    if defaults is None:
        raise CliError(ExitCode.CATALOG, f"--arch {arch}: {platform} supports "
                       f"{', '.join(sorted(known.architectures))}")
    resources = ("nscale.com/rdmashare",) if platform == "nscale" else ()
    return tuple(NodeView(
        name=name, uid=f"uid-{name}", ready="True", allocatable_gpus=defaults.gpus_per_node,
        labels=tuple(sorted({L.GPU_PRESENT: "true", L.GPU_PRODUCT: _product(arch),
                             "kubernetes.io/hostname": name}.items())),
        provider_id=_PROVIDER.get(platform, "").format(i=i, name=name),
        extended_resources=resources) for i, name in enumerate(names))


def nodes_from_file(path: str) -> tuple[NodeView, ...]:
    """The Nodes of a ``kubectl get nodes -o yaml`` file (a List, or Node documents)."""
    try:
        docs = list(YAML(typ="safe", pure=True).load_all(Path(path).read_text(encoding="utf-8")))
    except OSError as exc:
        raise CliError(ExitCode.INPUT, f"--nodes-file {path}: cannot read: {exc}") from None
    except YAMLError as exc:
        raise CliError(ExitCode.INPUT, f"--nodes-file {path}: not valid YAML: "
                       f"{' '.join(str(exc).split())}") from None
    items: list[Mapping[str, Any]] = []
    for doc in docs:
        if isinstance(doc, dict) and doc.get("kind") == "List":
            items += [i for i in doc.get("items") or [] if isinstance(i, dict)]
        elif isinstance(doc, dict):
            items.append(doc)
    nodes = [i for i in items if i.get("kind") == "Node"]
    if not nodes:
        raise CliError(ExitCode.INPUT, f"--nodes-file {path}: no Node objects in it")
    return tuple(node_view(n) for n in nodes)


def load_object(path: str, text: str) -> Certification | Workflow:
    """The one Certification or Workflow in ``text`` (from ``path``), as its model."""
    try:
        docs = [d for d in YAML(typ="safe", pure=True).load_all(text) if d is not None]
    except YAMLError as exc:
        raise CliError(ExitCode.INPUT, f"{path}: not valid YAML: "
                       f"{' '.join(str(exc).split())}") from None
    found = [d for d in docs if isinstance(d, dict) and d.get("kind") in RENDERABLE]
    if len(found) != 1:
        raise CliError(ExitCode.INPUT, f"{path}: expected exactly one Certification or "
                       f"Workflow, found {len(found)}")
    body = dict(found[0])
    meta = {"namespace": "default", **dict(body.get("metadata") or {}), "uid": OFFLINE_UID,
            "generation": 1, "creationTimestamp": NOW.strftime("%Y-%m-%dT%H:%M:%SZ")}
    body["metadata"] = meta
    body.pop("status", None)
    try:
        model = from_dict(body)
    except ValidationError as exc:
        raise CliError(ExitCode.INPUT, f"{path}: {exc.subject}: {exc.errors[0]}") from None
    assert isinstance(model, Certification | Workflow)
    return model


def _workflow_objects(wf: Workflow, nodes: tuple[NodeView, ...]
                      ) -> tuple[list[Mapping[str, Any]], list[str]]:
    wf = attrs.evolve(wf, metadata=attrs.evolve(
        wf.metadata, uid=wf.metadata.uid or OFFLINE_UID,
        finalizers=(*wf.metadata.finalizers, L.WORKFLOW_FINALIZER)))
    name = f"Workflow {wf.metadata.namespace}/{wf.metadata.name}"
    first = reconcile_workflow(wf, WorkflowObservation(nodes=nodes), NOW)
    if first.status is None or first.status.orchestration is None:
        cond = next((c for c in (first.status.conditions if first.status else ())
                     if c.status == "True"), None)
        why = f"{cond.reason}: {cond.message}" if cond else "it would not start"
        raise CliError(ExitCode.PROBLEMS, f"{name}: {why}")
    docs: list[Mapping[str, Any]] = [dict(c.body) for c in first.creates]
    wf = attrs.evolve(wf, status=first.status)
    second = reconcile_workflow(wf, WorkflowObservation(nodes=nodes), NOW)
    launched = set()
    for create in second.creates:
        docs.append(dict(create.body))
        if create.kind == "Job":
            job = from_dict({**create.body, "metadata": {**create.body["metadata"],
                                                         "uid": OFFLINE_UID}})
            assert isinstance(job, Job)
            docs.append(manifest(job))
            launched.add(job.metadata.labels.get(L.GROUP_LABEL))
    orch = first.status.orchestration
    notes = [f"{name}: {orch.total_nodes} nodes on {orch.detected_platform}/"
             f"{orch.detected_gpu_architecture}, {orch.total_groups} group(s) of "
             f"{orch.nodes_per_job}"]
    if orch.exclusion_reason:
        notes.append(f"{name}: {orch.exclusion_reason}")
    waiting = [g.name for g in first.status.groups if g.name not in launched]
    if waiting:
        notes.append(f"{name}: group(s) {', '.join(waiting)} wait for a node of a running "
                     "group and are not rendered")
    return docs, notes


def render_object(obj: Certification | Workflow, *, nodes: tuple[NodeView, ...],
                  catalog: Catalog) -> Rendered:
    """Every Workflow, dependency copy, Job and TrainJob ``obj`` would create on ``nodes``."""
    docs: list[Mapping[str, Any]] = []
    notes: list[str] = []
    if isinstance(obj, Workflow):
        more, said = _workflow_objects(obj, nodes)
        return Rendered(documents=tuple(more), notes=tuple(said))
    for index, category in enumerate(obj.spec.categories):
        label = f"{category.domain}/{category.variant}"
        found = discover_for(obj, index, nodes, catalog)
        if isinstance(found, DiscoveryFailure):
            raise CliError(ExitCode.PROBLEMS, f"category {label}: {found.message}")
        try:
            body = build_workflow(obj, index, found=found, catalog=catalog)
        except BuildError as exc:
            raise CliError(ExitCode.PROBLEMS, f"category {label}: {exc}") from None
        docs.append(body)
        wf = from_dict({**body, "metadata": {**body["metadata"], "uid": OFFLINE_UID}})
        assert isinstance(wf, Workflow)
        more, said = _workflow_objects(wf, nodes)
        docs += more
        notes += said
    return Rendered(documents=tuple(docs), notes=tuple(notes))
