"""The heavy-tail simulation at a tiny size: the real scheduler on its virtual clock keeps the
politeness rules, conserves pages, and its time shares add up."""

from __future__ import annotations

import math

import pytest

from bench.probes.heavy_tail_model import (
    Partition,
    Setup,
    Web,
    make_web,
    mean_cycle,
    origin_name,
    run_worker,
)
from bench.probes.heavy_tail_sim import layout, measure_bytes, simulate, table
from streamcrawl.agents.stream.tables import partition_for

ORIGINS = 2_000
SETUP = Setup(partitions=8, workers=2, hours=0.05)


@pytest.fixture(scope="module")
def web() -> Web:
    return make_web(ORIGINS, seed=1)


def test_origins_are_partitioned_as_kafka_partitions_them(web: Web) -> None:
    for i in range(0, ORIGINS, 97):
        assert web.hashes[i] % 8 == partition_for(origin_name(i), 8)


def test_sizes_are_zipf_like(web: Web) -> None:
    ones = sum(1 for n in web.sizes if n == 1) / ORIGINS
    assert 0.45 < ones < 0.55  # P(size >= 2) = 1/2
    assert max(web.sizes) >= 100  # P(size >= 100) = 1 %: ~20 of them


def test_pages_are_conserved_and_politeness_kept(web: Web) -> None:
    parts: dict[int, Partition] = {}
    workers = [run_worker(web, SETUP, w, parts) for w in range(SETUP.workers)]
    assert sum(w.total for w in workers) == sum(web.sizes)  # every origin has one worker
    assert sorted(parts) == list(range(8))
    for w in workers:
        assert 0 < w.pages <= w.dispatched <= w.total
        assert w.dispatched - w.pages <= max(4 * SETUP.concurrency, 1024)  # in the pipeline
        assert w.max_gap_violation >= -1e-9  # request starts of an origin >= delay apart
        assert w.most_in_flight == 1  # per_origin_concurrency
    assert sum(p.pages for p in parts.values()) == sum(w.pages for w in workers)
    horizon = SETUP.hours * 3600
    for p in parts.values():
        assert p.busy + p.idle + p.queued <= horizon + 1e-6
        assert 0 <= p.idle_one <= p.idle


def test_shares_are_shares(web: Web) -> None:
    out = simulate(web, SETUP)
    for share in ("idle_share_window", "idle_share_life", "idle_behind_one_origin_life"):
        for key in ("median", "p99", "max"):
            assert 0.0 <= out[share][key] <= 1.0, share
    for key in ("cpu_share", "cpu_share_crawl", "slow_share_of_slots", "queued_share_window"):
        assert 0.0 <= out[key] <= 1.0, key
    assert 0.0 <= out["slots_in_use"] <= SETUP.concurrency
    assert out["finish_hours"]["max"] == out["hot_partition"]["finish_hours"]
    assert out["finish_hours"]["max"] >= out["finish_hours"]["p90"] >= out["finish_hours"]["median"]
    report = {"origins": ORIGINS, "total_pages": sum(web.sizes), "largest_origins": [9, 8, 7]}
    report |= {"median_origin": 1, "bytes": {"seen": 1, "queued": 1, "origin": 1}}
    assert table(report | {"layout": [], "runs": [out]}).count("\n| 8 / 2 / 64 |") == 1


def test_one_origin_alone_idles_between_its_requests() -> None:
    """A partition holding one origin of 1,000 pages: one request per delay, so it idles for
    the share of the delay its fetch does not take, and fetches window / delay pages."""
    web = Web(sizes=(1_000,), slow=(False,), hashes=(0,))
    setup = Setup(partitions=1, workers=1, hours=0.1)
    parts: dict[int, Partition] = {}
    worker = run_worker(web, setup, 0, parts)
    cycle, held = mean_cycle(setup, slow=False)
    assert worker.pages == pytest.approx(360 / cycle, rel=0.02)
    part = parts[0]
    share = part.idle / (part.busy + part.idle + part.queued)
    assert share == pytest.approx(1 - held / cycle, abs=0.05)
    assert part.idle_one == part.idle
    assert part.finished_at == pytest.approx(360 + (1_000 - worker.dispatched) * cycle)
    assert part.tail_idle == pytest.approx(part.tail * (1 - held / cycle))


def test_layout_and_state_bytes(web: Web) -> None:
    size = measure_bytes()
    assert 20 < size.seen < 200 and 20 < size.queued < 400
    out = layout(web, 8, 2, size)
    assert out["pages"]["max_over_mean"] >= 1.0
    assert out["origins"]["max"] * 8 >= ORIGINS
    assert math.isclose(
        out["mean_state_mb"] * 8 * 1e6,
        sum(web.sizes) * (size.seen + size.queued) + ORIGINS * size.origin,
    )
