"""Realistic pod dicts shaped like CRE's worker and launcher pods (shared by tests and bench)."""

from __future__ import annotations

from typing import Any


def _managed_fields(ts: str) -> list[dict[str, Any]]:
    return [
        {"manager": "job-controller", "operation": "Update", "apiVersion": "v1", "time": ts,
         "fieldsType": "FieldsV1", "fieldsV1": {
             "f:metadata": {"f:labels": {".": {}, "f:cre.dev/job": {}},
                            "f:ownerReferences": {".": {}}},
             "f:spec": {"f:containers": {"k:{\"name\":\"node\"}": {
                 ".": {}, "f:image": {}, "f:name": {}, "f:resources": {}}}}}},
        {"manager": "kubelet", "operation": "Update", "apiVersion": "v1", "time": ts,
         "fieldsType": "FieldsV1", "subresource": "status", "fieldsV1": {
             "f:status": {"f:conditions": {}, "f:containerStatuses": {}, "f:phase": {},
                          "f:podIP": {}, "f:startTime": {}}}},
    ]


def pod(*, name: str, namespace: str = "cre", labels: dict[str, str] | None = None,
        node: str | None = "gpu-node-001", phase: str = "Running", rv: str = "1",
        uid: str | None = None, launcher: bool = False,
        exit_code: int | None = None) -> dict[str, Any]:
    """A pod as the API serves it, with spec, managedFields and a kubelet-written status."""
    ts = "2026-03-01T10:00:00Z"
    container = "launcher" if launcher else "node"
    state: dict[str, Any] = {"running": {"startedAt": ts}}
    if exit_code is not None:
        state = {"terminated": {"exitCode": exit_code, "reason": "Error" if exit_code else
                                "Completed", "startedAt": ts, "finishedAt": ts}}
    return {
        "kind": "Pod", "apiVersion": "v1",
        "metadata": {
            "name": name, "namespace": namespace, "uid": uid or f"uid-{namespace}-{name}",
            "resourceVersion": rv, "creationTimestamp": ts, "generateName": name[:-5],
            "labels": labels if labels is not None else {
                "cre.dev/job": "nccl-allreduce", "app.kubernetes.io/managed-by": "cre",
                "jobset.sigs.k8s.io/jobset-name": "nccl-allreduce",
                "jobset.sigs.k8s.io/replicatedjob-name": "node",
                "jobset.sigs.k8s.io/job-index": "0",
                "batch.kubernetes.io/job-completion-index": "3",
                "batch.kubernetes.io/controller-uid": "6d7f0b8e-1111-4a1b-9c55-0f6a3a1d2e11",
                "controller-uid": "6d7f0b8e-1111-4a1b-9c55-0f6a3a1d2e11",
                "jobset.sigs.k8s.io/restart-attempt": "0",
                "trainer.kubeflow.org/trainjob-ancestor-step": "trainer",
            },
            "annotations": {
                "batch.kubernetes.io/job-completion-index": "3",
                "jobset.sigs.k8s.io/jobset-name": "nccl-allreduce",
                "kubectl.kubernetes.io/default-container": container,
            },
            "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job",
                                 "name": "nccl-allreduce-node-0",
                                 "uid": "6d7f0b8e-1111-4a1b-9c55-0f6a3a1d2e11",
                                 "controller": True, "blockOwnerDeletion": True}],
            "managedFields": _managed_fields(ts),
        },
        "spec": {
            "nodeName": node,
            "restartPolicy": "Never",
            "hostNetwork": False,
            "subdomain": "nccl-allreduce",
            "containers": [{
                "name": container,
                "image": "nvcr.io/nvidia/pytorch:25.01-py3",
                "command": ["/bin/bash", "-c"],
                "args": ["mpirun --allow-run-as-root -np 16 -bind-to none -map-by slot "
                         "-x NCCL_DEBUG=INFO all_reduce_perf -b 8 -e 8G -f 2 -g 1"],
                "env": [{"name": "NCCL_SOCKET_IFNAME", "value": "eth0"},
                        {"name": "OMPI_MCA_pml", "value": "ucx"}],
                "resources": {"limits": {"nvidia.com/gpu": "8", "memory": "64Gi"},
                              "requests": {"nvidia.com/gpu": "8", "memory": "64Gi"}},
                "volumeMounts": [{"name": "dshm", "mountPath": "/dev/shm"},
                                 {"name": "kube-api-access", "mountPath":
                                  "/var/run/secrets/kubernetes.io/serviceaccount",
                                  "readOnly": True}],
                "terminationMessagePath": "/dev/termination-log",
                "terminationMessagePolicy": "File",
                "imagePullPolicy": "IfNotPresent",
            }],
            "volumes": [{"name": "dshm", "emptyDir": {"medium": "Memory"}},
                        {"name": "kube-api-access", "projected": {"sources": [
                            {"serviceAccountToken": {"expirationSeconds": 3607,
                                                     "path": "token"}}]}}],
            "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists",
                             "effect": "NoSchedule"}],
            "schedulerName": "default-scheduler",
            "serviceAccountName": "default",
        },
        "status": {
            "phase": phase, "hostIP": "10.0.0.17", "podIP": "10.244.3.9", "startTime": ts,
            "qosClass": "Guaranteed",
            "conditions": [
                {"type": t, "status": "True", "lastProbeTime": None, "lastTransitionTime": ts}
                for t in ("PodReadyToStartContainers", "Initialized", "Ready",
                          "ContainersReady", "PodScheduled")],
            "containerStatuses": [{
                "name": container, "image": "nvcr.io/nvidia/pytorch:25.01-py3",
                "imageID": "nvcr.io/nvidia/pytorch@sha256:" + "ab" * 32,
                "containerID": "containerd://" + "cd" * 32, "ready": exit_code is None,
                "started": exit_code is None, "restartCount": 0, "state": state,
                "lastState": {}}],
        },
    }
