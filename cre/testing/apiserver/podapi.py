"""The pod subresources that are not storage: ``/log``, ``/eviction`` and ``/binding``.

``/log`` follows ``pkg/registry/core/pod/rest/log.go`` plus the kubelet's container checks
(400 for a missing or unknown container, 204 for an unscheduled pod, 422 for bad options).
``/eviction`` follows ``pkg/registry/core/pod/storage/eviction.go`` without
PodDisruptionBudgets (out of scope: no PDB resource is served): the pod gets the
``DisruptionTarget`` condition, then the normal graceful delete runs with the eviction's
``deleteOptions``; the answer is a 201 Success Status.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

from aiohttp import web

from . import errors
from .errors import StatusCause
from .httpio import json_response
from .logs import LogOptions
from .meta import parse_time
from .query import check_dry_run, delete_options, parse_bool, parse_int
from .writectx import WriteOptions

if TYPE_CHECKING:
    from .context import ServerContext
    from .httpio import Route

FOLLOW_POLL = 0.25  # seconds between checks whether a followed container has stopped


def _log_options(pod: str, q: Any) -> LogOptions:
    causes: list[StatusCause] = []
    tail = parse_int(q.get("tailLines"), name="tailLines")
    limit = parse_int(q.get("limitBytes"), name="limitBytes")
    since_s = parse_int(q.get("sinceSeconds"), name="sinceSeconds")
    since_t_text = q.get("sinceTime")
    if tail is not None and tail < 0:
        causes.append(StatusCause("FieldValueInvalid",
                                  f"Invalid value: {tail}: must be greater than or equal to 0",
                                  "tailLines"))
    if limit is not None and limit < 1:
        causes.append(StatusCause("FieldValueInvalid",
                                  f"Invalid value: {limit}: must be greater than 0",
                                  "limitBytes"))
    if since_s is not None and since_s < 1:
        causes.append(StatusCause("FieldValueInvalid",
                                  f"Invalid value: {since_s}: must be greater than 0",
                                  "sinceSeconds"))
    if since_s is not None and since_t_text:
        causes.append(StatusCause(
            "FieldValueForbidden",
            "Forbidden: at most one of `sinceTime` or `sinceSeconds` may be specified", ""))
    if causes:
        raise errors.invalid(kind_name="PodLogOptions", name=pod, group="",
                             details_kind="PodLogOptions", causes=causes)
    since_t = None
    if since_t_text:
        try:
            since_t = parse_time(since_t_text)
        except ValueError:
            raise errors.bad_request(f'invalid value for sinceTime: "{since_t_text}"') from None
    return LogOptions(
        container=q.get("container", ""),
        follow=bool(parse_bool(q.get("follow"), name="follow")),
        previous=bool(parse_bool(q.get("previous"), name="previous")),
        since_seconds=since_s,
        since_time=since_t,
        timestamps=bool(parse_bool(q.get("timestamps"), name="timestamps")),
        tail_lines=tail,
        limit_bytes=limit,
    )


def _container_state(pod: dict[str, Any], name: str) -> dict[str, Any] | None:
    status = pod.get("status") or {}
    for field in ("containerStatuses", "initContainerStatuses", "ephemeralContainerStatuses"):
        for cs in status.get(field) or []:
            if cs.get("name") == name:
                return dict(cs)
    return None


async def logs(server: ServerContext, request: web.Request, r: Route) -> web.StreamResponse:
    name, ns = r.name, r.namespace
    pod = server.objects.get(r.rt, ns, name)
    opts = _log_options(name, request.query)
    spec = pod.get("spec") or {}
    regular = [c.get("name", "") for c in spec.get("containers") or []]
    every = regular + [c.get("name", "") for c in spec.get("initContainers") or []] + [
        c.get("name", "") for c in spec.get("ephemeralContainers") or []]
    container = opts.container
    if not container:
        if len(regular) == 1:
            container = regular[0]
        elif not every:
            raise errors.bad_request(f"a container name must be specified for pod {name}")
        else:
            raise errors.bad_request(
                f"a container name must be specified for pod {name}, choose one of: "
                f"[{' '.join(every)}]"
            )
    if container not in every:
        raise errors.bad_request(f"container {container} is not valid for pod {name}")
    if not spec.get("nodeName"):
        return web.Response(status=204)
    logs_ = server.logs
    if opts.previous and not logs_.has(ns, name, container, True):
        raise errors.bad_request(
            f'previous terminated container "{container}" in pod "{name}" not found'
        )
    state = _container_state(pod, container)
    previous = opts.previous
    if not previous and not logs_.has(ns, name, container, False):
        waiting = ((state or {}).get("state") or {}).get("waiting")
        last = ((state or {}).get("lastState") or {}).get("terminated")
        if waiting is not None and last and logs_.has(ns, name, container, True):
            # The kubelet answers a waiting container (CrashLoopBackOff) that ran before with
            # its last terminated instance, the same log ``previous=true`` gives.
            previous = True
        elif state is None or waiting is not None:
            reason = (waiting or {}).get("reason") or "ContainerCreating"
            raise errors.bad_request(
                f'container "{container}" in pod "{name}" is waiting to start: {reason}'
            )
    key = (ns, name, container, previous)
    data, pos = logs_.render(key, opts)
    budget = opts.limit_bytes
    if budget is not None:
        data = data[:budget]
        budget -= len(data)
    if not opts.follow or previous:
        return web.Response(body=data, status=200, content_type="text/plain")
    resp = web.StreamResponse(status=200, headers={"Content-Type": "text/plain"})
    resp.enable_chunked_encoding()
    await resp.prepare(request)
    try:
        if data:
            await resp.write(data)
        while budget is None or budget > 0:
            if _stopped(server, r, container):
                chunk, pos = logs_.render(key, LogOptions(timestamps=opts.timestamps), start=pos)
                if chunk:
                    await resp.write(chunk if budget is None else chunk[:budget])
                break
            await logs_.wait_changed(FOLLOW_POLL)
            chunk, pos = logs_.render(key, LogOptions(timestamps=opts.timestamps), start=pos)
            if chunk:
                if budget is not None:
                    chunk = chunk[:budget]
                    budget -= len(chunk)
                await resp.write(chunk)
    except (ConnectionResetError, asyncio.CancelledError):
        pass
    return resp


def _stopped(server: ServerContext, r: Route, container: str) -> bool:
    pod = server.store.get(r.rt.bucket, (r.namespace, r.name))
    if pod is None:
        return True
    state = _container_state(pod, container) or {}
    return "terminated" in (state.get("state") or {})


async def evict(server: ServerContext, request: web.Request, r: Route, body: Any) -> web.Response:
    if not isinstance(body, dict):
        raise errors.bad_request("the object provided is unrecognized (must be of type Eviction)")
    if (body.get("metadata") or {}).get("name") != r.name:
        raise errors.bad_request("name in URL does not match name in Eviction object")
    pod = server.objects.get(r.rt, r.namespace, r.name)
    delete_body = body.get("deleteOptions") or {}
    opts = delete_options(request.query, delete_body)
    query_dry = check_dry_run(list(request.query.getall("dryRun", [])))
    dry = opts.dry_run or query_dry
    if not dry and not pod["metadata"].get("deletionTimestamp"):
        status = dict(pod.get("status") or {})
        conds = [c for c in status.get("conditions") or [] if c.get("type") != "DisruptionTarget"]
        conds.append({"type": "DisruptionTarget", "status": "True",
                      "reason": "EvictionByEvictionAPI", "message": "Eviction API: evicting",
                      "lastTransitionTime": server.objects.now()})
        status["conditions"] = conds
        update = {**pod, "metadata": dict(pod["metadata"]), "status": status}
        server.objects.update(r.rt, r.namespace, r.name, update,
                              WriteOptions(manager="kube-apiserver"), subresource="status")
    if not dry:
        server.objects.delete(r.rt, r.namespace, r.name, opts)
    return json_response({"kind": "Status", "apiVersion": "v1", "metadata": {},
                          "status": "Success", "code": 201}, status=201)


async def bind(server: ServerContext, request: web.Request, r: Route, body: Any) -> web.Response:
    """``POST pods/{name}/binding``: the scheduler's way to set ``spec.nodeName`` (an update
    may not), once, with ``PodScheduled=True`` (``pkg/registry/core/pod/storage``)."""
    if not isinstance(body, dict) or not isinstance(body.get("target"), dict):
        raise errors.bad_request("the object provided is unrecognized (must be of type Binding)")
    node = str(body["target"].get("name") or "")
    pod = server.objects.get(r.rt, r.namespace, r.name)
    current = (pod.get("spec") or {}).get("nodeName")
    if pod["metadata"].get("deletionTimestamp"):
        raise _binding_conflict(r.name, f"pod {r.name} is being deleted, cannot be assigned "
                                        "to a host")
    if current:
        raise _binding_conflict(r.name, f'pod {r.name} is already assigned to node "{current}"')
    bound, _ = server.objects.update(
        r.rt, r.namespace, r.name,
        {**pod, "metadata": dict(pod["metadata"]),
         "spec": {**(pod.get("spec") or {}), "nodeName": node}},
        WriteOptions(manager="kube-apiserver", binding=True))
    status = dict(bound.get("status") or {})
    conds = [c for c in status.get("conditions") or [] if c.get("type") != "PodScheduled"]
    conds.append({"type": "PodScheduled", "status": "True", "lastProbeTime": None,
                  "lastTransitionTime": server.objects.now()})
    status["conditions"] = conds
    server.objects.update(r.rt, r.namespace, r.name,
                          {**bound, "metadata": dict(bound["metadata"]), "status": status},
                          WriteOptions(manager="kube-apiserver"), subresource="status")
    return json_response({"kind": "Status", "apiVersion": "v1", "metadata": {},
                          "status": "Success", "code": 201}, status=201)


def _binding_conflict(name: str, detail: str) -> errors.ApiError:
    return errors.ApiError(code=409, reason=errors.Reason.CONFLICT,
                           message=f'Operation cannot be fulfilled on pods/binding "{name}": '
                                   f"{detail}",
                           details={"name": name, "kind": "pods/binding"})
