"""Micro-benchmark of link canonicalization on a realistic page (30 hrefs).

Run: ``python bench/micro_canonical.py``.  Prints microseconds per link for:

* ``w3lib``: ``urljoin`` + ``url_query_cleaner`` + ``canonicalize_url`` (the baseline);
* ``canonicalize``: our module function, no cache;
* ``links fresh``: ``Canonicalizer.links`` with a new, empty cache per page (all misses);
* ``links cold``: one ``Canonicalizer``, a new page URL each time (relative hrefs miss; absolute
  and root-relative ones hit entries shared across the site's pages, as in a real crawl);
* ``links warm``: the same page again (every href a cache hit).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from urllib.parse import urljoin

from agents.canonical import Canonicalizer, canonicalize

HREFS = [
    "/",
    "/about",
    "/blog/",
    "/blog/2024/05/post-title.html",
    "post-2.html",
    "../archive/index.html",
    "./tags/python",
    "#top",
    "#comments",
    "?page=2",
    "/search?q=kafka&lang=en",
    "/products?utm_source=newsletter&utm_medium=email&id=42",
    "https://example.com/blog/2024/05/post-title.html#respond",
    "https://example.com/contact?gclid=abc123",
    "https://www.example.com/",
    "http://example.com:80/legal",
    "https://cdn.example.net/static/app.css",
    "https://twitter.com/example",
    "https://github.com/example/repo",
    "https://en.wikipedia.org/wiki/Web_crawler",
    "mailto:hello@example.com",
    "javascript:void(0)",
    "tel:+15555550100",
    "/category/news?sort=date&page=3",
    "/a/b/../c/./d",
    "/caf%c3%a9/menu",
    "/path with spaces/file.pdf",
    "https://example.com/?fbclid=xyz&ref=home",
    "../../up/two",
    "page.html?b=2&a=1",
]


def w3lib_link(href: str, base: str) -> str | None:
    from w3lib.url import canonicalize_url, url_query_cleaner

    if href.startswith(("mailto:", "javascript:", "tel:")):
        return None
    url = urljoin(base, href)
    url = url_query_cleaner(url, ("utm_source", "utm_medium", "gclid", "fbclid"), remove=True)
    return canonicalize_url(url)


def per_link(run: Callable[[int], object], pages: int, links: int) -> float:
    start = time.perf_counter()
    for page in range(pages):
        run(page)
    return (time.perf_counter() - start) / (pages * links) * 1e6


def main() -> None:
    pages, n = 2000, len(HREFS)
    bases = [f"https://example.com/blog/{i}/page-{i}.html?x={i}" for i in range(pages)]
    results = {
        "w3lib": per_link(lambda p: [w3lib_link(h, bases[p]) for h in HREFS], pages // 4, n),
        "canonicalize": per_link(
            lambda p: [_try(h, bases[p]) for h in HREFS],
            pages,
            n,
        ),
    }
    results["links fresh"] = per_link(lambda p: Canonicalizer().links(HREFS, bases[p]), pages, n)
    cold = Canonicalizer()
    results["links cold"] = per_link(lambda p: cold.links(HREFS, bases[p]), pages, n)
    warm = Canonicalizer()
    warm.links(HREFS, bases[0])
    results["links warm"] = per_link(lambda p: warm.links(HREFS, bases[0]), pages, n)
    for name, micros in results.items():
        print(f"{name:>14}: {micros:6.2f} us/link")


def _try(href: str, base: str) -> object:
    try:
        return canonicalize(href, base)
    except Exception:
        return None


if __name__ == "__main__":
    main()
