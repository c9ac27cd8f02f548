"""The manager's configuration: flags, then environment, then defaults, validated up front.

Containers are configured by args in the Deployment and by env vars injected from ConfigMaps or
the downward API; both must work, and a flag must win over the environment. A value that is wrong
must stop the process before it touches the cluster, with a message naming the flag (and the
variable it came from), instead of failing minutes later inside a controller.
"""

from __future__ import annotations

import argparse
import os
import re
import socket
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Final

import attrs
from ruamel.yaml import YAML
from ruamel.yaml.error import YAMLError

from cre import __version__
from cre.controller.registry import BY_NAME
from cre.kube.leader import JITTER_FACTOR, LeaderElectionConfig
from cre_manager.errors import ConfigError
from cre_manager.logs import LogFormat

ENV_PREFIX: Final = "CRE_"
SA_NAMESPACE_FILE: Final = Path("/var/run/secrets/kubernetes.io/serviceaccount/namespace")
SA_TOKEN_FILE: Final = Path("/var/run/secrets/kubernetes.io/serviceaccount/token")
DEFAULT_LEASE_NAME: Final = "cre-manager.cre.dev"
DEFAULT_NAMESPACE: Final = "cre-system"
LOG_LEVELS: Final = ("debug", "info", "warning", "error")
_DURATION: Final = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h)?\s*$")
_DNS_LABEL: Final = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_DNS_SUBDOMAIN: Final = re.compile(r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$")


@attrs.frozen(slots=True)
class BindAddress:
    """``host:port`` to listen on; ``None`` host means all interfaces, port 0 an ephemeral one."""

    host: str | None
    port: int

    def __str__(self) -> str:
        return f"{self.host or ''}:{self.port}"


@attrs.frozen(slots=True)
class ManagerConfig:
    """Everything the process needs, already validated."""

    kubeconfig: str | None  # None: in-cluster config
    context: str | None
    namespaces: tuple[str, ...]  # empty: all namespaces
    leader_election: LeaderElectionConfig | None
    metrics_address: BindAddress | None  # None: disabled ("0")
    health_address: BindAddress | None
    max_concurrent_reconciles: int
    log_format: LogFormat
    log_level: str
    # None: the shipped catalog. Parsed at start-up (fail fast on a broken entry); the tiers
    # that render workloads themselves (Workflow, Certification) read it from here.
    catalog_dir: Path | None
    shutdown_grace_period: float
    controllers: tuple[str, ...]
    # --infra-scoped-failfast: infrastructure aborts of a Workflow group are deferred (retried
    # on their own budget, nodes Uncertified, never tripping FailFast). False restores the
    # plain behaviour; a Workflow's failurePolicy.infraScopedFailFast overrides it.
    infra_scoped_fail_fast: bool = True
    # How long start-up retries transient API errors (429, 5xx, 409, no connection).
    startup_timeout: float = 60.0
    # Test kit only (hidden --sim-time-scale / --sim-time-origin): read time as a simulated
    # cluster's scaled clock, ``origin + (wall - origin) x scale`` (cre.testing.cluster.clock),
    # so the controllers and a simulated cluster in another process agree on now.
    time_scale: float = 1.0
    time_origin: float | None = None

    def clock(self) -> Callable[[], datetime]:
        """What the controllers read as now: the wall clock, or the shared scaled clock."""
        if self.time_scale == 1.0 or self.time_origin is None:
            return _wall_now
        origin, scale = self.time_origin, self.time_scale

        def scaled() -> datetime:
            return datetime.fromtimestamp(origin + (time.time() - origin) * scale, tz=UTC)

        return scaled


def _wall_now() -> datetime:
    return datetime.now(UTC)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="cre-manager",
        description="CRE manager: runs the CRE controllers against a Kubernetes cluster. "
                    "Every flag can also be set by the environment variable shown; a flag wins.")
    p.add_argument("--version", action="version", version=f"cre-manager {__version__}")

    def opt(flag: str, help_text: str, **kw: object) -> None:
        env = ENV_PREFIX + flag.lstrip("-").upper().replace("-", "_")
        p.add_argument(flag, default=None, help=f"{help_text} [${env}]", **kw)  # type: ignore[arg-type]

    opt("--kubeconfig", "kubeconfig path ($KUBECONFIG and ~/.kube/config also apply; "
        "default: in-cluster config)")
    opt("--context", "kubeconfig context (default: the current context)")
    opt("--namespaces", "comma-separated namespaces to watch (default: all)")
    opt("--controllers", "comma-separated controllers to run (default: all: "
        f"{', '.join(BY_NAME)})")
    p.add_argument("--leader-elect", default=None, action=argparse.BooleanOptionalAction,
                   help="elect a leader with a Lease so only one replica reconciles "
                        "[$CRE_LEADER_ELECT]")
    opt("--leader-elect-lease-name", f"Lease name (default {DEFAULT_LEASE_NAME})")
    opt("--leader-elect-lease-namespace", "Lease namespace (default: $POD_NAMESPACE, the "
        f"service account's namespace, else {DEFAULT_NAMESPACE})")
    opt("--leader-elect-identity", "this replica's identity (default: hostname_<random>)")
    opt("--leader-elect-lease-duration", "how long a standby waits before taking an "
        "unrenewed lease (default 15s)")
    opt("--leader-elect-renew-deadline", "how long the leader retries renewing before it "
        "gives up (default 10s)")
    opt("--leader-elect-retry-period", "wait between election tries (default 2s)")
    opt("--metrics-bind-address", "address of /metrics, e.g. :8080; 0 disables (default :8080)")
    opt("--health-probe-bind-address", "address of /healthz and /readyz (default :8081)")
    opt("--max-concurrent-reconciles", "workers per controller (default 50; reconciles mostly "
        "wait on API round-trips)")
    opt("--log-format", "json or text (default json)")
    opt("--log-level", f"one of {', '.join(LOG_LEVELS)} (default info)")
    opt("--catalog-dir", "workload catalog directory (default: the shipped catalog)")
    p.add_argument("--infra-scoped-failfast", default=None, nargs="?", const="true",
                   metavar="true|false",
                   help="defer infrastructure aborts of Workflow groups (Node, Platform, "
                        "ControlPlane class): retried on their own budget, nodes Uncertified, "
                        "never tripping FailFast; =false restores the plain behaviour (a "
                        "Workflow's failurePolicy.infraScopedFailFast wins) (default true) "
                        "[$CRE_INFRA_SCOPED_FAILFAST]")
    opt("--shutdown-grace-period", "how long in-flight reconciles may run after SIGTERM "
        "(default 30s)")
    opt("--startup-timeout", "how long start-up retries transient API errors (429, 5xx, 409, "
        "no connection) before exiting 3 (default 60s)")
    # The test kit's shared simulated clock (see ManagerConfig.time_scale); not for clusters.
    p.add_argument("--sim-time-scale", default=None, help=argparse.SUPPRESS)
    p.add_argument("--sim-time-origin", default=None, help=argparse.SUPPRESS)
    return p


def _sim_time(args: argparse.Namespace) -> tuple[float, float | None]:
    """The shared simulated clock's scale and origin (Unix seconds; default: now)."""
    scale, origin = 1.0, None
    if args.sim_time_scale is not None:
        try:
            scale = float(args.sim_time_scale)
        except ValueError:
            scale = 0.0
        if not scale > 0 or scale == float("inf"):
            raise ConfigError("--sim-time-scale",
                              f"{args.sim_time_scale!r} is not a positive number")
        origin = time.time()
    if args.sim_time_origin is not None:
        try:
            origin = float(args.sim_time_origin)
        except ValueError:
            raise ConfigError("--sim-time-origin", f"{args.sim_time_origin!r} is not Unix "
                              "seconds") from None
    return scale, origin


class _Resolver:
    """Flag value if given, else ``CRE_<FLAG>``, else the default, and where it came from."""

    def __init__(self, args: argparse.Namespace, env: Mapping[str, str]) -> None:
        self.args = args
        self.env = env

    def get(self, flag: str, default: str | None = None) -> tuple[str | None, str | None]:
        """(value, env var it came from or None)."""
        value = getattr(self.args, flag.lstrip("-").replace("-", "_"))
        if value is not None:
            return str(value), None
        env = ENV_PREFIX + flag.lstrip("-").upper().replace("-", "_")
        if env in self.env:
            return self.env[env], env
        return default, None


def parse_duration(text: str) -> float:
    """``15s``, ``500ms``, ``1m``, ``1h`` or bare seconds (``2.5``) -> seconds."""
    m = _DURATION.match(text)
    if not m:
        raise ValueError(f"{text!r} is not a duration (use e.g. 15s, 500ms, 1m)")
    scale = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}[m.group(2) or "s"]
    return float(m.group(1)) * scale


def parse_bind_address(text: str) -> BindAddress | None:
    """``:8080``, ``127.0.0.1:8080``, ``[::1]:8080``; ``0`` (or empty) disables the server."""
    text = text.strip()
    if text in ("", "0"):
        return None
    host, sep, port_text = text.rpartition(":")
    if not sep:
        raise ValueError(f"{text!r} is not host:port (e.g. :8080 or 127.0.0.1:8080)")
    try:
        port = int(port_text)
    except ValueError:
        raise ValueError(f"port {port_text!r} is not a number") from None
    if not 0 <= port <= 65535:
        raise ValueError(f"port {port} is out of range 0-65535")
    host = host.strip("[]")
    return BindAddress(host or None, port)


def _truthy(text: str, *, flag: str, env: str | None) -> bool:
    low = text.strip().lower()
    if low in ("1", "true", "yes", "on"):
        return True
    if low in ("0", "false", "no", "off", ""):
        return False
    raise ConfigError(flag, f"{text!r} is not a boolean (true/false)", env=env)


def _kubeconfig_contexts(path: str) -> list[str]:
    names: list[str] = []
    for part in path.split(os.pathsep):
        try:
            doc = YAML(typ="safe").load(Path(part).read_text(encoding="utf-8"))
        except (OSError, YAMLError) as exc:
            raise ConfigError("--kubeconfig", f"cannot read {part}: {exc}") from None
        if not isinstance(doc, dict):
            raise ConfigError("--kubeconfig", f"{part} is not a kubeconfig (no mapping)")
        names += [str(c.get("name")) for c in doc.get("contexts") or [] if isinstance(c, dict)]
    return names


def _resolve_kubeconfig(r: _Resolver, env: Mapping[str, str]) -> tuple[str | None, str | None]:
    value, src = r.get("--kubeconfig")
    if value is None and env.get("KUBECONFIG"):
        value, src = env["KUBECONFIG"], "KUBECONFIG"
    if value is None:
        home = Path(env.get("HOME", "~")).expanduser() / ".kube" / "config"
        if home.is_file():
            value = str(home)
    context, ctx_src = r.get("--context")
    if value is None:
        if not (env.get("KUBERNETES_SERVICE_HOST") and SA_TOKEN_FILE.is_file()):
            raise ConfigError("--kubeconfig", "no kubeconfig given ($KUBECONFIG, ~/.kube/config) "
                              "and not running in a cluster (no service-account token)")
        if context:
            raise ConfigError("--context", "a context needs a kubeconfig; none was found",
                              env=ctx_src)
        return None, None
    for part in value.split(os.pathsep):
        if not Path(part).is_file():
            raise ConfigError("--kubeconfig", f"file {part} does not exist", env=src)
    contexts = _kubeconfig_contexts(value)
    if context and context not in contexts:
        raise ConfigError("--context", f"context {context!r} is not in {value} "
                          f"(have: {', '.join(contexts) or 'none'})", env=ctx_src)
    return value, context


def _int(r: _Resolver, flag: str, default: str, *, minimum: int) -> int:
    text, src = r.get(flag, default)
    assert text is not None
    try:
        value = int(text)
    except ValueError:
        raise ConfigError(flag, f"{text!r} is not an integer", env=src) from None
    if value < minimum:
        raise ConfigError(flag, f"must be at least {minimum}, got {value}", env=src)
    return value


def _duration(r: _Resolver, flag: str, default: str) -> float:
    text, src = r.get(flag, default)
    assert text is not None
    try:
        value = parse_duration(text)
    except ValueError as exc:
        raise ConfigError(flag, str(exc), env=src) from None
    if value <= 0:
        raise ConfigError(flag, "must be greater than 0", env=src)
    return value


def _address(r: _Resolver, flag: str, default: str) -> BindAddress | None:
    text, src = r.get(flag, default)
    assert text is not None
    try:
        return parse_bind_address(text)
    except ValueError as exc:
        raise ConfigError(flag, str(exc), env=src) from None


def _default_lease_namespace(env: Mapping[str, str]) -> str:
    if env.get("POD_NAMESPACE"):
        return env["POD_NAMESPACE"]
    try:
        return SA_NAMESPACE_FILE.read_text(encoding="utf-8").strip() or DEFAULT_NAMESPACE
    except OSError:
        return DEFAULT_NAMESPACE


def _leader_election(r: _Resolver, env: Mapping[str, str]) -> LeaderElectionConfig | None:
    """The election settings, or None without ``--leader-elect``. Every ``--leader-elect-*``
    value is validated either way: a typo must not wait to surface until election is enabled."""
    text, src = r.get("--leader-elect", "false")
    assert text is not None
    enabled = _truthy(text, flag="--leader-elect", env=src)
    name, name_src = r.get("--leader-elect-lease-name", DEFAULT_LEASE_NAME)
    if not name or not _DNS_SUBDOMAIN.match(name) or len(name) > 253:
        raise ConfigError("--leader-elect-lease-name", f"{name!r} is not a DNS subdomain name",
                          env=name_src)
    ns, ns_src = r.get("--leader-elect-lease-namespace", _default_lease_namespace(env))
    if not ns or not _DNS_LABEL.match(ns) or len(ns) > 63:
        raise ConfigError("--leader-elect-lease-namespace", f"{ns!r} is not a namespace name",
                          env=ns_src)
    identity, _ = r.get("--leader-elect-identity",
                        f"{socket.gethostname()}_{uuid.uuid4().hex[:12]}")
    duration = _duration(r, "--leader-elect-lease-duration", "15s")
    deadline = _duration(r, "--leader-elect-renew-deadline", "10s")
    retry = _duration(r, "--leader-elect-retry-period", "2s")
    if duration <= deadline:
        raise ConfigError("--leader-elect-lease-duration", f"must be greater than "
                          f"--leader-elect-renew-deadline ({duration}s <= {deadline}s)")
    if deadline <= JITTER_FACTOR * retry:
        raise ConfigError("--leader-elect-renew-deadline", f"must be greater than {JITTER_FACTOR}"
                          f" x --leader-elect-retry-period ({deadline}s <= {retry}s x 1.2)")
    assert identity is not None
    if not enabled:
        return None
    return LeaderElectionConfig(lease_name=name, lease_namespace=ns, identity=identity,
                                lease_duration=duration, renew_deadline=deadline,
                                retry_period=retry)


def _csv(r: _Resolver, flag: str, default: str, *, allowed: Sequence[str] | None = None,
         pattern: re.Pattern[str] | None = None) -> tuple[str, ...]:
    text, src = r.get(flag, default)
    items = tuple(dict.fromkeys(x.strip() for x in (text or "").split(",") if x.strip()))
    for item in items:
        if allowed is not None and item not in allowed:
            raise ConfigError(flag, f"unknown {item!r} (known: {', '.join(allowed)})", env=src)
        if pattern is not None and (not pattern.match(item) or len(item) > 63):
            raise ConfigError(flag, f"{item!r} is not a namespace name", env=src)
    return items


def parse_config(argv: Sequence[str] | None, env: Mapping[str, str] | None = None, *,
                 known_controllers: Sequence[str] = tuple(BY_NAME)
                 ) -> ManagerConfig:
    """Parse and validate; :class:`ConfigError` names the offending flag."""
    env = os.environ if env is None else env
    args = build_parser().parse_args(argv)
    r = _Resolver(args, env)
    kubeconfig, context = _resolve_kubeconfig(r, env)
    fmt_text, fmt_src = r.get("--log-format", "json")
    try:
        fmt = LogFormat((fmt_text or "").lower())
    except ValueError:
        raise ConfigError("--log-format", f"{fmt_text!r} is not json or text",
                          env=fmt_src) from None
    level, level_src = r.get("--log-level", "info")
    if (level or "").lower() not in LOG_LEVELS:
        raise ConfigError("--log-level", f"{level!r} is not one of {', '.join(LOG_LEVELS)}",
                          env=level_src)
    catalog_text, catalog_src = r.get("--catalog-dir")
    catalog = Path(catalog_text) if catalog_text else None
    if catalog is not None and not catalog.is_dir():
        raise ConfigError("--catalog-dir", f"{catalog} is not a directory", env=catalog_src)
    controllers = _csv(r, "--controllers", ",".join(known_controllers),
                       allowed=known_controllers)
    if not controllers:
        raise ConfigError("--controllers", "at least one controller must run")
    failfast_text, failfast_src = r.get("--infra-scoped-failfast", "true")
    assert failfast_text is not None
    infra_scoped = _truthy(failfast_text, flag="--infra-scoped-failfast", env=failfast_src)
    time_scale, time_origin = _sim_time(args)
    return ManagerConfig(
        kubeconfig=kubeconfig, context=context,
        namespaces=_csv(r, "--namespaces", "", pattern=_DNS_LABEL),
        leader_election=_leader_election(r, env),
        metrics_address=_address(r, "--metrics-bind-address", ":8080"),
        health_address=_address(r, "--health-probe-bind-address", ":8081"),
        max_concurrent_reconciles=_int(r, "--max-concurrent-reconciles", "50", minimum=1),
        log_format=fmt, log_level=(level or "info").lower(), catalog_dir=catalog,
        shutdown_grace_period=_duration(r, "--shutdown-grace-period", "30s"),
        controllers=controllers, infra_scoped_fail_fast=infra_scoped,
        startup_timeout=_duration(r, "--startup-timeout", "60s"),
        time_scale=time_scale, time_origin=time_origin,
    )
