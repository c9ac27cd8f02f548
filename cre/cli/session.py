"""One connection per command: read snapshots for ``status`` and ``report``, write the HTML.

The glue between the kubectl-style flags and :mod:`cre.cli.cluster`: open a client, read, and
close it whatever happens. :func:`write_html_report` is the one call a program needs to leave
a Certification's report on disk (``make demo`` ends with it).
"""

from __future__ import annotations

from pathlib import Path

import anyio

from cre.cli.cluster import (
    Connection,
    connect,
    get_certification,
    list_certifications,
    namespace_of,
    snapshot,
)
from cre.cli.exitcodes import CliError, ExitCode
from cre.cli.htmlreport import render_html
from cre.core.certification.report import Report, Snapshot, build_report
from cre.kube.client import ApiError


async def read_snapshots(conn: Connection, name: str | None, *,
                         all_namespaces: bool = False) -> list[Snapshot]:
    """The named Certification's snapshot, or one per Certification of the namespace."""
    namespace = namespace_of(conn)
    client = await connect(conn)
    try:
        with anyio.fail_after(conn.timeout):
            if name is not None:
                certs = [await get_certification(client, name, namespace)]
            else:
                certs = await list_certifications(client, None if all_namespaces else namespace)
            return [await snapshot(client, cert) for cert in certs]
    except TimeoutError:
        raise CliError(ExitCode.UNREACHABLE, f"no answer from the API server at {client.host} "
                       f"within {conn.timeout:g}s (--request-timeout)") from None
    except ApiError as exc:  # a read outside the mapped ones
        raise CliError(ExitCode.API, f"{client.host}: {exc}") from None
    finally:
        await client.close()


async def read_report(conn: Connection, name: str) -> Report:
    """The report of one Certification."""
    (snap,) = await read_snapshots(conn, name)
    return build_report(snap)


def write_html_report(
    certification: str,
    *,
    path: str | Path,
    namespace: str | None = None,
    kubeconfig: str | None = None,
    context: str | None = None,
) -> Path:
    """Read a Certification from the cluster and write its self-contained HTML report to
    ``path``; returns the path. Raises :class:`~cre.cli.exitcodes.CliError` with a one-line
    message when the cluster or the Certification cannot be read."""
    conn = Connection(kubeconfig=kubeconfig, context=context, namespace=namespace)
    report = anyio.run(read_report, conn, certification)
    out = Path(path)
    write_text(out, render_html(report))
    return out


def write_text(path: Path, text: str) -> None:
    """Write a report file; a one-line error when the folder is missing or not writable."""
    try:
        path.write_text(text, encoding="utf-8")
    except OSError as exc:
        raise CliError(ExitCode.INPUT, f"{path}: cannot write: {exc.strerror or exc}") from None
