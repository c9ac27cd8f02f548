"""Lease-based leader election (cre.kube.leader) against the API emulator."""

from __future__ import annotations

from collections.abc import AsyncIterator

import anyio
import pytest

from cre.kube.client import LEASES, NAMESPACES, KubeClient
from cre.kube.leader import LeaderElectionConfig, LeaderElector, LeadershipLost
from cre.testing.apiserver import serve

pytestmark = pytest.mark.anyio

NS, NAME = "cre-system", "cre-manager.cre.dev"


class Ticks:
    """A monotonic clock the test advances by hand."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
async def client() -> AsyncIterator[KubeClient]:
    async with serve() as emu:
        kc = await KubeClient.from_kubeconfig(str(emu.kubeconfig_path))
        await kc.create(NAMESPACES, {"apiVersion": "v1", "kind": "Namespace",
                                     "metadata": {"name": NS}})
        try:
            yield kc
        finally:
            await kc.close()


def _config(identity: str, *, fast: bool = False) -> LeaderElectionConfig:
    if fast:
        return LeaderElectionConfig(lease_name=NAME, lease_namespace=NS, identity=identity,
                                    lease_duration=1.5, renew_deadline=1.0, retry_period=0.1)
    return LeaderElectionConfig(lease_name=NAME, lease_namespace=NS, identity=identity)


async def _spec(client: KubeClient) -> dict[str, object]:
    lease = await client.get(LEASES, NAME, namespace=NS)
    spec: dict[str, object] = lease["spec"]
    return spec


def test_config_validation() -> None:
    """Timings must satisfy lease > renew deadline > 1.2 x retry period, all positive."""
    with pytest.raises(ValueError, match="lease_duration"):
        LeaderElectionConfig(lease_name=NAME, lease_namespace=NS, identity="a",
                             lease_duration=5, renew_deadline=10)
    with pytest.raises(ValueError, match="renew_deadline"):
        LeaderElectionConfig(lease_name=NAME, lease_namespace=NS, identity="a",
                             renew_deadline=2, retry_period=2)
    with pytest.raises(ValueError, match="retry_period must be greater than 0"):
        LeaderElectionConfig(lease_name=NAME, lease_namespace=NS, identity="a", retry_period=0)
    with pytest.raises(ValueError, match="identity must not be empty"):
        LeaderElectionConfig(lease_name=NAME, lease_namespace=NS, identity="")


async def test_first_try_creates_the_lease(client: KubeClient) -> None:
    """With no Lease, the first try creates it with us as holder and zero transitions."""
    elector = LeaderElector(client, _config("a"))
    assert await elector.try_acquire_or_renew()
    assert elector.is_leader() and elector.healthy()
    spec = await _spec(client)
    assert spec["holderIdentity"] == "a"
    assert spec["leaseDurationSeconds"] == 15
    assert spec["leaseTransitions"] == 0
    assert str(spec["renewTime"]).endswith("Z") and "." in str(spec["renewTime"])


async def test_standby_cannot_take_a_valid_lease(client: KubeClient) -> None:
    """While the holder renews, another candidate's tries fail and it sees who leads."""
    a, b = LeaderElector(client, _config("a")), LeaderElector(client, _config("b"))
    assert await a.try_acquire_or_renew()
    assert not await b.try_acquire_or_renew()
    assert await a.try_acquire_or_renew()
    assert not await b.try_acquire_or_renew()
    assert b.leader == "a" and not b.is_leader() and b.healthy()


async def test_renewal_keeps_acquire_time_and_transitions(client: KubeClient) -> None:
    """Renewing changes renewTime only."""
    a = LeaderElector(client, _config("a"))
    assert await a.try_acquire_or_renew()
    before = await _spec(client)
    assert await a.try_acquire_or_renew()
    after = await _spec(client)
    assert after["acquireTime"] == before["acquireTime"]
    assert after["leaseTransitions"] == before["leaseTransitions"]
    assert after["renewTime"] != before["renewTime"]


async def test_release_hands_over_at_the_next_try(client: KubeClient) -> None:
    """A released Lease (empty holder, 1 s) is taken at once, counting one transition."""
    a, b = LeaderElector(client, _config("a")), LeaderElector(client, _config("b"))
    assert await a.try_acquire_or_renew()
    assert await a.release()
    spec = await _spec(client)
    assert spec["holderIdentity"] == "" and spec["leaseDurationSeconds"] == 1
    assert not a.is_leader()
    assert await b.try_acquire_or_renew()
    spec = await _spec(client)
    assert spec["holderIdentity"] == "b"
    assert spec["leaseTransitions"] == 1


async def test_expired_lease_is_taken_over(client: KubeClient) -> None:
    """Once the holder stops renewing for a lease duration (by the candidate's clock), it wins."""
    ticks = Ticks()
    a = LeaderElector(client, _config("a"))
    b = LeaderElector(client, _config("b"), clock=ticks)
    assert await a.try_acquire_or_renew()
    assert not await b.try_acquire_or_renew()
    ticks.now += 14.9
    assert not await b.try_acquire_or_renew()
    ticks.now += 0.2
    assert await b.try_acquire_or_renew()
    assert (await _spec(client))["holderIdentity"] == "b"
    # The old holder's fast-path renewal now conflicts and it sees b's valid lease.
    assert not await a.try_acquire_or_renew()
    assert a.leader == "b"


async def test_racing_candidates_have_one_winner(client: KubeClient) -> None:
    """Candidates racing for a free Lease: optimistic concurrency lets exactly one win."""
    electors = [LeaderElector(client, _config(f"c{i}")) for i in range(5)]
    results: list[bool] = []

    async def attempt(e: LeaderElector) -> None:
        results.append(await e.try_acquire_or_renew())

    async with anyio.create_task_group() as tg:
        for e in electors:
            tg.start_soon(attempt, e)
    assert results.count(True) == 1
    winner = next(e for e in electors if e.is_leader())
    assert (await _spec(client))["holderIdentity"] == winner.identity


async def test_run_releases_when_work_returns(client: KubeClient) -> None:
    """run() calls back when leading and releases the Lease when the work returns."""
    elector = LeaderElector(client, _config("a", fast=True))
    seen: list[str] = []

    async def work() -> None:
        seen.append((await _spec(client))["holderIdentity"])  # type: ignore[arg-type]

    stopped: list[bool] = []
    await elector.run(on_started_leading=work, on_stopped_leading=lambda: stopped.append(True),
                      on_new_leader=seen.append)
    assert seen == ["a", "a", ""]  # on_new_leader("a"), the work's read, the release
    assert stopped == [True]
    assert (await _spec(client))["holderIdentity"] == ""


async def test_run_cancelled_releases(client: KubeClient) -> None:
    """Cancelling run() cancels the work and releases the Lease."""
    elector = LeaderElector(client, _config("a", fast=True))
    leading = anyio.Event()

    async def work() -> None:
        leading.set()
        await anyio.sleep_forever()

    async with anyio.create_task_group() as tg:
        tg.start_soon(lambda: elector.run(on_started_leading=work))
        await leading.wait()
        tg.cancel_scope.cancel()
    assert (await _spec(client))["holderIdentity"] == ""


async def test_stolen_lease_is_lost(client: KubeClient) -> None:
    """If another writer keeps the Lease, renewal fails past the deadline: work is cancelled
    and LeadershipLost raised, without releasing the thief's Lease."""
    elector = LeaderElector(client, _config("a", fast=True))
    leading, cancelled = anyio.Event(), anyio.Event()

    async def work() -> None:
        leading.set()
        try:
            await anyio.sleep_forever()
        finally:
            cancelled.set()

    ticks = Ticks()
    thief = LeaderElector(client, _config("thief", fast=True), clock=ticks)

    async def steal() -> None:
        await leading.wait()
        while True:  # the thief's clock runs fast: a's lease always looks expired to it
            ticks.now += 100
            if await thief.try_acquire_or_renew():
                break
        while not cancelled.is_set():  # keep renewing as the new holder
            await thief.try_acquire_or_renew()
            await anyio.sleep(0.05)

    with pytest.RaisesGroup(LeadershipLost):
        async with anyio.create_task_group() as tg:
            tg.start_soon(steal)
            await elector.run(on_started_leading=work)
    assert cancelled.is_set()
    assert (await _spec(client))["holderIdentity"] == "thief"
