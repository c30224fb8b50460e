"""One crawl through either wiring, for tests that must hold for both: the embedded crawl
(``EmbeddedCrawl``) and the Kafka agents in one loop (``tests.kafka_agents.AgentsCrawl``)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from streamcrawl.agents.net.core import CrawlCore
from streamcrawl.agents.net.network import Network
from streamcrawl.agents.plugins.registry import Registry
from streamcrawl.agents.render.browser import RenderSettings
from streamcrawl.schemas.codec import decode
from streamcrawl.schemas.records import CrawlPolicy, Page
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
    states, _pages = await crawl_with_pages(wiring, policy, tmp_path, timeout, network)
    return states


async def crawl_with_pages(
    wiring: str,
    policy: CrawlPolicy,
    tmp_path: Path,
    timeout: float = 60.0,
    network: Network | None = None,
    plugins: Registry | None = None,
    render: RenderSettings | None = None,
) -> tuple[dict[str, State], list[Page]]:
    """``crawl``, and the page records as the wiring hands them on, in order: the lines of
    the embedded crawl's ``pages.jsonl``, the values the agents publish on ``pages``.
    ``plugins``: where the crawl's plugins are found (default: the installed ones);
    ``render``: the process's browser settings (a crawl with ``--render``)."""
    if wiring == "embedded":
        core = None
        if network is not None or render is not None:
            core = CrawlCore(network if network is not None else Network(), render)
        await EmbeddedCrawl(
            policy,
            out_dir=tmp_path / "out",
            state_dir=tmp_path / "state",
            concurrency=8,
            core=core,
            plugins=plugins,
        ).run()
        out: dict[str, State] = {}
        for line in (tmp_path / "out/urls.jsonl").read_text().splitlines():
            row = json.loads(line)
            assert row["url"] not in out, f"two terminal states for {row['url']}"
            out[row["url"]] = State(
                row["state"], row.get("last_error"), row.get("attempts", 0), row["depth"]
            )
        lines = (tmp_path / "out/pages.jsonl").read_text().splitlines()
        return out, [decode("pages", line) for line in lines]
    if network is None:
        network = Network(guard=LOOPBACK_GUARD)
    agents = await AgentsCrawl(policy, network=network, plugins=plugins, render=render).run(timeout)
    states = {
        url: State(str(s.state), s.last_error, s.attempts, s.depth)
        for url, s in agents.states().items()
    }
    return states, agents.pages
