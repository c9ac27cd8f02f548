"""Schema facts attached to attrs fields: one source for validation and CRD generation.

A model field states its JSON name (when plain camelCase is wrong, e.g. ``enableMNNVL``), its
OpenAPI constraints, its immutability and its user-facing description once, in
``metadata=c(...)``. The converter reads the JSON name, ``cre.api.validate`` checks the
constraints and ``cre.api.crdgen`` turns the very same facts into the CRD schema, so the
admission rules of a real server and the library cannot drift.

``doc`` is what ``kubectl explain`` shows for the field: what it means and its unit, in one or
two sentences ("Seconds a worker may stay silent before the Job is judged stalled."). The
default, the bounds and the length limits are NOT written there: ``cre.api.schema`` appends them
from the field's default and the constraints above, so they cannot disagree with what is
enforced. ``c(doc=...)`` also stores the text under the plain ``"description"`` metadata key,
which is where the API reference site (griffe-fieldz) reads attrs field descriptions.
"""

from __future__ import annotations

from typing import Any, Final

import attrs

KEY: Final = "cre.api"


@attrs.frozen(kw_only=True)
class Constraints:
    """OpenAPI facts for one field; ``None`` means "no constraint"."""

    json_name: str | None = None
    # What the field means, for users (kubectl explain, the CRD, the API reference): one or two
    # sentences with the unit; default and bounds are appended by cre.api.schema.
    doc: str | None = None
    minimum: int | float | None = None
    maximum: int | float | None = None
    min_length: int | None = None
    max_length: int | None = None
    pattern: str | None = None
    min_items: int | None = None
    max_items: int | None = None
    min_properties: int | None = None
    max_properties: int | None = None
    int_format: str | None = None
    # Transition rule ``self == oldSelf`` with this message ("<field> is immutable").
    immutable: bool = False
    # The parent gets ``has(self.f) == has(oldSelf.f)`` ("cannot be added or removed").
    presence_immutable: bool = False
    # Opaque JSON (embedded foreign types such as a Kubeflow TrainJobSpec).
    preserve_unknown: bool = False
    # A list of objects merged by these keys (``x-kubernetes-list-type: map``).
    list_map_keys: tuple[str, ...] = ()
    # A Go-style duration string at most this long (``"720h"``): validation parses and compares
    # it, the CRD carries the CEL rule ``duration(self) <= duration('<max>')``.
    max_duration: str | None = None
    # Constraints of every value of a map (``additionalProperties``), e.g. a CEL length bound.
    values: Constraints | None = None


DESCRIPTION_KEY: Final = "description"


def c(**kwargs: Any) -> dict[str, Any]:
    """Field metadata carrying ``Constraints``: ``attrs.field(metadata=c(minimum=1, doc="..."))``.

    The ``doc`` text is stored twice on purpose: inside the ``Constraints`` (read by the CRD
    generator) and under the ``"description"`` key that documentation tools look for.
    """
    cons = Constraints(**kwargs)
    meta: dict[str, Any] = {KEY: cons}
    if cons.doc:
        meta[DESCRIPTION_KEY] = cons.doc
    return meta


NO_CONSTRAINTS: Final = Constraints()


@attrs.frozen
class CelRule:
    """An ``x-kubernetes-validations`` rule a model class declares in ``CEL_RULES``; the
    validator carries an equivalent Python check so both sides agree."""

    rule: str
    message: str


def constraints(field: attrs.Attribute[Any]) -> Constraints:
    """The constraints declared on ``field`` (empty when none were declared)."""
    found = field.metadata.get(KEY)
    return found if isinstance(found, Constraints) else NO_CONSTRAINTS


def camel(name: str) -> str:
    """``snake_case`` -> ``camelCase`` (``node_health_monitor`` -> ``nodeHealthMonitor``)."""
    head, *rest = name.split("_")
    return head + "".join(part[:1].upper() + part[1:] for part in rest)


def json_name(field: attrs.Attribute[Any]) -> str:
    """The JSON key of ``field``: an explicit ``json_name`` or the camelCase of its name."""
    return constraints(field).json_name or camel(field.name)


def json_names(cls: type) -> dict[str, str]:
    """Attribute name -> JSON key for every field of the attrs class ``cls``."""
    return {f.name: json_name(f) for f in attrs.fields(cls)}
