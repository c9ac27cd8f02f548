"""The simulator CLI's options: failure injection flags become the simulator's overrides."""

from __future__ import annotations

import pytest

from cre.testing.cluster.__main__ import FAILURE_MESSAGE, faulty_nodes, parse_args, sim_config
from cre.testing.cluster.config import SimConfig
from cre.testing.cluster.program import Role
from cre.testing.cluster.stubs import Behaviour

KUBECONFIG = ["--kubeconfig", "/nonexistent/kubeconfig"]


def _config(*argv: str) -> SimConfig:
    return sim_config(parse_args([*KUBECONFIG, *argv]))


def test_no_flag_injects_nothing() -> None:
    """Without failure flags the cluster has no overrides and no degraded node."""
    cfg = _config()
    assert cfg.overrides == () and cfg.node_bandwidth == ()


def test_fail_launcher_defaults_fail_every_launcher_with_the_nccl_error() -> None:
    """--fail-launcher alone makes every launcher exit 1 with the NCCL error after 3 s."""
    (ov,) = _config("--fail-launcher").overrides
    assert (ov.behaviour, ov.role, ov.after, ov.times, ov.message) == (
        Behaviour.FAIL, Role.LAUNCHER, 3.0, None, FAILURE_MESSAGE)


def test_fail_launcher_options_are_passed_through() -> None:
    """The delay, count and message of the launcher failure come from their flags."""
    (ov,) = _config("--fail-launcher", "--fail-launcher-after", "7.5", "--fail-launcher-times",
                     "1", "--fail-launcher-message", "boom").overrides
    assert (ov.after, ov.times, ov.message) == (7.5, 1, "boom")


def test_bad_node_factor() -> None:
    """--bad-node NODE[=FACTOR] degrades that node's bandwidth (0.4 by default)."""
    cfg = _config("--bad-node", "n1", "--bad-node", "n2=0.25")
    assert cfg.node_bandwidth == (("n1", 0.4), ("n2", 0.25))


def test_dcgm_fail_node_breaks_that_node_diagnostic() -> None:
    """--dcgm-fail-node NODE makes the DCGM diagnostic on NODE (only) report a failed test."""
    (ov,) = _config("--dcgm-fail-node", "aws-h100-node-2").overrides
    assert (ov.behaviour, ov.node, ov.role) == (Behaviour.DCGM_FAIL, "aws-h100-node-2",
                                                Role.ANY)


@pytest.mark.parametrize(("argv", "message"), [
    (["--fail-launcher-times", "0"], "--fail-launcher-times: must be at least 1"),
    (["--fail-launcher-after", "-1"], "--fail-launcher-after: must be >= 0"),
    (["--bad-node", "n1=fast"], "--bad-node 'n1=fast': FACTOR must be a number"),
    (["--nodes", "0"], "--nodes: must be at least 1"),
])
def test_bad_values_are_refused_naming_the_flag(argv: list[str], message: str,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    """An out-of-range option stops the CLI with a message naming the flag."""
    with pytest.raises(SystemExit) as exc:
        parse_args([*KUBECONFIG, *argv])
    assert exc.value.code == 2
    assert message in capsys.readouterr().err


def test_roles_select_the_simulated_controllers() -> None:
    """--roles runs only the named simulated controllers (all by default), in flow order."""
    from cre.testing.cluster import engine

    assert _config().roles is None
    assert [n for n, _ in engine.controllers(_config())] == list(engine.ROLES)
    cfg = _config("--roles", "kubelet,trainer,jobset,nodelifecycle")
    assert cfg.roles == {"trainer", "jobset", "nodelifecycle", "kubelet"}
    assert [n for n, _ in engine.controllers(cfg)] == [
        "trainer", "jobset", "nodelifecycle", "kubelet"]


def test_unknown_role_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        _config("--roles", "trainer,kube-scheduler")
    assert "--roles: unknown simulated controller(s) ['kube-scheduler']" in capsys.readouterr().err


def test_faulty_nodes_are_the_nodes_the_flags_broke_once_each() -> None:
    """SIGUSR1 repairs the nodes of --dcgm-fail-node, --broken-node and --bad-node, each once."""
    args = parse_args([*KUBECONFIG, "--dcgm-fail-node", "n2", "--broken-node", "n5",
                       "--bad-node", "n2=0.5", "--bad-node", "n3"])
    assert faulty_nodes(args) == ["n2", "n5", "n3"]
    assert faulty_nodes(parse_args(KUBECONFIG)) == []
