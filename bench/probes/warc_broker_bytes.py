"""What archiving adds on the broker: the ``captures`` topic next to ``pages`` for one ``--warc``
crawl of the synthetic web (bench/site.py) under nginx (bench/server.py), one worker.

For each serving mode (identity, then gzip: nginx ``gzip on``), generates ``--origins`` x
``--pages`` pages, crawls them through the Kafka wiring (``tests/integration/site.Cluster``:
the services in the environment, topics and keyspace of its own) seeded ``--warc --delay 0``,
and prints one JSON line: per topic the messages, the value bytes (uncompressed JSON) and the
bytes of its log segments on the broker's disk (zstd batches; ``--kafka-data``, the broker's
data directory), plus the worker's ``streamcrawl_kafka_capture_bytes`` counter.

    source .services/env
    .venv/bin/python -m bench.probes.warc_broker_bytes --kafka-data .services/kafka/data

Record of a run: bench/notes/warc-broker-bytes.md.

Informs: what archiving costs on the broker, and when to seed with ``--no-bodies``
(docs/warc.md, "Kafka wiring").
"""

from __future__ import annotations

import argparse
import collections
import json
import tempfile
import time
from pathlib import Path
from typing import Any

from bench import server
from bench.probes.page_records import disk_bytes, topic_values
from bench.site import generate

GZIP = "sendfile on;\n    gzip on; gzip_min_length 0; gzip_comp_level 6;"


def crawl(tmp: Path, *, gzip: bool, origins: int, pages: int, port: int, data: Path) -> Any:
    """One archived crawl of a fresh site; the figures of its two topics."""
    from tests.integration.site import Cluster

    spec = generate(tmp / "site", origins=origins, pages=pages, base_port=port)
    if gzip:  # the same template, with gzip on: payloads are stored as they came, compressed
        template = tmp / "nginx.conf.tmpl"
        template.write_text(server.TEMPLATE.read_text().replace("sendfile on;", GZIP))
        server.TEMPLATE = template
    nginx = server.Nginx(spec, tmp / "nginx").start()
    cluster = Cluster.create(tmp, partitions=3)
    try:
        worker = cluster.start_worker("w1")
        worker.wait_ready()
        cluster.seed(spec.seeds, "bytes", "--delay", "0", "--warc", "--per-origin-concurrency", "4")
        states = _wait(cluster, spec.expected_pages)
        time.sleep(3.0)  # the last batches reach the segments
        settings = cluster.settings()
        out: dict[str, Any] = {"gzip": gzip, "states": states}
        for short in ("pages", "captures"):
            name = f"{settings.topic_prefix}.{short}"
            values = topic_values(settings.kafka_bootstrap, name)
            out[short] = {
                "messages": len(values),
                "value_bytes": sum(len(v) for v in values),
                "disk_bytes": disk_bytes(data, name),
            }
        out["capture_bytes_metric"] = worker.metric("streamcrawl_kafka_capture_bytes_total")
        return out
    finally:
        cluster.stop_all()
        nginx.stop()


def _wait(cluster: Any, pages: int, timeout: float = 900.0) -> dict[str, int]:
    deadline = time.monotonic() + timeout
    while True:
        rows = cluster.query("SELECT state FROM {ks}.url_status")
        states = collections.Counter(r.state for r in rows)
        if states["fetched"] >= pages:
            return dict(states)
        if time.monotonic() > deadline:
            raise TimeoutError(f"{states['fetched']} of {pages} pages fetched")
        time.sleep(2.0)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(
        prog="python -m bench.probes.warc_broker_bytes", description=__doc__
    )
    ap.add_argument("--origins", type=int, default=2)
    ap.add_argument("--pages", type=int, default=300, help="per origin (default 300)")
    ap.add_argument("--port", type=int, default=21000, help="first origin's port")
    ap.add_argument("--kafka-data", type=Path, required=True, help="the broker's data directory")
    args = ap.parse_args(argv)
    for i, gzip in enumerate((False, True)):
        with tempfile.TemporaryDirectory() as tmp:
            figures = crawl(
                Path(tmp),
                gzip=gzip,
                origins=args.origins,
                pages=args.pages,
                port=args.port + 100 * i,
                data=args.kafka_data,
            )
            print(json.dumps(figures), flush=True)


if __name__ == "__main__":
    main()
