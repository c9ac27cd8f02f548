"""Fault injection: seeded error rates, Retry-After, outages, dropped watches, forced 410."""

from __future__ import annotations

import json

import aiohttp
import pytest

from cre.testing.apiserver import Emulator

from .conftest import PODS, Client, pod

pytestmark = pytest.mark.anyio


async def test_error_rate_per_verb_and_resource(client: Client, emu: Emulator) -> None:
    """A 429 rule on pod creates fails them with Retry-After and leaves other verbs alone."""
    emu.faults.add_error(429, rate=1.0, verb="create", resource="pods", retry_after=3)
    status, body, headers = await client.post(PODS, pod("p"))
    assert status == 429 and headers["Retry-After"] == "3"
    assert body["details"]["retryAfterSeconds"] == 3
    status, _, _ = await client.get(PODS)
    assert status == 200
    status, _, _ = await client.post("/api/v1/namespaces/default/configmaps",
                                     {"metadata": {"name": "c"}})
    assert status == 201


async def test_conflict_rules_only_hit_writes(client: Client, emu: Emulator) -> None:
    """A 409 rule on every verb fails creates, patches and deletes but never get/list/watch."""
    assert (await client.post(PODS, pod("c0")))[0] == 201
    emu.faults.add_error(409, rate=1.0)
    for status, _, _ in (await client.get(PODS), await client.get(f"{PODS}/c0")):
        assert status == 200
    async with aiohttp.ClientSession() as s, s.get(
            f"{emu.url}{PODS}?watch=true&timeoutSeconds=1") as r:
        assert r.status == 200
    status, body, _ = await client.post(PODS, pod("c1"))
    assert status == 409 and body["reason"] == "Conflict"
    assert (await client.delete(f"{PODS}/c0"))[0] == 409


async def test_seeded_rates_are_reproducible(emu: Emulator, client: Client) -> None:
    """The same seed and request sequence fail the same requests."""
    async def run() -> list[int]:
        emu.faults.reset(seed=7)
        emu.faults.add_error(500, rate=0.5, verb="list")
        return [(await client.get(PODS))[0] for _ in range(20)]

    first, second = await run(), await run()
    assert first == second
    assert {500, 200} == set(first)


@pytest.mark.emulator_only('the /_emulator/faults control API')
async def test_outage_and_http_configuration(client: Client) -> None:
    """POST /_emulator/faults configures an outage (503) and DELETE clears it."""
    status, desc, _ = await client.post("/_emulator/faults", {"outageSeconds": 600})
    assert status == 200 and desc["inOutage"] is True
    status, body, _ = await client.get(PODS)
    assert status == 503 and body["reason"] == "ServiceUnavailable"
    status, _, _ = await client.delete("/_emulator/faults")
    assert status == 204
    assert (await client.get(PODS))[0] == 200


async def test_watch_dropped_after_n_events(client: Client, emu: Emulator) -> None:
    """A watch fault ends streams after N events."""
    for i in range(3):
        await client.post(PODS, pod(f"p{i}"))
    emu.faults.configure({"watch": {"afterEvents": 2}})
    async with aiohttp.ClientSession() as s, s.get(f"{emu.url}{PODS}?watch=true") as r:
        lines = (await r.content.read()).splitlines()
    assert [json.loads(x)["type"] for x in lines] == ["ADDED", "ADDED"]


async def test_forced_410_on_resume(client: Client, emu: Emulator) -> None:
    """force410OnResume answers any watch resume with an Expired ERROR event."""
    _, created, _ = await client.post(PODS, pod("p"))
    emu.faults.configure({"force410OnResume": True})
    rv = created["metadata"]["resourceVersion"]
    async with aiohttp.ClientSession() as s, s.get(
            f"{emu.url}{PODS}?watch=true&resourceVersion={rv}") as r:
        ev = json.loads(await r.content.readline())
    assert ev["type"] == "ERROR" and ev["object"]["code"] == 410


async def test_watch_dropped_after_seconds(client: Client, emu: Emulator) -> None:
    """A time-based watch fault ends an idle stream without any event."""
    _, created, _ = await client.post(PODS, pod("p"))
    emu.faults.configure({"watch": {"afterSeconds": 0.2}})
    rv = created["metadata"]["resourceVersion"]
    async with aiohttp.ClientSession() as s, s.get(
            f"{emu.url}{PODS}?watch=true&resourceVersion={rv}") as r:
        assert await r.content.read() == b""


async def test_latency_is_configurable_over_http(client: Client, emu: Emulator) -> None:
    """The fault spec sets added latency; GET /_emulator/faults reports it."""
    status, desc, _ = await client.post("/_emulator/faults", {"latency": 0.01, "seed": 3})
    assert status == 200 and desc["latency"] == 0.01
    assert emu.faults.latency == 0.01
    assert (await client.get(PODS))[0] == 200


async def test_drop_watches_ends_open_streams(client: Client, emu: Emulator) -> None:
    """drop_watches ends the open pod watch (and only watches of the named resource)."""
    _, created, _ = await client.post(PODS, pod("p"))
    rv = created["metadata"]["resourceVersion"]
    async with aiohttp.ClientSession() as s, s.get(
            f"{emu.url}{PODS}?watch=true&resourceVersion={rv}") as r:
        await client.post(PODS, pod("q"))
        first = json.loads(await r.content.readline())
        assert emu.faults.drop_watches("configmaps") == 0
        assert emu.faults.drop_watches() == 1
        rest = await r.content.read()
    assert first["type"] == "ADDED" and rest == b""


async def test_drop_watches_over_http(client: Client, emu: Emulator) -> None:
    """POST /_emulator/faults {"dropWatches": true} ends every open watch stream."""
    _, created, _ = await client.post(PODS, pod("p"))
    rv = created["metadata"]["resourceVersion"]
    async with aiohttp.ClientSession() as s, s.get(
            f"{emu.url}{PODS}?watch=true&resourceVersion={rv}") as r:
        await client.post(PODS, pod("q"))
        await r.content.readline()
        status, desc, _ = await client.post("/_emulator/faults", {"dropWatches": True})
        assert status == 200 and desc["injected"] == 1
        assert await r.content.read() == b""


async def test_gone_status_answers_resume_with_http_410(client: Client, emu: Emulator) -> None:
    """watchGoneStatus answers the next resume with an HTTP 410 Expired Status, then streams."""
    _, created, _ = await client.post(PODS, pod("p"))
    rv = created["metadata"]["resourceVersion"]
    status, _, _ = await client.post("/_emulator/faults", {"watchGoneStatus": 1})
    assert status == 200
    url = f"{emu.url}{PODS}?watch=true&resourceVersion={rv}"
    async with aiohttp.ClientSession() as s:
        async with s.get(url) as r:
            body = await r.json()
        assert r.status == 410
        assert body["kind"] == "Status" and body["reason"] == "Expired" and body["code"] == 410
        assert body["message"].startswith(f"too old resource version: {rv} (")
        async with s.get(url) as r:
            await client.post(PODS, pod("q"))
            ev = json.loads(await r.content.readline())
        assert r.status == 200 and ev["type"] == "ADDED"
    assert emu.faults.gone_status_remaining == 0


async def test_refuse_create_answers_as_admission_would(client: Client, emu: Emulator) -> None:
    """refuseCreate makes every create of the resource fail with the real Status shape: 403
    Forbidden naming the object, 422 Invalid with one cause, 409 AlreadyExists, 400 BadRequest;
    other resources and other verbs are untouched, and the refusal lasts until removed."""
    denial = 'admission webhook "trainjob.example.com" denied the request: no GPUs for you'
    emu.faults.configure({"refuseCreate": {"resource": "pods", "code": 403,
                                           "message": denial}})
    status, body, _ = await client.post(PODS, pod("p"))
    assert status == 403
    assert (body["kind"], body["status"], body["reason"], body["code"]) == (
        "Status", "Failure", "Forbidden", 403)
    assert body["message"] == f'pods "p" is forbidden: {denial}'
    assert body["details"] == {"name": "p", "kind": "pods"}
    assert (await client.post(PODS, pod("q")))[0] == 403  # not a one-off: every create
    assert (await client.get(PODS))[0] == 200
    assert (await client.post("/api/v1/namespaces/default/configmaps",
                              {"metadata": {"name": "c"}}))[0] == 201
    emu.faults.configure({"refuseCreate": {"resource": "pods", "remove": True}})
    assert (await client.post(PODS, pod("p")))[0] == 201

    emu.faults.refuse_create("configmaps", 422, "must name an existing runtime",
                             field="spec.runtimeRef.name", times=1)
    status, body, _ = await client.post("/api/v1/namespaces/default/configmaps",
                                        {"metadata": {"name": "c2"}})
    assert status == 422 and body["reason"] == "Invalid"
    assert body["message"] == ('ConfigMap "c2" is invalid: spec.runtimeRef.name: must name an '
                               'existing runtime')
    assert body["details"]["kind"] == "ConfigMap" and body["details"]["name"] == "c2"
    assert body["details"]["causes"] == [{"reason": "FieldValueInvalid",
                                          "message": "must name an existing runtime",
                                          "field": "spec.runtimeRef.name"}]
    assert (await client.post("/api/v1/namespaces/default/configmaps",
                              {"metadata": {"name": "c3"}}))[0] == 201  # times: 1 spent

    emu.faults.refuse_create("pods", 409, "", name="taken")
    status, body, _ = await client.post(PODS, pod("taken"))
    assert status == 409 and body["reason"] == "AlreadyExists"
    assert body["message"] == 'pods "taken" already exists'
    assert (await client.post(PODS, pod("free")))[0] == 201  # only that name
    emu.faults.refuse_create("pods", 400, "bad request from a policy")
    status, body, _ = await client.post(PODS, pod("other"))
    assert status == 400 and body["reason"] == "BadRequest"
    assert body["message"] == "bad request from a policy"
    described = emu.faults.describe()["refuseCreate"]
    assert [(r["resource"], r["code"]) for r in described] == [
        ("configmaps", 422), ("pods", 409), ("pods", 400)]


async def test_a_create_with_malformed_metadata_is_a_400_not_a_crash(
        client: Client, emu: Emulator) -> None:
    """The create-refusal check reads the name only from an object ``metadata``: a body whose
    metadata is a string gets the decoder's 400, never a 500 from the fault hook."""
    status, body, _ = await client.post("/api/v1/namespaces/default/configmaps",
                                        {"apiVersion": "v1", "kind": "ConfigMap",
                                         "metadata": "x"})
    assert status == 400 and body["reason"] == "BadRequest"


def test_refuse_create_rejects_codes_that_are_not_refusals() -> None:
    """A refuseCreate code other than 400/403/409/422 is a configuration error naming it."""
    from cre.testing.apiserver.faults import Faults

    with pytest.raises(ValueError, match=r"refuseCreate\.code must be one of"):
        Faults().configure({"refuseCreate": {"resource": "pods", "code": 500}})


@pytest.mark.emulator_only('the /_emulator/faults control API')
async def test_refuse_create_over_http(client: Client) -> None:
    """POST /_emulator/faults {"refuseCreate": ...} refuses creates (the description lists the
    rule), a bad code is a 400 naming it, and DELETE clears the refusal."""
    rule = {"resource": "pods", "code": 403,
            "message": 'admission webhook "p.example.com" denied the request: no'}
    status, desc, _ = await client.post("/_emulator/faults", {"refuseCreate": rule})
    assert status == 200
    assert [(r["resource"], r["code"]) for r in desc["refuseCreate"]] == [("pods", 403)]
    status, body, _ = await client.post(PODS, pod("http-refused"))
    assert status == 403 and body["reason"] == "Forbidden"
    status, body, _ = await client.post("/_emulator/faults",
                                        {"refuseCreate": {"resource": "pods", "code": 418}})
    assert status == 400 and "refuseCreate.code must be one of" in body["message"]
    assert (await client.delete("/_emulator/faults"))[0] == 204
    assert (await client.post(PODS, pod("http-refused")))[0] == 201
