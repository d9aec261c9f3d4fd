"""The operator's logs: the level and the format chosen on its command line (`--log-level`, `--log-format`)."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator

import pytest

from streamapp.controller.operatorcli import configure_logging


@pytest.fixture(autouse=True)
def restored() -> Iterator[None]:
    """Put the root logger back as pytest set it up."""
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    yield
    root.handlers[:] = handlers
    root.setLevel(level)
    logging.getLogger("kopf.objects").setLevel(logging.NOTSET)


def test_json_logs_are_one_object_a_line_at_the_chosen_level(capfd: pytest.CaptureFixture[str]) -> None:
    configure_logging("warning", "json")
    log = logging.getLogger("streamapp.operator")
    log.info("not shown")
    log.warning("member %s is lost", 3)
    lines = [line for line in capfd.readouterr().err.splitlines() if line.strip()]
    assert len(lines) == 1, lines
    record = json.loads(lines[0])
    assert record["message"] == "member 3 is lost" and record["severity"].startswith("warn")
    assert "timestamp" in record


def test_text_logs_name_the_logger_and_hide_kopfs_handler_chatter(capfd: pytest.CaptureFixture[str]) -> None:
    configure_logging("info", "text")
    logging.getLogger("streamapp.operator").info("reconciled")
    logging.getLogger("kopf.objects").info("Handler 'x' succeeded.")
    err = capfd.readouterr().err
    assert "streamapp.operator" in err and "reconciled" in err
    assert "succeeded" not in err
