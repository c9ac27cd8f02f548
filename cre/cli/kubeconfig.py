"""Check a kubeconfig before a client is built from it, so every mistake is one line with the fix.

kubernetes-asyncio reports a missing file, a malformed file or an unknown context with
messages meant for its own developers ("Invalid kube-config file. Expected key
current-context"), sometimes twice, and a structural mistake (``clusters: 3``) as a bare
TypeError. :func:`check_kubeconfig` reads the files the way kubectl picks them (``--kubeconfig``,
else ``$KUBECONFIG``, a list separated by ``os.pathsep``, else ``~/.kube/config``) and raises a
:class:`~cre.cli.exitcodes.CliError` (exit 5, cluster unreachable) naming the file, the field
and what to do. :func:`unreachable_reason` turns a transport error into the words a person
uses ("connection refused", "unknown host").
"""

from __future__ import annotations

import os
import socket
import ssl
from collections.abc import Mapping, Sequence
from typing import Any

import attrs
import yaml

from cre.cli.exitcodes import CliError, ExitCode

HOME_KUBECONFIG = "~/.kube/config"
NAMED_LISTS = ("clusters", "contexts", "users")


@attrs.frozen(kw_only=True)
class KubeconfigFiles:
    """Where the kubeconfig came from (``--kubeconfig``, ``KUBECONFIG``, the home file) and the
    files that exist."""

    source: str
    value: str
    files: tuple[str, ...]

    @property
    def path(self) -> str:
        """The value to hand to the client (several files joined as ``$KUBECONFIG`` does)."""
        return os.pathsep.join(self.files)


def _bad(file: str, what: str) -> CliError:
    return CliError(ExitCode.UNREACHABLE, f"{file}: not a valid kubeconfig: {what} "
                    "(kubectl config view shows what kubectl reads)")


def locate(explicit: str | None) -> KubeconfigFiles | None:
    """The kubeconfig files in use; None when there is none (in-cluster config is next)."""
    if explicit:
        source, value = "--kubeconfig", explicit
    elif os.environ.get("KUBECONFIG"):
        source, value = "KUBECONFIG", os.environ["KUBECONFIG"]
    else:
        home = os.path.expanduser(HOME_KUBECONFIG)
        return (KubeconfigFiles(source=HOME_KUBECONFIG, value=home, files=(home,))
                if os.path.exists(home) else None)
    named = [p for p in value.split(os.pathsep) if p]
    files = tuple(p for p in named if os.path.isfile(p))
    if not files:
        if source == "KUBECONFIG":
            raise CliError(ExitCode.UNREACHABLE, f"KUBECONFIG={value}: no such file (point "
                           "KUBECONFIG at a kubeconfig file, or unset it to use "
                           f"{HOME_KUBECONFIG})")
        raise CliError(ExitCode.UNREACHABLE, f"--kubeconfig {value}: no such file")
    return KubeconfigFiles(source=source, value=value, files=files)


def _load(file: str) -> Mapping[str, Any]:
    try:
        with open(file, encoding="utf-8") as handle:
            doc = yaml.safe_load(handle)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = f" at line {mark.line + 1}" if mark is not None else ""
        raise _bad(file, f"invalid YAML{line}: {exc.problem or exc.context}") from None
    except yaml.YAMLError as exc:
        raise _bad(file, f"invalid YAML: {exc}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise CliError(ExitCode.UNREACHABLE, f"{file}: cannot read kubeconfig: {exc}") from None
    if doc is None:
        return {}
    if not isinstance(doc, Mapping):
        raise _bad(file, f"expected a mapping (apiVersion, kind: Config, clusters, contexts, "
                   f"users), got {type(doc).__name__}")
    for key in NAMED_LISTS:
        entries = doc.get(key)
        if entries is None:
            continue
        if not isinstance(entries, list):
            raise _bad(file, f"{key}: must be a list, got {type(entries).__name__}")
        for i, entry in enumerate(entries):
            if not isinstance(entry, Mapping) or not isinstance(entry.get("name"), str):
                raise _bad(file, f"{key}[{i}]: must be a mapping with a name")
    return doc


def _names(docs: Sequence[tuple[str, Mapping[str, Any]]], key: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for _, doc in docs:
        for entry in doc.get(key) or []:
            out.setdefault(entry["name"], entry.get(key[:-1]) or {})  # first file wins
    return out


def check_kubeconfig(found: KubeconfigFiles, context: str | None) -> str:
    """Check the files and the context; returns the name of the context in use."""
    docs = [(f, _load(f)) for f in found.files]
    where = found.files[0] if len(found.files) == 1 else f"{found.source}={found.value}"
    contexts = _names(docs, "contexts")
    known = ", ".join(sorted(contexts)) or "none"
    if context is not None:
        if context not in contexts:
            raise CliError(ExitCode.UNREACHABLE, f"--context {context}: no such context in "
                           f"{where} (contexts: {known})")
        chosen = context
    else:
        current = next((d.get("current-context") for _, d in docs if d.get("current-context")),
                       None)
        if not current:
            raise CliError(ExitCode.UNREACHABLE, f"{where}: no current-context; pass --context "
                           f"(contexts: {known})")
        if current not in contexts:
            raise CliError(ExitCode.UNREACHABLE, f"{where}: current-context {current} is not "
                           f"one of its contexts ({known}); pass --context or kubectl config "
                           "use-context")
        chosen = str(current)
    spec = contexts[chosen]
    if not isinstance(spec, Mapping):
        raise _bad(where, f"context {chosen}: must be a mapping with cluster and user")
    clusters = _names(docs, "clusters")
    cluster = spec.get("cluster")
    if cluster not in clusters:
        raise _bad(where, f"context {chosen} names cluster {cluster}, which is not in clusters "
                   f"({', '.join(sorted(clusters)) or 'none'})")
    server = clusters[cluster].get("server") if isinstance(clusters[cluster], Mapping) else None
    if not server:
        raise _bad(where, f"cluster {cluster}: server is missing")
    return chosen


def unreachable_reason(exc: BaseException) -> str | None:
    """What went wrong on the way to the server, in a few words; None when not recognised."""
    seen: set[int] = set()
    cause: BaseException | None = exc
    while cause is not None and id(cause) not in seen:
        seen.add(id(cause))
        if isinstance(cause, ConnectionRefusedError):
            return "connection refused"
        if isinstance(cause, socket.gaierror):
            return "unknown host"
        if isinstance(cause, ssl.SSLCertVerificationError):
            return f"TLS certificate not trusted ({cause.verify_message})"
        if isinstance(cause, ssl.SSLError):
            return "TLS handshake failed"
        if isinstance(cause, TimeoutError):
            return "timed out"
        if isinstance(cause, ConnectionResetError):
            return "connection reset"
        inner = getattr(cause, "os_error", None)  # aiohttp.ClientConnectorError
        cause = inner if isinstance(inner, BaseException) else (
            cause.__cause__ or cause.__context__)
    return None
