"""Stub programs, platform profiles and the simulated clock."""

from __future__ import annotations

import json
import re

import pytest

from cre.testing.cluster.clock import SimClock, fmt_time, parse_time
from cre.testing.cluster.profiles import PROFILES, get_profile, node_manifest
from cre.testing.cluster.program import Role, StubContext
from cre.testing.cluster.stubs import Behaviour, Override, choose, nccl_table, parse_overrides

NCCL_CMD: dict[str, object] = {
    "name": "node", "image": "nccl-tests:1", "command": ["timeout", "3600", "mpirun"],
    "args": ["-N", "8", "/opt/nccl-tests/build/all_reduce_perf", "-b", "8", "-e", "1G", "-f",
             "2"]}


def ctx(container: dict[str, object] = NCCL_CMD, *, role: Role = Role.LAUNCHER,
        group_busbw: float = 480.0) -> StubContext:
    return StubContext(pod_name="tj-launcher-0-0-abcde", container=container, role=role,
                       node_name="n0", node_busbw=480.0, group_busbw=group_busbw, group_size=2,
                       gpus_per_node=8, gpu_product="NVIDIA-H100-80GB-HBM3")


def avg_busbw(text: str) -> float:
    found = re.search(r"# Avg bus bandwidth\s*: ([0-9.]+)", text)
    assert found, text
    return float(found.group(1))


def test_sim_clock_scales_durations() -> None:
    """Simulated time runs `scale` times faster than the injected wall clock."""
    wall = [100.0]
    clock = SimClock(scale=50, start=1000.0, wall=lambda: wall[0])
    wall[0] += 0.2
    assert clock.now() == pytest.approx(1010.0)
    assert clock.wall_delay(10.0) == pytest.approx(0.2)
    with pytest.raises(ValueError, match="scale"):
        SimClock(scale=0)


def test_time_format_round_trips_at_second_precision() -> None:
    """Timestamps are written like metav1.Time and parse back."""
    assert fmt_time(1767225600.7) == "2026-01-01T00:00:00Z"
    assert parse_time("2026-01-01T00:00:00Z") == 1767225600.0
    assert parse_time("nonsense") is None


def test_nccl_output_has_the_real_layout() -> None:
    """The all_reduce stub prints the banner, both column headers, one row per size, the footer."""
    prog = choose(ctx())
    assert prog.name == "all_reduce" and prog.exit_code == 0
    text = prog.start_text + prog.end_text
    assert text.startswith("# nThread 1 nGpus 1 minBytes 8 maxBytes 1073741824 step: 2(factor)")
    header = "#       size         count      type   redop    root     time   algbw   busbw #wrong"
    assert header in text
    rows = [line for line in text.splitlines() if line and not line.startswith("#")]
    assert len(rows) == 28  # 8 B .. 1 GiB by factor 2
    assert rows[-1].split()[:5] == ["1073741824", "268435456", "float", "sum", "-1"]
    assert "# Out of bounds values : 0 OK" in text


def test_degraded_group_lowers_bandwidth() -> None:
    """The group's figures follow its slowest node's bandwidth."""
    healthy = avg_busbw(choose(ctx()).end_text)
    degraded = avg_busbw(choose(ctx(group_busbw=480.0 * 0.4)).end_text)
    assert degraded < healthy * 0.5


def test_bus_factor_differs_by_collective() -> None:
    """all_gather reports about half all_reduce's bus bandwidth ratio for the same peak."""
    ar = nccl_table("all_reduce_perf", "-b 1G -e 1G", busbw=400.0, ranks=2)
    ag = nccl_table("all_gather_perf", "-b 1G -e 1G", busbw=400.0, ranks=2)
    row_ar = next(line for line in ar.splitlines() if not line.startswith("#")).split()
    row_ag = next(line for line in ag.splitlines() if not line.startswith("#")).split()
    assert row_ag[3] == "none" and row_ar[3] == "sum"
    assert float(row_ar[7]) / float(row_ar[6]) == pytest.approx(2 * 15 / 16, rel=0.02)
    assert float(row_ag[7]) / float(row_ag[6]) == pytest.approx(15 / 16, rel=0.02)


def test_failure_override_prints_an_nccl_error_and_exits_1() -> None:
    """A 'fail' override exits 1 after N s with an NCCL failure line."""
    prog = choose(ctx(), Override(behaviour=Behaviour.FAIL, after=7, message="boom"))
    assert (prog.exit_code, prog.reason, prog.duration) == (1, "Error", 7)
    assert "Test NCCL failure common.cu:1279 'boom / '" in prog.end_text


@pytest.mark.parametrize(("behaviour", "expect"), [
    (Behaviour.OOM, (137, "OOMKilled")), (Behaviour.HANG, (0, "Completed")),
    (Behaviour.NO_OUTPUT, (0, "Completed"))])
def test_failure_modes(behaviour: Behaviour, expect: tuple[int, str]) -> None:
    """OOM exits 137 OOMKilled; a hang never ends; no-output prints no table."""
    prog = choose(ctx(), Override(behaviour=behaviour))
    assert (prog.exit_code, prog.reason) == expect
    if behaviour is Behaviour.HANG:
        assert prog.duration is None
    if behaviour is Behaviour.NO_OUTPUT:
        assert "Avg bus bandwidth" not in prog.start_text + prog.end_text


def test_sshd_dcgm_and_wait_for_workers_are_recognised() -> None:
    """Programs are chosen from the command: sshd runs forever, dcgmi prints JSON."""
    sshd = choose(ctx({"name": "node", "command": ["sh", "-c", "exec /usr/sbin/sshd -De"]},
                      role=Role.WORKER))
    assert sshd.name == "sshd" and sshd.duration is None and sshd.ready_after == 5.0
    dcgm = choose(ctx({"name": "node", "command": ["dcgmi", "diag", "-r", "3", "--json"]}))
    body = json.loads(dcgm.end_text)
    statuses = [r["status"] for c in body["DCGM Diagnostic"]["test_categories"]
                for t in c["tests"] for r in t["results"]]
    assert set(statuses) == {"Pass"} and dcgm.exit_code == 0
    bad = choose(ctx({"name": "node", "command": ["dcgmi", "diag"]}),
                 Override(behaviour=Behaviour.DCGM_FAIL))
    assert '"status": "Fail"' in bad.end_text and bad.exit_code != 0
    wait = choose(ctx({"name": "wait-for-workers", "command": ["sh", "-c",
                       "while [ $attempt -lt 12 ]; do sleep 5; done"]}, role=Role.INIT))
    assert wait.wait_for_workers == 60.0 and "gave up after 12 attempts" in wait.message


def test_override_parsing_names_the_bad_field() -> None:
    """Scenario overrides with a bad behaviour or unknown field fail with the field path."""
    with pytest.raises(ValueError, match=r"x\[0\]\.behaviour"):
        parse_overrides([{"behaviour": "explode"}], where="x")
    with pytest.raises(ValueError, match=r"x\[0\]: unknown fields \['colour'\]"):
        parse_overrides([{"behaviour": "fail", "colour": 1}], where="x")
    (ov,) = parse_overrides([{"behaviour": "fail", "role": "launcher", "times": 2}], where="x")
    assert ov.role is Role.LAUNCHER and ov.times == 2 and ov.id == "x-0"


@pytest.mark.parametrize("name", ["aws-h100", "aws-gb200", "gcp-h100", "onprem-gb200",
                                  "oci-gb300"])
def test_profiles_build_gpu_nodes(name: str) -> None:
    """Each profile yields a node with providerID, GPU labels and allocatable GPUs/NICs."""
    prof = get_profile(name)
    node = node_manifest(prof, 3)
    labels = node["metadata"]["labels"]
    assert labels["nvidia.com/gpu.present"] == "true"
    assert labels["nvidia.com/gpu.product"] == prof.gpu_product
    assert node["spec"]["providerID"]
    assert node["status"]["allocatable"]["nvidia.com/gpu"] == str(prof.gpus)
    assert node["status"]["allocatable"][prof.nic_resource] == str(prof.nics)
    assert ("nvidia.com/gpu.clique" in labels) == bool(prof.clique_size)
    assert labels["kubernetes.io/arch"] == ("arm64" if prof.clique_size else "amd64")


def test_unknown_profile_lists_known_ones() -> None:
    """A typo in a profile name says which names exist."""
    with pytest.raises(ValueError, match="aws-h100"):
        get_profile("aws-h200")
    assert len(PROFILES) >= 5


@pytest.mark.parametrize(("name", "provider_id", "zone"), [
    ("aws-h100", "aws:///us-east-1a/i-00000000000000003", "us-east-1a"),
    ("gcp-h100", "gce://cre-sim/us-central1-a/gcp-h100-3", "us-central1-a"),
    ("oci-gb300", "oci://ocid1.instance.oc1.iad.sim00000003", "US-ASHBURN-AD-1"),
    ("onprem-gb200", "onprem://onprem-gb200-3", None),
])
def test_profiles_use_each_platforms_provider_id_and_zone(name: str, provider_id: str,
                                                          zone: str | None) -> None:
    """providerID and topology zone follow the platform's own scheme; on-prem has no zone."""
    node = node_manifest(get_profile(name), 3)
    assert node["spec"]["providerID"] == provider_id
    assert node["metadata"]["labels"].get("topology.kubernetes.io/zone") == zone


@pytest.mark.parametrize(("flags", "complaint"), [
    (["-e", "infG"], "invalid size specified for 'maxbytes'"),
    (["-b", "lots"], "invalid size specified for 'minbytes'"),
    (["-b", "1G", "-e", "8"], "invalid sizes for 'minbytes' and 'maxbytes': 1073741824 > 8"),
    (["-f", "x"], "invalid step factor 'x'"),
])
def test_unparseable_nccl_flags_fail_the_container_not_the_cluster(
        flags: list[str], complaint: str) -> None:
    """Flags nccl-tests refuses: the stub prints the complaint and exits non-zero (no raise)."""
    container = {**NCCL_CMD, "args": ["/opt/nccl-tests/build/all_reduce_perf", *flags]}
    prog = choose(ctx(container, role=Role.LAUNCHER))
    assert prog.exit_code != 0 and prog.reason == "Error" and prog.duration == 0.0
    assert prog.end_text == complaint + "\n"
    # an override's banner on the same command line still renders
    fail = choose(ctx(container), Override(behaviour=Behaviour.FAIL, after=1.0))
    assert fail.start_text.startswith("# nThread 1 nGpus 1 minBytes 8 ")


def test_zero_min_bytes_still_ends_the_size_table() -> None:
    """``-b 0`` must not loop forever doubling zero: the table starts at 1 byte."""
    container = {**NCCL_CMD, "args": ["all_reduce_perf", "-b", "0", "-e", "64"]}
    rows = [r for r in choose(ctx(container)).end_text.splitlines() if r and r[0] != "#"]
    assert [int(r.split()[0]) for r in rows] == [1, 2, 4, 8, 16, 32, 64]
