"""``cre render``: a catalog entry rendered offline for one platform, architecture and node set.

The same documents the Job tier applies and ``python -m cre.render`` prints (the Job first,
then the TrainingRuntime and any DRA objects); the render goldens (``goldens/render``) are the
reviewed output for the same inputs. Flags become one :class:`~cre.render.RenderOptions`;
``--option k=v`` strings are typed by the entry's own parameter defaults, so ``iterations=20``
is an int and ``maxBytes=32G`` a string, as in a catalog file.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import IO, Any

import attrs
from ruamel.yaml import YAML

from cre.catalog import Catalog, CatalogEntry, CatalogError
from cre.catalog.template import Scalar
from cre.cli.exitcodes import CliError, ExitCode
from cre.render import GangScheduler, RenderError, RenderOptions, render_job_manifest
from cre.render.options import DEFAULT_QUEUE, KAI_QUEUE_LABEL, KAI_SCHEDULER


@attrs.frozen(kw_only=True)
class RenderRequest:
    """Everything ``cre render`` was asked for, before the catalog is consulted."""

    entry: str
    platform: str
    arch: str
    nodes: tuple[str, ...]
    job_name: str | None = None
    namespace: str = "default"
    options: Mapping[str, str] = attrs.field(factory=dict)
    image: str | None = None
    gang_scheduler: str | None = None
    queue: str | None = None
    queue_label_key: str | None = None
    worker_backoff_limit: int = 3
    launcher_backoff_limit: int | None = None
    nic_resource_name: str | None = None


def node_names(*, nodes: str | None, node_count: int | None) -> tuple[str, ...]:
    """``--nodes a,b`` as given, or ``--node-count N`` as ``node-01``.. (the goldens' names)."""
    if (nodes is None) == (node_count is None):
        raise CliError(ExitCode.USAGE, "give exactly one of --nodes and --node-count")
    if nodes is not None:
        names = tuple(n.strip() for n in nodes.split(",") if n.strip())
        if not names:
            raise CliError(ExitCode.USAGE, "--nodes: no node names given")
        return names
    assert node_count is not None
    if node_count < 1:
        raise CliError(ExitCode.USAGE, f"--node-count: must be >= 1, got {node_count}")
    return tuple(f"node-{i:02d}" for i in range(1, node_count + 1))


def parse_options(pairs: Sequence[str]) -> dict[str, str]:
    """``k=v`` strings as a dict; a pair without ``=`` is a usage error naming it."""
    out: dict[str, str] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise CliError(ExitCode.USAGE, f"--option {pair!r}: expected key=value")
        out[key] = value
    return out


def typed_parameters(entry: CatalogEntry, raw: Mapping[str, str]) -> dict[str, Scalar]:
    """Each ``--option`` value converted to the type of the parameter's default."""
    out: dict[str, Scalar] = {}
    for key, text in raw.items():
        param = entry.parameters.get(key)
        if param is None:
            known = ", ".join(sorted(entry.parameters)) or "none"
            raise CliError(
                ExitCode.CATALOG,
                f"{entry.name}: --option {key}: unknown parameter (known: {known})",
            )
        default = param.default
        if isinstance(default, bool):
            if text.lower() not in ("true", "false"):
                raise CliError(ExitCode.USAGE, f"--option {key}={text}: expected true or false")
            out[key] = text.lower() == "true"
        elif isinstance(default, int):
            try:
                out[key] = int(text)
            except ValueError:
                raise CliError(
                    ExitCode.USAGE, f"--option {key}={text}: expected an integer like {default}"
                ) from None
        else:
            out[key] = text
    return out


def gang_scheduler(request: RenderRequest) -> GangScheduler | None:
    """The gang scheduler option, or None; a queue without a scheduler is a usage error."""
    if request.gang_scheduler is None:
        if request.queue is not None or request.queue_label_key is not None:
            raise CliError(ExitCode.USAGE,
                           "--queue/--queue-label-key need --kai or --gang-scheduler")
        return None
    return GangScheduler(
        scheduler_name=request.gang_scheduler,
        queue=request.queue if request.queue is not None else DEFAULT_QUEUE,
        queue_label_key=(
            request.queue_label_key if request.queue_label_key is not None else KAI_QUEUE_LABEL
        ),
    )


def render_documents(catalog: Catalog, request: RenderRequest) -> list[dict[str, Any]]:
    """The rendered documents; :class:`CliError` naming the entry, platform or flag otherwise."""
    try:
        entry = catalog.entry(request.entry)
        options = RenderOptions(
            image=request.image,
            gang_scheduler=gang_scheduler(request),
            worker_backoff_limit=request.worker_backoff_limit,
            launcher_backoff_limit=request.launcher_backoff_limit,
            nic_resource_name=request.nic_resource_name,
            parameters=typed_parameters(entry, request.options),
        )
        return render_job_manifest(
            job_name=request.job_name or entry.variant,
            namespace=request.namespace,
            catalog=catalog,
            entry=request.entry,
            platform=request.platform,
            arch=request.arch,
            nodes=request.nodes,
            options=options,
        )
    except CatalogError as exc:
        raise CliError(ExitCode.CATALOG, str(exc)) from None
    except RenderError as exc:
        raise CliError(ExitCode.USAGE, str(exc)) from None


def write_documents(docs: Sequence[Mapping[str, Any]], *, output: str, out: IO[str]) -> None:
    """YAML documents (as ``python -m cre.render`` prints them) or a kubectl-style JSON List."""
    if output == "json":
        listing = {"apiVersion": "v1", "kind": "List", "items": list(docs)}
        out.write(json.dumps(listing, indent=2, sort_keys=True, ensure_ascii=False) + "\n")
        return
    yaml = YAML(typ="safe", pure=True)
    yaml.default_flow_style = False
    yaml.dump_all(list(docs), out)


__all__ = [
    "KAI_SCHEDULER",
    "RenderRequest",
    "gang_scheduler",
    "node_names",
    "parse_options",
    "render_documents",
    "typed_parameters",
    "write_documents",
]
