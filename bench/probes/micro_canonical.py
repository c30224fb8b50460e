"""Micro-benchmark of link canonicalization on a realistic page (30 hrefs).

Run: ``python -m bench.probes.micro_canonical``.  Prints microseconds per link for:

* ``w3lib``: ``urljoin`` + ``url_query_cleaner`` + ``canonicalize_url`` (the baseline);
* ``resolve (ada)``: the WHATWG resolution alone (``agents.urls.canonical.resolve``, the ada
  parser), no crawl rules: what browser-exact resolution costs of ``canonicalize``;
* ``canonicalize``: our module function (ada resolution + the crawl rules), no cache;
* ``links fresh``: ``Canonicalizer.links`` with a new, empty cache per page (all misses);
* ``links cold``: one ``Canonicalizer``, a new page URL each time (relative hrefs miss; absolute
  and root-relative ones hit entries shared across the site's pages, as in a real crawl);
* ``links warm``: the same page again (every href a cache hit).

Informs: how links are resolved and canonicalized: WHATWG resolution by ada rather than a
resolver of our own, and the ``Canonicalizer``'s cache (docs/performance.md, "Canonicalization
and discovery"; rows in bench/notes/canonicalization-and-discovery.md).
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable
from urllib.parse import urljoin

from streamcrawl.agents.urls.canonical import Canonicalizer, canonicalize, resolve

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


def per_link(make_run: Callable[[], Callable[[int], object]], pages: int, rounds: int = 5) -> float:
    """Best of ``rounds`` (the machine may be shared): microseconds of CPU per link.

    ``make_run()`` is called once per round, so that every round starts from the same state.
    """
    best = float("inf")
    for _ in range(rounds):
        run = make_run()
        start = time.process_time()
        for page in range(pages):
            run(page)
        best = min(best, time.process_time() - start)
    return best / (pages * len(HREFS)) * 1e6


def main() -> None:
    pages = 2000
    bases = [f"https://example.com/blog/{i}/page-{i}.html?x={i}" for i in range(pages)]

    def w3lib_page() -> Callable[[int], object]:
        return lambda p: [w3lib_link(h, bases[p]) for h in HREFS]

    def resolve_page() -> Callable[[int], object]:
        return lambda p: [_try(h, bases[p], resolve) for h in HREFS]

    def uncached_page() -> Callable[[int], object]:
        return lambda p: [_try(h, bases[p]) for h in HREFS]

    def fresh_cache_per_page() -> Callable[[int], object]:
        return lambda p: Canonicalizer().links(HREFS, bases[p])

    def new_page_each_time() -> Callable[[int], object]:
        return functools.partial(_links_of_page, Canonicalizer(), bases)

    def same_page_again() -> Callable[[int], object]:
        warm = Canonicalizer()
        warm.links(HREFS, bases[0])
        return lambda _: warm.links(HREFS, bases[0])

    results = {
        "w3lib": per_link(w3lib_page, pages // 4),
        "resolve (ada)": per_link(resolve_page, pages),
        "canonicalize": per_link(uncached_page, pages),
        "links fresh": per_link(fresh_cache_per_page, pages),
        "links cold": per_link(new_page_each_time, pages),
        "links warm": per_link(same_page_again, pages),
    }
    for name, micros in results.items():
        print(f"{name:>14}: {micros:6.2f} us/link")


def _links_of_page(canon: Canonicalizer, bases: list[str], page: int) -> object:
    return canon.links(HREFS, bases[page])


def _try(href: str, base: str, function: Callable[[str, str], object] = canonicalize) -> object:
    try:
        return function(href, base)
    except Exception:
        return None


if __name__ == "__main__":
    main()
