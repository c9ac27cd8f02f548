"""The catalog's values: entries, platforms, GPU defaults, and resolving one for a cluster.

An entry is data, not a template program: a base ``spec`` plus ``when:`` blocks selected by
platform and GPU architecture. Resolving an entry for (platform, arch, node count) lays the
platform's fabric blocks, then the entry's own blocks, over the base spec in file order (later
blocks win), substitutes ``${...}`` references and type-checks the result. Everything here is
pure; reading files is ``cre.catalog.loader``'s job.
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import Enum
from typing import Any

import attrs

from cre.catalog.errors import CatalogError
from cre.catalog.merge import deep_merge, network_merge
from cre.catalog.shape import SPEC, check, resolve
from cre.catalog.template import Scalar, TemplateError, substitute

# Values every template may use besides an entry's own parameters.
BUILTINS = (
    "numNodes",
    "gpusPerNode",
    "mlnxPerNode",
    "totalGpus",
    "mnnvl",
    "entry",
    "platform",
    "arch",
)
MNNVL_ARCHS = frozenset({"gb200", "gb300"})


class RuntimeShape(Enum):
    """How an entry runs: an MPI launcher with sshd workers, one pod per node that tests that
    node alone (``single-pod``), or one pod per node of a multi-node ``torch`` job (Trainer's
    torch plugin gives each pod the rendezvous: torchrun reads its ``PET_*`` environment)."""

    MPI = "mpi"
    SINGLE_POD = "single-pod"
    TORCH = "torch"


class Fabric(Enum):
    """What an entry takes from its platform file's fabric blocks: nothing (``false``);
    everything (``true``: the NCCL-test entries, whose image and mpirun the blocks swap for the
    platform's nccl-tests build); or only the network (``network``: env, worker resources,
    annotations, capabilities, volumes, init containers, DRA claims, the ComputeDomain; never
    ``image`` or ``mpirun``), for an entry that brings its own image, as training does."""

    NONE = "none"
    ALL = "all"
    NETWORK = "network"


class MeasurementKind(Enum):
    """What a Job of the entry measures: nccl-tests bandwidth or training goodput."""

    BANDWIDTH = "bandwidth"
    GOODPUT = "goodput"


@attrs.frozen
class Selector:
    """Matches a platform or architecture name: one of ``values`` (or none of them)."""

    values: frozenset[str]
    negate: bool = False

    def matches(self, name: str) -> bool:
        """Whether ``name`` is selected."""
        return (name in self.values) != self.negate


@attrs.frozen
class OverrideBlock:
    """One ``when:`` block: where it applies, and what it lays over the spec."""

    label: str
    platform: Selector | None
    arch: Selector | None
    spec: Mapping[str, Any]
    parameters: Mapping[str, Scalar]

    def applies(self, platform: str, arch: str) -> bool:
        """Whether this block is selected for (platform, arch)."""
        return (self.platform is None or self.platform.matches(platform)) and (
            self.arch is None or self.arch.matches(arch)
        )


@attrs.frozen
class ThresholdBlock:
    """One ``thresholds:`` block of an entry: default pass criteria for the platforms and
    architectures it selects, and where the figures come from (``source``)."""

    label: str
    platform: Selector | None
    arch: Selector | None
    thresholds: Mapping[str, str]
    source: str

    def applies(self, platform: str, arch: str) -> bool:
        """Whether this block is selected for (platform, arch)."""
        return (self.platform is None or self.platform.matches(platform)) and (
            self.arch is None or self.arch.matches(arch)
        )


@attrs.frozen
class Parameter:
    """A value a user may override; its type is the type of its default."""

    name: str
    default: Scalar
    description: str


@attrs.frozen
class Measurement:
    """The measurement a Job of this entry asks for (``test_type`` is bandwidth's only)."""

    log_profile: str
    test_type: str
    sample_interval: str
    kind: MeasurementKind = MeasurementKind.BANDWIDTH

    def job_fields(self) -> dict[str, dict[str, str]]:
        """The Job spec field that asks for it: ``bandwidthMeasurement`` or
        ``goodputMeasurement``."""
        body = {"logProfileRef": self.log_profile, "sampleInterval": self.sample_interval}
        if self.kind is MeasurementKind.GOODPUT:
            return {"goodputMeasurement": body}
        return {"bandwidthMeasurement": {**body, "testType": self.test_type}}


@attrs.frozen
class CheckpointDefaults:
    """How a training entry checkpoints when a Certification turns checkpointing on: the
    PVC's mount path and default size, the arguments appended to the command, the restarts
    allowed."""

    mount_path: str
    args: tuple[str, ...]
    max_restarts: int
    storage_size: str


@attrs.frozen
class TrainingDefaults:
    """A training entry's Job-tier settings: stall detection and checkpointing."""

    stall_multiplier: int
    startup_stall_timeout_seconds: int
    checkpoint: CheckpointDefaults | None = None
    # The fewest GPUs (nodes x GPUs per node) the model fits on; 1: no minimum.
    min_gpus: int = 1
    # Whether tensor parallelism may span nodes (Megatron's TP all-reduces leave NVLink).
    tensor_across_nodes: bool = False


@attrs.frozen
class ArchDefaults:
    """Hardware defaults for one GPU architecture."""

    gpus_per_node: int
    mlnx_per_node: int


@attrs.frozen
class CatalogEntry:
    """One workload: ``<domain>/<variant>``."""

    name: str
    file: str
    description: str
    runtime: RuntimeShape
    fabric: Fabric
    parameters: Mapping[str, Parameter]
    measurement: Measurement | None
    platforms: frozenset[str] | None
    spec: Mapping[str, Any]
    overrides: tuple[OverrideBlock, ...]
    # Default thresholds per platform / architecture, applied when a Certification names none.
    threshold_defaults: tuple[ThresholdBlock, ...] = ()
    training: TrainingDefaults | None = None

    def default_thresholds(self, platform: str, arch: str) -> tuple[dict[str, str],
                                                                    tuple[str, ...]]:
        """The default thresholds for (platform, arch) and the sources they come from: the
        selected blocks merged key by key in file order (a later block wins a key)."""
        merged: dict[str, str] = {}
        picked: dict[str, ThresholdBlock] = {}
        for block in self.threshold_defaults:
            if block.applies(platform, arch):
                merged.update(block.thresholds)
                picked.update({key: block for key in block.thresholds})
        used = {id(b) for b in picked.values()}  # the blocks that gave a key, in file order
        sources = tuple(dict.fromkeys(b.source for b in self.threshold_defaults
                                      if id(b) in used))
        return merged, sources

    @property
    def variant(self) -> str:
        """The entry's name without its domain."""
        return self.name.rsplit("/", 1)[1]


@attrs.frozen
class PlatformData:
    """A platform's supported architectures (with their defaults) and its fabric blocks."""

    name: str
    file: str
    description: str
    architectures: Mapping[str, ArchDefaults]
    fabric: tuple[OverrideBlock, ...]


@attrs.frozen
class ResolvedWorkload:
    """An entry resolved for one platform, architecture and node count."""

    entry: CatalogEntry
    platform: str
    arch: str
    num_nodes: int
    gpus_per_node: int
    mlnx_per_node: int
    parameters: Mapping[str, Scalar]
    spec: Mapping[str, Any]
    applied: tuple[str, ...]
    # The entry's checkpoint arguments with references substituted (empty: no checkpointing).
    checkpoint_args: tuple[str, ...] = ()


@attrs.frozen
class Catalog:
    """Every entry and platform, checked against each other at load."""

    entries: Mapping[str, CatalogEntry]
    platforms: Mapping[str, PlatformData]
    gpu_defaults: Mapping[str, ArchDefaults]

    def entry(self, name: str) -> CatalogEntry:
        """The entry called ``name``; CatalogError naming the known ones otherwise."""
        if name not in self.entries:
            raise CatalogError(
                name, "", f"unknown entry (known: {', '.join(sorted(self.entries))})"
            )
        return self.entries[name]

    def platform(self, name: str) -> PlatformData:
        """The platform called ``name``; CatalogError naming the known ones otherwise."""
        if name not in self.platforms:
            known = ", ".join(sorted(self.platforms))
            raise CatalogError(name, "", f"unknown platform (known: {known})")
        return self.platforms[name]

    def combinations(self) -> list[tuple[str, str, str]]:
        """Every renderable (entry, platform, arch), sorted."""
        out: list[tuple[str, str, str]] = []
        for entry in self.entries.values():
            for pname, pdata in self.platforms.items():
                if entry.platforms is not None and pname not in entry.platforms:
                    continue
                out.extend((entry.name, pname, arch) for arch in pdata.architectures)
        return sorted(out)

    def fabric_spec(
        self, *, platform: str, arch: str, num_nodes: int, entry: str
    ) -> Mapping[str, Any]:
        """The platform file's fabric blocks for ``arch`` laid over each other and resolved,
        without an entry (what a WorkloadRun shares with the catalog); empty for a platform or
        architecture the catalog has no data for. ``entry`` names the owner in templates."""
        pdata = self.platforms.get(platform)
        if pdata is None or arch not in pdata.architectures:
            return {}
        defaults = pdata.architectures[arch]
        spec: dict[str, Any] = {}
        for block in pdata.fabric:
            if block.applies(platform, arch):
                spec = deep_merge(spec, block.spec)
        values = _builtin_values(defaults, num_nodes=num_nodes, entry=entry,
                                 platform=platform, arch=arch)
        try:
            resolved: Mapping[str, Any] = resolve(spec, SPEC, values)
        except TemplateError as exc:
            raise CatalogError(pdata.file, "fabric", str(exc)) from exc
        return resolved

    def resolve(
        self,
        entry_name: str,
        *,
        platform: str,
        arch: str,
        num_nodes: int,
        parameters: Mapping[str, Scalar] | None = None,
    ) -> ResolvedWorkload:
        """Lay the selected blocks over the entry's spec and substitute every reference."""
        entry = self.entry(entry_name)
        pdata = self.platform(platform)
        if entry.platforms is not None and platform not in entry.platforms:
            raise CatalogError(
                entry.file, "platforms", f"entry does not support platform {platform}"
            )
        if arch not in pdata.architectures:
            known = ", ".join(sorted(pdata.architectures))
            raise CatalogError(
                pdata.file, "architectures", f"no architecture {arch} (known: {known})"
            )
        if num_nodes < 1:
            raise CatalogError(entry.file, "", f"num_nodes must be >= 1, got {num_nodes}")
        defaults = pdata.architectures[arch]
        fabric = [b for b in pdata.fabric
                  if entry.fabric is not Fabric.NONE and b.applies(platform, arch)]
        own = [b for b in entry.overrides if b.applies(platform, arch)]
        lay = network_merge if entry.fabric is Fabric.NETWORK else deep_merge
        spec: dict[str, Any] = dict(entry.spec)
        params: dict[str, Scalar] = {n: p.default for n, p in entry.parameters.items()}
        for block in fabric:
            spec = lay(spec, block.spec)
        for block in own:
            spec = deep_merge(spec, block.spec)
            params.update(block.parameters)
        blocks = [*fabric, *own]
        for key, value in (parameters or {}).items():
            params[key] = _coerce_parameter(entry, key, value, path=f"parameters.{key}")
        values = {**params, **_builtin_values(defaults, num_nodes=num_nodes,
                                              entry=entry.variant, platform=platform,
                                              arch=arch)}
        try:
            resolved = resolve(spec, SPEC, values)
        except TemplateError as exc:
            raise CatalogError(entry.file, "spec", str(exc)) from exc
        check(resolved, SPEC, file=entry.file, path="spec", allow_templates=False)
        ckpt = entry.training.checkpoint if entry.training is not None else None
        return ResolvedWorkload(
            entry=entry,
            platform=platform,
            arch=arch,
            num_nodes=num_nodes,
            gpus_per_node=defaults.gpus_per_node,
            mlnx_per_node=defaults.mlnx_per_node,
            parameters=params,
            spec=resolved,
            applied=tuple(b.label for b in blocks),
            checkpoint_args=tuple(str(substitute(a, values)) for a in ckpt.args) if ckpt else (),
        )


def _builtin_values(defaults: ArchDefaults, *, num_nodes: int, entry: str, platform: str,
                    arch: str) -> dict[str, Scalar]:
    """The values every catalog template may reference besides an entry's parameters."""
    return {
        "numNodes": num_nodes,
        "gpusPerNode": defaults.gpus_per_node,
        "mlnxPerNode": defaults.mlnx_per_node,
        "totalGpus": num_nodes * defaults.gpus_per_node,
        "mnnvl": 1 if arch in MNNVL_ARCHS else 0,
        "entry": entry,
        "platform": platform,
        "arch": arch,
    }


def _coerce_parameter(entry: CatalogEntry, key: str, value: object, *, path: str) -> Scalar:
    if key not in entry.parameters:
        known = ", ".join(sorted(entry.parameters)) or "none"
        raise CatalogError(entry.file, path, f"unknown parameter (known: {known})")
    want = type(entry.parameters[key].default)
    if type(value) is not want:
        raise CatalogError(
            entry.file, path, f"expected {want.__name__} like the default, got {value!r}"
        )
    assert isinstance(value, str | int | bool)
    return value
