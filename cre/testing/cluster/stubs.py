"""Stub programs: what a simulated container prints, how long it runs and how it ends.

Upstream proves CRE-like behaviour with stub images that print NCCL output or fail on purpose.
Here a container's program is chosen from its image and command (``all_reduce_perf`` and
friends -> nccl-tests; ``sshd`` -> an MPI worker that runs until killed; ``dcgmi diag`` -> a
DCGM diagnostic; ``cre-argv-echo`` -> prints the argv it got (``cre.testing.cluster.argv``);
an init container called or running ``wait-for-workers`` -> a wait on the worker pods), and a
scenario can override it per role, pod, container or node (a launcher told to fail, a node
marked bad).

nccl-tests output follows the real text format: the ``# nThread`` banner, ``# Using devices``,
the two-line column header with out-of-place and in-place time/algbw/busbw/#wrong, one row per
size from ``-b`` to ``-e`` by factor ``-f``, ``# Out of bounds values`` and ``# Avg bus
bandwidth``. Bus bandwidth comes from the node profile and is the minimum over the nodes of the
group, so one degraded node lowers the whole group's figures, as a real ring would.

Left out: real NCCL_DEBUG=INFO chatter, per-rank device lines beyond one per node, timing noise
(figures are deterministic), multi-process MPI start-up output.
"""

from __future__ import annotations

import enum
import json
import re
import shlex
from collections.abc import Mapping, Sequence
from typing import Any

import attrs

from cre.testing.cluster.argv import echo_text
from cre.testing.cluster.program import Program, Role, StubContext, TimedLine
from cre.testing.cluster.trainerstub import is_trainer, trainer_program


class Behaviour(enum.StrEnum):
    """What an override makes a container do instead of its normal program."""

    FAIL = "fail"  # exit 1 with an NCCL error line after ``after`` seconds
    HANG = "hang"  # print the banner, then never exit
    OOM = "oom"  # killed by the OOM killer: exit 137, reason OOMKilled
    NO_OUTPUT = "no-output"  # exit 0 without printing a bandwidth table (NoData)
    CRASH = "crash"  # exit 1 immediately with an error line (crash-looping sshd)
    NEVER_READY = "never-ready"  # runs but never passes its readiness probe
    DCGM_FAIL = "dcgm-fail"  # dcgmi diag reports a failed test
    SLOW = "slow"  # bandwidth multiplied by ``factor``
    SUCCEED = "succeed"  # exit 0 at once (e.g. an init container told to pass)
    # nccl-tests with two cycles over the sizes: a healthy table after ``after`` seconds, then
    # ``hold`` seconds later a second table at ``factor`` of the bandwidth (a link that degrades
    # mid-run), exit 0.
    DEGRADE = "degrade"
    # nccl-tests prints its table after ``after`` seconds, then ``hold`` seconds later dies
    # with an NCCL error (exit 1): under restartPolicy OnFailure the container crash-loops.
    CRASH_AFTER_TABLE = "crash-after-table"


@attrs.frozen(slots=True)
class Override:
    """Replace the program of matching containers; ``times`` bounds how many instances it hits."""

    behaviour: Behaviour
    role: Role = Role.ANY
    pod_prefix: str = ""
    container: str = ""
    node: str = ""
    after: float = 5.0
    times: int | None = None
    factor: float = 1.0
    message: str = ""
    id: str = ""
    hold: float = 60.0
    # Hit only a container whose group runs on at least one node of every set: one set of one
    # node is a bad node (every group holding it fails), two sets of a rack each a bad link.
    group_touches: tuple[tuple[str, ...], ...] = ()


NCCL_BINARIES = ("all_reduce_perf", "all_gather_perf", "alltoall_perf", "reduce_scatter_perf",
                 "broadcast_perf", "sendrecv_perf")
_DEFAULT_RUNTIME = 20.0


def command_line(container: Mapping[str, Any]) -> str:
    """The container's command and args as one string (what matching reads)."""
    parts = [str(p) for p in (container.get("command") or [])]
    parts += [str(p) for p in (container.get("args") or [])]
    return " ".join(parts)


def override_matches(ov: Override, ctx: StubContext) -> bool:
    """Whether ``ov`` applies to the container described by ``ctx``."""
    if ov.role is not Role.ANY and ov.role is not ctx.role:
        return False
    if ov.pod_prefix and not ctx.pod_name.startswith(ov.pod_prefix):
        return False
    if ov.container and ov.container != ctx.container.get("name"):
        return False
    if ov.group_touches and not all(set(nodes) & set(ctx.group_nodes)
                                    for nodes in ov.group_touches):
        return False
    return not (ov.node and ov.node != ctx.node_name)


def choose(ctx: StubContext, override: Override | None = None) -> Program:
    """The program for one container instance: the override's if given, else by image+command."""
    cmd = command_line(ctx.container)
    image = str(ctx.container.get("image", ""))
    name = str(ctx.container.get("name", ""))
    factor = override.factor if override and override.behaviour is Behaviour.SLOW else 1.0
    if override and override.behaviour is not Behaviour.SLOW:
        return _override_program(override, ctx, cmd)
    echoed = echo_text(ctx.container) if ctx.role is not Role.INIT else None
    if echoed is not None:
        return Program(name="argv-echo", end_text=echoed, duration=2.0)
    if ctx.role is Role.INIT and ("wait-for-workers" in cmd or "wait-for-workers" in name):
        return wait_for_workers_program(ctx, cmd)
    if "sshd" in cmd:
        return Program(name="sshd", start_text="Server listening on 0.0.0.0 port 2222.\n",
                       duration=None, ready_after=5.0)
    if "dcgmi" in cmd and "diag" in cmd:
        return dcgm_program(passed=True)
    if ctx.role is not Role.INIT and is_trainer(cmd):
        return trainer_program(ctx, cmd)
    for binary in NCCL_BINARIES:
        if binary in cmd or binary in image:
            loopback = "mpirun" not in cmd
            bw = (ctx.node_busbw if loopback else ctx.group_busbw) * factor
            try:
                _nccl_args(cmd)
            except NcclArgError as exc:
                return bad_args_program(binary, exc)
            return Program(name=binary.removesuffix("_perf"),
                           start_text=nccl_banner(ctx, cmd, loopback=loopback),
                           end_text=nccl_table(binary, cmd, busbw=bw,
                                               ranks=1 if loopback else ctx.group_size),
                           duration=_DEFAULT_RUNTIME)
    return Program(name="generic", duration=1.0 if ctx.role is Role.INIT else _DEFAULT_RUNTIME / 2)


def wait_for_workers_program(ctx: StubContext, cmd: str) -> Program:
    """CRE's ``wait-for-workers`` init: exit 0 once every worker answers, else give up.

    The give-up time is the script's ``attempt -lt N`` x ``sleep S`` (the scenario may shorten
    it); the output mirrors the script's lines.
    """
    attempts = _int_after(cmd, r"attempt -lt (\d+)", 240)
    pause = _int_after(cmd, r"sleep (\d+)", 5)
    timeout = ctx.wait_timeout if ctx.wait_timeout is not None else float(attempts * pause)
    peers = " ".join(p.split(" ")[0] for p in ctx.peers)
    hostfile = "".join(f"{p}\n" for p in ctx.peers)
    give_up = (f"wait-for-workers: not answering: {peers}\n"
               f"wait-for-workers: gave up after {attempts} attempts; hostfile:\n{hostfile}")
    return Program(name="wait-for-workers", end_text="wait-for-workers: all workers answer ssh\n",
                   duration=None, wait_for_workers=timeout, exit_code=1, reason="Error",
                   message=give_up)


def _int_after(text: str, pattern: str, default: int) -> int:
    found = re.search(pattern, text)
    return int(found.group(1)) if found else default


def _override_program(ov: Override, ctx: StubContext, cmd: str) -> Program:
    host = ctx.pod_name
    match ov.behaviour:
        case Behaviour.FAIL:
            msg = ov.message or "remote process exited or there was a network error"
            line = f"{host}: Test NCCL failure common.cu:1279 '{msg} / '\n"
            return Program(name="fail", start_text=nccl_banner(ctx, cmd, loopback=False),
                           end_text=line + f" .. {host} pid 1: Test failure common.cu:1157\n",
                           duration=ov.after, exit_code=1, reason="Error")
        case Behaviour.HANG:
            return Program(name="hang", start_text=nccl_banner(ctx, cmd, loopback=False),
                           duration=None, ready_after=None)
        case Behaviour.OOM:
            return Program(name="oom", start_text=nccl_banner(ctx, cmd, loopback=False),
                           duration=ov.after, exit_code=137, reason="OOMKilled")
        case Behaviour.NO_OUTPUT:
            return Program(name="no-output", duration=ov.after)
        case Behaviour.CRASH:
            msg = ov.message or "sshd: fatal: Cannot bind any address."
            return Program(name="crash", end_text=msg + "\n", duration=0.0, exit_code=1,
                           reason="Error", ready_after=None)
        case Behaviour.NEVER_READY:
            return Program(name="never-ready", duration=None, ready_after=None)
        case Behaviour.DCGM_FAIL:
            return dcgm_program(passed=False)
        case Behaviour.SUCCEED:
            return Program(name="succeed", duration=0.0)
        case Behaviour.DEGRADE | Behaviour.CRASH_AFTER_TABLE:
            return _two_part_program(ov, ctx, cmd)
        case Behaviour.SLOW:  # handled by choose(); kept exhaustive for mypy
            return choose(ctx)


def _two_part_program(ov: Override, ctx: StubContext, cmd: str) -> Program:
    binary = next((b for b in NCCL_BINARIES if b in cmd), "all_reduce_perf")
    loopback = "mpirun" not in cmd
    bw = ctx.node_busbw if loopback else ctx.group_busbw
    ranks = 1 if loopback else ctx.group_size
    first = nccl_table(binary, cmd, busbw=bw, ranks=ranks)
    banner = nccl_banner(ctx, cmd, loopback=loopback)
    if ov.behaviour is Behaviour.DEGRADE:
        return Program(name="degrade", start_text=banner, lines=(TimedLine(ov.after, first),),
                       end_text=nccl_table(binary, cmd, busbw=bw * ov.factor, ranks=ranks),
                       duration=ov.after + ov.hold)
    msg = ov.message or "remote process exited or there was a network error"
    host = ctx.pod_name
    return Program(name="crash-after-table", start_text=banner,
                   lines=(TimedLine(ov.after, first),),
                   end_text=f"{host}: Test NCCL failure common.cu:1279 '{msg} / '\n"
                            f" .. {host} pid 1: Test failure common.cu:1157\n",
                   duration=ov.after + ov.hold, exit_code=1, reason="Error")


def _flag_seconds(cmd: str, flag: str, default: float) -> float:
    try:
        words = shlex.split(cmd)
    except ValueError:
        words = cmd.split()
    for i, w in enumerate(words):
        if w == flag and i + 1 < len(words):
            return _seconds(words[i + 1], default)
        if w.startswith(flag + "="):
            return _seconds(w.split("=", 1)[1], default)
    return default


def _seconds(raw: str, default: float) -> float:
    raw = raw.strip().lower()
    try:
        if raw.endswith("m"):
            return float(raw[:-1]) * 60
        return float(raw.removesuffix("s"))
    except ValueError:
        return default


class NcclArgError(ValueError):
    """An nccl-tests flag the real binary would refuse (it prints this and exits non-zero)."""


_SIZE_FLAGS = {"-b": "minbytes", "-e": "maxbytes"}
_NCCL_BAD_ARGS_EXIT = 255  # nccl-tests' main returns -1 on a bad argument


def _size(raw: str, flag: str) -> int:
    """A byte count as nccl-tests' ``parsesize`` reads it: digits with an optional K/M/G."""
    units = {"k": 1 << 10, "m": 1 << 20, "g": 1 << 30}
    text = raw.strip().lower()
    mult = 1
    if text and text[-1] in units:
        text, mult = text[:-1], units[text[-1]]
    if not text.isdigit():
        raise NcclArgError(f"invalid size specified for '{_SIZE_FLAGS[flag]}'")
    return int(text) * mult


def _nccl_args(cmd: str) -> tuple[int, int, int, int]:
    """minBytes, maxBytes, factor and GPUs per process from ``-b -e -f -g`` (nccl-tests flags).

    Raises :class:`NcclArgError` with the real binary's complaint for a value it would refuse.
    """
    words = cmd.split()
    vals = {"-b": "8", "-e": "128M", "-f": "2", "-g": "1"}
    for i, w in enumerate(words[:-1]):
        if w in vals:
            vals[w] = words[i + 1]
    lo, hi = _size(vals["-b"], "-b"), _size(vals["-e"], "-e")
    if not vals["-f"].isdigit():
        raise NcclArgError(f"invalid step factor '{vals['-f']}'")
    if not vals["-g"].isdigit() or int(vals["-g"]) < 1:
        raise NcclArgError(f"invalid number of GPUs specified (-g {vals['-g']})")
    if lo > hi:
        raise NcclArgError(f"invalid sizes for 'minbytes' and 'maxbytes': {lo} > {hi}")
    return max(lo, 1), hi, max(2, int(vals["-f"])), int(vals["-g"])


def _nccl_args_lenient(cmd: str) -> tuple[int, int, int, int]:
    """:func:`_nccl_args`, or the defaults where an override's banner meets bad flags."""
    try:
        return _nccl_args(cmd)
    except NcclArgError:
        return 8, 128 << 20, 2, 1


def bad_args_program(binary: str, error: NcclArgError) -> Program:
    """What nccl-tests does with arguments it cannot parse: one line on stderr, exit non-zero."""
    return Program(name=f"{binary.removesuffix('_perf')}-bad-args", end_text=f"{error}\n",
                   duration=0.0, exit_code=_NCCL_BAD_ARGS_EXIT, reason="Error",
                   message=str(error))


def nccl_banner(ctx: StubContext, cmd: str, *, loopback: bool) -> str:
    lo, hi, factor, ngpus = _nccl_args_lenient(cmd)
    ranks = ctx.gpus_per_node if loopback else ctx.gpus_per_node * ctx.group_size
    lines = [
        f"# nThread 1 nGpus {ngpus} minBytes {lo} maxBytes {hi} step: {factor}(factor) "
        "warmup iters: 5 iters: 20 agg iters: 1 validation: 1 graph: 0",
        "#",
        "# Using devices",
    ]
    product = ctx.gpu_product.replace("-", " ")
    for rank in range(min(ranks, 64)):
        node = ctx.node_name if loopback else f"node{rank // max(1, ctx.gpus_per_node)}"
        dev = rank % max(1, ctx.gpus_per_node)
        lines.append(f"#  Rank {rank:2d} Group  0 Pid {1000 + rank:6d} on {node} device {dev:2d} "
                     f"[0000:{dev:02x}:00] {product}")
    return "\n".join(lines) + "\n#\n"


def bus_factor(binary: str, ranks: int) -> float:
    """nccl-tests' busbw/algbw ratio: 2(n-1)/n for all_reduce, (n-1)/n for gather/alltoall."""
    if binary == "all_reduce_perf":
        return 2 * (ranks - 1) / ranks
    if binary in ("all_gather_perf", "alltoall_perf", "reduce_scatter_perf"):
        return (ranks - 1) / ranks
    return 1.0


def nccl_table(binary: str, cmd: str, *, busbw: float, ranks: int) -> str:
    """The size table and footer for ``binary`` peaking at ``busbw`` GB/s."""
    lo, hi, factor, _ = _nccl_args_lenient(cmd)
    n = max(2, ranks * 8)
    factor_bus = bus_factor(binary, n)
    redop = "sum" if binary in ("all_reduce_perf", "reduce_scatter_perf") else "none"
    head = ("#                                                              out-of-place"
            "                       in-place          \n"
            "#       size         count      type   redop    root     time   algbw   busbw"
            " #wrong     time   algbw   busbw #wrong\n"
            "#        (B)    (elements)                               (us)  (GB/s)  (GB/s)"
            "            (us)  (GB/s)  (GB/s)       \n")
    rows: list[str] = []
    total = 0.0
    size = lo
    while size <= hi:
        bus = busbw * size / (size + (32 << 20))
        alg = bus / factor_bus if factor_bus else bus
        t_us = max(size / (alg * 1e3), 0.0) + 20.0 if alg > 0 else 20.0
        alg = size / (t_us * 1e3)
        bus = alg * factor_bus
        rows.append(f"{size:12d}  {size // 4:12d}     float  {redop:>6}      -1  "
                    f"{_t(t_us)}  {alg:6.2f}  {bus:6.2f}       0  {_t(t_us * 0.99)}  "
                    f"{alg / 0.99:6.2f}  {bus / 0.99:6.2f}       0")
        total += bus
        size *= factor
    avg = total / len(rows) if rows else 0.0
    return (head + "\n".join(rows) + "\n# Out of bounds values : 0 OK\n"
            f"# Avg bus bandwidth    : {avg:.3f} \n#\n")


def _t(us: float) -> str:
    return f"{us:7.1f}" if us < 10000 else f"{us:7.0f}"


DCGM_TESTS = (("Deployment", ("software",)), ("Integration", ("pcie",)),
              ("Hardware", ("memory", "diagnostic")), ("Stress", ("targeted_stress",)))


def dcgm_program(*, passed: bool) -> Program:
    """``dcgmi diag --json`` output: every test passes, or the memory test fails."""
    categories: list[dict[str, Any]] = []
    for cat, tests in DCGM_TESTS:
        entries: list[dict[str, Any]] = []
        for t in tests:
            ok = passed or t != "memory"
            result: dict[str, Any] = {"entity_group": "GPU", "entity_group_id": 1,
                                      "entity_id": 0, "status": "Pass" if ok else "Fail"}
            if not ok:
                result["warnings"] = [{"error_category": 4, "error_id": 60, "error_severity": 2,
                                       "warning": "A DBE occurred on GPU 0 (simulated)"}]
            entries.append({"name": t, "results": [result],
                            "test_summary": {"status": "Pass" if ok else "Fail"}})
        categories.append({"category": cat, "tests": entries})
    body = {"DCGM Diagnostic": {"test_categories": categories},
            "version": "3.3.7", "Driver Version Detected": "570.124.06"}
    return Program(name="dcgm-pass" if passed else "dcgm-fail",
                   end_text=json.dumps(body, indent=4) + "\n", duration=30.0,
                   exit_code=0 if passed else 226, reason="Completed" if passed else "Error")


def role_of(pod_labels: Mapping[str, str], *, is_init: bool, launcher_label: str,
            replicated_job_label: str) -> Role:
    """Launcher, worker or init, from the pod's labels (CRE's, else JobSet's)."""
    if is_init:
        return Role.INIT
    if launcher_label in pod_labels or pod_labels.get(replicated_job_label) == "launcher":
        return Role.LAUNCHER
    return Role.WORKER


def parse_overrides(raw: Sequence[Mapping[str, Any]], *, where: str) -> tuple[Override, ...]:
    """Overrides from scenario YAML; errors name the entry and field."""
    out: list[Override] = []
    for i, item in enumerate(raw):
        path = f"{where}[{i}]"
        try:
            behaviour = Behaviour(item["behaviour"])
        except KeyError:
            raise ValueError(f"{path}.behaviour: required, one of "
                             f"{[b.value for b in Behaviour]}") from None
        except ValueError:
            raise ValueError(f"{path}.behaviour: {item['behaviour']!r} is not one of "
                             f"{[b.value for b in Behaviour]}") from None
        try:
            role = Role(item.get("role", "any"))
        except ValueError:
            raise ValueError(f"{path}.role: {item.get('role')!r} is not one of "
                             f"{[r.value for r in Role]}") from None
        unknown = set(item) - {"behaviour", "role", "podPrefix", "container", "node", "after",
                               "times", "factor", "message", "hold", "groupTouches"}
        if unknown:
            raise ValueError(f"{path}: unknown fields {sorted(unknown)}")
        out.append(Override(behaviour=behaviour, role=role,
                            pod_prefix=str(item.get("podPrefix", "")),
                            container=str(item.get("container", "")),
                            node=str(item.get("node", "")), after=float(item.get("after", 5.0)),
                            times=item.get("times"), factor=float(item.get("factor", 1.0)),
                            message=str(item.get("message", "")), id=f"{where}-{i}",
                            hold=float(item.get("hold", 60.0)),
                            group_touches=tuple(tuple(str(n) for n in nodes)
                                                for nodes in item.get("groupTouches") or ())))
    return tuple(out)
