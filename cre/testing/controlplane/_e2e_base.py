"""The ``e2e_test.base`` module the client suites import, provided at test time (a pytest plugin).

The live tests in the published source distributions of the official Python client
(``kubernetes``, which also carries ``kubernetes.aio``) and of ``kubernetes_asyncio`` open with
``from <package>.e2e_test import base`` and call ``base.get_e2e_configuration()``; the
``e2e_test`` package itself is not in either distribution. This plugin (``pytest -p
cre.testing.controlplane._e2e_base``) registers that module for each package before the tests
are collected: its ``get_e2e_configuration()`` returns the package's own ``Configuration``
pointed at the server of the kubeconfig named by ``$CRE_CLIENTSUITE_KUBECONFIG`` (server URL,
CA file, bearer token: what the emulator and the real control plane write).
"""

from __future__ import annotations

import importlib
import os
import sys
import types
from typing import Any

from ruamel.yaml import YAML

KUBECONFIG_ENV = "CRE_CLIENTSUITE_KUBECONFIG"
PACKAGES = {
    "kubernetes": "kubernetes.client",
    "kubernetes.aio": "kubernetes.aio.client.configuration",
    "kubernetes_asyncio": "kubernetes_asyncio.client.configuration",
}
"""Each package whose tests import ``<package>.e2e_test.base``, and where its ``Configuration``
class lives."""


def _server() -> tuple[str, str | None, str]:
    """(server URL, CA file or None, bearer token) of the kubeconfig the suite runs against."""
    path = os.environ.get(KUBECONFIG_ENV)
    if not path:
        raise RuntimeError(f"${KUBECONFIG_ENV} names no kubeconfig for the client suite")
    config = YAML(typ="safe").load(open(path, encoding="utf-8"))  # noqa: SIM115
    cluster = config["clusters"][0]["cluster"]
    user = config["users"][0]["user"]
    return cluster["server"], cluster.get("certificate-authority"), user.get("token", "")


def _configuration_factory(where: str) -> Any:
    def get_e2e_configuration() -> Any:
        """The package's Configuration for the suite's server (what upstream's base does with
        ``~/.kube/config``, from ``$CRE_CLIENTSUITE_KUBECONFIG`` instead)."""
        server, ca_file, token = _server()
        config = importlib.import_module(where).Configuration()
        config.host = server
        if ca_file:
            config.ssl_ca_cert = ca_file
        else:
            config.verify_ssl = False
        if token:  # the generated clients' security scheme is named BearerToken
            config.api_key = {"BearerToken": token}
            config.api_key_prefix = {"BearerToken": "Bearer"}
        return config

    return get_e2e_configuration


def pytest_configure(config: Any) -> None:
    """Register ``<package>.e2e_test`` and its ``base`` for every package of the suites."""
    del config
    for package, where in PACKAGES.items():
        pkg = types.ModuleType(f"{package}.e2e_test")
        pkg.__path__ = []
        base = types.ModuleType(f"{package}.e2e_test.base")
        base.get_e2e_configuration = _configuration_factory(where)  # type: ignore[attr-defined]
        pkg.base = base  # type: ignore[attr-defined]
        sys.modules[pkg.__name__] = pkg
        sys.modules[base.__name__] = base
