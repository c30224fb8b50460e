"""Poll one crawl's terminal-state counts the way ``streamcrawl status`` reads them (the Kafka
runner runs it in the streamcrawl venv).

``python -m bench.kafka_status --crawl-id ID [--interval S]`` prints one JSON line per poll,
``{"t": unix_time, "states": {state: n}, "sink_lag": n | null}``, until it is terminated. The
counts are the last ``counts`` record of each frontier partition and the lag is the sink
group's (``topology/admin/status.py``), so a poll costs the broker a few requests and
Cassandra nothing: an exact poll (``status --exact``, a read of every state row) every 0.5 s
was a large share of the Cassandra CPU the bench charged to the crawl. Settings come from the
environment (``STREAMCRAWL_KAFKA_*``, ``STREAMCRAWL_TOPIC_PREFIX``).
"""

from __future__ import annotations

import argparse
import json
import sys
import time


def main(crawl_id: str, interval: float) -> None:
    from streamcrawl.agents.errors import CrawlError
    from streamcrawl.topology.admin.status import read_status
    from streamcrawl.topology.settings import load_settings

    settings = load_settings()
    while True:
        t = time.time()
        try:
            stats, lag, _revisits = read_status(settings)
        except CrawlError as exc:  # topics not there yet, a slow broker: poll again
            print(f"bench.kafka_status: {exc}", file=sys.stderr)
        else:
            states = stats[crawl_id].all_states() if crawl_id in stats else {}
            sys.stdout.write(json.dumps({"t": t, "states": states, "sink_lag": lag}) + "\n")
            sys.stdout.flush()
        time.sleep(max(0.0, interval - (time.time() - t)))


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--crawl-id", required=True)
    ap.add_argument("--interval", type=float, default=0.5)
    a = ap.parse_args()
    main(a.crawl_id, a.interval)
