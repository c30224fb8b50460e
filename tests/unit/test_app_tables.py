"""The worker's Faust tables get bounded RocksDB options (Faust's defaults grow with the crawl)."""

from __future__ import annotations

from pathlib import Path

import pytest

from streamcrawl.topology.settings import load_settings
from streamcrawl.topology.worker.app import create_app, table_options


@pytest.mark.parametrize("mb", [2, 8, 64])
def test_table_options_spend_exactly_the_budget(mb: int) -> None:
    opts = table_options(load_settings(table_memory_mb=mb))
    spent = opts["write_buffer_size"] * opts["max_write_buffer_number"] + opts["block_cache_size"]
    assert spent == mb * 1024 * 1024


def test_every_table_of_the_worker_gets_its_own_bounded_options(tmp_path: Path) -> None:
    settings = load_settings(table_memory_mb=4, state_dir=tmp_path, partitions=3)
    app = create_app(settings)
    names = {"seen", "pending", "origins"}
    options = {name: app.tables[name].options for name in names}
    for opts in options.values():
        assert opts == table_options(settings)
    assert len({id(o) for o in options.values()}) == 3  # Faust pops keys: never shared


def test_the_worker_keeps_the_root_logger_at_the_configured_level(tmp_path: Path) -> None:
    """Faust's spinner would put the root logger at DEBUG: every aiokafka debug call then
    builds a LogRecord on the hot path."""
    import logging

    from streamcrawl.topology.worker.run import make_worker

    root = logging.getLogger()
    saved = (root.level, list(root.handlers))
    try:
        worker = make_worker(create_app(load_settings(state_dir=tmp_path)), "WARNING")
        worker._setup_logging()
        assert root.level == logging.WARNING
        assert not logging.getLogger("aiokafka.producer.producer").isEnabledFor(logging.DEBUG)
    finally:
        root.setLevel(saved[0])
        root.handlers[:] = saved[1]
