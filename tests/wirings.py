"""One crawl through either wiring, for tests that must hold for both: the embedded crawl
(``EmbeddedCrawl``) and the Kafka agents in one loop (``tests.kafka_agents.AgentsCrawl``)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from streamcrawl.agents.net.core import CrawlCore
from streamcrawl.agents.net.network import Network
from streamcrawl.schemas.records import CrawlPolicy
from streamcrawl.topology.embedded.runner import EmbeddedCrawl
from tests.httpserver import LOOPBACK_GUARD
from tests.kafka_agents import AgentsCrawl

WIRINGS = ("embedded", "kafka-agents")


@dataclass(frozen=True)
class State:
    """The terminal state of one URL as the sink received it."""

    state: str
    last_error: str | None
    attempts: int
    depth: int


async def crawl(
    wiring: str,
    policy: CrawlPolicy,
    tmp_path: Path,
    timeout: float = 60.0,
    network: Network | None = None,
) -> dict[str, State]:
    """Run ``policy`` through ``wiring``; URL -> its one terminal state (fails on two).
    ``network``: the process's side (proxy, credentials); default: the embedded crawl's (its
    seeds' addresses allowed), the agents' (loopback allowed)."""
    if wiring == "embedded":
        await EmbeddedCrawl(
            policy,
            out_dir=tmp_path / "out",
            state_dir=tmp_path / "state",
            concurrency=8,
            core=CrawlCore(network) if network is not None else None,
        ).run()
        out: dict[str, State] = {}
        for line in (tmp_path / "out/urls.jsonl").read_text().splitlines():
            row = json.loads(line)
            assert row["url"] not in out, f"two terminal states for {row['url']}"
            out[row["url"]] = State(
                row["state"], row.get("last_error"), row.get("attempts", 0), row["depth"]
            )
        return out
    if network is None:
        network = Network(guard=LOOPBACK_GUARD)
    agents = await AgentsCrawl(policy, network=network).run(timeout)
    return {
        url: State(str(s.state), s.last_error, s.attempts, s.depth)
        for url, s in agents.states().items()
    }
