"""How ``when:`` blocks combine with the base spec.

Mappings merge key by key (recursively), lists and scalars are replaced whole, and an explicit
``null`` removes the key. Lists replace rather than append because Kubernetes lists in these
fragments (mpirun args, volumes) have no reliable merge key, and a replaced list reads the same
in the YAML as in the output.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any


def deep_merge(base: Mapping[str, Any], override: Mapping[str, Any]) -> dict[str, Any]:
    """A new mapping: ``override`` laid over ``base`` (maps merge, lists replace, null deletes)."""
    out: dict[str, Any] = copy.deepcopy(dict(base))
    for key, value in override.items():
        if value is None:
            out.pop(key, None)
        elif isinstance(value, Mapping) and isinstance(out.get(key), Mapping):
            out[key] = deep_merge(out[key], value)
        else:
            out[key] = copy.deepcopy(_strip_nulls(value))
    return out


def _strip_nulls(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {k: _strip_nulls(v) for k, v in value.items() if v is not None}
    return value
