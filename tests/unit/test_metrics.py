"""Metric names: ``streamcrawl_<component>_<metric>``, the component one of the worker's parts
(or ``render``, a render worker's); labels of bounded cardinality only (docs/operations.md,
"Metrics")."""

from __future__ import annotations

from pathlib import Path

from prometheus_client.metrics import MetricWrapperBase
from prometheus_client.parser import text_string_to_metric_families

from streamcrawl.agents.render.browser import Renderer
from streamcrawl.agents.stream.metrics import Metrics
from streamcrawl.agents.stream.render_metrics import RenderMetrics

COMPONENTS = {
    "fetch", "scheduler", "frontier", "robots", "sink", "kafka", "pipeline", "health", "worker",
    "tables", "state", "render",
}  # fmt: skip
# Every label a worker's metric may carry, each with a bounded set of values: no URL, origin,
# host or crawl id (per-origin detail is `streamcrawl status`'s).
LABELS = {
    "status_class", "kind", "state", "topic", "partition", "what", "reason", "dependency", "result",
}  # fmt: skip


def render_metrics() -> RenderMetrics:
    """A render worker's metrics, its renderer's among them."""
    metrics = RenderMetrics()
    metrics.watch(Renderer())
    return metrics


def _families(metrics: Metrics) -> dict[str, list[tuple[str, dict[str, str], float]]]:
    return {
        f.name: [(s.name, s.labels, s.value) for s in f.samples]
        for f in text_string_to_metric_families(metrics.render().decode())
    }


def test_every_metric_name_starts_with_its_component() -> None:
    registries = (Metrics().registry, render_metrics().registry)
    names = [m.name for r in registries for m in r.collect() if not m.name.startswith("process_")]
    assert names and all(n.startswith("streamcrawl_") for n in names), names
    assert sorted(n for n in names if n.split("_")[1] not in COMPONENTS) == []


def wrappers(metrics: Metrics | RenderMetrics) -> list[MetricWrapperBase]:
    return [v for v in vars(metrics).values() if isinstance(v, MetricWrapperBase)]


def test_labels_are_of_bounded_cardinality() -> None:
    labels = {
        label for m in (Metrics(), RenderMetrics()) for w in wrappers(m) for label in w._labelnames
    }
    # the renderer's, read at each scrape
    families = render_metrics().registry.collect()
    labels |= {k for f in families for s in f.samples for k in s.labels if k != "le"}
    assert labels <= LABELS, labels - LABELS
    for name in ("origin", "url", "host", "crawl_id"):
        assert name not in labels


def test_every_metric_is_documented_with_its_labels() -> None:
    doc = (Path(__file__).parents[2] / "docs" / "operations.md").read_text()
    rows = {line.split("|")[1].strip(" `"): line for line in doc.splitlines()
            if line.startswith("| `")}  # fmt: skip
    for w in wrappers(Metrics()) + wrappers(RenderMetrics()):
        name = w._name + ("_total" if w._type == "counter" else "")
        assert name in rows, f"docs/operations.md has no row for {name}"
        for label in w._labelnames:
            assert f"`{label}`" in rows[name], (name, label)
    for name in ("streamcrawl_state_volume_free_bytes", "streamcrawl_state_volume_size_bytes"):
        assert name in rows
    for family in render_metrics().registry.collect():  # the renderer's, read at each scrape
        name = family.name + ("_total" if family.type == "counter" else "")
        assert family.name.startswith("process_") or name in rows, name


def test_known_label_values_are_exported_at_zero_before_any_event() -> None:
    families = _families(Metrics())
    pages = {s[1]["status_class"]: s[2] for s in families["streamcrawl_fetch_pages"]
             if s[0].endswith("_total")}  # fmt: skip
    assert pages == {"2xx": 0.0, "3xx": 0.0, "4xx": 0.0, "5xx": 0.0}
    retries = {s[1]["reason"] for s in families["streamcrawl_sink_retries"]}
    assert retries == {"backpressure", "error"}
    states = {s[1]["state"] for s in families["streamcrawl_scheduler_origins_by_state"]}
    assert states == {"ready", "waiting", "fetching"}
    assert {s[1]["kind"] for s in families["streamcrawl_pipeline_stage_failures"]} >= {"page"}


def test_process_and_state_volume_metrics(tmp_path: Path) -> None:
    families = _families(Metrics(state_dir=tmp_path))
    assert families["process_cpu_seconds"][0][2] > 0
    free = families["streamcrawl_state_volume_free_bytes"][0][2]
    size = families["streamcrawl_state_volume_size_bytes"][0][2]
    assert 0 < free <= size
    # No state directory yet (a worker's first start): no series, not an error.
    assert "streamcrawl_state_volume_free_bytes" not in _families(
        Metrics(state_dir=tmp_path / "missing")
    )
