"""Poll one crawl's terminal-state counts the way ``streamcrawl status`` reads them (the Kafka
runner runs it in the streamcrawl venv).

``python -m bench.kafka_status --crawl-id ID [--interval S]`` prints one JSON line per poll,
``{"t": unix_time, "states": {state: n}, "sink_lag": n | null}``, until it is terminated. The
counts are the last ``counts`` record of each frontier partition and the lag is the sink
group's (``topology/admin/status.py``), read by one ``StatusReader`` for the poller's life
(as ``status --watch`` reads): a poll costs the broker two ``ListOffsets``, an offset fetch
and a fetch, and Cassandra nothing. A new reader per poll was most of the requests the
broker served in the Kafka rows (docs/performance.md, "The broker's bill"), and an exact poll
(``status --exact``, a read of every state row) a large share of the Cassandra CPU. Settings
come from the environment (``STREAMCRAWL_KAFKA_*``, ``STREAMCRAWL_TOPIC_PREFIX``).
"""

from __future__ import annotations

import argparse
import json
import sys
import time


def main(crawl_id: str, interval: float) -> None:
    from streamcrawl.agents.errors import CrawlError
    from streamcrawl.topology.admin.status import StatusReader
    from streamcrawl.topology.settings import load_settings

    with StatusReader(load_settings()) as reader:
        while True:
            t = time.time()
            try:
                snapshot = reader.read()
            except CrawlError as exc:  # topics not there yet, a slow broker: poll again
                print(f"bench.kafka_status: {exc}", file=sys.stderr)
            else:
                stats = snapshot.stats
                states = stats[crawl_id].all_states() if crawl_id in stats else {}
                line = {"t": t, "states": states, "sink_lag": snapshot.sink_lag}
                sys.stdout.write(json.dumps(line) + "\n")
                sys.stdout.flush()
            time.sleep(max(0.0, interval - (time.time() - t)))


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--crawl-id", required=True)
    ap.add_argument("--interval", type=float, default=0.5)
    a = ap.parse_args()
    main(a.crawl_id, a.interval)
