"""Leader election on a ``coordination.k8s.io/v1`` Lease, as client-go's ``leaderelection`` does.

Several manager replicas may run for availability, but only one may reconcile at a time: two
writers racing on the same Job would create duplicate TrainJobs and overwrite each other's status.
The API server does nothing special for Leases; correctness rests entirely on optimistic
concurrency (every PUT carries the resourceVersion it read, a concurrent writer gets 409).

Behaviour followed (client-go ``tools/leaderelection``):

* each try renews the cached Lease when this replica leads and its lease is still valid locally;
  otherwise it GETs the Lease, creates it on 404, gives up while another holder's lease is
  unexpired, else takes it over with a PUT (``leaseTransitions`` + 1 when the holder changes);
* expiry is judged from the local monotonic time at which this replica last saw the record
  *change*, never from the ``renewTime`` written by another machine (clocks may disagree);
* acquiring retries every ``retry_period`` (jittered by up to 1.2x); renewing retries every
  ``retry_period`` and gives up leadership when no renewal succeeded for ``renew_deadline``;
* on release (shutdown) the Lease is written with an empty ``holderIdentity`` and a 1 s duration,
  so a standby takes over at its next try instead of waiting out the lease.

Left out: ConfigMap/Endpoints locks, coordinated leader election (``strategy`` and
``preferredHolder``), and the health-check adaptor (readiness uses :meth:`LeaderElector.healthy`).
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import Any

import anyio
import attrs

from cre.kube.client import LEASES, ApiError, KubeClient

log = logging.getLogger("cre.kube.leader")

JITTER_FACTOR = 1.2
_MICROTIME = "%Y-%m-%dT%H:%M:%S.%fZ"


class LeadershipLost(Exception):
    """This replica led, then could not renew its lease within the renew deadline."""


def _positive(_inst: Any, attribute: attrs.Attribute[float], value: float) -> None:
    if value <= 0:
        raise ValueError(f"{attribute.name} must be greater than 0, got {value}")


@attrs.frozen(slots=True)
class LeaderElectionConfig:
    """Where the Lease lives, who we are, and the three timings (client-go's 15 s / 10 s / 2 s)."""

    lease_name: str
    lease_namespace: str
    identity: str
    lease_duration: float = attrs.field(default=15.0, validator=_positive)
    renew_deadline: float = attrs.field(default=10.0, validator=_positive)
    retry_period: float = attrs.field(default=2.0, validator=_positive)
    release_on_cancel: bool = True

    def __attrs_post_init__(self) -> None:
        for field, value in (("lease_name", self.lease_name),
                             ("lease_namespace", self.lease_namespace),
                             ("identity", self.identity)):
            if not value:
                raise ValueError(f"{field} must not be empty")
        if self.lease_duration <= self.renew_deadline:
            raise ValueError(f"lease_duration ({self.lease_duration}) must be greater than "
                             f"renew_deadline ({self.renew_deadline})")
        if self.renew_deadline <= JITTER_FACTOR * self.retry_period:
            raise ValueError(f"renew_deadline ({self.renew_deadline}) must be greater than "
                             f"{JITTER_FACTOR} x retry_period ({self.retry_period})")


@attrs.frozen(slots=True)
class LeaderRecord:
    """The election-relevant part of a Lease's ``spec``."""

    holder_identity: str = ""
    lease_duration_seconds: int = 0
    acquire_time: str | None = None
    renew_time: str | None = None
    lease_transitions: int = 0

    @classmethod
    def from_lease(cls, lease: dict[str, Any]) -> LeaderRecord:
        spec = lease.get("spec") or {}
        return cls(holder_identity=str(spec.get("holderIdentity") or ""),
                   lease_duration_seconds=int(spec.get("leaseDurationSeconds") or 0),
                   acquire_time=spec.get("acquireTime"), renew_time=spec.get("renewTime"),
                   lease_transitions=int(spec.get("leaseTransitions") or 0))

    def to_spec(self) -> dict[str, Any]:
        return {"holderIdentity": self.holder_identity,
                "leaseDurationSeconds": self.lease_duration_seconds,
                "acquireTime": self.acquire_time, "renewTime": self.renew_time,
                "leaseTransitions": self.lease_transitions}


def microtime(moment: datetime) -> str:
    """A ``metav1.MicroTime``: RFC 3339 in UTC with six fractional digits."""
    return moment.astimezone(UTC).strftime(_MICROTIME)


def _utcnow() -> datetime:
    return datetime.now(UTC)


class LeaderElector:
    """Acquire, hold and release one Lease; see the module docstring for the protocol.

    ``run`` is the whole life cycle with callbacks; ``try_acquire_or_renew`` and ``release`` are
    the single steps, public so tests and tools can drive an election by hand.
    """

    def __init__(self, client: KubeClient, config: LeaderElectionConfig, *,
                 clock: Callable[[], float] = time.monotonic,
                 wall_clock: Callable[[], datetime] = _utcnow,
                 jitter: Callable[[], float] = random.random) -> None:
        self._client = client
        self.config = config
        self._clock = clock
        self._wall = wall_clock
        self._jitter = jitter
        self._lease: dict[str, Any] | None = None
        self._observed: LeaderRecord | None = None
        self._observed_at = 0.0
        self._last_contact: float | None = None
        self._reported_leader = ""
        self._on_new_leader: Callable[[str], None] | None = None

    # -- state ---------------------------------------------------------------------------------

    @property
    def identity(self) -> str:
        return self.config.identity

    @property
    def leader(self) -> str:
        """The holder this replica last observed ('' when none or released)."""
        return self._observed.holder_identity if self._observed else ""

    def is_leader(self) -> bool:
        return self._observed is not None and self._observed.holder_identity == self.identity

    def healthy(self) -> bool:
        """True when the API server answered one of our Lease requests within a lease duration.

        A standby replica is healthy while it can see who leads; a leader is healthy while its
        lease is valid by its own clock.
        """
        if self._last_contact is None:
            return False
        return self._clock() - self._last_contact < self.config.lease_duration

    def _lease_valid_locally(self) -> bool:
        return self._observed_at + self.config.lease_duration > self._clock()

    def _observe(self, lease: dict[str, Any]) -> None:
        record = LeaderRecord.from_lease(lease)
        now = self._clock()
        self._lease = lease
        self._last_contact = now
        if record != self._observed:
            self._observed = record
            self._observed_at = now
        if record.holder_identity != self._reported_leader:
            self._reported_leader = record.holder_identity
            log.info("observed lease holder", extra={
                "lease": f"{self.config.lease_namespace}/{self.config.lease_name}",
                "holder": record.holder_identity or "<none>"})
            if self._on_new_leader is not None:
                self._on_new_leader(record.holder_identity)

    # -- single steps ----------------------------------------------------------------------------

    def _desired(self, *, acquire_time: str, transitions: int) -> LeaderRecord:
        return LeaderRecord(holder_identity=self.identity,
                            lease_duration_seconds=max(1, round(self.config.lease_duration)),
                            acquire_time=acquire_time, renew_time=microtime(self._wall()),
                            lease_transitions=transitions)

    async def _put(self, base: dict[str, Any], record: LeaderRecord) -> dict[str, Any]:
        body = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                "metadata": {**base["metadata"]}, "spec": {**(base.get("spec") or {}),
                                                           **record.to_spec()}}
        return await self._client.replace(LEASES, body)

    async def try_acquire_or_renew(self) -> bool:
        """One try: True when this replica holds the Lease afterwards."""
        cfg = self.config
        # Fast path: we lead and our lease is valid, so PUT the copy we hold with a new renewTime.
        if self.is_leader() and self._lease is not None and self._lease_valid_locally():
            assert self._observed is not None
            record = self._desired(acquire_time=self._observed.acquire_time or microtime(
                self._wall()), transitions=self._observed.lease_transitions)
            try:
                self._observe(await self._put(self._lease, record))
                return True
            except ApiError as exc:
                log.info("lease renewal failed, re-reading the lease",
                         extra={"error": str(exc)})
        try:
            current = await self._client.get(LEASES, cfg.lease_name,
                                             namespace=cfg.lease_namespace)
        except ApiError as exc:
            if not exc.not_found:
                log.warning("cannot read the lease", extra={"error": str(exc)})
                return False
            now = microtime(self._wall())
            record = self._desired(acquire_time=now, transitions=0)
            body = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                    "metadata": {"name": cfg.lease_name, "namespace": cfg.lease_namespace},
                    "spec": record.to_spec()}
            try:
                self._observe(await self._client.create(LEASES, body))
            except ApiError as create_exc:
                if create_exc.already_exists:
                    log.info("another candidate created the lease first")
                else:
                    log.warning("cannot create the lease", extra={"error": str(create_exc)})
                return False
            return True
        self._observe(current)
        assert self._observed is not None
        held = self._observed
        if (held.holder_identity and held.holder_identity != self.identity
                and self._lease_valid_locally_for(held)):
            return False
        if held.holder_identity == self.identity:
            record = self._desired(acquire_time=held.acquire_time or microtime(self._wall()),
                                   transitions=held.lease_transitions)
        else:
            record = self._desired(acquire_time=microtime(self._wall()),
                                   transitions=held.lease_transitions + 1)
        try:
            self._observe(await self._put(current, record))
        except ApiError as exc:
            log.info("lease takeover failed", extra={"error": str(exc)})
            return False
        return True

    def _lease_valid_locally_for(self, record: LeaderRecord) -> bool:
        duration = record.lease_duration_seconds or self.config.lease_duration
        return self._observed_at + duration > self._clock()

    async def release(self) -> bool:
        """Give the Lease up (empty holder, 1 s duration); True when written or not ours."""
        if not self.is_leader() or self._lease is None or self._observed is None:
            return True
        now = microtime(self._wall())
        record = LeaderRecord(holder_identity="", lease_duration_seconds=1, acquire_time=now,
                              renew_time=now, lease_transitions=self._observed.lease_transitions)
        try:
            try:
                self._observe(await self._put(self._lease, record))
            except ApiError as exc:
                if not exc.conflict:
                    raise
                # Our copy is stale (a renewal was cut off after the server applied it):
                # re-read, and release only if the Lease is still ours.
                fresh = await self._client.get(LEASES, self.config.lease_name,
                                               namespace=self.config.lease_namespace)
                if LeaderRecord.from_lease(fresh).holder_identity != self.identity:
                    self._observe(fresh)
                    return True
                self._observe(await self._put(fresh, record))
        except ApiError as exc:
            log.error("failed to release the lease", extra={"error": str(exc)})
            return False
        log.info("released the lease",
                 extra={"lease": f"{self.config.lease_namespace}/{self.config.lease_name}"})
        return True

    # -- life cycle -------------------------------------------------------------------------------

    async def acquire(self) -> None:
        """Try every retry period (jittered) until this replica holds the Lease."""
        lease = f"{self.config.lease_namespace}/{self.config.lease_name}"
        log.info("attempting to acquire the lease", extra={"lease": lease,
                                                           "identity": self.identity})
        while not await self.try_acquire_or_renew():
            period = self.config.retry_period
            await anyio.sleep(period + self._jitter() * JITTER_FACTOR * period)
        log.info("acquired the lease", extra={"lease": lease, "identity": self.identity})

    async def renew_until_lost(self) -> None:
        """Renew every retry period; return once no renewal succeeded within the deadline."""
        cfg = self.config
        while True:
            renewed = False
            with anyio.move_on_after(cfg.renew_deadline):
                while True:
                    renewed = await self.try_acquire_or_renew()
                    if renewed:
                        break
                    await anyio.sleep(cfg.retry_period)
            if not renewed:
                return
            await anyio.sleep(cfg.retry_period)

    async def run(self, *, on_started_leading: Callable[[], Awaitable[None]],
                  on_stopped_leading: Callable[[], None] | None = None,
                  on_new_leader: Callable[[str], None] | None = None) -> None:
        """Acquire, run ``on_started_leading`` while renewing, then give the lease up.

        * ``on_started_leading`` returns: the Lease is released (when ``release_on_cancel``)
          and ``run`` returns.
        * The lease is lost: ``on_started_leading`` is cancelled and :class:`LeadershipLost` is
          raised (the caller should exit so the process restarts clean).
        * ``run`` is cancelled: the work is cancelled, the Lease released under a shield.
        ``on_stopped_leading`` is called whenever leadership ends after it began.
        """
        self._on_new_leader = on_new_leader
        await self.acquire()
        lost = False
        try:
            async with anyio.create_task_group() as tg:
                async def work() -> None:
                    await on_started_leading()
                    tg.cancel_scope.cancel()

                tg.start_soon(work)
                await self.renew_until_lost()
                lost = True
                tg.cancel_scope.cancel()
        finally:
            if lost:
                self._observed = None
                log.error("leader election lost", extra={
                    "lease": f"{self.config.lease_namespace}/{self.config.lease_name}",
                    "identity": self.identity})
            elif self.config.release_on_cancel:
                with anyio.CancelScope(shield=True), anyio.move_on_after(self.config.retry_period
                                                                         + 5.0):
                    await self.release()
            if on_stopped_leading is not None:
                on_stopped_leading()
        if lost:
            raise LeadershipLost(f"lost lease {self.config.lease_namespace}/"
                                 f"{self.config.lease_name} held as {self.identity}")
