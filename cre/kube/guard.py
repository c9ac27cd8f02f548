"""The run-time guard against unscoped Pod reads.

A cluster-wide Pod cache is what made the reference controller's memory unbounded on large GPU
clusters. CRE only ever reads pods through label selectors (``cre.dev/job`` workers,
``cre.dev/launcher`` launchers). Every Pod informer and every live Pod list passes through
:func:`require_pod_scope`, which refuses a missing or empty label selector and names the caller
in the error, so the offending code path is obvious from the traceback's first line.

One caller is waived, by module, in :data:`WAIVED_CALLERS` with the reason: the test kit's
cluster simulator plays the kubelet and the scheduler, which see every pod of the cluster. The
waiver is checked against the real calling module (from the stack), never against the
``caller`` text a call site passes, so it cannot be claimed by naming it.
"""

from __future__ import annotations

import inspect

from cre.kube.client import PODS, Resource

# Frames inside these modules are plumbing, not "the caller".
_PLUMBING = ("cre.kube.guard", "cre.kube.informer", "cre.kube.factory")
#: module -> why it may list or watch every Pod. Keep this short: every entry is a hole.
WAIVED_CALLERS: dict[str, str] = {
    "cre.testing.cluster.runtime": "the cluster simulator plays the kubelet and the scheduler, "
                                   "which see every pod",
}


class UnscopedPodRead(RuntimeError):
    """Something tried to list or watch Pods without a label selector."""


def calling_module(skip: tuple[str, ...] = _PLUMBING) -> str:
    """``module:function`` of the nearest stack frame outside ``skip``."""
    frame = inspect.currentframe()
    try:
        f = frame.f_back if frame else None
        while f is not None:
            module = str(f.f_globals.get("__name__", "?"))
            if module not in skip:
                return f"{module}:{f.f_code.co_name}"
            f = f.f_back
        return "<unknown>"
    finally:
        del frame


def require_pod_scope(resource: Resource, label_selector: str | None, *,
                      caller: str | None = None, what: str = "informer") -> None:
    """Raise :class:`UnscopedPodRead` if ``resource`` is Pods and no label selector is given."""
    if resource != PODS:
        return
    if label_selector is not None and label_selector.strip():
        return
    if calling_module().split(":")[0] in WAIVED_CALLERS:
        return
    who = caller or calling_module()
    raise UnscopedPodRead(
        f"{who}: refusing an unscoped Pod {what}: a label selector is required "
        f"(CRE reads pods only through cre.kube.pods, scoped by cre.dev/job or cre.dev/launcher)")
