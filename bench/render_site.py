"""A site whose pages are built by a script, for the rendering bench (bench/render_rows.py).

``generate(root, origins=M, pages=P, base_port=PORT)`` writes M origins (ports PORT.., each a
directory named by its port, served by the bench's nginx, bench/server.py) of P app pages each.
Each page is an app shell: a title, an empty ``<div id="root">`` and a deferred ``/app.js``,
which fetches the page's JSON (``/data/p{n}.json``, same origin) and fills the root with a
heading, paragraphs and the links.
The HTML of a page links nowhere: only a crawler that runs the script finds the next pages, so a
complete crawl is a count of renders (every page rendered once, one JSON fetch each).

Page 0 is ``/`` (``index.html``), page n > 0 ``/app/p{n}.html``. Page n links to pages 2n+1 and
2n+2 (so every page is reachable from the root) and to ``RANDOM_LINKS`` others; everything is
derived from ``seed``. ``robots.txt`` disallows ``/private/`` (no page links there).
``expected.txt`` holds the page URLs, ``seeds.txt`` the roots (a crawl is seeded with all of
them), ``site.json`` the ``SiteSpec``.
"""

from __future__ import annotations

import json
import random
from dataclasses import asdict
from pathlib import Path

from bench.site import ROBOTS_TXT, SiteSpec

RANDOM_LINKS = 6
PARAGRAPHS = 6
WORDS = ("render", "script", "bundle", "route", "fetch", "frontier", "origin", "browser", "page")

# The site's one script: the page's number from the body, its JSON fetched, the DOM built.
APP_JS = """\
(function () {
  var n = document.body.getAttribute("data-page");
  fetch("/data/p" + n + ".json")
    .then(function (r) { return r.json(); })
    .then(function (d) {
      var root = document.getElementById("root");
      var h = document.createElement("h1");
      h.textContent = d.title;
      root.appendChild(h);
      d.text.forEach(function (t) {
        var p = document.createElement("p");
        p.textContent = t;
        root.appendChild(p);
      });
      var ul = document.createElement("ul");
      d.links.forEach(function (href) {
        var li = document.createElement("li");
        var a = document.createElement("a");
        a.href = href;
        a.textContent = href;
        li.appendChild(a);
        ul.appendChild(li);
      });
      root.appendChild(ul);
    });
})();
"""


def page_path(n: int) -> str:
    """URL path of page ``n``."""
    return "/" if n == 0 else f"/app/p{n}.html"


def file_path(n: int) -> str:
    """File (relative to the origin's directory) that serves page ``n``."""
    return "index.html" if n == 0 else f"app/p{n}.html"


def shell(n: int) -> str:
    """The HTML of page ``n``: no link, no text but its title."""
    return (
        '<!doctype html>\n<html lang="en"><head><meta charset="utf-8">'
        f'<title>App page {n}</title><script src="/app.js" defer></script></head>\n'
        f'<body data-page="{n}"><div id="root"></div></body></html>\n'
    )


def data(n: int, pages: int, rng: random.Random) -> dict[str, object]:
    """The JSON of page ``n``: its title, text and links (tree links first)."""
    tree = [m for m in (2 * n + 1, 2 * n + 2) if m < pages]
    others = [rng.randrange(pages) for _ in range(RANDOM_LINKS)]
    text = [" ".join(rng.choice(WORDS) for _ in range(40)) for _ in range(PARAGRAPHS)]
    return {
        "title": f"App page {n}",
        "text": text,
        "links": [page_path(m) for m in [*tree, *others]],
    }


def generate(root: str | Path, origins: int, pages: int, base_port: int, seed: int = 7) -> SiteSpec:
    """Write the site under ``root`` (nothing outside it) and return its spec."""
    root = Path(root)
    spec = SiteSpec(str(root), origins, pages, base_port, seed, 2 + RANDOM_LINKS, origins * pages)
    rng = random.Random(seed)
    for port in spec.ports:
        site = root / str(port)
        (site / "app").mkdir(parents=True, exist_ok=True)
        (site / "data").mkdir(exist_ok=True)
        (site / "robots.txt").write_text(ROBOTS_TXT)
        (site / "app.js").write_text(APP_JS)
        for n in range(pages):
            (site / file_path(n)).write_text(shell(n))
            (site / "data" / f"p{n}.json").write_text(json.dumps(data(n, pages, rng)))
    urls = [f"{spec.origin(i)}{page_path(n)}\n" for i in range(origins) for n in range(pages)]
    (root / "expected.txt").write_text("".join(urls))
    (root / "seeds.txt").write_text("".join(f"{url}\n" for url in spec.seeds))
    (root / "site.json").write_text(json.dumps(asdict(spec)))
    return spec
