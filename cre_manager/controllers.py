"""The controllers the manager can run, what each needs installed, and how to build it.

One table so that adding a controller (Workflow, Certification, ...) is one entry: a name for
``--controllers``, the API resources it reads or writes (the start-up check verifies they are
served before any informer starts), and a factory from the shared client and the config.
"""

from __future__ import annotations

from collections.abc import Callable

import attrs
from prometheus_client import CollectorRegistry

from cre.api.labels import GROUP, VERSION
from cre.controller.job import JobController
from cre.controller.measurement import MeasurementController
from cre.kube.client import KubeClient
from cre_manager.config import ManagerConfig
from cre_manager.runnable import Draining, RestartPolicy, Runnable

CRDS_INSTALL_HINT = "install CRE's CRDs with `kubectl apply -k deploy/crds`"
TRAINER_INSTALL_HINT = ("install Kubeflow Trainer (its CRDs are vendored under "
                        "cre/testing/crds/trainer-latest: `kubectl apply -f` that folder)")


@attrs.frozen(slots=True)
class RequiredResource:
    """An API resource a controller needs, and how to install it when it is missing."""

    group: str
    version: str
    plural: str
    hint: str

    @property
    def crd_name(self) -> str:
        return f"{self.plural}.{self.group}"

    @property
    def discovery_path(self) -> str:
        return f"/apis/{self.group}/{self.version}"

    def list_path(self, namespace: str | None) -> str:
        base = self.discovery_path
        return f"{base}/namespaces/{namespace}/{self.plural}" if namespace else \
            f"{base}/{self.plural}"


def _cre(plural: str) -> RequiredResource:
    return RequiredResource(GROUP, VERSION, plural, CRDS_INSTALL_HINT)


def _trainer(plural: str) -> RequiredResource:
    return RequiredResource("trainer.kubeflow.org", "v1alpha1", plural, TRAINER_INSTALL_HINT)


def _job_controller(client: KubeClient, config: ManagerConfig,
                    registry: CollectorRegistry) -> Runnable:
    return Draining(JobController(client, namespaces=config.namespaces or None,
                                  max_concurrent_reconciles=config.max_concurrent_reconciles,
                                  registry=registry))


def _measurement_controller(client: KubeClient, config: ManagerConfig,
                            registry: CollectorRegistry) -> Runnable:
    return Draining(MeasurementController(client, namespaces=config.namespaces or None,
                                          registry=registry))


@attrs.frozen(slots=True)
class ControllerSpec:
    """One controller: its ``--controllers`` name, what it needs served, how to build it (from
    the shared client, the config and the registry its metrics go to).

    ``restart``: controllers shut their workqueue when ``run()`` ends, so they are not
    restarted in-process; a failure escaping one stops the manager and Kubernetes restarts it
    (the informers inside already retry every transient API error themselves).
    """

    name: str
    requires: tuple[RequiredResource, ...]
    build: Callable[[KubeClient, ManagerConfig, CollectorRegistry], Runnable]
    restart: RestartPolicy = attrs.field(factory=lambda: RestartPolicy(max_restarts=0))


CONTROLLERS: dict[str, ControllerSpec] = {
    spec.name: spec for spec in (
        ControllerSpec(name="job",
                       requires=(_cre("jobs"), _cre("bandwidthmeasurements"),
                                 _trainer("trainjobs"), _trainer("trainingruntimes")),
                       build=_job_controller),
        ControllerSpec(name="measurement",
                       requires=(_cre("bandwidthmeasurements"), _cre("jobs"),
                                 _cre("logprofiles")),
                       build=_measurement_controller),
    )
}


def required_resources(names: tuple[str, ...]) -> list[RequiredResource]:
    """The union of what the named controllers need, in a stable order."""
    seen: dict[str, RequiredResource] = {}
    for name in names:
        for res in CONTROLLERS[name].requires:
            seen.setdefault(res.crd_name, res)
    return list(seen.values())
