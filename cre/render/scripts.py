"""Shell snippets the MPI runtime runs: sshd on workers, key setup and the KAI worker wait.

They live in one module so the simulator, the goldens and a reader see exactly one copy.
Each is plain POSIX ``sh`` so it works in any image that has a shell.
"""

from __future__ import annotations

from typing import Final

# Trainer mounts the generated SSH key Secret here (TrainingRuntime mlPolicy.mpi.sshAuthMountPath);
# the files are copied because sshd refuses group/world-readable keys on the Secret mount.
SSH_RAW_DIR: Final = "/tmp/mpi-ssh-raw"
SSH_AUTH_VOLUME: Final = "mpi-ssh-auth"
HOSTFILE_VOLUME: Final = "mpi-hostfile"

WORKER_SSHD: Final = f"""set -e
test -x /usr/sbin/sshd || (apt-get update -qq && apt-get install -y -qq openssh-server >/dev/null)
mkdir -p /run/sshd /root/.ssh
cp {SSH_RAW_DIR}/* /root/.ssh/
chmod 700 /root/.ssh && chmod 600 /root/.ssh/*
exec /usr/sbin/sshd -De
"""

# Ready only when sshd serves sessions: an ssh round trip when a client exists, else a LISTEN
# socket on port 22 (hex 0016, state 0A) in /proc/net/tcp{,6}.
WORKER_READY: Final = """if ! command -v ssh >/dev/null 2>&1; then
  grep -qE ':0016 [0-9A-F:]+ 0A' /proc/net/tcp /proc/net/tcp6
  exit $?
fi
T=""; command -v timeout >/dev/null 2>&1 && T="timeout 8"
$T ssh -n -o BatchMode=yes -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null \\
  -o ConnectTimeout=5 127.0.0.1 true
"""

FIX_SSH_PERMISSIONS: Final = f"""set -e
cp {SSH_RAW_DIR}/* /root/.ssh/
chmod 700 /root/.ssh && chmod 600 /root/.ssh/*
"""

# Under KAI the launcher cannot wait on `dependsOn: node Ready` (every PodGroup sub-group must
# have pods), so the launcher itself waits until every worker answers ssh: 240 tries, 5 s apart.
WAIT_FOR_WORKERS: Final = """me=$(hostname)
hosts=$(awk '{print $1}' /etc/mpi/hostfile | grep -v "^$me" || true)
if [ -z "$hosts" ]; then echo "wait-for-workers: no hosts in /etc/mpi/hostfile"; exit 1; fi
attempt=0
while [ $attempt -lt 240 ]; do
  attempt=$((attempt + 1)); pending=""
  for h in $hosts; do
    timeout 10 ssh -n -o BatchMode=yes -o StrictHostKeyChecking=no \\
      -o UserKnownHostsFile=/dev/null -o ConnectTimeout=5 "$h" true >/dev/null 2>&1 \\
      || pending="$pending $h"
  done
  if [ -z "$pending" ]; then echo "wait-for-workers: all workers answer ssh"; exit 0; fi
  if [ $((attempt % 10)) -eq 0 ]; then echo "wait-for-workers: not answering:$pending"; fi
  sleep 5
done
echo "wait-for-workers: gave up after 240 attempts; hostfile:"; cat /etc/mpi/hostfile
exit 1
"""
