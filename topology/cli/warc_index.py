"""``streamcrawl warc index DIR``: the CDXJ index of the closed WARC files in DIR, whether the
Kafka wiring's writer or an embedded ``crawl --warc`` wrote them. It reads files only, so it runs
on the base install (no kafka extra)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

from streamcrawl.agents.errors import ConfigError


def cmd_index(directory: Path, output: Path | None) -> int:
    """``warc index DIR [-o FILE]``: the CDXJ lines of DIR's closed files (``*.warc.gz``, not
    the ``.open`` one a writer is filling), each record once; to FILE (replaced whole) or
    stdout. Raises ``ConfigError`` if DIR is not a directory."""
    from streamcrawl.agents.sinks.warc.index import cdxj_lines

    if not directory.is_dir():
        raise ConfigError(f"{directory}: not a directory")
    lines = cdxj_lines(sorted(directory.glob("*.warc.gz")))
    text = "".join(line + "\n" for line in lines)
    if output is None:
        sys.stdout.write(text)
        return 0
    partial = output.with_name(output.name + ".partial")
    partial.write_text(text, "utf-8")
    os.replace(partial, output)
    return 0
