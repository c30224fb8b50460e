"""bench/worker_rows.py: ``--per-origin-concurrency`` reaches the run (the few-origins shape,
4 x 500 at delay 0 with one request per origin, needs it: the seed's default at delay 0 is 8),
and without it the run keeps the seed's default; ``--embedded`` runs the embedded crawl on the
row's site instead of the workers."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from bench import suite, worker_rows


@pytest.mark.parametrize(("flag", "passed"), [(1, {"per_origin_concurrency": 1}), (None, {})])
def test_the_per_origin_concurrency_reaches_the_run(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, flag: int | None, passed: dict[str, Any]
) -> None:
    calls: list[dict[str, Any]] = []

    def fake_try(name: str, spec: Any, rundir: Path, args: Any, **kw: Any) -> dict[str, Any]:
        calls.append(kw)
        return {"status": "failed", "reason": "not run here"}

    monkeypatch.setattr(suite, "ensure_site", lambda *a, **kw: type("S", (), {"origins": 4})())
    monkeypatch.setattr(suite, "_try", fake_try)
    worker_rows.politeness_rows(tmp_path, "4x500@0", 1, 1, per_origin_concurrency=flag)
    assert calls == [{"delay": 0.0, **passed}]


@pytest.mark.parametrize(("embedded", "name"), [(True, "embedded"), (False, "kafka-2")])
def test_the_embedded_flag_runs_the_embedded_crawl_on_the_same_site(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, embedded: bool, name: str
) -> None:
    """``--embedded``: the many-origins ratios' baseline, the embedded crawl on the row's own
    site; without it the workers run."""
    calls: list[tuple[str, Any]] = []
    site = type("S", (), {"origins": 2000})()

    def fake_try(name: str, spec: Any, rundir: Path, args: Any, **kw: Any) -> dict[str, Any]:
        calls.append((name, spec))
        return {"status": "failed", "reason": "not run here"}

    monkeypatch.setattr(suite, "ensure_site", lambda *a, **kw: site)
    monkeypatch.setattr(suite, "_try", fake_try)
    worker_rows.politeness_rows(tmp_path, "2000x5@1", 2, 1, embedded=embedded)
    assert calls == [(name, site)]
