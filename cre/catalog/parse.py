"""Parse catalog files (given as text) into a checked ``Catalog``.

Parsing is pure over ``{relative path: text}`` so tests feed broken files without touching
the disk. Every problem raises CatalogError with the file, the key path and what is wrong:
bad YAML, unknown keys, wrong types, unknown platforms or architectures in selectors,
``${...}`` references to parameters the entry never declared, and default ``thresholds`` blocks
with an unknown metric key, CEL that does not compile, or no ``source``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import attrs
from ruamel.yaml import YAML
from ruamel.yaml.error import MarkedYAMLError, YAMLError

from cre.api.cel import CelError, compile_cel
from cre.api.common import CEL_MAX_LENGTH, THRESHOLD_KEYS
from cre.catalog.errors import CatalogError
from cre.catalog.model import (
    BUILTINS,
    ArchDefaults,
    Catalog,
    CatalogEntry,
    CheckpointDefaults,
    Fabric,
    Measurement,
    MeasurementKind,
    OverrideBlock,
    Parameter,
    PlatformData,
    RuntimeShape,
    Selector,
    ThresholdBlock,
    TrainingDefaults,
)
from cre.catalog.shape import SPEC, check
from cre.catalog.template import Scalar, TemplateError, references

GPU_DEFAULTS_FILE = "_lib/gpu-defaults.yaml"
PLATFORMS_DIR = "_lib/platforms/"


def load_yaml(text: str, *, file: str) -> Any:
    """Parse one YAML document with the safe loader; CatalogError with the line on failure."""
    yaml = YAML(typ="safe", pure=True)
    try:
        return yaml.load(text)
    except MarkedYAMLError as exc:
        mark = exc.problem_mark
        where = f"line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        raise CatalogError(file, where, f"invalid YAML: {exc.problem}") from exc
    except YAMLError as exc:
        raise CatalogError(file, "", f"invalid YAML: {exc}") from exc


def parse_catalog(files: Mapping[str, str]) -> Catalog:
    """Build the catalog from ``{posix path relative to the catalog root: text}``; the first
    problem found raises (see :func:`parse_catalog_report` to load around bad files)."""
    report = parse_catalog_report(files)
    if report.errors:
        raise report.errors[0]
    return report.catalog


@attrs.frozen
class CatalogReport:
    """A catalog loaded around its bad files: what loaded, and one error per file that did not
    (file, key path, problem), in file order."""

    catalog: Catalog
    errors: tuple[CatalogError, ...] = ()


def parse_catalog_report(files: Mapping[str, str]) -> CatalogReport:
    """The catalog from every file that parses; each bad entry or platform file is one
    CatalogError (with its file and key) and the others still load. Only the GPU defaults
    table, without which nothing can be checked, and a catalog with no platform at all are
    fatal (raised)."""
    if GPU_DEFAULTS_FILE not in files:
        raise CatalogError(GPU_DEFAULTS_FILE, "", "missing: the GPU defaults table is required")
    gpu_defaults = _parse_gpu_defaults(load_yaml(files[GPU_DEFAULTS_FILE], file=GPU_DEFAULTS_FILE))
    archs = frozenset(gpu_defaults)
    platforms: dict[str, PlatformData] = {}
    entries: dict[str, CatalogEntry] = {}
    entry_docs: list[tuple[str, Any]] = []
    errors: list[CatalogError] = []
    for path in sorted(files):
        if not path.endswith(".yaml") or path == GPU_DEFAULTS_FILE:
            continue
        if path.startswith("_") and not path.startswith(PLATFORMS_DIR):
            continue
        try:
            doc = load_yaml(files[path], file=path)
            if path.startswith(PLATFORMS_DIR):
                pdata = _parse_platform(doc, file=path, gpu_defaults=gpu_defaults)
                platforms[pdata.name] = pdata
            else:
                entry_docs.append((path, doc))
        except CatalogError as exc:
            errors.append(exc)
    if not platforms:
        raise errors[0] if errors else CatalogError(PLATFORMS_DIR, "", "no platform files found")
    names = frozenset(platforms)
    for pname, pdata in sorted(platforms.items()):
        try:
            for block in pdata.fabric:
                _check_selector_names(block, file=pdata.file, platforms=names, archs=archs)
        except CatalogError as exc:
            errors.append(exc)
            del platforms[pname]
    names = frozenset(platforms)
    for path, doc in entry_docs:
        try:
            entry = _parse_entry(doc, file=path, platforms=names, archs=archs)
        except CatalogError as exc:
            errors.append(exc)
            continue
        if entry.name in entries:
            errors.append(CatalogError(path, "name",
                                       f"duplicate entry name {entry.name!r}"))
            continue
        entries[entry.name] = entry
    return CatalogReport(catalog=Catalog(entries=entries, platforms=platforms,
                                         gpu_defaults=gpu_defaults), errors=tuple(errors))


def _mapping(value: Any, *, file: str, path: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        kind = "null" if value is None else type(value).__name__
        raise CatalogError(file, path or "(top level)", f"expected a mapping, got {kind}")
    return value


def _keys(
    doc: Mapping[str, Any],
    *,
    file: str,
    path: str,
    required: Iterable[str],
    optional: Iterable[str],
) -> None:
    req, opt = set(required), set(optional)
    prefix = f"{path}." if path else ""
    for key in doc:
        if key not in req | opt:
            known = ", ".join(sorted(req | opt))
            raise CatalogError(file, f"{prefix}{key}", f"unknown key (known: {known})")
    for key in sorted(req):
        if key not in doc:
            raise CatalogError(file, f"{prefix}{key}", "required key is missing")


def _str(value: Any, *, file: str, path: str) -> str:
    if not isinstance(value, str) or not value:
        raise CatalogError(file, path, f"expected a non-empty string, got {value!r}")
    return value


def _int(value: Any, *, file: str, path: str, minimum: int = 0) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
        raise CatalogError(file, path, f"expected an integer >= {minimum}, got {value!r}")
    return value


def _bool(value: Any, *, file: str, path: str) -> bool:
    if not isinstance(value, bool):
        raise CatalogError(file, path, f"expected true or false, got {value!r}")
    return value


def _parse_gpu_defaults(doc: Any) -> dict[str, ArchDefaults]:
    file = GPU_DEFAULTS_FILE
    doc = _mapping(doc, file=file, path="")
    _keys(doc, file=file, path="", required=["architectures"], optional=[])
    table = _mapping(doc["architectures"], file=file, path="architectures")
    out: dict[str, ArchDefaults] = {}
    for arch, row in table.items():
        path = f"architectures.{arch}"
        row = _mapping(row, file=file, path=path)
        _keys(row, file=file, path=path, required=["gpusPerNode", "mlnxPerNode"], optional=[])
        out[arch] = ArchDefaults(
            gpus_per_node=_int(
                row["gpusPerNode"], file=file, path=f"{path}.gpusPerNode", minimum=1
            ),
            mlnx_per_node=_int(row["mlnxPerNode"], file=file, path=f"{path}.mlnxPerNode"),
        )
    return out


def _parse_platform(
    doc: Any, *, file: str, gpu_defaults: Mapping[str, ArchDefaults]
) -> PlatformData:
    doc = _mapping(doc, file=file, path="")
    _keys(
        doc,
        file=file,
        path="",
        required=["name", "description", "architectures"],
        optional=["fabric"],
    )
    name = _str(doc["name"], file=file, path="name")
    if file != f"{PLATFORMS_DIR}{name}.yaml":
        raise CatalogError(
            file, "name", f"platform {name!r} must live in {PLATFORMS_DIR}{name}.yaml"
        )
    table = _mapping(doc["architectures"], file=file, path="architectures")
    archs: dict[str, ArchDefaults] = {}
    for arch, row in table.items():
        path = f"architectures.{arch}"
        if arch not in gpu_defaults:
            raise CatalogError(
                file, path, f"unknown architecture (known: {', '.join(sorted(gpu_defaults))})"
            )
        row = _mapping(row if row is not None else {}, file=file, path=path)
        _keys(row, file=file, path=path, required=[], optional=["gpusPerNode", "mlnxPerNode"])
        base = gpu_defaults[arch]
        archs[arch] = ArchDefaults(
            gpus_per_node=_int(
                row.get("gpusPerNode", base.gpus_per_node),
                file=file,
                path=f"{path}.gpusPerNode",
                minimum=1,
            ),
            mlnx_per_node=_int(
                row.get("mlnxPerNode", base.mlnx_per_node), file=file, path=f"{path}.mlnxPerNode"
            ),
        )
    blocks = _parse_blocks(
        doc.get("fabric", []), file=file, key="fabric", platform_level=True, parameters={}
    )
    for block in blocks:
        _check_references(
            block.spec, file=file, path=f"{block.label.split(':', 1)[1]}.spec", declared=()
        )
    return PlatformData(
        name=name,
        file=file,
        description=_str(doc["description"], file=file, path="description"),
        architectures=archs,
        fabric=tuple(blocks),
    )


def _parse_selector(value: Any, *, file: str, path: str) -> Selector:
    if isinstance(value, str):
        return Selector(frozenset([value]))
    if isinstance(value, list) and value and all(isinstance(v, str) for v in value):
        return Selector(frozenset(value))
    if isinstance(value, Mapping) and set(value) == {"notIn"}:
        inner = value["notIn"]
        if isinstance(inner, list) and inner and all(isinstance(v, str) for v in inner):
            return Selector(frozenset(inner), negate=True)
    raise CatalogError(
        file, path, "expected a name, a non-empty list of names, or {notIn: [names]}"
    )


def _parse_blocks(
    value: Any, *, file: str, key: str, platform_level: bool, parameters: Mapping[str, Parameter]
) -> list[OverrideBlock]:
    if not isinstance(value, list):
        raise CatalogError(file, key, "expected a list of blocks")
    blocks = []
    for i, raw in enumerate(value):
        path = f"{key}[{i}]"
        raw = _mapping(raw, file=file, path=path)
        optional = (
            ["arch", "spec"] if platform_level else ["platform", "arch", "spec", "parameters"]
        )
        _keys(raw, file=file, path=path, required=[], optional=optional)
        if "platform" not in raw and "arch" not in raw:
            raise CatalogError(file, path, "a block needs a platform or arch selector")
        if "spec" not in raw and "parameters" not in raw:
            raise CatalogError(file, path, "a block needs a spec or parameters")
        spec = _mapping(raw.get("spec", {}), file=file, path=f"{path}.spec")
        check(spec, SPEC, file=file, path=f"{path}.spec")
        params: dict[str, Scalar] = {}
        for pname, pvalue in _mapping(
            raw.get("parameters", {}), file=file, path=f"{path}.parameters"
        ).items():
            ppath = f"{path}.parameters.{pname}"
            if pname not in parameters:
                raise CatalogError(file, ppath, "not a declared parameter")
            if type(pvalue) is not type(parameters[pname].default):
                raise CatalogError(
                    file,
                    ppath,
                    f"expected {type(parameters[pname].default).__name__}"
                    f" like the default, got {pvalue!r}",
                )
            params[pname] = pvalue
        blocks.append(
            OverrideBlock(
                label=f"{file}:{path}",
                platform=_parse_selector(raw["platform"], file=file, path=f"{path}.platform")
                if "platform" in raw
                else None,
                arch=_parse_selector(raw["arch"], file=file, path=f"{path}.arch")
                if "arch" in raw
                else None,
                spec=spec,
                parameters=params,
            )
        )
    return blocks


def _check_selector_names(
    block: OverrideBlock | ThresholdBlock, *, file: str, platforms: frozenset[str],
    archs: frozenset[str],
) -> None:
    where = block.label.split(":", 1)[1]
    for sel, known, what in ((block.platform, platforms, "platform"), (block.arch, archs, "arch")):
        if sel is None:
            continue
        for name in sorted(sel.values - known):
            raise CatalogError(
                file,
                f"{where}.{what}",
                f"unknown {what} {name!r} (known: {', '.join(sorted(known))})",
            )


def _parse_threshold_blocks(value: Any, *, file: str, platforms: frozenset[str],
                            archs: frozenset[str]) -> tuple[ThresholdBlock, ...]:
    """``thresholds: [{platform?, arch?, thresholds: {key: CEL}, source}]``, each checked as
    admission checks a Certification's thresholds (known key, CEL that compiles)."""
    if not isinstance(value, list):
        raise CatalogError(file, "thresholds", "expected a list of blocks")
    blocks = []
    for i, raw in enumerate(value):
        path = f"thresholds[{i}]"
        raw = _mapping(raw, file=file, path=path)
        _keys(raw, file=file, path=path, required=["thresholds", "source"],
              optional=["platform", "arch"])
        if "platform" not in raw and "arch" not in raw:
            raise CatalogError(file, path, "a block needs a platform or arch selector")
        source = _str(raw["source"], file=file, path=f"{path}.source")
        if not source.strip():
            raise CatalogError(file, f"{path}.source", "name where the figures come from")
        values = _mapping(raw["thresholds"], file=file, path=f"{path}.thresholds")
        if not values:
            raise CatalogError(file, f"{path}.thresholds", "expected at least one threshold")
        for key, expr in values.items():
            where = f"{path}.thresholds.{key}"
            if key not in THRESHOLD_KEYS:
                raise CatalogError(file, where, "unknown threshold key (expected one of "
                                   f"{', '.join(sorted(THRESHOLD_KEYS))})")
            expr = _str(expr, file=file, path=where)
            if not expr.strip() or len(expr) > CEL_MAX_LENGTH:
                raise CatalogError(file, where, "expected a CEL expression over value")
            try:
                compile_cel(expr)
            except CelError as exc:
                raise CatalogError(file, where, f"invalid CEL expression: {exc}") from None
        block = ThresholdBlock(
            label=f"{file}:{path}",
            platform=_parse_selector(raw["platform"], file=file, path=f"{path}.platform")
            if "platform" in raw else None,
            arch=_parse_selector(raw["arch"], file=file, path=f"{path}.arch")
            if "arch" in raw else None,
            thresholds=dict(values), source=source)
        _check_selector_names(block, file=file, platforms=platforms, archs=archs)
        blocks.append(block)
    return tuple(blocks)


def _check_references(node: Any, *, file: str, path: str, declared: Iterable[str]) -> None:
    allowed = set(BUILTINS) | set(declared)
    if isinstance(node, str):
        try:
            names = references(node)
        except TemplateError as exc:
            raise CatalogError(file, path, str(exc)) from exc
        for name in names:
            if name not in allowed:
                raise CatalogError(
                    file,
                    path,
                    f"${{{name}}} is neither a parameter of this entry "
                    f"nor a built-in ({', '.join(BUILTINS)})",
                )
    elif isinstance(node, Mapping):
        for key, value in node.items():
            _check_references(str(key), file=file, path=f"{path}.{key}", declared=allowed)
            _check_references(value, file=file, path=f"{path}.{key}", declared=allowed)
    elif isinstance(node, list):
        for i, value in enumerate(node):
            _check_references(value, file=file, path=f"{path}[{i}]", declared=allowed)


def _parse_parameters(value: Any, *, file: str) -> dict[str, Parameter]:
    out: dict[str, Parameter] = {}
    for name, raw in _mapping(value, file=file, path="parameters").items():
        path = f"parameters.{name}"
        if name in BUILTINS:
            raise CatalogError(file, path, "shadows a built-in value")
        raw = _mapping(raw, file=file, path=path)
        _keys(raw, file=file, path=path, required=["default", "description"], optional=[])
        default = raw["default"]
        if not isinstance(default, str | int | bool):
            raise CatalogError(
                file, f"{path}.default", f"expected a string, integer or boolean, got {default!r}"
            )
        out[name] = Parameter(
            name=name,
            default=default,
            description=_str(raw["description"], file=file, path=f"{path}.description"),
        )
    return out


def _parse_entry(
    doc: Any, *, file: str, platforms: frozenset[str], archs: frozenset[str]
) -> CatalogEntry:
    parts = file[: -len(".yaml")].split("/")
    if len(parts) != 2:
        raise CatalogError(
            file, "", "entries live exactly one directory deep: <domain>/<name>.yaml"
        )
    doc = _mapping(doc, file=file, path="")
    _keys(
        doc,
        file=file,
        path="",
        required=["description", "runtime", "spec"],
        optional=["fabric", "parameters", "measurement", "platforms", "when", "thresholds",
                  "training"],
    )
    try:
        runtime = RuntimeShape(doc["runtime"])
    except ValueError:
        raise CatalogError(
            file,
            "runtime",
            f"expected one of {[s.value for s in RuntimeShape]}, got {doc['runtime']!r}",
        ) from None
    raw_fabric = doc.get("fabric", False)
    fabric = (Fabric.ALL if raw_fabric is True else Fabric.NONE if raw_fabric is False
              else Fabric.NETWORK if raw_fabric == "network" else None)
    if fabric is None:
        raise CatalogError(file, "fabric", f"expected true, false or network, got {raw_fabric!r}")
    parameters = _parse_parameters(doc.get("parameters", {}), file=file)
    spec = _mapping(doc["spec"], file=file, path="spec")
    check(spec, SPEC, file=file, path="spec")
    _check_references(spec, file=file, path="spec", declared=parameters)
    if runtime is not RuntimeShape.MPI:
        for key in ("launcher", "mpirun"):
            if key in spec:
                raise CatalogError(file, f"spec.{key}", f"a {runtime.value} entry has no "
                                   "launcher")
    if runtime is RuntimeShape.MPI and "mpirun" not in spec:
        raise CatalogError(file, "spec.mpirun", "an mpi entry needs mpirun.path")
    if "image" not in spec or "command" not in spec:
        raise CatalogError(file, "spec", "image and command are required")
    blocks = _parse_blocks(
        doc.get("when", []), file=file, key="when", platform_level=False, parameters=parameters
    )
    for block in blocks:
        _check_selector_names(block, file=file, platforms=platforms, archs=archs)
        _check_references(
            block.spec, file=file, path=f"{block.label.split(':', 1)[1]}.spec", declared=parameters
        )
    measurement = (_parse_measurement(doc["measurement"], file=file)
                   if "measurement" in doc else None)
    training = None
    if "training" in doc:
        if runtime is not RuntimeShape.TORCH:
            raise CatalogError(file, "training", "only a torch entry has training settings")
        training = _parse_training(doc["training"], file=file, parameters=parameters)
    defaults = _parse_threshold_blocks(doc.get("thresholds", []), file=file,
                                       platforms=platforms, archs=archs)
    if defaults and measurement is None:
        raise CatalogError(file, "thresholds", "default thresholds need a measurement to judge")
    supported = None
    if "platforms" in doc:
        sel = _parse_selector(doc["platforms"], file=file, path="platforms")
        if sel.negate:
            raise CatalogError(file, "platforms", "expected a list of platform names")
        for name in sorted(sel.values - platforms):
            raise CatalogError(file, "platforms", f"unknown platform {name!r}")
        supported = sel.values
    return CatalogEntry(
        name=f"{parts[0]}/{parts[1]}",
        file=file,
        description=_str(doc["description"], file=file, path="description"),
        runtime=runtime,
        fabric=fabric,
        parameters=parameters,
        measurement=measurement,
        platforms=supported,
        spec=spec,
        overrides=tuple(blocks),
        threshold_defaults=defaults,
        training=training,
    )


def _parse_measurement(value: Any, *, file: str) -> Measurement:
    """``{kind?: bandwidth|goodput, logProfile, testType (bandwidth only), sampleInterval?}``."""
    raw = _mapping(value, file=file, path="measurement")
    kinds = [k.value for k in MeasurementKind]
    try:
        kind = MeasurementKind(raw.get("kind", MeasurementKind.BANDWIDTH.value))
    except ValueError:
        raise CatalogError(file, "measurement.kind",
                           f"expected one of {kinds}, got {raw['kind']!r}") from None
    bandwidth = kind is MeasurementKind.BANDWIDTH
    _keys(raw, file=file, path="measurement",
          required=["logProfile", *(["testType"] if bandwidth else [])],
          optional=["kind", "sampleInterval"])
    return Measurement(
        log_profile=_str(raw["logProfile"], file=file, path="measurement.logProfile"),
        test_type=_str(raw["testType"], file=file, path="measurement.testType")
        if bandwidth else "",
        sample_interval=_str(raw.get("sampleInterval", "30s"), file=file,
                             path="measurement.sampleInterval"),
        kind=kind)


def _parse_training(value: Any, *, file: str,
                    parameters: Mapping[str, Parameter]) -> TrainingDefaults:
    """``{stallMultiplier, startupStallTimeoutSeconds, minGpus?, tensorAcrossNodes?,
    checkpoint?: {mountPath,
    args, maxRestarts, storageSize}}``; checkpoint args may reference parameters and
    built-ins."""
    raw = _mapping(value, file=file, path="training")
    _keys(raw, file=file, path="training",
          required=["stallMultiplier", "startupStallTimeoutSeconds"],
          optional=["checkpoint", "minGpus", "tensorAcrossNodes"])
    checkpoint = None
    if "checkpoint" in raw:
        path = "training.checkpoint"
        ck = _mapping(raw["checkpoint"], file=file, path=path)
        _keys(ck, file=file, path=path, required=["mountPath", "args", "maxRestarts",
                                                  "storageSize"], optional=[])
        args = ck["args"]
        if not isinstance(args, list) or not all(isinstance(a, str) for a in args):
            raise CatalogError(file, f"{path}.args", f"expected a list of strings, got {args!r}")
        _check_references(args, file=file, path=f"{path}.args", declared=parameters)
        mount = _str(ck["mountPath"], file=file, path=f"{path}.mountPath")
        if not mount.startswith("/"):
            raise CatalogError(file, f"{path}.mountPath", f"expected an absolute path, got "
                               f"{mount!r}")
        checkpoint = CheckpointDefaults(
            mount_path=mount, args=tuple(args),
            max_restarts=_int(ck["maxRestarts"], file=file, path=f"{path}.maxRestarts"),
            storage_size=_str(ck["storageSize"], file=file, path=f"{path}.storageSize"))
    return TrainingDefaults(
        stall_multiplier=_int(raw["stallMultiplier"], file=file,
                              path="training.stallMultiplier", minimum=1),
        startup_stall_timeout_seconds=_int(raw["startupStallTimeoutSeconds"], file=file,
                                           path="training.startupStallTimeoutSeconds",
                                           minimum=1),
        checkpoint=checkpoint,
        min_gpus=_int(raw.get("minGpus", 1), file=file, path="training.minGpus", minimum=1),
        tensor_across_nodes=_bool(raw.get("tensorAcrossNodes", False), file=file,
                                  path="training.tensorAcrossNodes"))
