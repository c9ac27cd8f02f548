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
  command line (a pre-command turns the command into ``/bin/bash -c <script>``);
* ``annotations`` / ``claims``: worker pod annotations and DRA claims (a claim adds its
  ResourceClaimTemplate dependency, built by the catalog's own ``claim_template``);
* ``topology_key``: the platform's NVLink-domain label for GB200/GB300, an orchestration
  override (groups are packed into its domains);
* ``fabric``: the parts (``env``, ``resources``, ``annotations``, ``claims``) taken from the
  catalog's platform file (``catalog/_lib/platforms/<platform>.yaml``, resolved for the
  architecture) instead of being written twice; ``fabric_env_skip`` names env the WorkloadRun
  does not take (see the row).

The GB200/GB300 ComputeDomain (the reference's block 1) is not a row: it depends on the run's
``enableMNNVL`` and is built by ``cre.render.workloadrun`` with the catalog's
``compute_domain``. Where the reference names a block without its values (togetherai and
mistral IB: blocks 12/13) there is no row: CRE detects those platforms, but neither the
reference nor the catalog gives their fabric values, so a run there gets no fabric patch.

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
    annotations: Mapping[str, str] = attrs.field(factory=dict)
    claims: tuple[Mapping[str, Any], ...] = ()
    topology_key: str = ""
    fabric: tuple[str, ...] = ()
    fabric_env_skip: tuple[str, ...] = ()

    def applies(self, *, platform: str, arch: str, framework: str) -> bool:
        """Whether the block is for this platform, architecture and framework."""
        return ((not self.platforms or platform in self.platforms)
                and (not self.archs or arch in self.archs)
                and arch not in self.not_archs
                and (not self.frameworks or framework in self.frameworks))

    def with_fabric(self, fabric: Mapping[str, Any]) -> RunPlatformBlock:
        """The row with its ``fabric`` parts filled in from the catalog's resolved platform
        spec (the row's own values win by name)."""
        if not self.fabric:
            return self
        worker: Mapping[str, Any] = fabric.get("worker") or {}
        changes: dict[str, Any] = {}
        if "env" in self.fabric:
            given = {k: str(v) for k, v in (fabric.get("env") or {}).items()
                     if k not in self.fabric_env_skip}
            changes["env"] = {**given, **self.env}
        if "resources" in self.fabric:
            given = {k: str(v) for k, v in (worker.get("resources") or {}).items()}
            changes["worker_resources"] = {**given, **self.worker_resources}
        if "annotations" in self.fabric:
            given = {k: str(v) for k, v in (worker.get("annotations") or {}).items()}
            changes["annotations"] = {**given, **self.annotations}
        if "claims" in self.fabric:
            changes["claims"] = (*(fabric.get("claims") or ()), *self.claims)
        return attrs.evolve(self, **changes)


AWS_EFA_ENV: Final = {"FI_PROVIDER": "efa", "FI_EFA_USE_DEVICE_RDMA": "1",
                      "FI_EFA_FORK_SAFE": "1"}

TOPOLOGY_KEYS: Final = {"aws": "topology.k8s.aws/network-node-layer-1",
                         "gcp": "cloud.google.com/gce-topology-block",
                         "azure": "kubernetes.azure.com/ppg"}

# In order: a later block's value for the same name wins (resources, env). The reference's
# block numbers (nvcre-api §9.5) are in the comments; the rows keep CRE's earlier order where
# the reference's order changes nothing (no two rows of one platform set the same name).
BLOCKS: Final[tuple[RunPlatformBlock, ...]] = (
    # 3 (v0.6.0 form): H100 and GB200 keep the image's EFA plugin and get the EFA env.
    RunPlatformBlock(name="aws-efa", platforms=("aws",), archs=("h100", "h200", "gb200"),
                     env=AWS_EFA_ENV, capabilities=("IPC_LOCK",)),
    # 8, 6
    RunPlatformBlock(name="aws-h100-efa", platforms=("aws",), archs=("h100", "h200"),
                     worker_resources={EFA: "32"}),
    RunPlatformBlock(name="aws-gb200-efa", platforms=("aws",), archs=("gb200",),
                     worker_resources={EFA: "4"}),
    # 7: GB300 talks RoCE through a DRA claim; its template is the aws platform file's.
    RunPlatformBlock(name="aws-gb300-roce-claim", platforms=("aws",), archs=("gb300",),
                     fabric=("claims",)),
    # 3: GB300 talks RoCE: the image's EFA plugin must go before anything loads it.
    RunPlatformBlock(name="aws-gb300-roce", platforms=("aws",), archs=("gb300",),
                     pre_command=("rm -rf /opt/amazon", "unset NCCL_NET_PLUGIN",
                                  "unset NCCL_TUNER_PLUGIN", "unset AWS_OFI_NCCL_VERSION")),
    # 4: every AWS MPI run, whatever the architecture (the reference's row has no arch
    # selector, and its AWS GB200 golden carries it). On H100/GB200 this keeps NCCL off the
    # image's aws-ofi-nccl plugin, so NCCL does not use EFA (the reference's own finding: a
    # WorkloadRun on AWS H100 ran over TCP); a user ``env`` entry NCCL_NET_PLUGIN replaces it.
    RunPlatformBlock(name="aws-mpi", platforms=("aws",), frameworks=("mpi",),
                     mpi_args=("-x", "NCCL_NET_PLUGIN=none")),
    # 5: the RoCE transport args and, exported to the ranks, the aws file's GB300 env (its
    # NCCL_NET_PLUGIN=none is block 4's already).
    RunPlatformBlock(name="aws-gb300-mpi", platforms=("aws",), archs=("gb300",),
                     frameworks=("mpi",), fabric=("env",),
                     fabric_env_skip=("NCCL_NET_PLUGIN",),
                     mpi_args=("--mca", "orte_keep_fqdn_hostnames",
                               "true", "--mca", "pml", "ob1", "--mca", "btl", "tcp,self",
                               "--mca", "coll_ucc_enable", "0", "--mca", "coll_hcoll_enable",
                               "0")),
    # 9: the FastRak env of the gcp platform file. Its LD_LIBRARY_PATH points into the
    # TCPXO host mount that only the catalog's runtime patch adds; a WorkloadRun (as in the
    # reference) gets no tcpxo-daemon, and replacing the user image's LD_LIBRARY_PATH with a
    # directory that is not mounted would break the image, so that one name is not taken.
    RunPlatformBlock(name="gcp-h100-fastrak", platforms=("gcp",), archs=("h100",),
                     fabric=("env",), fabric_env_skip=("LD_LIBRARY_PATH",)),
    # 10: the gcp platform file's RoCE patch (four RDMA networks, their resources and env).
    # The reference's catalog row adds the arm64 and gpu=present tolerations with it (its
    # catalog pods tolerate everything anyway); a WorkloadRun's trainer pods need them.
    RunPlatformBlock(name="gcp-gb-roce", platforms=("gcp",), archs=MNNVL_ARCHS,
                     fabric=("env", "resources", "annotations"),
                     tolerations=(ARM64_TOLERATION, GPU_TOLERATION)),
    # 11: every Azure architecture (the reference's row has no arch selector, and the azure
    # platform file requests the NICs on A100 too); omitted at mlnxPerNode 0.
    RunPlatformBlock(name="azure-ib", platforms=("azure",), worker_resources={MLNX: "{mlnx}"}),
    RunPlatformBlock(name="oci-roce", platforms=("oci",), worker_resources={MLNX: "{mlnx}"}),
    # Newer versions: on-prem GB200/GB300.
    RunPlatformBlock(name="onprem-gb", platforms=("onprem",), archs=MNNVL_ARCHS,
                     tolerations=(ARM64_TOLERATION, GPU_TOLERATION),
                     worker_resources={"{nic}": "{mlnx}"},
                     env={"NCCL_IB_PCI_RELAXED_ORDERING": "1",
                          "SHARP_COLL_ENABLE_PCI_RELAXED_ORDERING": "1"}),
    # 2: the platform's NVLink-domain label on GB200/GB300 (the catalog's is
    # nvidia.com/gpu.clique, which the run keeps elsewhere).
    *(RunPlatformBlock(name=f"{p}-gb-topology", platforms=(p,), archs=MNNVL_ARCHS,
                       topology_key=key) for p, key in TOPOLOGY_KEYS.items()),
)


def blocks_for(*, platform: str, arch: str, framework: str,
               fabric: Mapping[str, Any] | None = None) -> tuple[RunPlatformBlock, ...]:
    """The table rows that apply, in table order, their ``fabric`` parts taken from
    ``fabric`` (the catalog's platform spec for this platform and architecture)."""
    return tuple(b.with_fabric(fabric or {}) for b in BLOCKS
                 if b.applies(platform=platform, arch=arch, framework=framework))


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
