"""Admission-time validation for the API emulator, as the real server does it.

Three entry points, each pure and cached where it matters for write throughput:

* `CRDSchema.from_crd(crd, version)` — a CRD version's structural schema compiled once; it
  defaults, prunes and validates custom resources (OpenAPI checks and `x-kubernetes-validations`
  CEL rules, transition rules with `oldSelf` only on update) (`_crd_schema`, `_cel`);
* `validate_crd_definition(crd)` — the checks on a CRD itself (`_crd_definition`);
* `validate_builtin(obj, kubernetes_version=...)` — built-in kinds against the published
  schemas of that release plus the semantic rules a controller runs into (`_builtin`).

Every error is a `Cause` (reason, message, field) worded as the real server words it, ready to
become a 422 Status (`aggregate_message` builds the text after `is invalid: `).
"""

from __future__ import annotations

from cre.testing.apiserver._builtin import schema_release, validate_builtin
from cre.testing.apiserver._causes import Cause, CauseType, aggregate_message
from cre.testing.apiserver._crd_definition import validate_crd_definition
from cre.testing.apiserver._crd_schema import CRDSchema

__all__ = [
    "CRDSchema",
    "Cause",
    "CauseType",
    "aggregate_message",
    "schema_release",
    "validate_builtin",
    "validate_crd_definition",
]
