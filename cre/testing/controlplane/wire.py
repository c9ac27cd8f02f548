"""Responses as bytes on the wire, for the differential's byte-for-byte comparison.

kube-apiserver writes JSON with Go's ``encoding/json`` ``Encoder``: compact, UTF-8 as is,
``<``, ``>``, ``&``, U+2028 and U+2029 escaped, and a newline after the value; it writes the
few bodies it encodes outside its serializer (the 406 of a failed content negotiation) indented.
A client that keeps the raw body (the official Python client's ``ApiException.body``) sees all
of it, and a comparison of parsed objects sees none of it. :func:`wire_record` keeps what the
comparison needs: the status line, the Content-Type, the body's form and (for error responses
and sampled successful ones) the raw text with only run-specific values masked by
:func:`mask_raw`, so key order, spacing and escaping are compared as sent.
"""

from __future__ import annotations

import json
import re
from typing import Any

import aiohttp

_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


def wire_record(resp: aiohttp.ClientResponse, raw: bytes, *, full: bool) -> dict[str, Any]:
    """What a response looks like on the wire: its status line, Content-Type and body form;
    with ``full``, also the body text with run-specific values masked."""
    out: dict[str, Any] = {
        "line": f"HTTP/{resp.version.major}.{resp.version.minor} {resp.status} {resp.reason}"
        if resp.version is not None else f"{resp.status} {resp.reason}",
        "type": resp.headers.get("Content-Type", ""),
        "form": body_form(raw),
    }
    if full:
        out["bytes"] = mask_raw(raw.decode(errors="replace"))
    return out


def go_compact(value: Any) -> bytes:
    """``value`` as Go's ``encoding/json`` writes it compactly (kube-apiserver's serializer):
    UTF-8 as is, ``<``, ``>``, ``&``, U+2028 and U+2029 as ``\\u`` escapes."""
    text = json.dumps(value, separators=(",", ":"), ensure_ascii=False)
    for char, escaped in (("<", "\\u003c"), (">", "\\u003e"), ("&", "\\u0026"),
                          ("\u2028", "\\u2028"), ("\u2029", "\\u2029")):
        text = text.replace(char, escaped)
    return text.encode()


def body_form(raw: bytes) -> str:
    """How a body is laid out: ``empty``; ``go-json+newline`` (Go's compact JSON and the
    newline its Encoder writes), ``go-json`` (the same without it), ``json-indented``,
    ``json-other`` (JSON in another spacing or escaping) or ``text`` (not JSON)."""
    if not raw:
        return "empty"
    try:
        value = json.loads(raw)
    except ValueError:
        return "text"
    compact = go_compact(value)
    if raw == compact + b"\n":
        return "go-json+newline"
    if raw == compact:
        return "go-json"
    if raw.startswith(b"{\n  ") or raw.startswith(b"[\n  "):
        return "json-indented"
    return "json-other"


_RAW_MASKS = tuple(
    (re.compile(rf'"{key}":"[^"]+"'), f'"{key}":"{mask}"') for key, mask in (
        ("uid", "<uid>"), ("resourceVersion", "<rv>"), ("creationTimestamp", "<ts>"),
        ("deletionTimestamp", "<ts>"), ("lastTransitionTime", "<ts>"), ("time", "<ts>"),
        ("lastUpdateTime", "<ts>"), ("lastProbeTime", "<ts>"), ("startTime", "<ts>"),
        ("continue", "<continue>")))
_RAW_MESSAGE = re.compile(r'"message":"(?:[^"\\]|\\.)*"')
_RAW_GENERATE = re.compile(r'"generateName":"([^"]+)"')


def mask_raw(text: str) -> str:
    """The raw body with what :func:`normalise` masks masked in place (everything else, key
    order, escaping and whitespace, kept): uids, resourceVersions, timestamps, continue
    tokens, generated name suffixes, ``managedFields`` (compared, with their allowance, in
    the parsed body) and every ``message`` value (compared exactly, or with an allowance
    naming why, in the parsed body; the form check covers how it is escaped)."""
    text = _UUID.sub("<uid>", text)
    for pattern, replacement in _RAW_MASKS:
        text = pattern.sub(replacement, text)
    text = _RAW_MESSAGE.sub('"message":"<see body>"', text)
    for prefix in set(_RAW_GENERATE.findall(text)):
        text = re.sub(rf'"name":"{re.escape(prefix)}[a-z0-9]{{5}}"',
                      f'"name":"{prefix}<suffix>"', text)
    return _drop_value(text, '"managedFields":')


def _drop_value(text: str, key: str) -> str:
    """``text`` with each ``key``'s JSON value replaced by ``"<masked>"`` (the value is
    skipped by bracket depth, strings and their escapes respected)."""
    out: list[str] = []
    start = 0
    while (at := text.find(key, start)) >= 0:
        i = at + len(key)
        out.append(text[start:i] + '"<masked>"')
        if text[i:i + 1] not in ('"', "[", "{"):  # a scalar: up to the next separator
            end = min((j for j in (text.find(c, i) for c in ",}]") if j >= 0), default=len(text))
            start = end
            continue
        depth, in_string, escaped = 0, False, False
        while i < len(text):
            c = text[i]
            i += 1
            if in_string:
                if escaped:
                    escaped = False
                elif c == "\\":
                    escaped = True
                elif c == '"':
                    in_string = False
                    if depth == 0:
                        break
            elif c == '"':
                in_string = True
            elif c in "[{":
                depth += 1
            elif c in "]}":
                depth -= 1
                if depth == 0:
                    break
        start = i
    out.append(text[start:])
    return "".join(out)
