"""Label and annotation rules every write obeys, with the real server's 422 causes.

A real API server validates ``metadata.labels`` (qualified-name keys, values of at most 63
characters from a restricted alphabet) and ``metadata.annotations`` (qualified-name keys, case
ignored, and at most 256 KiB of keys plus values in total) for every kind, before any other
check of the object (``apimachinery`` ``ValidateLabels`` / ``ValidateAnnotations``). The
messages are theirs: ``Invalid value: "<value>": <rule>`` on the map's path, and
``Too long: may not be more than 262144 bytes`` for the annotation total.
"""

from __future__ import annotations

import re
from typing import Any

from .errors import StatusCause

TOTAL_ANNOTATION_BYTES = 256 * 1024
NAME_MAX = 63
_QUALIFIED = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")


def _regex_error(msg: str, fmt: str, *examples: str) -> str:
    """apimachinery's ``RegexError`` wording (examples joined with ``,  or``)."""
    shown = " or ".join(f"'{e}', " for e in examples)
    return f"{msg} (e.g. {shown}regex used for validation is '{fmt}')"


_QUALIFIED_FMT = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]"
_QUALIFIED_MSG = _regex_error(
    "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an "
    "alphanumeric character", _QUALIFIED_FMT, "MyName", "my.name", "123-abc")
_VALUE_MSG = _regex_error(
    "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or "
    "'.', and must start and end with an alphanumeric character",
    "(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?", "MyValue", "my_value", "12345")
_SUBDOMAIN_MSG = _regex_error(
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or "
    "'.', and must start and end with an alphanumeric character",
    "[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*", "example.com")


def qualified_name_errors(value: str) -> list[str]:
    """``IsQualifiedName``: an optional DNS-subdomain prefix and ``/``, then a name <= 63."""
    parts = value.split("/")
    if len(parts) > 2:
        return [f"a qualified name {_QUALIFIED_MSG} with an optional DNS subdomain prefix and "
                "'/' (e.g. 'example.com/MyName')"]
    errs: list[str] = []
    name = parts[-1]
    if len(parts) == 2:
        prefix = parts[0]
        if not prefix:
            errs.append("prefix part must be non-empty")
        else:
            if len(prefix) > 253:
                errs.append("prefix part must be no more than 253 characters")
            if not _SUBDOMAIN.match(prefix):
                errs.append(f"prefix part {_SUBDOMAIN_MSG}")
    if not name:
        errs.append("name part must be non-empty")
    elif len(name) > NAME_MAX:
        errs.append(f"name part must be no more than {NAME_MAX} characters")
    if not _QUALIFIED.match(name):
        errs.append(f"name part {_QUALIFIED_MSG}")
    return errs


def label_value_errors(value: str) -> list[str]:
    """``IsValidLabelValue``: at most 63 characters, alphanumerics inside ``-_.``."""
    errs: list[str] = []
    if len(value) > NAME_MAX:
        errs.append(f"must be no more than {NAME_MAX} characters")
    if not _VALUE.match(value):
        errs.append(_VALUE_MSG)
    return errs


def _invalid(path: str, value: str, msg: str) -> StatusCause:
    shown = '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
    return StatusCause("FieldValueInvalid", f"Invalid value: {shown}: {msg}", path)


def validate_labels(labels: Any, path: str = "metadata.labels") -> list[StatusCause]:
    """Causes for bad label keys and values (keys in sorted order, for stable messages)."""
    if not isinstance(labels, dict):
        return []
    causes: list[StatusCause] = []
    for key in sorted(labels, key=str):
        value = labels[key]
        causes.extend(_invalid(path, str(key), m) for m in qualified_name_errors(str(key)))
        if isinstance(value, str):
            causes.extend(_invalid(path, value, m) for m in label_value_errors(value))
    return causes


def validate_annotations(annotations: Any,
                         path: str = "metadata.annotations") -> list[StatusCause]:
    """Causes for bad annotation keys (case ignored) and a total size above 256 KiB."""
    if not isinstance(annotations, dict):
        return []
    causes: list[StatusCause] = []
    total = 0
    for key in sorted(annotations, key=str):
        causes.extend(_invalid(path, str(key), m)
                      for m in qualified_name_errors(str(key).lower()))
        total += len(str(key).encode()) + len(str(annotations[key] or "").encode())
    if total > TOTAL_ANNOTATION_BYTES:
        causes.append(StatusCause("FieldValueTooLong",
                                  f"Too long: may not be more than {TOTAL_ANNOTATION_BYTES} bytes",
                                  path))
    return causes
