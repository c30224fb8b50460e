"""Poll one crawl's terminal-state counts in Cassandra (the Kafka runner runs it in the
streamcrawl venv).

``python -m bench.kafka_status --crawl-id ID [--interval S]`` prints one JSON line per poll,
``{"t": unix_time, "states": {state: n}}``, until it is terminated.  It is what
``streamcrawl status --crawl-id ID --json`` reports, from one long-lived process: a CLI call
per poll would start an interpreter and a Cassandra session each time and load the machine
under test.  Settings come from the environment (``STREAMCRAWL_CASSANDRA_*``).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time


async def main(crawl_id: str, interval: float) -> None:
    from streamcrawl.agents.sink_cassandra import CassandraSink
    from streamcrawl.topology.kafka_commands import _quiet_cassandra_driver
    from streamcrawl.topology.settings import load_settings

    _quiet_cassandra_driver()
    sink = CassandraSink(load_settings().cassandra_config())
    await sink.start()
    try:
        while True:
            t = time.time()
            stats = await sink.stats(crawl_id)
            states = stats[crawl_id].all_states()
            sys.stdout.write(json.dumps({"t": t, "states": states}) + "\n")
            sys.stdout.flush()
            await asyncio.sleep(max(0.0, interval - (time.time() - t)))
    finally:
        await sink.stop()


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--crawl-id", required=True)
    ap.add_argument("--interval", type=float, default=0.5)
    a = ap.parse_args()
    asyncio.run(main(a.crawl_id, a.interval))
