"""``cre-manager``: parse the configuration, run the start-up checks, then run the Manager.

Kept apart from :mod:`cre_manager.manager` so the process front (exit codes, logging setup,
client construction) is separate from supervision, and tests can run a :class:`Manager` with
their own runnables in-process.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Sequence

import anyio
from kubernetes_asyncio.config.config_exception import ConfigException
from prometheus_client import CollectorRegistry

from cre import __version__
from cre.kube.client import KubeClient
from cre.kube.leader import LeaderElector
from cre_manager.checks import check_api, check_catalog, check_resources
from cre_manager.config import ManagerConfig, parse_config
from cre_manager.controllers import required_resources, runnables
from cre_manager.errors import ConfigError, ExitCode, StartupError
from cre_manager.gcstats import freeze_heap, install_pause_metrics
from cre_manager.logs import setup_logging
from cre_manager.manager import Manager
from cre_manager.registry import manager_registry
from cre_manager.retry import StartupBudget

log = logging.getLogger("cre_manager")


async def connect(config: ManagerConfig) -> KubeClient:
    """A client from the resolved kubeconfig/context, else from the in-cluster config."""
    try:
        agent = f"cre-manager/{__version__}"
        if config.kubeconfig is None:
            return KubeClient.in_cluster(user_agent=agent)
        return await KubeClient.from_kubeconfig(config.kubeconfig, context=config.context,
                                                user_agent=agent)
    except (ConfigException, OSError, ValueError) as exc:
        flag = "--kubeconfig" if config.kubeconfig else "in-cluster config"
        raise ConfigError(flag, str(exc)) from None


async def run_manager(config: ManagerConfig, registry: CollectorRegistry | None = None
                      ) -> ExitCode:
    """Everything after flag parsing; returns the exit code (never raises a StartupError).
    ``registry``: where every metric goes and what /metrics serves (default: a fresh one)."""
    registry = registry if registry is not None else manager_registry()
    log.info("starting cre-manager", extra={
        "version": __version__, "controllers": list(config.controllers),
        "namespaces": list(config.namespaces) or "all",
        "leaderElection": config.leader_election is not None})
    client: KubeClient | None = None
    try:
        check_catalog(config.catalog_dir)
        client = await connect(config)
        budget = StartupBudget(config.startup_timeout)
        await check_api(client, budget=budget)
        await check_resources(client, required_resources(config.controllers),
                              namespaces=config.namespaces, budget=budget)
        elector = (LeaderElector(client, config.leader_election)
                   if config.leader_election is not None else None)
        code = await Manager(config=config, runnables=runnables(client, config, registry),
                             elector=elector,
                             on_synced=freeze_heap, registry=registry).run()
    except StartupError as exc:
        log.error(exc.message, extra={"exitCode": int(exc.code)})
        code = exc.code
    finally:
        if client is not None:
            with anyio.CancelScope(shield=True):
                await client.close()
    log.info("cre-manager exiting", extra={"exitCode": int(code)})
    return code


def main(argv: Sequence[str] | None = None) -> int:
    try:
        config = parse_config(argv)
    except ConfigError as exc:
        print(f"cre-manager: {exc.message}", file=sys.stderr)
        return int(exc.code)
    setup_logging(fmt=config.log_format, level=config.log_level)
    registry = manager_registry()
    install_pause_metrics(registry)
    # The ~90,000 objects the imports left behind live as long as the process: freezing them now
    # keeps every full collection while the informers list from walking them again (halves the GC
    # pauses before ready at 10,000 pods; docs/design/008-manager.md). The Manager freezes again
    # once the caches have synced.
    freeze_heap(after="start-up")
    code: ExitCode = anyio.run(run_manager, config, registry, backend="asyncio")
    logging.shutdown()
    return int(code)
