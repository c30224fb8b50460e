"""Apply what one fetch reported to the frontier: the one function both wirings call.

``settle`` admits the URLs a report found (its link batches, each origin's in turn; URLs that
turned out to be of another origin are admitted here too when this store holds that origin,
else handed back to be sent to it), then applies the fetch's outcome, all in the caller's
``Changes`` overlay. It returns the effects, and the wiring commits them its own way: the
embedded crawl with its output files in one RocksDB write, the Kafka frontier agent with its
sends and changelogs before it acknowledges the event. Nothing here reads a clock, a topic or
a file, so a replayed event settles to the same effects.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from streamcrawl.agents.frontier import revisits
from streamcrawl.agents.frontier.frontier import Admission, Applied, Frontier
from streamcrawl.agents.frontier.store import Changes
from streamcrawl.agents.policy.rules import CrawlRules
from streamcrawl.schemas.records import (
    FrontierBatch,
    OriginState,
    Outcome,
    TerminalState,
    UrlStatus,
)

Budget = Callable[[str], int | None]  # crawl id -> how many more URLs it may queue now
Local = Callable[[str], bool]  # origin -> whether this store holds it


@dataclass
class Effects:
    """What settling a report changed and must publish.

    ``refused``: the terminal statuses of URLs that ended at admission (out of scope, over the
    budget, denied by a cached robots.txt), in order. ``touched``: origins whose queues grew.
    ``elsewhere``: URLs of origins this store does not hold, to send to them. ``applied``:
    what applying the outcome did (None: there was no outcome).
    """

    refused: list[UrlStatus] = field(default_factory=list)
    touched: list[OriginState] = field(default_factory=list)
    elsewhere: list[FrontierBatch] = field(default_factory=list)
    applied: Applied | None = None
    admitted: int = 0
    duplicates: int = 0
    robots_denied: int = 0
    budgeted: set[str] = field(default_factory=set)  # crawls that queued under a budget
    moves: list[revisits.LaneMove] = field(default_factory=list)

    def add(self, admission: Admission, budget: int | None, crawl_id: str) -> None:
        self.refused.extend(admission.statuses)
        self.robots_denied += sum(
            s.state is TerminalState.ROBOTS_DENIED for s in admission.statuses
        )
        self.duplicates += admission.duplicates
        self.admitted += len(admission.queued)
        self.moves.extend(admission.moves)
        if admission.state is not None and (admission.queued or admission.forced):
            self.touched.append(admission.state)
        if admission.queued and budget is not None:
            self.budgeted.add(crawl_id)


def _everywhere(_origin: str) -> bool:
    return True


def settle(
    frontier: Frontier,
    ch: Changes,
    rules: CrawlRules,
    outcome: Outcome | None,
    batches: Sequence[FrontierBatch],
    *,
    budget: Budget,
    local: Local = _everywhere,
    source: bytes = b"",
    count_admitted: bool = True,
    canonical: bool = False,
    admitted: Callable[[FrontierBatch, Admission], None] | None = None,
) -> Effects:
    """Admit ``batches`` (last first; the URLs of other origins a batch held right after it,
    each within the crawl's ``budget``), then apply
    ``outcome``; ``source``, ``count_admitted`` and ``canonical`` are ``Frontier.admit``'s.
    ``admitted`` is told of each admission (the Kafka agent counts it per partition)."""
    effects = Effects()
    pending = [(batch, canonical) for batch in batches]
    while pending:
        batch, canonical = pending.pop()
        left = budget(batch.crawl_id)
        admission = frontier.admit(
            ch,
            batch,
            rules,
            budget=left,
            source=source,
            count_admitted=count_admitted,
            canonical=canonical,
        )
        if admitted is not None:
            admitted(batch, admission)
        effects.add(admission, left, batch.crawl_id)
        local_ones = []
        for origin, refs in admission.misrouted.items():
            again = FrontierBatch(crawl_id=batch.crawl_id, origin=origin, urls=tuple(refs))
            if local(origin):  # canonicalized by ``admit`` just now, with these rules
                local_ones.append((again, True))
            else:
                effects.elsewhere.append(again)
        pending.extend(reversed(local_ones))  # next, in the order ``admit`` found them
    if outcome is not None:
        effects.applied = frontier.apply(ch, outcome, rules)
    return effects
