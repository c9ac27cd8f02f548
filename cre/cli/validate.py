"""``cre validate FILE...``: every problem of CRE objects (and what they carry), offline.

Each document is checked by what it is:

* a CRE kind (``cre.dev/v1alpha1``): :func:`cre.api.validate.validate`, the manager's own
  validation (structure, field constraints, CEL syntax and semantic rules), then, when that
  passes, the CRD generated from the models (structural schema and create-time CEL rules).
  A type error stops the models from being built, which would hide every rule below it, so
  the fields with type errors are set aside and the rest is validated again (all problems of
  a file at once, not one round per fix); a Certification's categories are looked up in the
  shipped catalog, as the manager would (``nccl-all-reduse`` is named with the closest entry);
  the TrainJob spec a Job or Workflow template carries is checked against the Trainer CRDs,
  and the objects a Workflow lists as ``dependencies`` as the objects they are;
* Kubeflow Trainer objects against the vendored Trainer CRDs (oldest supported and latest),
  a TrainingRuntime's JobSet spec against the JobSet CRDs and the batch Jobs JobSet would make
  from it against the Kubernetes release schemas;
* built-in kinds against the Kubernetes release schemas (``--kubernetes-version``, default
  every release CRE supports).

Problems print as ``file:line: field.path: message`` with the line from ruamel.yaml's
round-trip positions; the same problem found by several schema sets prints once, naming them.
"""

from __future__ import annotations

import copy
import difflib
import functools
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence, Set
from pathlib import Path
from typing import Any

import attrs

from cre._vendor import crds as vendored
from cre.api.converter import from_dict
from cre.api.crdgen import build_crd
from cre.api.errors import FieldError, ValidationError
from cre.api.kinds import BY_KIND
from cre.api.labels import API_VERSION
from cre.api.validate import validate as validate_cre
from cre.catalog import CatalogError, load_catalog
from cre.cli import schemas
from cre.cli.exitcodes import CliError, ExitCode
from cre.cli.yamlpos import Document, load_documents, resolve, show_path, tokens

TRAINER = "trainer.kubeflow.org/"
TRAINER_SETS: Mapping[str, Path] = {
    "trainer-v2.2.0": vendored.TRAINER_OLDEST,
    "trainer-latest": vendored.TRAINER_LATEST,
}
JOBSET_SETS: Mapping[str, Path] = {
    "jobset-v0.11.1": vendored.JOBSET_OLDEST,
    "jobset-latest": vendored.JOBSET_LATEST,
}
# Where the TrainJob spec sits in the CRE kinds that carry one.
TRAINJOB_AT: Mapping[str, tuple[str, ...]] = {
    "Job": ("spec", "workload", "trainJob"),
    "Workflow": ("spec", "jobTemplate", "spec", "workload", "trainJob"),
}

Keys = list[str | int]
# Maps a path inside a synthesised object (a TrainJob around a carried spec) to the document.
Relocate = Callable[[Keys], Keys]


@attrs.frozen(kw_only=True, order=True)
class Problem:
    """One problem at one line of one file."""

    file: str
    line: int
    path: str
    message: str
    sources: tuple[str, ...] = ()
    # Not a problem: something that could not be checked offline (printed, not counted).
    note: bool = False

    def __str__(self) -> str:
        message = " ".join(self.message.split())  # one problem, one line
        where = f"{self.file}:{self.line}: {self.path or '(document)'}: {message}"
        where = f"note: {where}" if self.note else where
        return f"{where} [{', '.join(self.sources)}]" if self.sources else where


def kube_versions(wanted: Sequence[str]) -> tuple[str, ...]:
    """``--kubernetes-version`` values (``1.33`` or ``1.33.0``) as kubernetes-validate names."""
    if not wanted:
        return schemas.KUBE_VERSIONS
    out = []
    for text in wanted:
        version = text.removeprefix("v")
        version = version if version.count(".") == 2 else f"{version}.0"
        if version not in schemas.KUBE_VERSIONS:
            known = ", ".join(v.rsplit(".", 1)[0] for v in schemas.KUBE_VERSIONS)
            raise CliError(ExitCode.USAGE, f"--kubernetes-version {text}: not one of {known}")
        out.append(version)
    return tuple(dict.fromkeys(out))


def validate_files(paths: Iterable[str], *, versions: Sequence[str]) -> list[Problem]:
    """Every problem of every document of every file, in file and line order."""
    problems: list[Problem] = []
    for path in paths:
        for doc in load_documents(path):
            problems += validate_document(doc, versions=versions)
    return problems


def _identity(keys: Keys) -> Keys:
    return keys


def _under(prefix: Sequence[str | int], *, spec_only: bool = True) -> Relocate:
    """Paths of an object built around ``prefix``'s value as its ``spec`` (or as itself)."""

    def relocate(keys: Keys) -> Keys:
        if not spec_only:
            return [*prefix, *keys]
        if keys and keys[0] == "spec":
            return [*prefix, *keys[1:]]
        return list(prefix)

    return relocate


class _Collector:
    """Problems of one document, placed on lines and merged across schema sets."""

    def __init__(self, doc: Document) -> None:
        self.doc = doc
        self.found: dict[tuple[int, str, str], list[str]] = {}
        self.notes: dict[tuple[int, str, str], list[str]] = {}

    def add(self, path: str | Keys, message: str, *, source: str = "",
            relocate: Relocate = _identity, shown: str | None = None,
            note: bool = False) -> None:
        """Record a problem at ``path`` (``shown`` as given when the validator's own path
        spelling is kept, e.g. ``spec.thresholds[busBandwidthGBps]``)."""
        keys = relocate(tokens(path) if isinstance(path, str) else list(path))
        line, real = resolve(self.doc.node, keys, default=self.doc.line)
        found = self.notes if note else self.found
        sources = found.setdefault((line, shown or show_path(real), message), [])
        if source and source not in sources:
            sources.append(source)

    def add_schema(self, found: Iterable[schemas.SchemaProblem], *,
                   relocate: Relocate = _identity) -> None:
        for p in found:
            self.add(p.path, p.message, source=p.schema, relocate=relocate)

    def problems(self) -> list[Problem]:
        """Problems and notes, in line order."""
        return sorted(
            Problem(file=self.doc.file, line=line, path=path, message=message,
                    sources=_compact(sources), note=found is self.notes)
            for found in (self.found, self.notes)
            for (line, path, message), sources in found.items()
        )


def _compact(sources: Sequence[str]) -> tuple[str, ...]:
    """``kubernetes-1.30.0`` .. ``kubernetes-1.34.0`` as ``kubernetes 1.30-1.34``."""
    kube = sorted(int(s.split(".")[1]) for s in sources if s.startswith("kubernetes-"))
    rest = [s for s in sources if not s.startswith("kubernetes-")]
    if kube:
        span = f"1.{kube[0]}" if len(kube) == 1 else f"1.{kube[0]}-1.{kube[-1]}"
        rest.append(f"kubernetes {span}")
    return tuple(rest)


def validate_document(doc: Document, *, versions: Sequence[str]) -> list[Problem]:
    """Every problem of one document."""
    out = _Collector(doc)
    obj = doc.value
    if not isinstance(obj, Mapping) or not obj.get("apiVersion") or not obj.get("kind"):
        out.add("", "not a Kubernetes object (apiVersion and kind are required)")
        return out.problems()
    api = str(obj["apiVersion"])
    if api == API_VERSION or api.startswith("cre.dev/"):
        _cre_object(out, obj, versions=versions)
    else:
        _foreign_object(out, obj, versions=versions, relocate=_identity)
    return out.problems()


@functools.cache
def _cre_schema(kind: str) -> dict[str, Any] | None:
    info = BY_KIND.get(kind)
    if info is None:
        return None
    return next(iter(schemas.served_schemas(build_crd(info)).values()))


REPAIR_ROUNDS = 5
# A stand-in of the type a "expected TYPE, got ..." error asks for: valid for every rule of
# its field that the validation has (a DNS label, >= 1, ...); problems under it are not shown.
_STAND_INS: Mapping[str, Any] = {"string": "a", "integer": 1, "number": 1, "boolean": False,
                                  "array": [], "object": {}}
_DROP = object()


def _parent(obj: Any, keys: Keys) -> Any:
    for key in keys:
        if isinstance(obj, Mapping) and isinstance(key, str):
            obj = obj.get(key)
        elif isinstance(obj, list) and isinstance(key, int) and 0 <= key < len(obj):
            obj = obj[key]
        else:
            return None
    return obj


def _patch(obj: Any, keys: Keys, value: Any) -> bool:
    """Replace (or, with ``_DROP``, remove) the value at ``keys`` in place; False when there
    is nothing there. A list item is replaced, never removed (the later items keep their
    paths)."""
    if not keys:
        return False
    parent, last = _parent(obj, keys[:-1]), keys[-1]
    if isinstance(parent, dict) and isinstance(last, str) and last in parent:
        if value is _DROP:
            del parent[last]
        else:
            parent[last] = value
        return True
    if isinstance(parent, list) and isinstance(last, int) and 0 <= last < len(parent) \
            and value is not _DROP:
        parent[last] = value
        return True
    return False


def _stand_in(message: str) -> Any:
    expected = message.removeprefix("expected ").split(",", 1)[0]
    return copy.deepcopy(_STAND_INS[expected]) if message.startswith("expected ") \
        and expected in _STAND_INS else _DROP


def _is_under(path: str, roots: Set[str]) -> bool:
    return any(path == r or path.startswith((f"{r}.", f"{r}[")) for r in roots)


def cre_errors(obj: Mapping[str, Any]) -> list[FieldError]:
    """Every problem the manager's validation finds, type errors and the rules behind them.

    A type error (or an unknown field) stops the models from being built, and with them every
    rule; so each round replaces a wrongly typed value with a stand-in of the right type (or
    removes an unknown field) and validates again, until the models build."""
    found = validate_cre(obj)
    errors = list(found)
    patched: set[str] = set()
    current: Any = copy.deepcopy(dict(obj))
    for _ in range(REPAIR_ROUNDS):
        if _builds(current):
            break  # the models build: the last validate_cre ran every rule
        fixed = [e.path for e in found if not _is_under(e.path, patched)
                 and _patch(current, tokens(e.path), _stand_in(e.message))]
        if not fixed:
            break
        patched.update(fixed)
        found = validate_cre(current)
        seen = {(e.path, e.message) for e in errors}
        errors += [e for e in found if not _is_under(e.path, patched)
                   and (e.path, e.message) not in seen]
    return errors


def _builds(obj: Mapping[str, Any]) -> bool:
    """Whether the models build from ``obj`` (no type error left to stand in for)."""
    try:
        from_dict(obj)
    except ValidationError:
        return False
    return True


def catalog_problems(obj: Mapping[str, Any], *,
                     known_bad: Set[str] = frozenset()) -> Iterator[tuple[str, str]]:
    """A Certification's categories that the shipped catalog does not have: (path, message);
    a category with a problem of its own already (``known_bad`` paths) is not looked up."""
    if obj.get("kind") != "Certification":
        return
    entries = sorted(load_catalog().entries)
    for i, category in enumerate(_get(obj, ("spec", "categories")) or []):
        if not isinstance(category, Mapping):
            continue
        domain, variant = category.get("domain"), category.get("variant")
        if not isinstance(domain, str) or not isinstance(variant, str) \
                or _is_under(f"spec.categories[{i}].domain", known_bad) \
                or _is_under(f"spec.categories[{i}].variant", known_bad):
            continue
        name = f"{domain}/{variant}"
        if name in entries:
            continue
        close = difflib.get_close_matches(name, entries, n=1)
        hint = f"did you mean {close[0]}? " if close else ""
        yield (f"spec.categories[{i}].variant",
               f"{name}: not in the catalog ({hint}known: {', '.join(entries)})")


def _cre_object(out: _Collector, obj: Mapping[str, Any], *, versions: Sequence[str]) -> None:
    errors = cre_errors(obj)
    for error in errors:
        out.add(error.path, error.message, shown=error.path)
    try:
        for path, message in catalog_problems(obj, known_bad={e.path for e in errors}):
            out.add(path, message, source="catalog")
    except CatalogError as exc:
        raise CliError(ExitCode.CATALOG, f"the shipped catalog is invalid: {exc}") from None
    kind = str(obj["kind"])
    schema = _cre_schema(kind)
    if not errors and schema is not None:
        out.add_schema(schemas.crd_problems(obj, schema, schema_name="cre-crd"))
    at = TRAINJOB_AT.get(kind)
    if at is not None:
        spec = _get(obj, at)
        if isinstance(spec, Mapping):
            name = f"{obj.get('metadata', {}).get('name', 'job')}-workload"
            train_job = {"apiVersion": f"{TRAINER}v1alpha1", "kind": "TrainJob",
                         "metadata": {"name": name}, "spec": dict(spec)}
            _trainer_object(out, train_job, versions=versions, relocate=_under(at))
    if kind == "Workflow":
        for i, dep in enumerate(_get(obj, ("spec", "dependencies")) or []):
            if isinstance(dep, Mapping) and dep.get("apiVersion") and dep.get("kind"):
                body = {k: v for k, v in dep.items() if k != "when"}
                _foreign_object(out, body, versions=versions,
                                relocate=_under(("spec", "dependencies", i), spec_only=False))


def _get(obj: Any, keys: Sequence[str]) -> Any:
    for key in keys:
        if not isinstance(obj, Mapping):
            return None
        obj = obj.get(key)
    return obj


def _foreign_object(out: _Collector, obj: Mapping[str, Any], *, versions: Sequence[str],
                    relocate: Relocate) -> None:
    api = str(obj.get("apiVersion"))
    if api.startswith(TRAINER):
        _trainer_object(out, obj, versions=versions, relocate=relocate)
    elif "." not in api.split("/")[0] or api.startswith("resource.k8s.io/"):
        out.add_schema(schemas.kube_problems(obj, versions), relocate=relocate)
    else:
        out.add("apiVersion", f"{api} {obj.get('kind')}: no schema known offline, not checked",
                relocate=relocate, note=True)


def _trainer_object(out: _Collector, obj: Mapping[str, Any], *, versions: Sequence[str],
                    relocate: Relocate) -> None:
    key = (str(obj.get("apiVersion")), str(obj.get("kind")))
    for set_name, folder in TRAINER_SETS.items():
        schema = schemas.crd_schemas(folder).get(key)
        if schema is None:
            out.add("kind", f"{key[0]} {key[1]} is not served by {set_name}", relocate=relocate)
            continue
        out.add_schema(schemas.crd_problems(obj, schema, schema_name=set_name),
                       relocate=relocate)
    template = _get(obj, ("spec", "template", "spec"))
    if key[1] != "TrainingRuntime" or not isinstance(template, Mapping):
        return
    jobset = {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet",
              "metadata": {"name": _get(obj, ("metadata", "name")) or "runtime"},
              "spec": dict(template)}
    to_runtime = _then(relocate, _under(("spec", "template", "spec")))
    for set_name, folder in JOBSET_SETS.items():
        schema = schemas.crd_schemas(folder).get(("jobset.x-k8s.io/v1alpha2", "JobSet"))
        if schema is not None:
            out.add_schema(schemas.crd_problems(jobset, schema, schema_name=set_name),
                           relocate=to_runtime)
    for i, job in enumerate(schemas.embedded_batch_jobs(obj)):
        at = ("spec", "template", "spec", "replicatedJobs", i, "template", "spec")
        out.add_schema(schemas.kube_problems(job, versions),
                       relocate=_then(relocate, _under(at)))


def _then(outer: Relocate, inner: Relocate) -> Relocate:
    return lambda keys: outer(inner(keys))
