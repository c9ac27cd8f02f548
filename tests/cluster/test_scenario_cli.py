"""Scenario DSL validation and the command-line entry point."""

from __future__ import annotations

import anyio
import pytest

from cre.testing.cluster.__main__ import parse_args
from cre.testing.cluster.scenario import (
    ManagerSlot,
    ScenarioError,
    _satisfied,
    build_config,
    resource_for,
)


def test_cluster_section_builds_the_config() -> None:
    """Profile, timing knobs, overrides and bad nodes land in SimConfig."""
    cfg = build_config({"profile": "gcp-h100", "config": {"waitForWorkersTimeout": 30},
                        "overrides": [{"behaviour": "fail", "role": "launcher"}],
                        "badNodes": {"gcp-h100-node-1": 0.5}})
    assert cfg.profile.name == "gcp-h100" and cfg.wait_for_workers_timeout == 30
    assert cfg.overrides[0].id == "cluster.overrides-0"
    assert cfg.node_factor("gcp-h100-node-1") == 0.5 and cfg.node_factor("x") == 1.0


def test_bad_scenario_input_names_the_field() -> None:
    """Unknown config keys and kinds are rejected with their location."""
    with pytest.raises(ScenarioError, match=r"cluster.config: unknown fields \['speed'\]"):
        build_config({"config": {"speed": 2}})
    with pytest.raises(ScenarioError, match=r"timeline\[0\]\.kind: unknown kind 'Deployment'"):
        resource_for({"kind": "Deployment"}, where="timeline[0]")
    assert resource_for({"kind": "Job", "apiVersion": "cre.dev/v1alpha1"},
                        where="x").group == "cre.dev"


def test_wait_predicates() -> None:
    """Waits match conditions (status defaults to True), phases, counts and absence."""
    done = {"status": {"phase": "Succeeded", "conditions": [
        {"type": "Complete", "status": "True", "reason": "AllJobsCompleted"}]}}
    assert _satisfied([done], {"condition": {"type": "Complete"}})
    assert not _satisfied([done], {"condition": {"type": "Complete", "reason": "Other"}})
    assert _satisfied([done, done], {"phase": "Succeeded", "count": 2})
    assert _satisfied([], {"absent": True}) and not _satisfied([done], {"absent": True})
    assert not _satisfied([], {"condition": {"type": "Complete"}})
    tainted = {"spec": {"taints": [{"key": "node.kubernetes.io/not-ready"}]}}
    assert _satisfied([tainted], {"field": "spec.taints.0.key",
                                  "equals": "node.kubernetes.io/not-ready"})
    assert not _satisfied([tainted], {"field": "spec.taints.1.key", "equals": "x"})


def test_cli_arguments() -> None:
    """The CLI needs a kubeconfig and rejects a non-positive scale or node count."""
    args = parse_args(["--kubeconfig", "kc", "--profile", "oci-gb300", "--nodes", "8",
                       "--time-scale", "10"])
    assert (args.profile, args.nodes, args.time_scale) == ("oci-gb300", 8, 10.0)
    with pytest.raises(SystemExit):
        parse_args(["--kubeconfig", "kc", "--time-scale", "0"])
    with pytest.raises(SystemExit):
        parse_args(["--kubeconfig", "kc", "--profile", "nope"])


def test_unavailable_image_flags() -> None:
    """--unavailable-image REF[@NODE,...] lists the refs and their nodes (none: every node);
    an empty ref or node is refused."""
    from cre.testing.cluster.__main__ import unavailable_images

    args = parse_args(["--kubeconfig", "kc", "--unavailable-image", "nvcr.io",
                       "--unavailable-image", "ghcr.io/x/y:1@n0,n1"])
    assert unavailable_images(args) == [("nvcr.io", ()), ("ghcr.io/x/y:1", ("n0", "n1"))]
    for bad in ("@n0", "nvcr.io@n0,,n1"):
        with pytest.raises(SystemExit):
            parse_args(["--kubeconfig", "kc", "--unavailable-image", bad])


@pytest.mark.anyio
async def test_fault_verbs_refuse_malformed_arguments() -> None:
    """imagePull needs an image and a boolean available (nodes a list of names); refuseCreate
    needs a resource and a code (or remove), one of 400/403/409/422, and an in-process
    emulator; each error names the timeline entry."""
    from typing import Any

    from cre.testing.apiserver.faults import Faults
    from cre.testing.cluster.scenario import ScenarioRun

    class _Emu:
        faults = Faults()

    class _Cluster:
        calls: list[tuple[Any, ...]] = []

        def set_image_pull(self, image: str, *, available: bool, nodes: Any,
                           message: str) -> None:
            self.calls.append((image, available, nodes, message))

    cluster = _Cluster()
    run = ScenarioRun(client=None, cluster=cluster, emu=_Emu(), namespace="d")  # type: ignore[arg-type]
    for bad in ({"image": "x"}, {"available": False}, {"image": "x", "available": "no"},
                {"image": "x", "available": False, "nodes": "n0"}):
        with pytest.raises(ScenarioError, match=r"timeline\[3\]"):
            await run.step({"imagePull": bad}, where="timeline[3]")
    await run.step({"imagePull": {"image": "nvcr.io", "available": False, "nodes": ["n0"]}},
                   where="t")
    assert cluster.calls == [("nvcr.io", False, ["n0"], "")]
    with pytest.raises(ScenarioError, match=r"timeline\[4\]: refuseCreate needs"):
        await run.step({"refuseCreate": {"code": 403}}, where="timeline[4]")
    with pytest.raises(ScenarioError, match=r"timeline\[5\]: refuseCreate\.code must be one of"):
        await run.step({"refuseCreate": {"resource": "pods", "code": 500}}, where="timeline[5]")
    await run.step({"refuseCreate": {"resource": "pods", "code": 422}}, where="t")
    assert [r.code for r in _Emu.faults.refusals] == [422]
    run.emu = None
    with pytest.raises(ScenarioError, match="needs an in-process emulator"):
        await run.step({"refuseCreate": {"resource": "pods", "code": 422}}, where="t")


def test_a_manager_that_is_not_running_cannot_be_stopped() -> None:
    """stopControllers before the controllers run (or twice) is a scenario error naming the
    step, not a silent no-op."""
    async def stop() -> None:
        async with anyio.create_task_group() as tg:
            slot = ManagerSlot(tg=tg, names=["job"], cluster=None,  # type: ignore[arg-type]
                               namespace="default", args={})
        await slot.stop(where="timeline[3]")

    with pytest.raises(ScenarioError, match=r"timeline\[3\]: the controllers are not running"):
        anyio.run(stop)
