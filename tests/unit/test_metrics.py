"""Metric names: ``streamcrawl_<component>_<metric>``, the component one of the worker's parts."""

from __future__ import annotations

from streamcrawl.agents.stream.metrics import Metrics

COMPONENTS = {"fetch", "scheduler", "frontier", "robots", "sink", "kafka", "pipeline", "health"}


def test_every_metric_name_starts_with_its_component() -> None:
    names = [m.name for m in Metrics().registry.collect()]
    assert names and all(n.startswith("streamcrawl_") for n in names), names
    assert sorted(n for n in names if n.split("_")[1] not in COMPONENTS) == []
