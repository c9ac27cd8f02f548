"""Admission: defaulting, pruning and validation of every write, as the real server orders it.

For custom resources the apiextensions server decodes, prunes unknown fields, applies schema
defaults, then validates against the structural schema and the CEL rules (transition rules see
the old object). Built-in kinds get their group's defaults (:mod:`.defaults`) and are validated
against the published schemas of the emulated Kubernetes release. The schema work itself
lives in :mod:`.validation`; this module keeps the compiled schema per served CRD version and
turns causes into a 422 ``Status``.
"""

from __future__ import annotations

from typing import Any

from . import validation
from ._causes import parse_version
from .defaults import apply_builtin_defaults
from .errors import ApiError, StatusCause, invalid_object
from .resources import ResourceType

Obj = dict[str, Any]


class Admission:
    """Per-server admission state: the compiled CRD schemas and the Kubernetes version."""

    def __init__(self, *, kubernetes_version: str) -> None:
        self.kubernetes_version = kubernetes_version
        self._schemas: dict[tuple[str, str, str], validation.CRDSchema] = {}
        self._raw: dict[tuple[str, str, str], Obj] = {}

    def install_crd(self, crd: Obj) -> None:
        spec = crd.get("spec") or {}
        group = str(spec.get("group", ""))
        plural = str((spec.get("names") or {}).get("plural", ""))
        self.remove_crd(group, plural)
        for v in spec.get("versions") or []:
            version = str(v.get("name", ""))
            self._schemas[(group, version, plural)] = validation.CRDSchema.from_crd(
                crd, version, kubernetes_version=self.kubernetes_version)
            raw = (v.get("schema") or {}).get("openAPIV3Schema")
            if isinstance(raw, dict):
                self._raw[(group, version, plural)] = raw

    def schema_of(self, rt: ResourceType) -> Obj | None:
        """The openAPIV3Schema of a served CRD version (None for built-ins)."""
        return self._raw.get((rt.group, rt.version, rt.plural))

    def remove_crd(self, group: str, plural: str) -> None:
        for key in [k for k in self._schemas if k[0] == group and k[2] == plural]:
            del self._schemas[key]
            self._raw.pop(key, None)

    def check_crd(self, crd: Obj) -> list[StatusCause]:
        return [_cause(c) for c in validation.validate_crd_definition(crd)]

    def admit(self, rt: ResourceType, obj: Obj, old: Obj | None) -> tuple[Obj, list[str]]:
        """Prune, default and validate ``obj``; returns it with the dropped unknown fields.

        Raises 422 Invalid with causes.
        """
        causes: list[StatusCause]
        dropped: list[str] = []
        if rt.is_custom:
            schema = self._schemas.get((rt.group, rt.version, rt.plural))
            if schema is None:
                return obj, dropped
            pruned, dropped = schema.prune_with_paths(obj)
            obj = schema.default(pruned)
            causes = [_cause(c) for c in schema.validate(obj, old)]
        else:
            obj = apply_builtin_defaults(obj, release=parse_version(self.kubernetes_version))
            causes = [
                _cause(c)
                for c in validation.validate_builtin(
                    obj, kubernetes_version=self.kubernetes_version, old=old
                )
            ]
        if causes:
            name = str((obj.get("metadata") or {}).get("name", ""))
            raise invalid_object(rt.qualified, name, causes)
        return obj, dropped


def _cause(c: validation.Cause) -> StatusCause:
    return StatusCause(reason=c.type, message=c.message, field=c.field)


def invalid(rt: ResourceType, name: str, causes: list[StatusCause]) -> ApiError:
    return invalid_object(rt.qualified, name, causes)
