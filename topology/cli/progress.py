"""Progress bar (rich) and the human-readable summary."""

from __future__ import annotations

import sys
import time
from types import TracebackType
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rich.progress import Progress


class ProgressBar:
    """done/discovered, pages/s, queue and errors; a no-op when disabled (not a terminal)."""

    def __init__(self, *, enabled: bool) -> None:
        self.enabled = enabled
        self._progress: Progress | None = None
        self._task: Any = None
        self._started = time.monotonic()
        self._last = 0.0

    def __enter__(self) -> ProgressBar:
        if self.enabled:
            # rich only for a terminal: imported here, a crawl without the bar never loads it.
            from rich.console import Console
            from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

            self._progress = Progress(
                TextColumn("[bold]crawl"),
                BarColumn(),
                TextColumn("{task.completed}/{task.total} urls"),
                TextColumn("{task.fields[rate]:.1f} pages/s"),
                TextColumn("queue {task.fields[queue]}"),
                TextColumn("in flight {task.fields[in_flight]}"),
                TextColumn("[red]errors {task.fields[errors]}"),
                TextColumn("{task.fields[revisits]}"),
                TimeElapsedColumn(),
                console=Console(file=sys.stderr),
                transient=False,
            )
            self._progress.start()
            self._task = self._progress.add_task(
                "crawl", total=1, rate=0.0, queue=0, in_flight=0, errors=0, revisits=""
            )
        return self

    def update(self, summary: Any, in_flight: int, origins: int) -> None:
        if self._progress is None:
            return
        now = time.monotonic()
        if now - self._last < 0.1:
            return
        self._last = now
        done = sum(summary.states.values())
        errors = summary.states.get("failed", 0)
        discovered = done + summary.queued
        rate = summary.pages / max(now - self._started, 1e-6)
        self._progress.update(
            self._task,
            completed=done,
            total=max(discovered, done, 1),
            rate=rate,
            queue=summary.queued,
            in_flight=in_flight,
            errors=errors,
            revisits=revisit_text(summary.revisits, summary.changes),
        )

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._progress is not None:
            self._progress.stop()


def revisit_text(revisits: int, changes: dict[str, int]) -> str:
    """A continuous crawl's cycle: revisits done and the share that found a change."""
    if not revisits:
        return ""
    changed = changes.get("changed", 0) + changes.get("gone", 0)
    return f"revisits {revisits} ({changed / revisits:.0%} changed)"


def print_summary(result: dict[str, Any]) -> None:
    """A short human summary on stdout."""
    states = result.get("states", {})
    parts = ", ".join(f"{k} {v}" for k, v in states.items()) or "nothing"
    status = "interrupted" if result.get("interrupted") else "done"
    cycle = revisit_text(result.get("revisits", 0), result.get("changes", {}))
    print(
        f"{status}: {result['pages']} pages in {result['elapsed_s']} s "
        f"({result['pages_per_s']} pages/s); urls: {parts}; queued {result['queued']}; "
        f"{cycle + '; ' if cycle else ''}output in {result['out_dir']}"
    )
