"""JSON logging with reconcile context fields, and redaction of credentials."""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Iterator

import pytest

from cre.kube.logcontext import ContextFilter, log_fields, reconcile_context
from cre_manager.logs import (
    REDACTED,
    JsonFormatter,
    LogFormat,
    TextFormatter,
    redact_text,
    setup_logging,
)


@pytest.fixture
def captured() -> Iterator[io.StringIO]:
    """Root logging routed to a buffer in JSON; restored afterwards."""
    root = logging.getLogger()
    saved = (list(root.handlers), root.level)
    buf = io.StringIO()
    setup_logging(fmt=LogFormat.JSON, level="debug", stream=buf)
    yield buf
    root.handlers[:] = saved[0]
    root.setLevel(saved[1])


def _records(buf: io.StringIO) -> list[dict[str, object]]:
    return [json.loads(line) for line in buf.getvalue().splitlines()]


def test_reconcile_fields_are_attached(captured: io.StringIO) -> None:
    """Records emitted inside reconcile_context carry controller, namespace, name, reconcileID."""
    log = logging.getLogger("cre.controller.test")
    with reconcile_context(controller="job", namespace="ns1", name="j1",
                           reconcile_id="rid-1"):
        log.info("reconciling", extra={"phase": "Running"})
    log.info("outside")
    inside, outside = _records(captured)
    assert inside["controller"] == "job"
    assert inside["namespace"] == "ns1"
    assert inside["name"] == "j1"
    assert inside["reconcileID"] == "rid-1"
    assert inside["phase"] == "Running"
    assert inside["msg"] == "reconciling"
    assert inside["level"] == "info"
    assert "reconcileID" not in outside


def test_fresh_reconcile_ids_differ() -> None:
    """Each reconcile gets its own ID when none is given."""
    with reconcile_context(controller="job", namespace="a", name="b") as first:
        pass
    with reconcile_context(controller="job", namespace="a", name="b") as second:
        pass
    assert first != second


@pytest.mark.parametrize("secret_line", [
    "calling with Authorization: Bearer abc.def-ghi",
    "header {'Authorization': 'Bearer s3cr3t'}",
    "token=s3cr3t in query",
    '{"token": "s3cr3t"}',
    "jwt eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJzeXN0ZW0ifQ.c2lnbmF0dXJl seen",
    "Basic dXNlcjpwYXNz",
])
def test_secrets_in_messages_are_masked(captured: io.StringIO, secret_line: str) -> None:
    """Bearer/basic credentials, Authorization values, tokens and JWTs never reach the log."""
    logging.getLogger("x").warning(secret_line)
    (record,) = _records(captured)
    text = json.dumps(record)
    for secret in ("abc.def-ghi", "s3cr3t", "c2lnbmF0dXJl", "dXNlcjpwYXNz"):
        assert secret not in text
    assert REDACTED in text


def test_secret_fields_and_arguments_are_masked(captured: io.StringIO) -> None:
    """Fields named like credentials and %-arguments holding them are masked too."""
    log = logging.getLogger("x")
    log.info("headers %s", {"Authorization": "Bearer zzz123"},
             extra={"token": "t0k3n", "headers": {"Authorization": "Bearer yyy"}})
    (record,) = _records(captured)
    assert record["token"] == REDACTED
    assert record["headers"] == {"Authorization": REDACTED}
    assert "zzz123" not in str(record["msg"])


def test_tracebacks_are_masked(captured: io.StringIO) -> None:
    """A secret inside an exception message is masked in the stack trace."""
    try:
        raise RuntimeError("request failed, Authorization: Bearer leaked-value")
    except RuntimeError:
        logging.getLogger("x").exception("boom")
    (record,) = _records(captured)
    assert "leaked-value" not in json.dumps(record)
    assert "RuntimeError" in str(record["stacktrace"])


def test_redact_text_leaves_plain_text() -> None:
    """Text without credentials passes unchanged."""
    assert redact_text("job ns/a reached phase Succeeded") == "job ns/a reached phase Succeeded"


def test_context_filter_for_library_users() -> None:
    """ContextFilter gives a %-style format every bound field, the object's name as objectName."""
    buf = io.StringIO()
    handler = logging.StreamHandler(buf)
    handler.addFilter(ContextFilter())
    handler.setFormatter(logging.Formatter(
        "%(name)s %(controller)s %(namespace)s/%(objectName)s %(reconcileID)s %(message)s"))
    logger = logging.getLogger("lib.user")
    logger.addHandler(handler)
    logger.propagate = False
    try:
        with reconcile_context(controller="job", namespace="ns", name="obj-a", reconcile_id="r1"):
            logger.warning("m")
    finally:
        logger.removeHandler(handler)
        logger.propagate = True
    assert buf.getvalue() == "lib.user job ns/obj-a r1 m\n"


def test_context_filter_snapshots_fields_at_emit_time() -> None:
    """Fields are taken when the record is emitted, so a record formatted later keeps them."""
    record = logging.LogRecord("cre.x", logging.INFO, __file__, 1, "m", None, None)
    with reconcile_context(controller="job", namespace="ns", name="obj-a", reconcile_id="r1"):
        ContextFilter().filter(record)
    assert record.name == "cre.x"
    doc = json.loads(JsonFormatter().format(record))
    assert doc["logger"] == "cre.x"
    assert {k: doc[k] for k in ("controller", "namespace", "name", "reconcileID")} == {
        "controller": "job", "namespace": "ns", "name": "obj-a", "reconcileID": "r1"}
    assert "objectName" not in doc and "cre_fields" not in doc
    text = TextFormatter().format(record)
    assert " cre.x: m  " in text and "name=obj-a" in text and "objectName" not in text


def test_extra_field_wins_over_bound_field() -> None:
    """An extra= field of the same key as a bound one is what the record shows."""
    record = logging.LogRecord("cre.x", logging.INFO, __file__, 1, "m", None, None)
    record.namespace = "from-extra"
    with log_fields(namespace="bound", controller="job"):
        ContextFilter().filter(record)
    doc = json.loads(JsonFormatter().format(record))
    assert doc["namespace"] == "from-extra" and doc["controller"] == "job"


def test_text_format_is_readable_and_redacted() -> None:
    """--log-format text prints level, logger, message and key=value fields, secrets masked."""
    root = logging.getLogger()
    saved = (list(root.handlers), root.level)
    buf = io.StringIO()
    try:
        setup_logging(fmt=LogFormat.TEXT, level="info", stream=buf)
        with log_fields(controller="job"):
            logging.getLogger("cre.x").info("hello", extra={"token": "abc", "phase": "Running"})
        logging.getLogger("cre.x").debug("hidden at info level")
    finally:
        root.handlers[:] = saved[0]
        root.setLevel(saved[1])
    (line,) = buf.getvalue().splitlines()
    assert " INFO    cre.x: hello  " in line
    assert "controller=job" in line and "phase=Running" in line
    assert f"token={REDACTED}" in line and "abc" not in line
