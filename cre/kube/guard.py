"""The run-time guard against unscoped Pod reads.

A cluster-wide Pod cache is what made the reference controller's memory unbounded on large GPU
clusters. CRE only ever reads pods through label selectors (``cre.dev/job`` workers,
``cre.dev/launcher`` launchers). Every Pod informer and every live Pod list passes through
:func:`require_pod_scope`, which refuses a missing or empty label selector and names the caller
in the error, so the offending code path is obvious from the traceback's first line.
"""

from __future__ import annotations

import inspect

from cre.kube.client import PODS, Resource

# Frames inside these modules are plumbing, not "the caller".
_PLUMBING = ("cre.kube.guard", "cre.kube.informer")


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
    who = caller or calling_module()
    raise UnscopedPodRead(
        f"{who}: refusing an unscoped Pod {what}: a label selector is required "
        f"(CRE reads pods only through cre.kube.pods, scoped by cre.dev/job or cre.dev/launcher)")
