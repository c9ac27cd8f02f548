"""Kubernetes ``Status`` error bodies, built the way the real API server builds them.

Clients match on ``reason``, ``code`` and ``details`` (and kubectl prints ``message``), so every
error the emulator returns goes through :class:`ApiError`, whose :meth:`ApiError.body` produces
the exact key order and wording of ``k8s.io/apimachinery/pkg/api/errors`` and whose
:meth:`ApiError.encode` the exact bytes kube-apiserver sends: compact JSON as Go's
``encoding/json`` writes it, ending in the newline its ``Encoder`` appends. Some clients keep
the raw body (the official client's ``ApiException.body``) and tests compare it as text.
:data:`STATUS_TEXT` is the status line's reason phrase as Go's ``net/http`` words it.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from typing import Any

import attrs

from .store import dumps, dumps_indented

STATUS_TEXT: dict[int, str] = {
    400: "Bad Request", 401: "Unauthorized", 403: "Forbidden", 404: "Not Found",
    405: "Method Not Allowed", 406: "Not Acceptable", 409: "Conflict", 410: "Gone",
    413: "Request Entity Too Large", 415: "Unsupported Media Type",
    422: "Unprocessable Entity", 429: "Too Many Requests", 500: "Internal Server Error",
    503: "Service Unavailable", 504: "Gateway Timeout",
}
"""Reason phrases of the error status lines, as Go's ``http.StatusText`` has them (Python
renamed 413 and 422 in 3.13; the real server's words stay)."""

OPTIMISTIC_LOCK = (
    "the object has been modified; please apply your changes to the latest version and try again"
)


class Reason(enum.StrEnum):
    """``Status.reason`` values the emulator produces."""

    NOT_FOUND = "NotFound"
    ALREADY_EXISTS = "AlreadyExists"
    CONFLICT = "Conflict"
    EXPIRED = "Expired"
    INVALID = "Invalid"
    BAD_REQUEST = "BadRequest"
    METHOD_NOT_ALLOWED = "MethodNotAllowed"
    NOT_ACCEPTABLE = "NotAcceptable"
    UNSUPPORTED_MEDIA_TYPE = "UnsupportedMediaType"
    TOO_MANY_REQUESTS = "TooManyRequests"
    INTERNAL_ERROR = "InternalError"
    SERVICE_UNAVAILABLE = "ServiceUnavailable"
    FORBIDDEN = "Forbidden"
    UNAUTHORIZED = "Unauthorized"
    TIMEOUT = "Timeout"
    REQUEST_ENTITY_TOO_LARGE = "RequestEntityTooLarge"
    UNKNOWN = ""


@attrs.frozen
class StatusCause:
    """One entry of ``details.causes`` (the JSON key for the type is ``reason``)."""

    reason: str
    message: str
    field: str = ""

    def to_json(self) -> dict[str, str]:
        out: dict[str, str] = {}
        if self.reason:
            out["reason"] = self.reason
        if self.message:
            out["message"] = self.message
        if self.field:
            out["field"] = self.field
        return out


@attrs.frozen
class Qualified:
    """A resource named the way errors name it: plural + group (and the Kind for Invalid)."""

    group: str
    resource: str
    kind: str

    @property
    def resource_name(self) -> str:
        return f"{self.resource}.{self.group}" if self.group else self.resource

    @property
    def kind_name(self) -> str:
        return f"{self.kind}.{self.group}" if self.group else self.kind


class ApiError(Exception):
    """An API failure that renders as a ``Status`` body with the matching HTTP code."""

    def __init__(
        self,
        *,
        code: int,
        reason: Reason,
        message: str,
        details: dict[str, Any] | None = None,
        retry_after: int = 0,
        metadata: dict[str, Any] | None = None,
        indented: bool = False,
    ) -> None:
        super().__init__(message)
        self.indented = indented
        self.code = code
        self.reason = reason
        self.message = message
        self.details = details
        self.retry_after = retry_after
        self.metadata = metadata or {}

    def body(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": self.metadata,
            "status": "Failure",
        }
        if self.message:
            out["message"] = self.message
        if self.reason:
            out["reason"] = str(self.reason)
        details = dict(self.details) if self.details is not None else None
        if self.retry_after > 0:
            details = details or {}
            details["retryAfterSeconds"] = self.retry_after
        if details is not None:
            out["details"] = details
        out["code"] = self.code
        return out

    def encode(self) -> bytes:
        """The body as kube-apiserver sends it: Go-compact JSON and a final newline, or (for
        the errors it writes outside its serializer, ``indented``) Go's ``MarshalIndent``
        with two spaces and no newline."""
        if self.indented:
            return dumps_indented(self.body())
        return dumps(self.body()) + b"\n"


def _details(q: Qualified | None, name: str = "", *, kind: str | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if name:
        out["name"] = name
    if q is not None and q.group:
        out["group"] = q.group
    if kind is not None:
        out["kind"] = kind
    elif q is not None:
        out["kind"] = q.resource
    return out


def not_found(q: Qualified, name: str) -> ApiError:
    return ApiError(
        code=404,
        reason=Reason.NOT_FOUND,
        message=f'{q.resource_name} "{name}" not found',
        details=_details(q, name),
    )


def resource_not_found() -> ApiError:
    return ApiError(
        code=404,
        reason=Reason.NOT_FOUND,
        message="the server could not find the requested resource",
        details={},
    )


def already_exists(q: Qualified, name: str, *, generated: bool = False) -> ApiError:
    if generated:
        return ApiError(
            code=409,
            reason=Reason.ALREADY_EXISTS,
            message=(
                f'{q.resource_name} "{name}" already exists, the server was not able to '
                "generate a unique name for the object"
            ),
            details=_details(q, name),
            retry_after=1,
        )
    return ApiError(
        code=409,
        reason=Reason.ALREADY_EXISTS,
        message=f'{q.resource_name} "{name}" already exists',
        details=_details(q, name),
    )


def conflict(q: Qualified, name: str, detail: str = OPTIMISTIC_LOCK) -> ApiError:
    return ApiError(
        code=409,
        reason=Reason.CONFLICT,
        message=f'Operation cannot be fulfilled on {q.resource_name} "{name}": {detail}',
        details=_details(q, name),
    )


def precondition_conflict(q: Qualified, name: str, detail: str) -> ApiError:
    """Delete preconditions name the Kind, not the resource (``rest/delete.go``), in the
    message and in ``details.kind`` alike."""
    return ApiError(
        code=409,
        reason=Reason.CONFLICT,
        message=f'Operation cannot be fulfilled on {q.kind_name} "{name}": {detail}',
        details=_details(q, name, kind=q.kind),
    )


def expired(message: str, *, metadata: dict[str, Any] | None = None) -> ApiError:
    return ApiError(code=410, reason=Reason.EXPIRED, message=message, metadata=metadata)


def bad_request(message: str) -> ApiError:
    return ApiError(code=400, reason=Reason.BAD_REQUEST, message=message)


def method_not_allowed(q: Qualified | None, verb: str) -> ApiError:
    if q is None:
        return ApiError(
            code=405,
            reason=Reason.METHOD_NOT_ALLOWED,
            message="the server does not allow this method on the requested resource",
            details={},
        )
    return ApiError(
        code=405,
        reason=Reason.METHOD_NOT_ALLOWED,
        message=f'{verb} is not supported on resources of kind "{q.resource_name}"',
        details=_details(q),
    )


def unsupported_media_type(accepted: Sequence[str]) -> ApiError:
    return ApiError(
        code=415,
        reason=Reason.UNSUPPORTED_MEDIA_TYPE,
        message=(
            "the body of the request was in an unknown format - accepted media types include: "
            + ", ".join(accepted)
        ),
    )


def not_acceptable() -> ApiError:
    return ApiError(
        code=406,
        reason=Reason.NOT_ACCEPTABLE,
        message=(
            "only the following media types are accepted: application/json, application/yaml, "
            "application/vnd.kubernetes.protobuf"
        ),
    )


def not_acceptable_raw(message: str) -> ApiError:
    """A 406 from a failed output negotiation after the handler ran (``as=`` a form the object
    has not): written by ``WriteRawJSON``, so indented, and without details."""
    return ApiError(code=406, reason=Reason.NOT_ACCEPTABLE, message=message, indented=True)


def too_many_requests(message: str, *, retry_after: int) -> ApiError:
    return ApiError(
        code=429,
        reason=Reason.TOO_MANY_REQUESTS,
        message=message,
        details={},
        retry_after=retry_after,
    )


def internal_error(err: str) -> ApiError:
    return ApiError(
        code=500,
        reason=Reason.INTERNAL_ERROR,
        message=f"Internal error occurred: {err}",
        details={"causes": [{"message": err}]},
    )


def unknown_500(message: str) -> ApiError:
    return ApiError(code=500, reason=Reason.UNKNOWN, message=message)


def service_unavailable(message: str, *, retry_after: int = 0) -> ApiError:
    return ApiError(
        code=503,
        reason=Reason.SERVICE_UNAVAILABLE,
        message=message,
        retry_after=retry_after,
    )


def forbidden(q: Qualified, name: str, why: str) -> ApiError:
    prefix = f'{q.resource_name} "{name}"' if name else q.resource_name
    return ApiError(
        code=403,
        reason=Reason.FORBIDDEN,
        message=f"{prefix} is forbidden: {why}",
        details=_details(q, name),
    )


def invalid(
    *,
    kind_name: str,
    name: str,
    group: str,
    details_kind: str,
    causes: Sequence[StatusCause],
) -> ApiError:
    """422 Invalid: ``<QualifiedKind> "<name>" is invalid: <aggregate>`` with causes."""
    texts: list[str] = []
    for c in causes:
        text = f"{c.field}: {c.message}" if c.field else c.message
        if text not in texts:
            texts.append(text)
    message = f'{kind_name} "{name}" is invalid'
    if len(texts) == 1:
        message += f": {texts[0]}"
    elif texts:
        message += ": [" + ", ".join(texts) + "]"
    details: dict[str, Any] = {}
    if name:
        details["name"] = name
    if group:
        details["group"] = group
    details["kind"] = details_kind
    details["causes"] = [c.to_json() for c in causes]
    return ApiError(code=422, reason=Reason.INVALID, message=message, details=details)


def invalid_object(q: Qualified, name: str, causes: Sequence[StatusCause]) -> ApiError:
    return invalid(
        kind_name=q.kind_name, name=name, group=q.group, details_kind=q.kind, causes=causes
    )


def invalid_options(kind: str, causes: Sequence[StatusCause]) -> ApiError:
    """Errors on request options (``ListOptions.meta.k8s.io "" is invalid: ...``)."""
    return invalid(
        kind_name=f"{kind}.meta.k8s.io",
        name="",
        group="meta.k8s.io",
        details_kind=kind,
        causes=causes,
    )


def generic_invalid() -> ApiError:
    """The 422 a failed JSON-patch operation gets (the library's text is not included)."""
    return ApiError(
        code=422,
        reason=Reason.INVALID,
        message="the server rejected our request due to an error in our request",
        details={},
    )
