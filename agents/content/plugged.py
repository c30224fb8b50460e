"""A crawl's link and page extractor plugins on one parsed page (docs/plugins.md).

Pure: no I/O. They run after the built-in rules, which they cannot loosen: link extractors see
the links the crawl follows (none on a nofollow page, where they are not run) and what they add
is canonicalized against the page's base and then admitted like any link (scope, robots,
dedupe); a link the page marks nofollow stays unfollowed. Page extractors add their objects to
``data`` after the crawl's ``--extract`` selectors.
"""

from __future__ import annotations

from collections.abc import Iterable

from streamcrawl.agents.content.outlinks import CanonicalLink, canonical_links, followed
from streamcrawl.agents.content.parse import parse_html, parse_tree
from streamcrawl.agents.plugins.api import JSON, PageView
from streamcrawl.agents.policy.rules import CrawlRules
from streamcrawl.agents.urls.canonical import Canonical


def plugin_links(
    rules: CrawlRules,
    page: PageView,
    follow: list[Canonical],
    found: Iterable[CanonicalLink],
    errors: list[str],
) -> list[Canonical]:
    """``follow`` after the crawl's link extractors: their URLs canonicalized against the
    page's base, distinct, in their order, less those the page's nofollow links hold back."""
    urls = rules.plugins.links(page, [c.url for c in follow], errors)
    kept = {c.url for c in follow}
    held = {canon.url for _link, canon in found} - kept  # nofollow links of the page
    out: list[Canonical] = []
    seen: set[str] = set()
    for canon in rules.canonicalizer.each(urls, page.base):
        if canon is None or canon.url in seen or canon.url in held:
            continue
        seen.add(canon.url)
        out.append(canon)
    return out


def plugin_data(
    rules: CrawlRules, page: PageView, data: dict[str, JSON] | None, errors: list[str]
) -> dict[str, JSON] | None:
    """``data`` with the crawl's page extractors' objects (``Plugins.extract``)."""
    if not rules.plugins.page_extractors:
        return data
    return rules.plugins.extract(page, data, errors)


def decisions(
    rules: CrawlRules, url: str, status: int, headers: dict[str, str], text: str | None
) -> list[dict[str, JSON]]:
    """What the crawl's plugins decide on one page (``streamcrawl plugin test``), as JSON
    lines: per URL filter asked about ``url``, ``{"url", "admitted", "reason"}``; for the link
    extractors, ``{"links", "added", "dropped"}`` against the links the built-in rules follow;
    for the page extractors, ``{"data"}``; ``{"errors"}`` when a call failed."""
    plugins = rules.plugins
    out: list[dict[str, JSON]] = []
    if plugins.url_filters:
        reason = plugins.check(url, 0, "seed")
        out.append({"url": url, "admitted": reason is None, "reason": reason})
    if not (plugins.link_extractors or plugins.page_extractors):
        return out
    tree = parse_tree(text, url) if text is not None else None
    base, found = url, []
    if text is not None and tree is not None:
        parsed = parse_html(text, url, product_token=rules.token, parsed=tree)
        base = parsed.base
        found = canonical_links(parsed.links, (), rules, base)
    view = PageView(url, status, headers, text, tree.tree if tree else None, base, None)
    errors: list[str] = []
    if plugins.link_extractors:
        before = [c.url for c in followed(found, rules.policy.honor_nofollow)]
        after = [
            c.url
            for c in plugin_links(
                rules, view, followed(found, rules.policy.honor_nofollow), found, errors
            )
        ]
        added = [u for u in after if u not in before]
        out.append(
            {"links": after, "added": added, "dropped": [u for u in before if u not in after]}
        )
    if plugins.page_extractors:
        out.append({"data": plugins.extract(view, None, errors)})
    if errors:
        out.append({"errors": errors})
    return out
