"""One crawl through either wiring, for tests that must hold for both: the embedded crawl
(``EmbeddedCrawl``) and the Kafka agents in one loop (``tests.kafka_agents.AgentsCrawl``)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from streamcrawl.schemas.records import CrawlPolicy
from streamcrawl.topology.embedded.runner import EmbeddedCrawl
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
    wiring: str, policy: CrawlPolicy, tmp_path: Path, timeout: float = 60.0
) -> dict[str, State]:
    """Run ``policy`` through ``wiring``; URL -> its one terminal state (fails on two)."""
    if wiring == "embedded":
        await EmbeddedCrawl(
            policy, out_dir=tmp_path / "out", state_dir=tmp_path / "state", concurrency=8
        ).run()
        out: dict[str, State] = {}
        for line in (tmp_path / "out/urls.jsonl").read_text().splitlines():
            row = json.loads(line)
            assert row["url"] not in out, f"two terminal states for {row['url']}"
            out[row["url"]] = State(
                row["state"], row.get("last_error"), row.get("attempts", 0), row["depth"]
            )
        return out
    agents = await AgentsCrawl(policy).run(timeout)
    return {
        url: State(str(s.state), s.last_error, s.attempts, s.depth)
        for url, s in agents.states().items()
    }
