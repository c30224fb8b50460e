"""The ``embedded-extract`` bench row (bench/README.md): registered wherever the rows are named,
and its five extractors each read something from every page of the bench site, so that the row
measures extraction at work, not selectors that match nothing."""

from __future__ import annotations

import random
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:  # `bench` is a top-level folder of the repo, not an installed package
    sys.path.insert(0, str(REPO))

from bench.chart import SHORT  # noqa: E402
from bench.run import ALL  # noqa: E402
from bench.runners import EXTRACT_FLAGS, LABELS, RUNNERS  # noqa: E402
from bench.site import SiteSpec, _PageWriter  # noqa: E402
from bench.tables import ORDER  # noqa: E402
from streamcrawl.agents.content.extract import extract  # noqa: E402
from streamcrawl.agents.content.parse import parse_tree  # noqa: E402
from streamcrawl.agents.policy.extractors import compile_extractors, parse_extractor  # noqa: E402


def test_the_row_is_registered_where_rows_are_named() -> None:
    name = "embedded-extract"
    assert name in RUNNERS and name in LABELS and name in ALL and name in ORDER and name in SHORT
    assert ALL.index(name) == ALL.index("embedded-requests") + 1


@pytest.mark.parametrize("name", ["kafka-1-extract", "kafka-1-text"])
def test_the_one_worker_rows_are_registered_and_seed_their_flags(
    name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The Kafka rows of --extract and --text: named everywhere rows are, and each runs
    ``run_kafka_topology`` with one worker and its seed flags."""
    import bench.runners as runners

    assert name in RUNNERS and name in LABELS and name in ALL and name in ORDER and name in SHORT
    called: list[tuple[int, tuple[str, ...]]] = []

    def topology(_ctx: object, workers: int, flags: tuple[str, ...] = ()) -> dict:
        called.append((workers, tuple(flags)))
        return {}

    monkeypatch.setattr(runners, "run_kafka_topology", topology)
    RUNNERS[name](None)  # type: ignore[arg-type]
    assert called == [(1, EXTRACT_FLAGS if name == "kafka-1-extract" else ("--text",))]


def test_its_five_extractors_read_every_page_of_the_site() -> None:
    specs = EXTRACT_FLAGS[1::2]
    assert EXTRACT_FLAGS[::2] == ("--extract",) * 5
    extractors = compile_extractors([parse_extractor(s) for s in specs])
    writer = _PageWriter(SiteSpec("unused", 4, 64, 20000, 6, 0, 256), random.Random(6))
    for n in (0, 1, 17, 63):
        data = extract(extractors, parse_tree(writer.html(2, n)))
        assert data["title"] == data["heading"] == f"Origin 2 page {n}"
        assert data["lang"] == "en"
        assert isinstance(data["first_section"], str) and data["first_section"].endswith(" link 0")
        links = data["links"]
        assert isinstance(links, list) and 20 <= len(links) < 256
        assert "_truncated" not in data
