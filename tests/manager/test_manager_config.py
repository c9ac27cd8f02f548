"""Flags, environment and defaults of cre-manager, and the errors that name the bad flag."""

from __future__ import annotations

from pathlib import Path

import pytest

from cre.controller.registry import CONTROLLERS
from cre_manager.config import BindAddress, parse_bind_address, parse_config, parse_duration
from cre_manager.errors import ConfigError, ExitCode
from cre_manager.logs import LogFormat


def _env(kubeconfig: Path, **extra: str) -> dict[str, str]:
    return {"KUBECONFIG": str(kubeconfig), **extra}


def test_defaults(kubeconfig: Path) -> None:
    """Without flags the manager watches all namespaces, serves :8080/:8081, logs JSON and
    runs every controller of the registry."""
    cfg = parse_config([], _env(kubeconfig))
    assert cfg.kubeconfig == str(kubeconfig)
    assert cfg.namespaces == ()
    assert cfg.leader_election is None
    assert cfg.metrics_address == BindAddress(None, 8080)
    assert cfg.health_address == BindAddress(None, 8081)
    assert cfg.max_concurrent_reconciles == 50
    assert cfg.log_format is LogFormat.JSON
    assert cfg.log_level == "info"
    assert cfg.shutdown_grace_period == 30.0
    assert cfg.controllers == tuple(e.name for e in CONTROLLERS)  # every registered one
    assert cfg.infra_scoped_fail_fast is True


def test_infra_scoped_failfast_switch(kubeconfig: Path) -> None:
    """--infra-scoped-failfast=false (or CRE_INFRA_SCOPED_FAILFAST=false) is the rollback
    lever; the flag wins over the environment."""
    assert parse_config(["--infra-scoped-failfast=false"], _env(kubeconfig)) \
        .infra_scoped_fail_fast is False
    env = _env(kubeconfig, CRE_INFRA_SCOPED_FAILFAST="false")
    assert parse_config([], env).infra_scoped_fail_fast is False
    assert parse_config(["--infra-scoped-failfast"], env).infra_scoped_fail_fast is True


def test_flag_wins_over_environment(kubeconfig: Path) -> None:
    """A flag overrides the CRE_* variable, which overrides the default."""
    env = _env(kubeconfig, CRE_MAX_CONCURRENT_RECONCILES="3", CRE_NAMESPACES="a,b",
               CRE_LOG_FORMAT="text")
    cfg = parse_config(["--max-concurrent-reconciles", "7"], env)
    assert cfg.max_concurrent_reconciles == 7
    assert cfg.namespaces == ("a", "b")
    assert cfg.log_format is LogFormat.TEXT


def test_cre_kubeconfig_wins_over_kubeconfig(kubeconfig: Path, tmp_path: Path) -> None:
    """$CRE_KUBECONFIG is preferred to $KUBECONFIG."""
    other = tmp_path / "other"
    other.write_text(kubeconfig.read_text())
    cfg = parse_config([], _env(kubeconfig, CRE_KUBECONFIG=str(other)))
    assert cfg.kubeconfig == str(other)


def test_leader_election_defaults(kubeconfig: Path) -> None:
    """--leader-elect uses client-go's 15 s / 10 s / 2 s and the pod's namespace."""
    cfg = parse_config(["--leader-elect"], _env(kubeconfig, POD_NAMESPACE="ops"))
    le = cfg.leader_election
    assert le is not None
    assert (le.lease_duration, le.renew_deadline, le.retry_period) == (15.0, 10.0, 2.0)
    assert le.lease_namespace == "ops"
    assert le.lease_name == "cre-manager.cre.dev"
    assert le.identity


def test_leader_election_from_environment(kubeconfig: Path) -> None:
    """CRE_LEADER_ELECT and the timing variables accept duration strings."""
    env = _env(kubeconfig, CRE_LEADER_ELECT="true", CRE_LEADER_ELECT_LEASE_DURATION="1500ms",
               CRE_LEADER_ELECT_RENEW_DEADLINE="1s", CRE_LEADER_ELECT_RETRY_PERIOD="0.2",
               CRE_LEADER_ELECT_IDENTITY="me")
    le = parse_config([], env).leader_election
    assert le is not None
    assert (le.lease_duration, le.renew_deadline, le.retry_period, le.identity) == (
        1.5, 1.0, 0.2, "me")


@pytest.mark.parametrize(("argv", "env", "flag", "words"), [
    (["--kubeconfig", "/does/not/exist"], {}, "--kubeconfig", "does not exist"),
    (["--context", "nope"], None, "--context", "'nope' is not in"),
    (["--max-concurrent-reconciles", "0"], None, "--max-concurrent-reconciles", "at least 1"),
    (["--max-concurrent-reconciles", "x"], None, "--max-concurrent-reconciles", "not an integer"),
    ([], {"CRE_MAX_CONCURRENT_RECONCILES": "-1"}, "--max-concurrent-reconciles",
     "$CRE_MAX_CONCURRENT_RECONCILES"),
    (["--metrics-bind-address", "8080"], None, "--metrics-bind-address", "not host:port"),
    (["--health-probe-bind-address", ":99999"], None, "--health-probe-bind-address",
     "out of range"),
    (["--log-format", "xml"], None, "--log-format", "not json or text"),
    (["--log-level", "loud"], None, "--log-level", "not one of"),
    (["--namespaces", "Bad_NS"], None, "--namespaces", "not a namespace name"),
    (["--controllers", "workflows"], None, "--controllers", "unknown 'workflows'"),
    ([], {"CRE_INFRA_SCOPED_FAILFAST": "sometimes"}, "--infra-scoped-failfast",
     "not a boolean"),
    (["--shutdown-grace-period", "soon"], None, "--shutdown-grace-period", "not a duration"),
    (["--catalog-dir", "/does/not/exist"], None, "--catalog-dir", "not a directory"),
    (["--leader-elect", "--leader-elect-renew-deadline", "20s"], None,
     "--leader-elect-lease-duration", "greater than --leader-elect-renew-deadline"),
    (["--leader-elect", "--leader-elect-retry-period", "9s"], None,
     "--leader-elect-renew-deadline", "1.2 x --leader-elect-retry-period"),
    (["--leader-elect", "--leader-elect-lease-namespace", "Not OK"], None,
     "--leader-elect-lease-namespace", "not a namespace name"),
    ([], {"CRE_LEADER_ELECT": "maybe"}, "--leader-elect", "not a boolean"),
    # Validated even while election is off, so the typo shows before it is switched on.
    (["--leader-elect-retry-period", "abc"], None, "--leader-elect-retry-period",
     "not a duration"),
    ([], {"CRE_LEADER_ELECT_LEASE_NAME": "Bad Name"}, "--leader-elect-lease-name",
     "not a DNS subdomain name"),
])
def test_bad_values_name_the_flag(kubeconfig: Path, argv: list[str], env: dict[str, str] | None,
                                  flag: str, words: str) -> None:
    """Each invalid value raises a BAD_CONFIG error whose message names the flag."""
    full_env = _env(kubeconfig, **(env or {}))
    if argv[:1] == ["--kubeconfig"]:
        full_env = {}
    with pytest.raises(ConfigError) as info:
        parse_config(argv, full_env)
    assert info.value.code is ExitCode.BAD_CONFIG
    assert info.value.flag == flag
    assert flag in info.value.message
    assert words in info.value.message


def test_no_kubeconfig_outside_a_cluster(tmp_path: Path) -> None:
    """With no kubeconfig anywhere and no service account, the error names --kubeconfig."""
    with pytest.raises(ConfigError) as info:
        parse_config([], {"HOME": str(tmp_path)})
    assert info.value.flag == "--kubeconfig"
    assert "not running in a cluster" in info.value.message


@pytest.mark.parametrize(("text", "seconds"), [
    ("15s", 15.0), ("500ms", 0.5), ("1m", 60.0), ("2", 2.0), ("1.5h", 5400.0)])
def test_durations(text: str, seconds: float) -> None:
    """Durations accept ms/s/m/h suffixes and bare seconds."""
    assert parse_duration(text) == seconds


@pytest.mark.parametrize(("text", "address"), [
    (":8080", BindAddress(None, 8080)), ("127.0.0.1:0", BindAddress("127.0.0.1", 0)),
    ("[::1]:9090", BindAddress("::1", 9090)), ("0", None), ("", None)])
def test_bind_addresses(text: str, address: BindAddress | None) -> None:
    """Bind addresses follow controller-runtime: host:port, and "0" disables the server."""
    assert parse_bind_address(text) == address


def test_in_cluster_fallback(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """With no kubeconfig but a service-account token and KUBERNETES_SERVICE_HOST, the
    manager uses the in-cluster config, and the lease defaults to the pod's namespace file."""
    token = tmp_path / "token"
    token.write_text("t")
    ns_file = tmp_path / "namespace"
    ns_file.write_text("cre-system-2\n")
    monkeypatch.setattr("cre_manager.config.SA_TOKEN_FILE", token)
    monkeypatch.setattr("cre_manager.config.SA_NAMESPACE_FILE", ns_file)
    cfg = parse_config(["--leader-elect"], {"HOME": str(tmp_path),
                                            "KUBERNETES_SERVICE_HOST": "10.0.0.1"})
    assert cfg.kubeconfig is None and cfg.context is None
    assert cfg.leader_election is not None
    assert cfg.leader_election.lease_namespace == "cre-system-2"


def test_context_needs_a_kubeconfig(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """--context with the in-cluster config is an error naming --context."""
    token = tmp_path / "token"
    token.write_text("t")
    monkeypatch.setattr("cre_manager.config.SA_TOKEN_FILE", token)
    with pytest.raises(ConfigError) as info:
        parse_config(["--context", "x"], {"HOME": str(tmp_path),
                                          "KUBERNETES_SERVICE_HOST": "10.0.0.1"})
    assert info.value.flag == "--context"
