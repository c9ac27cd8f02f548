"""Start-up rides out an API brown-out: transient answers on /version, discovery and the list
check are retried (Retry-After honoured) within the start-up budget; errors that waiting cannot
heal, and a spent budget, exit with their own codes."""

from __future__ import annotations

import json
import random
import urllib.request
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest
from ruamel.yaml import YAML

from cre.kube.client import ApiError, KubeClient
from cre.testing.apiserver import Emulator, serve
from cre.testing.apiserver.pytest_fixtures import default_crd_sources
from cre.testing.procs import Stack
from cre_manager.checks import check_api, check_resources
from cre_manager.controllers import RequiredResource, required_resources
from cre_manager.errors import ExitCode, StartupError
from cre_manager.retry import BudgetSpent, StartupBudget


class FakeTime:
    """A clock that only moves when start-up sleeps; ``on_sleep`` runs before each wake-up (a
    test heals the server there)."""

    def __init__(self, on_sleep: Callable[[int], None] = lambda n: None) -> None:
        self.now = 0.0
        self.sleeps: list[float] = []
        self.on_sleep = on_sleep

    def clock(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds
        self.on_sleep(len(self.sleeps))

    def budget(self, seconds: float = 60.0) -> StartupBudget:
        return StartupBudget(seconds, clock=self.clock, sleep=self.sleep, rng=random.Random(1))


@pytest.fixture
async def emu() -> AsyncIterator[Emulator]:
    async with serve(crds=default_crd_sources()) as emulator:
        yield emulator


@pytest.fixture
async def client(emu: Emulator) -> AsyncIterator[KubeClient]:
    kube = await KubeClient.from_kubeconfig(str(emu.kubeconfig_path))
    try:
        yield kube
    finally:
        await kube.close()


def _heal_after(emu: Emulator, sleeps: int) -> Callable[[int], None]:
    def heal(n: int) -> None:
        if n >= sleeps:
            emu.faults.reset()
    return heal


@pytest.mark.anyio
async def test_version_429_is_retried_after_retry_after(emu: Emulator, client: KubeClient
                                                        ) -> None:
    """/version answering 429 with Retry-After 3 is retried after exactly 3 s (the server's
    word, not our backoff) until it answers."""
    emu.faults.add_error(429, resource="version", retry_after=3)
    time = FakeTime(_heal_after(emu, 2))
    version = await check_api(client, budget=time.budget())
    assert version.startswith("v1.")
    assert time.sleeps == [3.0, 3.0]


@pytest.mark.anyio
async def test_discovery_5xx_and_list_5xx_are_retried_with_jittered_backoff(
        emu: Emulator, client: KubeClient) -> None:
    """Discovery answering 503 and the list check answering 500 are retried with growing,
    jittered backoff (no Retry-After on a 500) until the server heals."""
    emu.faults.add_error(503, resource="discovery", retry_after=0)
    emu.faults.add_error(500, verb="list")
    time = FakeTime(_heal_after(emu, 3))
    budget = time.budget()
    await check_resources(client, required_resources(("job",)), namespaces=(), budget=budget)
    assert budget.retries == 3
    assert len(time.sleeps) == 3
    # 200 ms doubling, each stretched by up to 50 % jitter.
    for attempt, slept in enumerate(time.sleeps, start=1):
        base = 0.2 * 2 ** (attempt - 1)
        assert base <= slept <= base * 1.5
    assert time.sleeps[0] != 0.2 or time.sleeps[1] != 0.4  # jittered, not a fixed ladder


@pytest.mark.anyio
async def test_outage_longer_than_the_budget_exits_3(emu: Emulator, client: KubeClient) -> None:
    """An outage that outlasts the start-up budget exits API_UNREACHABLE, saying how long and
    how often it tried and the last answer."""
    emu.faults.outage(600)
    time = FakeTime()
    with pytest.raises(StartupError) as caught:
        await check_api(client, budget=time.budget(5.0))
    assert caught.value.code == ExitCode.API_UNREACHABLE
    assert "in 5s (--startup-timeout)" in caught.value.message
    assert "503" in caught.value.message
    assert sum(time.sleeps) == pytest.approx(5.0)


@pytest.mark.anyio
async def test_missing_crds_exit_5_without_waiting(client: KubeClient, emu: Emulator) -> None:
    """A group that is not served (404) is not waited for: CRDS_MISSING at once, even after a
    transient error on the way."""
    emu.faults.add_error(503, resource="discovery", retry_after=0)
    time = FakeTime(_heal_after(emu, 1))
    missing = RequiredResource(group="nosuch.dev", version="v1", plural="widgets",
                               hint="install the widgets CRD")
    with pytest.raises(StartupError) as caught:
        await check_resources(client, [missing], namespaces=(), budget=time.budget())
    assert caught.value.code == ExitCode.CRDS_MISSING
    assert len(time.sleeps) == 1


@pytest.mark.anyio
@pytest.mark.parametrize("status,transient", [
    (0, True), (409, True), (429, True), (500, True), (502, True), (503, True), (504, True),
    (401, False), (403, False), (404, False), (422, False)])
async def test_which_errors_are_retried(status: int, transient: bool) -> None:
    """No connection, 409, 429 and 5xx are retried; 401/403/404/422 are raised at once."""
    calls: list[float] = []

    async def request(timeout: float) -> dict[str, str]:
        calls.append(timeout)
        if len(calls) == 1:
            raise ApiError(status=status, message="boom")
        return {"ok": "yes"}

    time = FakeTime()
    budget = time.budget()
    if transient:
        assert await budget.call("GET /x", request) == {"ok": "yes"}
        assert len(calls) == 2 and budget.retries == 1
    else:
        with pytest.raises(ApiError):
            await budget.call("GET /x", request)
        assert len(calls) == 1 and time.sleeps == []


@pytest.mark.anyio
async def test_budget_spent_names_the_request() -> None:
    """A request that keeps failing transiently ends in BudgetSpent naming it and the count."""
    async def request(timeout: float) -> None:
        raise ApiError(status=503, message="down", retry_after=2.0)

    time = FakeTime()
    with pytest.raises(BudgetSpent, match=r"GET /version: still failing after 6 attempt\(s\)"):
        await time.budget(10.0).call("GET /version", request)
    assert time.sleeps == [2.0] * 5


def _emulator_url(kubeconfig: str) -> str:
    doc = YAML(typ="safe").load(Path(kubeconfig).read_text())
    return str(doc["clusters"][0]["cluster"]["server"])


def _faults(url: str, spec: dict[str, object]) -> None:
    req = urllib.request.Request(f"{url}/_emulator/faults", data=json.dumps(spec).encode(),
                                 headers={"Content-Type": "application/json"}, method="POST")
    with urllib.request.urlopen(req, timeout=10) as resp:
        assert resp.status == 200


def test_manager_started_during_an_outage_comes_up() -> None:
    """A manager started while the API server answers 503 to everything (an outage of a few
    seconds) keeps retrying and becomes ready once the server is back; its log shows the
    retries."""
    with Stack() as stack:
        stack.start_emulator()
        _faults(_emulator_url(str(stack.kubeconfig)), {"outageSeconds": 3})
        manager = stack.start_manager("--startup-timeout", "60s")
        assert manager.ready()
        retries = [r for r in manager.json_records()
                   if r.get("msg") == "start-up request failed, retrying"]
        assert retries and retries[0]["request"] == "GET /version"
        assert retries[0]["status"] == 503
