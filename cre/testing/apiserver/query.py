"""Request parsing shared by the handlers: paths, booleans, list options, delete options.

Kubernetes parses booleans like Go's ``strconv.ParseBool`` (``kubernetes_asyncio`` sends
``True``), validates list options with fixed messages (``ListOptions.meta.k8s.io "" is
invalid``), and encodes continue tokens as base64url JSON. Those rules live here.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Mapping
from typing import Any

import attrs

from . import errors
from .errors import StatusCause
from .objects import DeleteOptions
from .selectors import (
    FieldSelector,
    LabelSelector,
    SelectorError,
    parse_field_selector,
    parse_label_selector,
)

_TRUE = {"1", "t", "T", "TRUE", "true", "True"}
_FALSE = {"0", "f", "F", "FALSE", "false", "False"}


def parse_bool(value: str | None, *, name: str) -> bool | None:
    if value is None:
        return None
    if value in _TRUE:
        return True
    if value in _FALSE or value == "":
        return False
    raise errors.bad_request(f'invalid boolean value for {name}: "{value}"')


def parse_int(value: str | None, *, name: str) -> int | None:
    if value is None or value == "":
        return None
    try:
        return int(value)
    except ValueError:
        raise errors.bad_request(f'invalid value for {name}: "{value}"') from None


def parse_rv(value: str | None) -> int | None:
    if value is None or value == "":
        return None
    try:
        rv = int(value)
    except ValueError:
        rv = -1
    if rv < 0:
        raise errors.bad_request(f"invalid resource version: {value}")
    return rv


@attrs.frozen
class ListOptions:
    labels: LabelSelector
    fields: FieldSelector
    limit: int
    continue_token: str
    resource_version: str | None
    rv_match: str
    watch: bool
    allow_bookmarks: bool
    send_initial_events: bool | None
    timeout_seconds: int | None


def list_options(q: Mapping[str, str]) -> ListOptions:
    try:
        labels = parse_label_selector(q.get("labelSelector", ""))
        fields = parse_field_selector(q.get("fieldSelector", ""))
    except SelectorError as exc:
        raise errors.bad_request(str(exc)) from None
    watch = bool(parse_bool(q.get("watch"), name="watch"))
    rv = q.get("resourceVersion")
    match = q.get("resourceVersionMatch", "")
    sie = parse_bool(q.get("sendInitialEvents"), name="sendInitialEvents")
    causes: list[StatusCause] = []
    if match not in ("", "Exact", "NotOlderThan"):
        causes.append(StatusCause(
            "FieldValueNotSupported",
            f'Unsupported value: "{match}": supported values: "Exact", "NotOlderThan", ""',
            "resourceVersionMatch"))
    cont = q.get("continue", "")
    if watch:
        if sie is not None and match != "NotOlderThan":
            causes.append(StatusCause(
                "FieldValueForbidden",
                "Forbidden: sendInitialEvents requires setting resourceVersionMatch to "
                "NotOlderThan", "resourceVersionMatch"))
        elif match and sie is None:
            causes.append(StatusCause(
                "FieldValueForbidden",
                "Forbidden: resourceVersionMatch is forbidden for watch unless sendInitialEvents "
                "is provided", "resourceVersionMatch"))
    else:
        if sie is not None:
            causes.append(StatusCause(
                "FieldValueForbidden", "Forbidden: sendInitialEvents is forbidden for list",
                "sendInitialEvents"))
        if match:
            if not rv:
                causes.append(StatusCause(
                    "FieldValueForbidden",
                    "Forbidden: resourceVersionMatch is forbidden unless resourceVersion is "
                    "provided", "resourceVersionMatch"))
            elif cont:
                causes.append(StatusCause(
                    "FieldValueForbidden",
                    "Forbidden: resourceVersionMatch is forbidden when continue is provided",
                    "resourceVersionMatch"))
            elif match == "Exact" and rv == "0":
                causes.append(StatusCause(
                    "FieldValueForbidden",
                    'Forbidden: resourceVersionMatch "exact" is forbidden for resourceVersion "0"',
                    "resourceVersionMatch"))
    if causes:
        raise errors.invalid_options("ListOptions", causes)
    if cont and rv not in (None, "", "0"):
        raise errors.bad_request("specifying resource version is not allowed when using continue")
    parse_rv(rv)
    return ListOptions(
        labels=labels,
        fields=fields,
        limit=max(parse_int(q.get("limit"), name="limit") or 0, 0),
        continue_token=cont,
        resource_version=rv,
        rv_match=match,
        watch=watch,
        allow_bookmarks=bool(parse_bool(q.get("allowWatchBookmarks"), name="allowWatchBookmarks")),
        send_initial_events=sie,
        timeout_seconds=parse_int(q.get("timeoutSeconds"), name="timeoutSeconds"),
    )


def encode_continue(rv: int, start: tuple[str, str]) -> str:
    raw = json.dumps({"v": "meta.k8s.io/v1", "rv": rv, "start": f"{start[0]}/{start[1]}"})
    return base64.urlsafe_b64encode(raw.encode()).decode().rstrip("=")


CONTINUE_AT_LATEST = -1
"""A continue token's revision that means "go on at the current revision" (the token a 410 for
a compacted continue token carries, as kube-apiserver's)."""

_INCONSISTENT_CONTINUE = (
    "The provided continue parameter is too old to display a consistent list result. You can "
    "start a new list without the continue parameter, or use the continue token in this "
    "response to retrieve the remainder of the results. Continuing with the provided token "
    "results in an inconsistent list - objects that were created, modified, or deleted "
    "between the time the first chunk was returned and now may show up in the list.")


def compacted(start: tuple[str, str] | None, *, continued: bool) -> errors.ApiError:
    """The 410 for a list at a revision etcd compacted away: a continue token gets a token that
    goes on at the current revision (an inconsistent list), an exact list the plain message."""
    if continued and start is not None:
        return errors.expired(_INCONSISTENT_CONTINUE, metadata={
            "continue": encode_continue(CONTINUE_AT_LATEST, start)})
    return errors.expired("The resourceVersion for the provided list is too old.")


def decode_continue(token: str) -> tuple[int, tuple[str, str]]:
    try:
        padded = token + "=" * (-len(token) % 4)
        data = json.loads(base64.urlsafe_b64decode(padded.encode()))
        rv = int(data["rv"])
        ns, _, name = str(data["start"]).partition("/")
        if data.get("v") != "meta.k8s.io/v1":
            raise ValueError("unexpected version")
    except (ValueError, KeyError, TypeError, binascii.Error, json.JSONDecodeError) as exc:
        raise errors.bad_request(
            f"invalid continue token: continue key is not valid: {exc}"
        ) from None
    return rv, (ns, name)


def delete_options(q: Mapping[str, str], body: Any) -> DeleteOptions:
    opts: dict[str, Any] = dict(body) if isinstance(body, dict) else {}
    grace = opts.get("gracePeriodSeconds")
    if grace is None:
        grace = parse_int(q.get("gracePeriodSeconds"), name="gracePeriodSeconds")
    policy = opts.get("propagationPolicy") or q.get("propagationPolicy") or None
    if policy not in (None, "Orphan", "Background", "Foreground"):
        raise errors.invalid_options("DeleteOptions", [StatusCause(
            "FieldValueNotSupported",
            f'Unsupported value: "{policy}": supported values: "Foreground", "Background", '
            '"Orphan", "nil"', "propagationPolicy")])
    orphan = opts.get("orphanDependents")
    if orphan is None:
        orphan = parse_bool(q.get("orphanDependents"), name="orphanDependents")
    pre = opts.get("preconditions") or {}
    dry = opts.get("dryRun")
    if dry is None:
        getall = getattr(q, "getall", None)
        dry = list(getall("dryRun", [])) if getall is not None else q.get("dryRun")
    return DeleteOptions(
        grace_period=None if grace is None else int(grace),
        propagation=policy,
        orphan_dependents=orphan,
        precondition_uid=pre.get("uid"),
        precondition_rv=pre.get("resourceVersion"),
        dry_run=check_dry_run(dry if isinstance(dry, list) else ([dry] if dry else [])),
    )


def check_dry_run(values: list[str]) -> bool:
    if not values:
        return False
    bad = [v for v in values if v != "All"]
    if bad:
        rendered = "[" + ",".join(json.dumps(v) for v in values) + "]"
        raise errors.invalid_options("CreateOptions", [StatusCause(
            "FieldValueNotSupported",
            f'Unsupported value: {rendered}: supported values: "All"', "dryRun")])
    return True
