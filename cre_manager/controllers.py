"""The manager's side of the controller registry: what must be installed, and the runnables.

The controllers themselves are listed once, in :data:`cre.controller.registry.CONTROLLERS`
(the simulator's scenario runner builds from the same list). Here they become what the manager
supervises: one shared :class:`cre.kube.factory.InformerFactory` (the ``informers`` runnable,
started and stopped with the controllers, so a query several controllers ask for is listed and
watched once) and each enabled controller behind :class:`cre_manager.runnable.Draining`.
"""

from __future__ import annotations

from typing import Final

import attrs
from prometheus_client import CollectorRegistry

from cre.api.labels import GROUP
from cre.catalog.loader import load_catalog
from cre.catalog.model import Catalog
from cre.controller.registry import BY_NAME, ControllerContext
from cre.core.workflow.reconcile import WorkflowSettings
from cre.kube.client import KubeClient, Resource
from cre.kube.factory import InformerFactory
from cre.kube.metrics import metrics_for
from cre_manager.config import ManagerConfig
from cre_manager.runnable import Draining, RestartPolicy, Supervised

CRDS_INSTALL_HINT = "install CRE's CRDs with `kubectl apply -k deploy/crds`"
TRAINER_INSTALL_HINT = ("install Kubeflow Trainer v2.2 or later with JobSet (the manifests of "
                        "their releases; CRE is tested against the CRDs in cre/_vendor/crds)")
#: The name the shared informer factory is supervised (and logs) under.
INFORMERS: Final = "informers"
# Controllers shut their workqueue when ``run()`` ends, so they are not restarted in-process:
# a failure escaping one stops the manager and Kubernetes restarts it (the informers inside
# already retry every transient API error themselves).
NO_RESTART: Final = RestartPolicy(max_restarts=0)


@attrs.frozen(slots=True)
class RequiredResource:
    """An API resource a controller needs, and how to install it when it is missing."""

    group: str
    version: str
    plural: str
    hint: str

    @classmethod
    def of(cls, res: Resource) -> RequiredResource:
        hint = CRDS_INSTALL_HINT if res.group == GROUP else TRAINER_INSTALL_HINT
        return cls(res.group, res.version, res.plural, hint)

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


def required_resources(names: tuple[str, ...]) -> list[RequiredResource]:
    """The union of what the named controllers need, in a stable order."""
    seen: dict[str, RequiredResource] = {}
    for name in names:
        for res in BY_NAME[name].requires:
            required = RequiredResource.of(res)
            seen.setdefault(required.crd_name, required)
    return list(seen.values())


def runnables(client: KubeClient, config: ManagerConfig,
              registry: CollectorRegistry) -> list[Supervised]:
    """The enabled controllers, built over one informer factory, and that factory last."""
    informers = InformerFactory(client, namespaces=config.namespaces or None,
                                metrics=metrics_for(registry))

    def catalog() -> Catalog:
        # check_catalog parsed it at start-up already: a broken catalog never gets here.
        return load_catalog(config.catalog_dir)

    ctx = ControllerContext(
        client=client, informers=informers, registry=registry, clock=config.clock(),
        time_scale=config.time_scale, max_concurrent_reconciles=config.max_concurrent_reconciles,
        catalog=catalog,
        workflow_settings=WorkflowSettings(infra_scoped_fail_fast=config.infra_scoped_fail_fast))
    built = [Supervised(name, Draining(BY_NAME[name].build(ctx)), NO_RESTART)
             for name in config.controllers]
    return [*built, Supervised(INFORMERS, informers, NO_RESTART)]
