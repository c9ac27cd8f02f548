"""Process logging: JSON lines (default) or text on stderr, with context fields and redaction.

Operators ship the manager's stderr to a log pipeline that indexes fields, so every record is one
JSON object with ``ts``, ``level``, ``logger`` (the logger's name), ``msg``, the reconcile fields
bound by :mod:`cre.kube.logcontext` (``controller``, ``namespace``, ``name`` - the object's name -
and ``reconcileID``, snapshotted at emit time by its ``ContextFilter``) and any ``extra=``
fields. Secrets must never reach the log: a filter scrubs bearer tokens, Authorization headers
and token/password-like keys from messages and fields before any handler sees them.
"""

from __future__ import annotations

import json
import logging
import re
import sys
import traceback
from collections.abc import Mapping
from datetime import UTC, datetime
from enum import Enum
from typing import Any, Final, TextIO

from cre.kube.logcontext import FIELDS_ATTR, ContextFilter, current_fields, record_attribute

REDACTED: Final = "[REDACTED]"

# LogRecord's own attributes; anything else on a record came from ``extra=``.
_STANDARD: Final = frozenset(vars(logging.LogRecord("", 0, "", 0, "", None, None))) | {
    "message", "asctime", "taskName"}
_SECRET_KEY: Final = re.compile(r"(token|password|passwd|secret|authorization|api[-_]?key|"
                                r"client[-_]?key|credential)", re.IGNORECASE)
_SECRET_TEXT: Final = (
    re.compile(r"(?i)\b(bearer|basic)\s+[A-Za-z0-9._~+/=-]+"),
    re.compile(r"(?i)(authorization['\"]?\s*[:=]\s*['\"]?)[^'\",}\s]+(\s+[^'\",}\s]+)?"),
    re.compile(r"(?i)((?:token|password|secret|api[-_]?key)['\"]?\s*[:=]\s*['\"]?)[^'\",}\s]+"),
    re.compile(r"\beyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]+"),  # JWTs
)


class LogFormat(Enum):
    JSON = "json"
    TEXT = "text"


def redact_text(text: str) -> str:
    """The text with bearer/basic credentials, Authorization values, tokens and JWTs masked."""
    out = _SECRET_TEXT[0].sub(lambda m: f"{m.group(1)} {REDACTED}", text)
    out = _SECRET_TEXT[1].sub(lambda m: f"{m.group(1)}{REDACTED}", out)
    out = _SECRET_TEXT[2].sub(lambda m: f"{m.group(1)}{REDACTED}", out)
    return _SECRET_TEXT[3].sub(REDACTED, out)


def _redact_value(key: str, value: Any) -> Any:
    if _SECRET_KEY.search(key):
        return REDACTED
    if isinstance(value, str):
        return redact_text(value)
    if isinstance(value, Mapping):
        return {k: _redact_value(str(k), v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_redact_value(key, v) for v in value]
    return value


class RedactionFilter(logging.Filter):
    """Masks secrets in the message, its arguments and ``extra=`` fields of every record."""

    def filter(self, record: logging.LogRecord) -> bool:
        record.msg = redact_text(record.getMessage())
        record.args = None
        for key in list(vars(record)):
            if key not in _STANDARD:
                setattr(record, key, _redact_value(key, getattr(record, key)))
        if record.exc_info and record.exc_info[1] is not None:
            record.exc_text = redact_text("".join(traceback.format_exception(*record.exc_info)))
            record.exc_info = None
        return True


def _fields(record: logging.LogRecord) -> dict[str, Any]:
    """The bound fields snapshotted on the record by ContextFilter (the ones bound now if no filter
    ran), then its ``extra=`` fields; the filter's per-field copies (``objectName``) are skipped."""
    bound: Mapping[str, Any] = (getattr(record, FIELDS_ATTR) if hasattr(record, FIELDS_ATTR)
                                else current_fields())
    copies = {record_attribute(key): value for key, value in bound.items()}
    out: dict[str, Any] = dict(bound)
    for key, value in vars(record).items():
        if key in _STANDARD or key.startswith("_") or key == FIELDS_ATTR:
            continue
        if key in copies and key not in bound and copies[key] == value:
            continue
        out[key] = value
    return out


class JsonFormatter(logging.Formatter):
    """One JSON object per record."""

    def format(self, record: logging.LogRecord) -> str:
        doc: dict[str, Any] = {
            "ts": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds")
            .replace("+00:00", "Z"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        doc.update(_fields(record))
        if record.exc_text:
            doc["stacktrace"] = record.exc_text
        elif record.exc_info:
            doc["stacktrace"] = redact_text(self.formatException(record.exc_info))
        return json.dumps(doc, default=str, ensure_ascii=False)


class TextFormatter(logging.Formatter):
    """Human-readable: time, level, logger, message, then ``key=value`` fields."""

    def format(self, record: logging.LogRecord) -> str:
        ts = datetime.fromtimestamp(record.created, UTC).strftime("%H:%M:%S.%f")[:-3]
        fields = " ".join(f"{k}={v}" for k, v in _fields(record).items())
        line = f"{ts} {record.levelname:<7} {record.name}: {record.getMessage()}"
        if fields:
            line += f"  {fields}"
        if record.exc_text:
            line += "\n" + record.exc_text
        elif record.exc_info:
            line += "\n" + redact_text(self.formatException(record.exc_info))
        return line


def setup_logging(*, fmt: LogFormat, level: str, stream: TextIO | None = None) -> None:
    """Route the root logger to ``stream`` (stderr) in the chosen format, secrets redacted."""
    handler = logging.StreamHandler(stream or sys.stderr)
    handler.setFormatter(JsonFormatter() if fmt is LogFormat.JSON else TextFormatter())
    handler.addFilter(ContextFilter())  # first, so the redaction filter sees the bound fields
    handler.addFilter(RedactionFilter())
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(level.upper())
    # Library chatter that would drown the manager's own records at info level.
    for noisy in ("aiohttp.access", "kubernetes_asyncio"):
        logging.getLogger(noisy).setLevel(max(logging.WARNING, root.level))
