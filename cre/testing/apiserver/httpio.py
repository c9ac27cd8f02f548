"""HTTP plumbing every emulator handler shares: routes, bodies, write options, responses.

Below :mod:`.server` (which routes) and the handler modules (which serve one kind of request):
reading a JSON or YAML body the way the real server decodes it, the write options of a query
string (field manager, dry run, force, field validation), the field-selector check of a list or
watch, and turning an object, a Table or an :class:`~.errors.ApiError` into a response. YAML is
read with ruamel.yaml (YAML 1.2, the project's one YAML library).
"""

from __future__ import annotations

import io
from typing import Any

import attrs
import orjson
from aiohttp import web
from ruamel.yaml import YAML
from ruamel.yaml.error import YAMLError

from . import _protobuf, errors, partial, table
from .context import ServerContext
from .errors import ApiError
from .query import check_dry_run
from .resources import ResourceType
from .store import Obj, dumps, encode_object
from .writectx import WriteOptions

JSON = "application/json"
BODY_TYPES = {"application/json", "application/yaml", "application/x-yaml", "text/yaml", "",
              "text/plain", "application/octet-stream"}
YAML_TYPES = ("application/yaml", "application/x-yaml", "text/yaml")
# resources with their own field-selector list (others answer the "not a known field" form)
OWN_FIELD_LISTS = frozenset({"pods", "events", "nodes", "namespaces", "secrets", "services",
                             "jobs"})


@attrs.frozen
class Route:
    """A parsed resource path: the type, namespace, name, subresource and ``/watch/`` form."""

    rt: ResourceType
    namespace: str
    name: str
    subresource: str
    watch_path: bool


class PlainNotFound(ApiError):
    """A path outside the API: answered with the plain-text 404 of the real mux."""

    def __init__(self) -> None:
        super().__init__(code=404, reason=errors.Reason.NOT_FOUND, message="404 page not found")


def warning_text(text: str) -> str:
    """A warning as the quoted-string of a ``Warning`` header: backslash and quote escaped, and
    control characters (a field name from a client may hold any) escaped as ``\\xNN``, so the
    header stays one valid line."""
    out = text.replace("\\", "\\\\").replace('"', '\\"')
    return "".join(f"\\x{ord(c):02x}" if ord(c) < 0x20 or ord(c) == 0x7F else c for c in out)


def load_yaml(raw: bytes) -> Any:
    """One YAML document as plain dicts and lists (ruamel's safe loader)."""
    return YAML(typ="safe").load(io.BytesIO(raw))


async def read_body(request: web.Request, *, optional: bool = False,
                    rt: ResourceType | None = None) -> Any:
    """The request body decoded as JSON, YAML or (for a built-in kind) Kubernetes protobuf by
    its Content-Type (400/415 otherwise); ``rt`` is the resource a create or update writes,
    which a protobuf body must be an object of."""
    raw = await request.read()
    if not raw.strip():
        if optional:
            return None
        raise errors.bad_request("the object provided is unrecognized: empty body")
    ctype = request.headers.get("Content-Type", JSON).split(";")[0].strip().lower()
    if ctype == _protobuf.MEDIA_TYPE and not (rt is not None and rt.is_custom):
        return _protobuf_body(raw, rt)
    if ctype not in BODY_TYPES:
        raise errors.unsupported_media_type(
            ["application/json", "application/yaml", _protobuf.MEDIA_TYPE])
    try:
        if ctype in YAML_TYPES:
            return load_yaml(raw)
        return orjson.loads(raw)
    except (ValueError, YAMLError) as exc:
        raise errors.bad_request(
            f"the object provided is unrecognized: {exc} ({raw[:30]!r}...)"
        ) from None


def _protobuf_body(raw: bytes, rt: ResourceType | None) -> Any:
    """A built-in kind's protobuf body as its JSON, refused with kube-apiserver's 400 wording
    when it is not an object of ``rt``'s kind (custom resources have no protobuf form: 415)."""
    want = rt.kind if rt is not None else None
    try:
        obj = _protobuf.decode(raw)
    except _protobuf.UnknownKind as exc:
        if rt is None:
            raise errors.unsupported_media_type(["application/json", "application/yaml"]) from None
        raise errors.bad_request(
            f'{exc.kind} in version "{rt.version}" cannot be handled as a {want}: no kind '
            f'"{exc.kind}" is registered for version "{exc.api_version}" in scheme '
            '"pkg/runtime/scheme.go:110"') from None
    except _protobuf.ProtobufError as exc:
        must = f" (must be of type {want})" if want else ""
        raise errors.bad_request(
            f"the object provided is unrecognized{must}: {exc} ({raw[:16].hex()})") from None
    if rt is not None and (obj["kind"], obj["apiVersion"]) != (rt.kind, rt.api_version):
        version = obj["apiVersion"].rpartition("/")[2]
        raise errors.bad_request(
            f'{obj["kind"]} in version "{rt.version}" cannot be handled as a {want}: converting '
            f'({version}.{obj["kind"]}) to ({rt.group.split(".")[0] or "core"}.{want}): '
            "unknown conversion")
    return obj


def write_options(request: web.Request) -> WriteOptions:
    """Field manager (query, else the User-Agent's product), dryRun, force, fieldValidation."""
    q = request.query
    manager = q.get("fieldManager") or request.headers.get("User-Agent", "").split("/")[0]
    fv = q.get("fieldValidation")
    if fv not in (None, "", "Ignore", "Warn", "Strict"):
        raise errors.invalid_options("CreateOptions", [errors.StatusCause(
            "FieldValueNotSupported",
            f'Unsupported value: "{fv}": supported values: "Ignore", "Warn", "Strict"',
            "fieldValidation")])
    force = q.get("force")
    return WriteOptions(
        manager=manager or "unknown",
        dry_run=check_dry_run(list(q.getall("dryRun", []))),
        force=force in ("1", "t", "T", "true", "True", "TRUE"),
        field_validation=fv or "Warn",
        patch=request.method == "PATCH",
    )


def check_fields(rt: ResourceType, fields: Any) -> None:
    """400 for a field selector on a field ``rt`` cannot select by (the real wordings)."""
    for req in fields.requirements:
        if not rt.selectable(req.field):
            if rt.is_custom or rt.plural in OWN_FIELD_LISTS:
                raise errors.bad_request(f"field label not supported: {req.field}")
            raise errors.bad_request(
                f'"{req.field}" is not a known field selector: only "metadata.name", '
                '"metadata.namespace"'
            )


def json_response(body: Any, *, status: int = 200) -> web.Response:
    """``body`` as kube-apiserver's JSON serializer writes it (Go's ``json.Encoder``: compact,
    then a newline)."""
    return web.Response(body=dumps(body) + b"\n", status=status, content_type=JSON)


def error_response(exc: ApiError) -> web.Response:
    """The ``Status`` of ``exc`` byte for byte as the real server sends it: Go's reason phrase
    on the status line, ``application/json`` and :meth:`ApiError.encode`'s body."""
    if isinstance(exc, PlainNotFound):
        return web.Response(status=404, text="404 page not found\n")
    headers = {"Retry-After": str(exc.retry_after)} if exc.retry_after > 0 else None
    return web.Response(body=exc.encode(), status=exc.code, content_type=JSON, headers=headers,
                        reason=errors.STATUS_TEXT.get(exc.code))


def respond(
    request: web.Request,
    server: ServerContext,
    rt: ResourceType,
    obj: Obj,
    *,
    status: int = 200,
    warnings: list[str] | None = None,
) -> web.Response:
    version = table.requested(request)
    metadata_only = partial.requested(request)
    if metadata_only:
        resp = json_response(partial.one(rt, obj, metadata_only), status=status)
    elif version:
        meta = {"resourceVersion": str(obj["metadata"].get("resourceVersion", ""))}
        resp = json_response(table.build(server, rt, [obj], meta, version, request),
                             status=status)
    else:
        resp = web.Response(body=encode_object(obj, custom=rt.is_custom) + b"\n",
                            status=status, content_type=JSON)
    for text in dict.fromkeys(warnings or ()):
        resp.headers.add("Warning", f'299 - "{warning_text(text)}"')
    return resp
