"""A small styled site and its "CDN": what a person sees of a page, as files.

The pages of the asset tests that open a copy or a replay in Chromium
(tests/integration/test_offline_browser.py, tests/integration/test_warc_replay.py), of the Kafka
wiring's test (tests/integration/test_assets_kafka.py) and of the comparison with ``wget -p -k
-H`` (bench/asset_rows.py). ``site(cdn)`` gives two file sets, path -> ``(content type,
body)``: the site's own, and the CDN's, whose URLs start with ``cdn`` (another origin: another
local port, named ``localhost`` so that it is another host too).

Page ``n`` links two stylesheets (its own, which imports another and uses a background image
and a font, and the CDN's, which sets the heading's colour), two scripts, its own image and
the CDN's (with a ``srcset``), and the next four pages. ``/img/logo-copy.png`` and the CDN's
``/img/logo.png`` are byte for byte the site's ``/img/logo.png``: digest dedupe has work.
"""

from __future__ import annotations

import random
import struct
import zlib

Files = dict[str, tuple[str, bytes]]

PAGES = 5
HEADING_RGB = (200, 30, 40)  # theme.css on the CDN: h1 { color: rgb(200, 30, 40) }
BACKGROUND_RGB = (20, 120, 60)  # site.css: body { background: rgb(20, 120, 60) }
SITE_CSS = """@import url("base.css");
@font-face {{ font-family: "Site"; src: url(../fonts/site.woff2) format("woff2") }}
body {{ background: {}; font-family: Site, sans-serif }}
#hero {{ width: 200px; height: 50px; background-image: url(../img/bg.png) }}
"""
FONT = b"wOF2" + bytes(range(256)) * 4  # not a usable font: the browser still asks for it


def css_color(rgb: tuple[int, int, int]) -> str:
    """``rgb(r, g, b)``: as CSS writes it, and as a browser's computed style reads it."""
    return "rgb({}, {}, {})".format(*rgb)


def png(width: int, height: int, rgb: tuple[int, int, int], noise: int = 0) -> bytes:
    """A valid PNG (8-bit RGB, no filter) of one colour, or with ``noise`` of pixels drawn
    from ``random.Random(noise)`` (a photo's size: it does not compress): an image a browser
    decodes."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))

    if noise:
        draw = random.Random(noise)
        rows = b"".join(b"\0" + draw.randbytes(3 * width) for _ in range(height))
    else:
        rows = (b"\0" + bytes(rgb) * width) * height
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return b"".join(
        (
            b"\x89PNG\r\n\x1a\n",
            chunk(b"IHDR", header),
            chunk(b"IDAT", zlib.compress(rows)),
            chunk(b"IEND", b""),
        )
    )


def page(cdn: str, n: int, pages: int = PAGES) -> str:
    """Page ``n`` of ``pages`` (0: the home page ``/``, else ``/page/n.html``), linking to the
    next four that exist."""
    later = range(n + 1, min(n + 5, pages))
    links = "".join(f'<li><a href="/page/{i}.html">page {i}</a></li>' for i in later)
    return f"""<!doctype html>
<html><head><meta charset="utf-8"><title>page {n}</title>
<link rel="stylesheet" href="/css/site.css">
<link rel="stylesheet" href="{cdn}/lib/theme.css?v=3">
<link rel="icon" href="/favicon.png">
<script src="/js/app.js"></script><script src="{cdn}/lib/lib.js"></script>
</head><body>
<h1 id="title">page {n}</h1>
<div id="hero"></div>
<img id="logo" src="/img/logo.png" alt="logo">
<img id="photo" src="{cdn}/img/photo.png" srcset="{cdn}/img/photo-2x.png 2x" alt="photo">
<img id="own" src="/img/p{n}.png" alt="own"><img id="copy" src="/img/logo-copy.png" alt="copy">
<img id="cdnlogo" src="{cdn}/img/logo.png" alt="the logo again">
<ul>{links}</ul>
</body></html>
"""


def site(cdn: str, pages: int = PAGES) -> tuple[Files, Files]:
    """The site's files and the CDN's (``cdn``: the CDN's base URL, no trailing slash), with
    ``pages`` pages (and as many page images)."""
    logo = png(64, 32, (30, 60, 200), noise=1)
    own: Files = {
        "/": ("text/html; charset=utf-8", page(cdn, 0, pages).encode()),
        "/css/site.css": ("text/css", SITE_CSS.format(css_color(BACKGROUND_RGB)).encode()),
        "/css/base.css": ("text/css", b"img { border: 2px solid black }\n"),
        "/js/app.js": ("text/javascript", b"document.documentElement.dataset.app = 'yes';\n"),
        "/img/logo.png": ("image/png", logo),
        "/img/logo-copy.png": ("image/png", logo),
        "/img/bg.png": ("image/png", png(8, 8, (250, 200, 0))),
        "/favicon.png": ("image/png", png(16, 16, (0, 0, 0))),
        "/fonts/site.woff2": ("font/woff2", FONT),
    }
    for n in range(pages):
        if n:
            own[f"/page/{n}.html"] = ("text/html; charset=utf-8", page(cdn, n, pages).encode())
        own[f"/img/p{n}.png"] = ("image/png", png(40, 40, (0, 0, 0), noise=100 + n))
    theme = f"h1 {{ color: {css_color(HEADING_RGB)} }}\n"
    cdn_files: Files = {
        "/lib/theme.css?v=3": ("text/css", theme.encode()),
        "/lib/lib.js": ("text/javascript", b"window.lib = {};\n"),
        "/img/photo.png": ("image/png", png(120, 80, (0, 0, 0), noise=2)),
        "/img/photo-2x.png": ("image/png", png(240, 160, (0, 0, 0), noise=3)),
        "/img/logo.png": ("image/png", logo),
    }
    return own, cdn_files
