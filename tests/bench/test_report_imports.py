"""docs/benchmarks.md is written by ``bench.run`` in the benchmark venv, which has the competitors
and the measuring tools but not the crawler (bench/README.md, "The benchmark venv"): the report
and every module that writes a section of it must import without streamcrawl and its clients.
"""

from __future__ import annotations

import json
import subprocess
import sys

from bench.run import REPO

REPORT_MODULES = (
    "bench.report",
    "bench.tables",
    "bench.chart",
    "bench.wire",
    "bench.profile",
    "bench.doc_site",
    "bench.warc_rows",
    "bench.worker_rows",
    "bench.many_origins",
    "bench.cpu_split",
)
CRAWLER_SIDE = ("streamcrawl", "confluent_kafka", "cassandra", "faust", "aiokafka")


def test_the_report_imports_nothing_of_the_crawler() -> None:
    code = (
        "import importlib, json, sys\n"
        f"for name in {REPORT_MODULES!r}:\n"
        "    importlib.import_module(name)\n"
        f"side = {CRAWLER_SIDE!r}\n"
        "print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] in side)))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True
    )
    assert json.loads(done.stdout) == []
