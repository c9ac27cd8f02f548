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
from cre.catalog.loader import load_catalog
from cre.controller.certification import CertificationController
from cre.controller.goodput import GoodputController
from cre.controller.job import JobController
from cre.controller.measurement import MeasurementController
from cre.controller.workflow import SharedCaches, WorkflowController
from cre.controller.workloadrun import WorkloadRunController
from cre.core.workflow import WorkflowSettings
from cre.kube.client import KubeClient
from cre_manager.config import ManagerConfig
from cre_manager.runnable import Draining, RestartPolicy, Runnable

CRDS_INSTALL_HINT = "install CRE's CRDs with `kubectl apply -k deploy/crds`"
TRAINER_INSTALL_HINT = ("install Kubeflow Trainer v2.2 or later with JobSet (the manifests of "
                        "their releases; CRE is tested against the CRDs in cre/_vendor/crds)")


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


# The Job controller of each client, so the tiers above read its pod and node caches instead
# of keeping their own copies (one cache per kind and selector in the process).
_JOB_CONTROLLERS: dict[int, tuple[KubeClient, JobController]] = {}


def _job_controller_of(client: KubeClient, config: ManagerConfig,
                       registry: CollectorRegistry) -> JobController:
    held = _JOB_CONTROLLERS.get(id(client))
    if held is None or held[0] is not client:
        held = (client, JobController(
            client, namespaces=config.namespaces or None,
            max_concurrent_reconciles=config.max_concurrent_reconciles, registry=registry,
            clock=config.clock(), time_scale=config.time_scale))
        _JOB_CONTROLLERS[id(client)] = held
    return held[1]


def _shared_caches(client: KubeClient, config: ManagerConfig,
                   registry: CollectorRegistry) -> SharedCaches | None:
    """The Job controller's caches when it runs too (it runs them; the others follow)."""
    if "job" not in config.controllers:
        return None
    job = _job_controller_of(client, config, registry)
    return SharedCaches(workers=job.workers, launchers=job.launchers, nodes=job.nodes)


def _job_controller(client: KubeClient, config: ManagerConfig,
                    registry: CollectorRegistry) -> Runnable:
    return Draining(_job_controller_of(client, config, registry))


def _workflow_controller(client: KubeClient, config: ManagerConfig,
                         registry: CollectorRegistry) -> Runnable:
    settings = WorkflowSettings(infra_scoped_fail_fast=config.infra_scoped_fail_fast)
    return Draining(WorkflowController(client, namespaces=config.namespaces or None,
                                       max_concurrent_reconciles=config.max_concurrent_reconciles,
                                       settings=settings, registry=registry,
                                       shared=_shared_caches(client, config, registry),
                                       clock=config.clock()))


def _catalog_tier(cls: type[CertificationController] | type[WorkloadRunController]
                  ) -> Callable[[KubeClient, ManagerConfig, CollectorRegistry], Runnable]:
    """The builder of a tier that renders catalog workloads itself (Certification,
    WorkloadRun): it reads the catalog and follows the Job controller's node cache."""

    def build(client: KubeClient, config: ManagerConfig, registry: CollectorRegistry
              ) -> Runnable:
        # check_catalog parsed it at start-up already: a broken catalog never gets here.
        shared = _shared_caches(client, config, registry)
        return Draining(cls(
            client, catalog=load_catalog(config.catalog_dir),
            namespaces=config.namespaces or None,
            max_concurrent_reconciles=config.max_concurrent_reconciles, registry=registry,
            nodes=shared.nodes if shared is not None else None, clock=config.clock()))

    return build


def _measurement_controller(client: KubeClient, config: ManagerConfig,
                            registry: CollectorRegistry) -> Runnable:
    return Draining(MeasurementController(
        client, namespaces=config.namespaces or None,
        max_concurrent_reconciles=config.max_concurrent_reconciles, registry=registry,
        clock=config.clock()))


def _goodput_controller(client: KubeClient, config: ManagerConfig,
                        registry: CollectorRegistry) -> Runnable:
    return Draining(GoodputController(
        client, namespaces=config.namespaces or None,
        max_concurrent_reconciles=config.max_concurrent_reconciles, registry=registry,
        clock=config.clock(), time_scale=config.time_scale))


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
                                 _cre("goodputmeasurements"), _trainer("trainjobs"),
                                 _trainer("trainingruntimes")),
                       build=_job_controller),
        ControllerSpec(name="workflow",
                       requires=(_cre("workflows"), _cre("jobs"), _trainer("trainingruntimes")),
                       build=_workflow_controller),
        ControllerSpec(name="certification",
                       requires=(_cre("certifications"), _cre("workflows")),
                       build=_catalog_tier(CertificationController)),
        ControllerSpec(name="workloadrun",
                       requires=(_cre("workloadruns"), _cre("workflows"),
                                 _cre("goodputmeasurements")),
                       build=_catalog_tier(WorkloadRunController)),
        ControllerSpec(name="measurement",
                       requires=(_cre("bandwidthmeasurements"), _cre("jobs"),
                                 _cre("logprofiles")),
                       build=_measurement_controller),
        ControllerSpec(name="goodput",
                       requires=(_cre("goodputmeasurements"), _cre("jobs"),
                                 _cre("logprofiles")),
                       build=_goodput_controller),
    )
}


def required_resources(names: tuple[str, ...]) -> list[RequiredResource]:
    """The union of what the named controllers need, in a stable order."""
    seen: dict[str, RequiredResource] = {}
    for name in names:
        for res in CONTROLLERS[name].requires:
            seen.setdefault(res.crd_name, res)
    return list(seen.values())
