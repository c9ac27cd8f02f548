"""The understood differences between the simulated and the real Job controller and scheduler.

Each entry of :data:`ALLOWED` names the scenarios and objects it covers (fnmatch patterns),
which comparison (``sequence``: an object's distinct states; ``collected``: the scenario's
golden output) and the reason, so the report of :mod:`.sequences` never hides a difference
without saying why.
"""

from __future__ import annotations

import fnmatch
from typing import Final

import attrs


@attrs.frozen
class Allowed:
    """A difference that is understood: scenarios and object keys (fnmatch patterns) it
    covers, which side of the comparison (``sequence`` or ``collected``) and why."""

    scenario: str
    obj: str
    where: str
    reason: str

    def covers(self, scenario: str, *, where: str, obj: str) -> bool:
        """Whether this entry explains a difference of ``obj`` on side ``where``."""
        return (fnmatch.fnmatchcase(scenario, self.scenario) and where == self.where
                and fnmatch.fnmatchcase(obj, self.obj))

ALLOWED: Final[tuple[Allowed, ...]] = (
    Allowed(scenario="*", obj="*.nodeName", where="collected",
            reason="which node a pod lands on: kube-scheduler scores the feasible nodes "
                   "(NodeResourcesFit LeastAllocated, BalancedAllocation, ...) and breaks ties "
                   "at random, so a launcher beside two equally loaded workers goes to either "
                   "node; the simulated scheduler takes the first feasible node by name. CRE's "
                   "failureLog names the node the pod ran on, which is right on both"),
    Allowed(scenario="*", obj="Pod/*", where="placement",
            reason="the same pod-state sequences under other completion indexes of one Job: "
                   "kube-scheduler placed index 0 where the simulator placed index 1 (scoring "
                   "and random tie-break, above), so the pod on the node the scenario turns "
                   "NotReady is another index; as a set, the Job's pods agree"),
)

# With the real JobSet and Trainer as well (``scenarios --workloads``): every entry above, and
ALLOWED_WITH_WORKLOADS: Final[tuple[Allowed, ...]] = (
    *ALLOWED,
    Allowed(scenario="*", obj="Pod/*:labels.jobset.sigs.k8s.io/priority", where="shape",
            reason="JobSet's pod admission webhook labels every JobSet pod with its "
                   "spec.priority (0 here) for its exclusive-placement affinities; the "
                   "simulator plays controllers, not admission webhooks, so its pods (and the "
                   "real Job controller's without the real JobSet) lack the label. CRE neither "
                   "reads it nor uses exclusive placement"),
    Allowed(scenario="*", obj="Pod/*-launcher-*", where="deleted-only-simulated",
            reason="a failed launcher's pod: the simulated JobSet deletes a failed child "
                   "Job's pods 0.5 s after the Job fails (the reference's measurement on its "
                   "Kind cluster, the adverse case CRE's early capture is built for); JobSet "
                   "v0.11.1 keeps a failed JobSet's finished child Jobs and their pods (it "
                   "deletes only active ones, and finished ones only on a RestartJobSet "
                   "restart). Every state before the deletion agrees"),
)
