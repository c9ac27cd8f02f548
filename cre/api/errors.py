"""Field-level errors shared by the converter and the validator.

Bad input must name the object, the field path and what is wrong, and report every problem
at once so a user can fix a manifest in one pass.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import attrs


@attrs.frozen(kw_only=True)
class FieldError:
    """One problem at ``path`` (``spec.thresholds[busBandwidthGBps]``, ``status.conditions[0]``)."""

    path: str
    message: str
    value: Any = None

    def __str__(self) -> str:
        return f"{self.path}: {self.message}" if self.path else self.message


def join(path: str, key: str | int) -> str:
    """Extend ``path`` by an attribute (``a.b``), list index (``a[0]``) or map key (``a[k]``)."""
    if isinstance(key, int):
        return f"{path}[{key}]"
    return f"{path}.{key}" if path else key


def map_key(path: str, key: str) -> str:
    """``path[key]`` for a map entry."""
    return f"{path}[{key}]"


def describe(obj: Mapping[str, Any] | Any, default_kind: str = "object") -> str:
    """``Kind namespace/name`` (or ``Kind name``) of a raw dict or a model, for messages."""
    if isinstance(obj, Mapping):
        kind = obj.get("kind") or default_kind
        meta = obj.get("metadata")
        meta = meta if isinstance(meta, Mapping) else {}
        name, namespace = meta.get("name"), meta.get("namespace")
    else:
        kind = getattr(obj, "kind", default_kind)
        meta_obj = getattr(obj, "metadata", None)
        name = getattr(meta_obj, "name", None)
        namespace = getattr(meta_obj, "namespace", None)
    shown = str(name) if name else "<unnamed>"
    if namespace:
        shown = f"{namespace}/{shown}"
    return f"{kind} {shown}"


class ValidationError(ValueError):
    """An object failed structuring or validation; ``errors`` lists every problem."""

    def __init__(self, subject: str, errors: Iterable[FieldError]) -> None:
        self.subject = subject
        self.errors: tuple[FieldError, ...] = tuple(errors)
        lines = [f"{subject}: {e}" for e in self.errors]
        super().__init__("\n".join(lines) if lines else f"{subject}: invalid")
