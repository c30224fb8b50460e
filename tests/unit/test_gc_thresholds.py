"""The worker collects cyclic garbage at ``THRESHOLDS``, set before its Faust app is built."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest

from streamcrawl.topology.worker.gc_thresholds import THRESHOLDS, tune_gc
from tests.unit.worker_run import run_worker


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
    run = run_worker(monkeypatch)
    assert (run.thresholds_at_build, run.thresholds_at_run) == (THRESHOLDS, THRESHOLDS)
