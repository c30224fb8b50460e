"""The Kafka topology on a real documentation site: a Debian package's HTML tree under nginx.

``python -m bench.doc_site [--package postgresql-doc-15] [--runs 3]`` (project
venv, services' env sourced; a private broker + Cassandra give clean service figures) installs
the package if its HTML tree is missing (``apt-get install``, root only), serves the tree with
nginx from its installed place (a symlink in the run's directory: nothing is copied, nothing
lands in the repository), crawls it with one worker (bodies in the stream, the default) and
prints per run, then as medians: pages, CPU ms per page of the worker,
the broker and Cassandra over the crawl (raw CPU seconds; the harness's status poller reads
the counts topic as ``streamcrawl status`` does, Cassandra nothing) and their sum.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import tempfile
from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast

HTML = {"postgresql-doc-15": "/usr/share/doc/postgresql-doc-15/html"}


def html_tree(package: str) -> Path:
    """The package's HTML tree, installed first if missing."""
    root = Path(HTML.get(package, f"/usr/share/doc/{package}/html"))
    if not root.is_dir():
        subprocess.run(["apt-get", "install", "-y", package], check=True, capture_output=True)
    return root


def one_run(root: Path, args: argparse.Namespace) -> dict[str, Any]:
    from bench.kafka_runner import _free_port, drain, measure, seed, start_topology
    from bench.server import Nginx

    tmp = Path(tempfile.mkdtemp(prefix="doc-site-"))
    port = _free_port()
    (tmp / "site").mkdir()
    (tmp / "site" / str(port)).symlink_to(root)
    spec = SimpleNamespace(root=tmp / "site", ports=[port])
    expected = sum(1 for _ in root.glob("*.html"))
    with Nginx(cast(Any, spec), tmp / "nginx") as nginx, start_topology(tmp, 1, 12) as topo:
        seeded = seed(topo, [f"http://127.0.0.1:{port}/index.html"], delay=0.0,
                      max_pages=10 * expected)  # fmt: skip
        drained = drain(topo, seeded, expected_pages=expected, max_pages=None,
                        timeout=args.timeout, access_log=nginx.access_log)  # fmt: skip
    run = measure(topo, seeded, drained, rss_samples=False)
    pages = max(drained.states.get("fetched", 0), 1)
    wall = run["wall_s"]
    out: dict[str, Any] = {"pages": pages, "states": drained.states, "wall_s": round(wall, 1)}
    out["worker_ms"] = round(1000 * run["cpu_s"] / pages, 2)
    for name, cpu in run["service_cpu_s"].items():
        if cpu is None:
            continue
        out[f"{name}_ms"] = round(1000 * cpu / pages, 2)
    out["total_ms"] = round(
        out["worker_ms"] + out.get("kafka_ms", 0) + out.get("cassandra_ms", 0), 2
    )
    shutil.rmtree(tmp, ignore_errors=True)
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--package", default="postgresql-doc-15")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--timeout", type=float, default=600.0)
    args = ap.parse_args()
    root = html_tree(args.package)
    rows = []
    for _ in range(args.runs):
        row = one_run(root, args)
        print(json.dumps(row), flush=True)
        rows.append(row)
    keys = [k for k in rows[0] if k.endswith("_ms")]
    medians = {k: statistics.median(r[k] for r in rows) for k in keys}
    print(json.dumps({"package": args.package, "runs": len(rows), "median": medians}))


if __name__ == "__main__":
    main()
