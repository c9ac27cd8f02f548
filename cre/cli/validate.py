"""``cre validate FILE...``: every problem of CRE objects (and what they carry), offline.

Each document is checked by what it is:

* a CRE kind (``cre.dev/v1alpha1``): :func:`cre.api.validate.validate`, the manager's own
  validation (structure, field constraints, CEL syntax and semantic rules), then, when that
  passes, the CRD generated from the models (structural schema and create-time CEL rules);
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

import functools
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs

from cre.api.crdgen import build_crd
from cre.api.kinds import BY_KIND
from cre.api.labels import API_VERSION
from cre.api.validate import validate as validate_cre
from cre.cli import schemas
from cre.cli.exitcodes import CliError, ExitCode
from cre.cli.yamlpos import Document, load_documents, resolve, show_path, tokens
from cre.testing import crds as vendored  # data only: the upstream CRD files, see 014-cli.md

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


def _cre_object(out: _Collector, obj: Mapping[str, Any], *, versions: Sequence[str]) -> None:
    errors = validate_cre(obj)
    for error in errors:
        out.add(error.path, error.message, shown=error.path)
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
