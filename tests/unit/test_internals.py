"""The Faust and aiokafka internals the worker reaches were checked against one release series
each (``topology.worker.internals``): another series fails here, so an upgrade re-reads them."""

from __future__ import annotations

from importlib.metadata import version

from streamcrawl.topology.worker.internals import CHECKED_AGAINST


def test_the_installed_faust_and_aiokafka_are_the_series_checked() -> None:
    installed = {name: ".".join(version(name).split(".")[:2]) for name in CHECKED_AGAINST}
    assert installed == CHECKED_AGAINST
