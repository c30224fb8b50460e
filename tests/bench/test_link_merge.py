"""bench/probes/link_merge.py: the frontier messages a page makes when its links to other origins
are flushed with other reports'; on hand-made pages and a small generated site."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.probes.link_merge import fit_reports, messages_per_page, page_partitions, with_workers
from bench.site import generate
from streamcrawl.agents.stream.partitioner import key_hash

EVERY = frozenset(range(4))


def test_a_flush_sends_one_message_per_partition_linked() -> None:
    # Every page links all 4 partitions: a flush of r pages sends 4 messages.
    assert messages_per_page([EVERY] * 10, 4) == pytest.approx(1.0)
    assert messages_per_page([EVERY] * 10, 8) == pytest.approx(0.5)
    # Pages that link nothing make no message.
    assert messages_per_page([frozenset()] * 10, 5) == 0.0


def test_more_reports_a_flush_fewer_messages_a_page() -> None:
    pages = [frozenset({i % 4, (i * 3) % 4}) for i in range(40)]
    per_page = [messages_per_page(pages, r) for r in (1, 2, 4, 8, 16)]
    assert per_page == sorted(per_page, reverse=True)
    assert per_page[0] > per_page[-1]


def test_a_second_worker_halves_each_flush_and_sends_more() -> None:
    pages = [(i % 4, frozenset({(i + 1) % 4, (i + 2) % 4})) for i in range(80)]
    one, two = with_workers(pages, 12, 1), with_workers(pages, 12, 2)
    assert two > one
    assert with_workers(pages, 12, 2) == pytest.approx(
        (messages_per_page([p for o, p in pages if o % 2 == 0], 6) * 40
         + messages_per_page([p for o, p in pages if o % 2 == 1], 6) * 40) / 80
    )  # fmt: skip


def test_the_fit_finds_the_reports_that_give_the_measured_rate() -> None:
    pages = [(i % 4, frozenset({(i + 1) % 4, (i + 3) % 4})) for i in range(80)]
    measured = with_workers(pages, 6, 1)
    reports = fit_reports(pages, measured)
    assert with_workers(pages, reports, 1) == pytest.approx(measured, rel=0.02)


def test_a_sites_pages_link_the_partitions_of_other_origins_only(tmp_path: Path) -> None:
    spec = generate(tmp_path, origins=3, pages=5, base_port=27100)
    pages = page_partitions(tmp_path, 64)
    assert len(pages) == spec.expected_pages
    parts = {key_hash(spec.origin(i).encode()) % 64 for i in range(spec.origins)}
    assert len(parts) == 3  # distinct at 64 partitions: a page's own is then never linked
    assert {own for own, _ in pages} <= parts
    for own, linked in pages:
        assert linked <= parts
        assert own not in linked
    assert any(linked for _, linked in pages)  # the site links other origins
