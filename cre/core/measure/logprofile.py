"""LogProfiles: the shipped ones, and checking a profile's regexes before a measurement uses it.

A LogProfile (cluster-scoped) tells a measurement which pod and container to read and which
regex finds a result line. CRE ships two, installed with the CRDs
(``deploy/logprofiles``, ``kubectl apply -k deploy/default``) and by the demo:

* ``nccl-bandwidth``: multi-node nccl-tests, read from the MPI ``launcher`` (rank 0 prints the
  table);
* ``nccl-loopback``: single-node nccl-tests, read from each ``node`` pod (``workerStrategy:
  Multi``: one result per node, so a threshold miss blames only the node that missed).

Both use :data:`cre.core.measure.ncclparse.NCCL_ROW_REGEX` (out-of-place columns). The YAML under
``deploy/logprofiles`` is these models serialised; a test keeps the two identical.

A profile written by a user can carry a regex that does not compile, lacks a named group the
parser needs, or does not match its own ``example``. The CRD schema cannot say whether a string
is a regex (Kubernetes CEL has no such function), so the check is done where the profile is
used: :func:`compile_profile` returns the compiled pattern or a :class:`ProfileError` whose
message names the profile and the key (``spec.patterns.bandwidthResult.regex``), which the
measurement puts on its ``Measuring`` condition (reason ``LogProfileInvalid``, retried: fixing
the profile heals the measurement).
"""

from __future__ import annotations

import re
from typing import Final

import attrs

from cre.api.measurement import (
    LogPattern,
    LogPatterns,
    LogProfile,
    LogProfileSpec,
    TimestampSpec,
    WorkerStrategy,
    WorkerStrategyType,
)
from cre.api.meta import ObjectMeta
from cre.core.measure.ncclparse import NCCL_ROW_REGEX, PatternError, compile_row_pattern

NCCL_BANDWIDTH: Final = "nccl-bandwidth"
NCCL_LOOPBACK: Final = "nccl-loopback"
_EXAMPLE: Final = ("     1048576        262144     float     sum      -1    61.20   17.13   32.12"
                   "      0    60.10   17.45   32.71      0")
_KEY: Final = "spec.patterns.bandwidthResult"


def _profile(name: str, replicated_job: str, description: str, *,
             strategy: WorkerStrategyType = WorkerStrategyType.SINGLE) -> LogProfile:
    return LogProfile(
        metadata=ObjectMeta(name=name, labels={"app.kubernetes.io/name": "cre"},
                            annotations={"cre.dev/description": description}),
        spec=LogProfileSpec(
            timestamp=TimestampSpec(layout="2006-01-02T15:04:05.999999999Z"),
            worker_strategy=WorkerStrategy(type=strategy,
                                           replicated_job_name=replicated_job),
            patterns=LogPatterns(bandwidth_result=LogPattern(regex=NCCL_ROW_REGEX,
                                                             example=_EXAMPLE))))


def shipped_profiles() -> tuple[LogProfile, ...]:
    """The LogProfiles CRE installs with its CRDs."""
    return (
        _profile(NCCL_BANDWIDTH, "launcher",
                 "nccl-tests across nodes: the MPI launcher's log, out-of-place columns"),
        _profile(NCCL_LOOPBACK, "node",
                 "nccl-tests on one node: each node pod's log, out-of-place columns",
                 strategy=WorkerStrategyType.MULTI),
    )


class ProfileError(ValueError):
    """A LogProfile a measurement cannot use; the message names the profile and the key."""


@attrs.frozen(kw_only=True)
class CompiledProfile:
    """A checked profile: the row pattern and where to read."""

    name: str
    resource_version: str
    pattern: re.Pattern[str]
    replicated_job: str
    container: str | None
    # ``workerStrategy: Multi``: the final read covers every pod of the replicated job and the
    # measurement keeps one result per node (a loopback test runs once per node).
    multi: bool = False


def compile_profile(profile: LogProfile) -> CompiledProfile:
    """``profile`` checked and compiled for bandwidth parsing; :class:`ProfileError` if not."""
    name = profile.metadata.name or ""
    pattern_spec = profile.spec.patterns.bandwidth_result
    if pattern_spec is None:
        raise ProfileError(f"LogProfile {name}: {_KEY} is not set (a bandwidth measurement "
                           "needs it)")
    try:
        pattern = compile_row_pattern(pattern_spec.regex)
    except PatternError as exc:
        raise ProfileError(f"LogProfile {name}: {_KEY}.regex {exc}") from None
    if pattern_spec.example and pattern.match(pattern_spec.example) is None:
        raise ProfileError(f"LogProfile {name}: {_KEY}.regex does not match its own example "
                           f"{pattern_spec.example!r}")
    return CompiledProfile(name=name, resource_version=profile.metadata.resource_version or "",
                           pattern=pattern,
                           replicated_job=profile.spec.worker_strategy.replicated_job_name,
                           container=profile.spec.container_name or None,
                           multi=profile.spec.worker_strategy.type == WorkerStrategyType.MULTI)
