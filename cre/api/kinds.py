"""The registry of CRE kinds: names, scope, short names and printer columns per model.

``cre.api.crdgen`` builds one CRD per entry and ``cre.api.converter.from_dict`` dispatches on
``kind`` through it, so adding a kind means adding one ``KindInfo`` here.
"""

from __future__ import annotations

import attrs

from cre.api.job import Job


@attrs.frozen(kw_only=True)
class PrinterColumn:
    """One ``additionalPrinterColumns`` entry for ``kubectl get``."""

    name: str
    json_path: str
    type: str = "string"
    description: str = ""
    priority: int = 0


PHASE = PrinterColumn(name="Phase", json_path=".status.phase", description="Lifecycle phase")
REASON = PrinterColumn(
    name="Reason",
    json_path='.status.conditions[?(@.status=="True")].reason',
    description="Reason of the conditions that are True",
)
AGE = PrinterColumn(name="Age", json_path=".metadata.creationTimestamp", type="date")


@attrs.frozen(kw_only=True)
class KindInfo:
    """How one model is served: names, scope and columns."""

    kind: str
    model: type
    plural: str
    short_names: tuple[str, ...]
    namespaced: bool = True
    status: bool = True
    columns: tuple[PrinterColumn, ...] = ()

    @property
    def singular(self) -> str:
        """The lower-case singular resource name."""
        return self.kind.lower()


KINDS: tuple[KindInfo, ...] = (
    KindInfo(
        kind="Job",
        model=Job,
        plural="jobs",
        short_names=("crejob", "crejobs"),
        columns=(
            PHASE,
            REASON,
            PrinterColumn(name="Restarts", json_path=".status.restartCount", type="integer"),
            PrinterColumn(name="Workload", json_path=".status.workloadRef.name", priority=1),
            AGE,
        ),
    ),
)
