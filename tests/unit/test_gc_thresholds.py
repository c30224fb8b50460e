"""The worker collects cyclic garbage at ``THRESHOLDS``, set before its Faust app is built."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from pathlib import Path

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


def test_an_embedded_crawl_runs_with_the_thresholds(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from streamcrawl.topology.cli import crawl as command
    from streamcrawl.topology.cli.main import build_parser

    seen: list[tuple[int, int, int]] = []

    def run_embedded(*args: object, **kwargs: object) -> dict[str, object]:
        seen.append(gc.get_threshold())
        return {"interrupted": False}

    monkeypatch.setattr(command, "run_embedded", run_embedded)
    gc.set_threshold(700, 10, 10)
    args = build_parser().parse_args(["crawl", "http://a.example/", "--out", str(tmp_path)])
    assert command.cmd_crawl(args) == 0
    assert seen == [THRESHOLDS]
