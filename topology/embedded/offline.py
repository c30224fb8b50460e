"""``crawl --save-to DIR``: an offline copy of the crawl's pages and assets (docs/assets.md).

Each fetched page and asset is written as it is committed, to the file
``agents/content/offline.py`` names under DIR; HTML and CSS are also kept as received under
``DIR/.streamcrawl/originals`` and ``DIR/.streamcrawl/manifest.jsonl`` lists every file. When
the crawl closes (at its end, or stopped), ``finish`` rewrites every HTML and CSS file from its
original with the references to files of the copy made relative and the others absolute: so a
resumed crawl, whose new files join the manifest, completes the copy when it closes in turn.

Every file is written to a temporary name in its folder and renamed over the old one, so a
crash never leaves a half file under a copy's name. A body is in memory only while its report
is committed (at most ``--max-body`` each).
"""

from __future__ import annotations

import json
import logging
import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple

from streamcrawl.agents.content.css import rewrite_css
from streamcrawl.agents.content.offline import local_path, relative, rewrite_html
from streamcrawl.agents.content.parse import parse_html
from streamcrawl.agents.net.stages import Body

log = logging.getLogger(__name__)

STATE_DIR = ".streamcrawl"
# A reference as written and the base it is resolved against -> its canonical URL, or None.
Canonicalize = Callable[[str, str], str | None]


class Saved(NamedTuple):
    """One file of the copy: its path under the root, what it is, its charset."""

    path: str
    kind: str  # "html", "css" or "other"
    charset: str | None
    final_url: str


def write_atomically(path: Path, data: bytes) -> None:
    """``data`` as ``path``: written to a temporary file beside it, then renamed over it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _kind(body: Body) -> str:
    if body.page:
        return "html"
    if body.content_type == "text/css" or body.final_url.split("?")[0].endswith(".css"):
        return "css"
    return "other"


class OfflineCopy:
    """The copy under ``root``; ``canonicalize`` is the crawl's (its canonicalizer)."""

    def __init__(self, root: Path, canonicalize: Canonicalize) -> None:
        self.root = root
        self.canonicalize = canonicalize
        self.files: dict[str, Saved] = {}  # canonical URL (asked for, and final) -> its file
        state = root / STATE_DIR
        state.mkdir(parents=True, exist_ok=True)
        self.manifest_path = state / "manifest.jsonl"
        if self.manifest_path.exists():
            for line in self.manifest_path.read_text("utf-8").splitlines():
                row = json.loads(line)
                saved = Saved(row["path"], row["kind"], row["charset"], row["final_url"])
                self.files[row["url"]] = self.files[row["final_url"]] = saved
        self.manifest = self.manifest_path.open("a", encoding="utf-8")

    def save(self, body: Body) -> None:
        """Write one fetched body (see the module docstring)."""
        kind = _kind(body)
        path = local_path(body.final_url, page=kind == "html")
        saved = Saved(path, kind, body.charset, body.final_url)
        write_atomically(self.root / saved.path, body.body)
        if kind != "other":
            write_atomically(self.root / STATE_DIR / "originals" / saved.path, body.body)
        row = {"url": body.url, **saved._asdict()}
        self.manifest.write(json.dumps(row) + "\n")
        self.manifest.flush()
        self.files[body.url] = self.files[body.final_url] = saved

    def finish(self) -> int:
        """Rewrite every HTML and CSS file of the copy from its original; how many."""
        self.manifest.close()
        done = set()
        for saved in self.files.values():
            if saved.kind == "other" or saved.path in done:
                continue
            done.add(saved.path)
            self._rewrite(saved)
        return len(done)

    def _rewrite(self, saved: Saved) -> None:
        original = self.root / STATE_DIR / "originals" / saved.path
        try:
            data = original.read_bytes()
        except FileNotFoundError:
            return
        charset = saved.charset or "utf-8"
        try:
            text = data.decode(charset, errors="replace")
        except LookupError:
            charset, text = "utf-8", data.decode("utf-8", errors="replace")
        if saved.kind == "html":
            base = parse_html(text, saved.final_url).base
            new = rewrite_html(text, lambda href: self._target(saved.path, href, base))
        else:
            new = rewrite_css(text, lambda ref: self._target(saved.path, ref.url, saved.final_url))
        write_atomically(self.root / saved.path, new.encode(charset, errors="xmlcharrefreplace"))

    def _target(self, from_path: str, href: str, base: str) -> str | None:
        """What a reference in ``from_path`` becomes: the relative path of its file in the copy,
        else its absolute URL; None (unchanged) for a fragment or a non-http(s) reference."""
        if not href or href.startswith("#"):
            return None
        url = self.canonicalize(href, base)
        if url is None:
            return None
        fragment = "#" + href.split("#", 1)[1] if "#" in href else ""
        saved = self.files.get(url)
        if saved is None:
            return url + fragment
        return relative(from_path, saved.path) + fragment
