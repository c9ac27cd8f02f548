"""What a platform adds to a WorkloadRun, and the env merge rule the user's env wins by.

A WorkloadRun brings its own image, so the catalog's tuned fabric entries do not apply; this
table is the WorkloadRun's own (the reference's ``overrides/workloadrun.yaml``). Each block
names the platforms, GPU architectures and frameworks it applies to and what it adds:

* ``env``: the fabric env. Non-MPI runs get it through a Workflow override of the trainer's
  env; MPI runs get it as ``-x NAME=VALUE`` mpirun arguments (mpirun exports it to the ranks);
* ``worker_resources`` / ``capabilities`` / ``tolerations`` / ``runtime_env``: patches of the
  generated TrainingRuntime's worker (and, for tolerations, launcher) pods, applied by the
  Workflow as dependency overrides once it has detected the platform;
* ``pre_command`` / ``mpi_args``: resolved when the run is built, because they shape the
  command line (a pre-command turns the command into ``/bin/bash -c <script>``).

Env merge rule (:func:`merge_env`): the user's ``spec.env`` wins by name over every other
source: platform env, the runtime's own env and ``-x NAME=...`` mpirun arguments (an mpirun
``-x`` pair whose name the user sets is dropped, and the user's value is forwarded with a bare
``-x NAME``). Order: the base entries in their order (a user value replacing one in place),
then the user's new names in the user's order.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final

import attrs

# Hardware-platform constants the blocks use.
EFA: Final = "vpc.amazonaws.com/efa"
MLNX: Final = "nvidia.com/mlnxnics"
ARM64_TOLERATION: Final = {"key": "kubernetes.io/arch", "operator": "Equal", "value": "arm64",
                           "effect": "NoSchedule"}
GPU_TOLERATION: Final = {"key": "nvidia.com/gpu", "operator": "Equal", "value": "present",
                         "effect": "NoSchedule"}
MNNVL_ARCHS: Final = ("gb200", "gb300")


@attrs.frozen(kw_only=True)
class RunPlatformBlock:
    """One row of the WorkloadRun platform table (empty selectors match anything)."""

    name: str
    platforms: tuple[str, ...] = ()
    archs: tuple[str, ...] = ()
    not_archs: tuple[str, ...] = ()
    frameworks: tuple[str, ...] = ()
    env: Mapping[str, str] = attrs.field(factory=dict)
    runtime_env: Mapping[str, str] = attrs.field(factory=dict)
    worker_resources: Mapping[str, str] = attrs.field(factory=dict)
    capabilities: tuple[str, ...] = ()
    tolerations: tuple[Mapping[str, str], ...] = ()
    pre_command: tuple[str, ...] = ()
    mpi_args: tuple[str, ...] = ()

    def applies(self, *, platform: str, arch: str, framework: str) -> bool:
        """Whether the block is for this platform, architecture and framework."""
        return ((not self.platforms or platform in self.platforms)
                and (not self.archs or arch in self.archs)
                and arch not in self.not_archs
                and (not self.frameworks or framework in self.frameworks))


AWS_EFA_ENV: Final = {"FI_PROVIDER": "efa", "FI_EFA_USE_DEVICE_RDMA": "1",
                      "FI_EFA_FORK_SAFE": "1"}

# In order: a later block's value for the same name wins (resources, env).
BLOCKS: Final[tuple[RunPlatformBlock, ...]] = (
    RunPlatformBlock(name="aws-efa", platforms=("aws",), archs=("h100", "h200", "gb200"),
                     env=AWS_EFA_ENV, capabilities=("IPC_LOCK",)),
    RunPlatformBlock(name="aws-h100-efa", platforms=("aws",), archs=("h100", "h200"),
                     worker_resources={EFA: "32"}),
    RunPlatformBlock(name="aws-gb200-efa", platforms=("aws",), archs=("gb200",),
                     worker_resources={EFA: "4"}),
    # GB300 talks RoCE: the image's EFA plugin must go before anything loads it.
    RunPlatformBlock(name="aws-gb300-roce", platforms=("aws",), archs=("gb300",),
                     pre_command=("rm -rf /opt/amazon", "unset NCCL_NET_PLUGIN",
                                  "unset NCCL_TUNER_PLUGIN", "unset AWS_OFI_NCCL_VERSION")),
    RunPlatformBlock(name="aws-gb300-mpi", platforms=("aws",), archs=("gb300",),
                     frameworks=("mpi",),
                     mpi_args=("-x", "NCCL_NET_PLUGIN=none", "--mca", "orte_keep_fqdn_hostnames",
                               "true", "--mca", "pml", "ob1", "--mca", "btl", "tcp,self",
                               "--mca", "coll_ucc_enable", "0", "--mca", "coll_hcoll_enable",
                               "0")),
    RunPlatformBlock(name="azure-ib", platforms=("azure",), not_archs=("a100",),
                     worker_resources={MLNX: "{mlnx}"}),
    RunPlatformBlock(name="oci-roce", platforms=("oci",), worker_resources={MLNX: "{mlnx}"}),
    RunPlatformBlock(name="onprem-gb", platforms=("onprem",), archs=MNNVL_ARCHS,
                     tolerations=(ARM64_TOLERATION, GPU_TOLERATION),
                     worker_resources={"{nic}": "{mlnx}"},
                     env={"NCCL_IB_PCI_RELAXED_ORDERING": "1",
                          "SHARP_COLL_ENABLE_PCI_RELAXED_ORDERING": "1"}),
)


def blocks_for(*, platform: str, arch: str, framework: str) -> tuple[RunPlatformBlock, ...]:
    """The table rows that apply, in table order."""
    return tuple(b for b in BLOCKS if b.applies(platform=platform, arch=arch,
                                                framework=framework))


def env_list(values: Mapping[str, str]) -> list[dict[str, str]]:
    """``{name: value}`` as a corev1 EnvVar list, in the mapping's order."""
    return [{"name": k, "value": str(v)} for k, v in values.items()]


def merge_env(base: Sequence[Mapping[str, Any]], user: Sequence[Mapping[str, Any]]
              ) -> list[dict[str, Any]]:
    """``base`` with ``user`` laid over by name (the user wins; see the module docstring)."""
    mine = {str(e["name"]): dict(e) for e in user}
    out: list[dict[str, Any]] = []
    seen: set[str] = set()
    for entry in base:
        name = str(entry["name"])
        if name in seen:
            continue
        seen.add(name)
        out.append(mine.get(name, dict(entry)))
    out += [dict(e) for n, e in mine.items() if n not in seen]
    return out


def drop_exported(args: Sequence[str], names: frozenset[str]) -> list[str]:
    """``args`` without the ``-x NAME[=VALUE]`` pairs whose NAME is in ``names``."""
    out: list[str] = []
    i = 0
    while i < len(args):
        if args[i] == "-x" and i + 1 < len(args) and args[i + 1].split("=", 1)[0] in names:
            i += 2
            continue
        out.append(args[i])
        i += 1
    return out
