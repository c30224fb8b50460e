"""The probe's ``--revisits`` arithmetic on hand-made requests and readings: which request is a
first fetch and which a revisit, in which window, and what each costs."""

from __future__ import annotations

import pytest

from bench.probes import revisit_probe
from bench.probes.kafka_probe import Fetch
from bench.probes.revisit_probe import Phases, Point, per_request, phases, revisit_report

A, B, ROBOTS = "http://o:1/", "http://o:1/p1", "http://o:1/robots.txt"


def test_revisit_flags_are_fixed_without_jitter() -> None:
    assert revisit_probe.revisit_flags(3) == [
        *("--recrawl-mode", "fixed", "--recrawl-after", "3s", "--recrawl-min", "3s"),
        *("--recrawl-jitter", "0"),
    ]


def test_first_requests_are_the_earliest_and_skip_robots() -> None:
    requests = [(1.0, ROBOTS), (2.0, A), (3.0, B), (4.0, A)]
    assert revisit_probe.first_requests(requests) == {A: 2.0, B: 3.0}


def test_phases_split_first_fetches_from_revisits_by_window() -> None:
    # c = 10, d = 20: A is revisited inside the first cycle (overlap) and in the window; a
    # request at or after d is outside both.
    requests = [(1.0, ROBOTS), (2.0, A), (6.0, B), (8.0, A), (11.0, B), (12.0, ROBOTS), (20.0, A)]
    assert phases(requests, 10.0, 20.0) == Phases(
        first=2, overlap=1, revisits=1, late_first=0, robots=(1, 1), span=6.0
    )


def test_phases_count_a_page_first_requested_in_the_window() -> None:
    assert phases([(2.0, A), (11.0, B)], 10.0, 20.0).late_first == 1


@pytest.mark.parametrize(
    ("cycle", "window", "p", "expected"),
    [
        # 10 first fetches at 4 and 2 revisits at 1 in the cycle; 5 revisits at 1 in the window
        (42.0, 5.0, Phases(10, 2, 5, 0, (0, 0), 1.0), (4.0, 1.0)),
        (40.0, 5.0, Phases(10, 0, 5, 0, (0, 0), 1.0), (4.0, 1.0)),
        (40.0, 0.0, Phases(10, 0, 0, 0, (0, 0), 1.0), (None, None)),  # no revisit: no rate
        (3.0, 5.0, Phases(0, 3, 5, 0, (0, 0), 1.0), (None, 1.0)),
    ],
)
def test_per_request_takes_the_cycles_revisits_out_at_the_windows_cost(
    cycle: float, window: float, p: Phases, expected: tuple[float | None, float | None]
) -> None:
    assert per_request(cycle, window, p) == expected


def _values(sent_pages: float, batches: float, events: float, lag: float) -> dict:
    return {
        ("streamcrawl_kafka_messages_sent_total", (("topic", "pages"),)): sent_pages,
        ("streamcrawl_frontier_batch_events_count", ()): batches,
        ("streamcrawl_frontier_batch_events_sum", ()): events,
        ("streamcrawl_sink_consumer_lag", (("partition", "0"), ("topic", "pages"))): lag,
    }


def test_revisit_report_per_request_ratio_idle_and_304s() -> None:
    # first cycle 0..10 s: pages A and B first, A once again; window 10..20 s: 4 revisits
    requests = [(0.5, ROBOTS), (1.0, A), (2.0, B), (9.0, A), *((11.0 + i, B) for i in range(4))]
    cpu0 = {"worker": 0.0, "kafka": 0.0, "cassandra": None}
    p0 = Point(0.0, cpu0, _values(0, 0, 0, 0), {"pages": 0})
    # worker: 2 first fetches at 10 ms + 1 revisit at 2 ms + 10 s idle at 1 ms/s = 32 ms;
    # then 4 revisits at 2 ms + 10 ms idle = 18 ms
    stored1, stored2 = {"pages": 3, "seen-changelog": 4}, {"pages": 7, "seen-changelog": 8}
    p1 = Point(
        10.0, {"worker": 0.032, "kafka": 0.1, "cassandra": None}, _values(3, 3, 6, 2), stored1
    )
    p2 = Point(
        20.0, {"worker": 0.05, "kafka": 0.15, "cassandra": None}, _values(7, 5, 10, 0), stored2
    )
    fetches = [Fetch(1.0, 200, "new"), *(Fetch(11.0 + i, 304, "unchanged") for i in range(3))]
    fetches.append(Fetch(14.0, 200, "changed"))
    idle = {"worker": 0.001, "kafka": 0.004, "cassandra": None}
    r = revisit_report((p0, p1, p2), requests, fetches, idle)
    assert r["first_cycle"]["first_fetches"] == 2 and r["first_cycle"]["revisits"] == 1
    assert r["first_cycle"]["robots"] == 1 and r["first_cycle"]["sink_lag_at_end"] == 2
    assert r["revisit_window"]["revisits"] == 4 and r["revisit_window"]["answered_304"] == 0.75
    first, again = r["per_first_fetch"], r["per_revisit"]
    assert again["worker_cpu_ms"] == 4.5  # 18 ms / 4
    assert first["worker_cpu_ms"] == pytest.approx((32 - 4.5) / 2)
    assert again["worker_cpu_ms_minus_idle"] == 2.0
    assert first["worker_cpu_ms_minus_idle"] == 10.0
    assert r["ratio_minus_idle"] == 0.2
    assert again["kafka_cpu_ms_minus_idle"] == 2.5  # (50 - 40) / 4
    assert "cassandra_cpu_ms_minus_idle" not in again  # not measured
    assert again["sent.pages"] == 1.0 and first["sent.pages"] == 1.0
    assert again["stored.seen-changelog"] == 1.0 and first["stored.seen-changelog"] == 1.5
    assert r["first_cycle"]["frontier_events_per_batch"] == 2.0
    assert r["revisit_window"]["frontier_events_per_batch"] == 2.0
