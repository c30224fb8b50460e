"""The worker collects cyclic garbage at ``THRESHOLDS``, set before its Faust app is built."""

from __future__ import annotations

import argparse
import gc
from collections.abc import Iterator
from typing import Any

import pytest

from streamcrawl.topology import app as app_module
from streamcrawl.topology import kafka_commands
from streamcrawl.topology.gc_thresholds import THRESHOLDS, tune_gc


@pytest.fixture(autouse=True)
def restore_thresholds() -> Iterator[None]:
    before = gc.get_threshold()
    yield
    gc.set_threshold(*before)


def test_tune_gc_sets_the_thresholds() -> None:
    gc.set_threshold(700, 10, 10)
    tune_gc()
    assert gc.get_threshold() == THRESHOLDS
    assert THRESHOLDS[0] > 700  # rarer young collections than CPython's default


def test_worker_runs_with_the_thresholds(monkeypatch: pytest.MonkeyPatch) -> None:
    gc.set_threshold(700, 10, 10)
    seen: list[tuple[int, int, int]] = []

    class Worker:
        def execute_from_commandline(self) -> None:
            seen.append(gc.get_threshold())

    def create_app(settings: Any) -> Any:
        seen.append(gc.get_threshold())
        return settings

    monkeypatch.setattr(kafka_commands, "make_worker", lambda app, loglevel: Worker())
    monkeypatch.setattr(kafka_commands, "_check_services", lambda settings: None)  # no Kafka
    monkeypatch.setattr(app_module, "create_app", create_app)
    kafka_commands.cmd_worker(argparse.Namespace())
    assert seen == [THRESHOLDS, THRESHOLDS]
