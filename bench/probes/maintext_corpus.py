"""The labelled pages of the main-text probe: articles wrapped in a site's boilerplate.

``bench/probes/data/maintext/`` holds, for each page, ``NN-LANG.txt``: the article (its title on
the first line, then its paragraphs separated by blank lines; a paragraph starting with ``## `` is
a subheading). That text is both the source of the page and the main text an extractor should
return. ``chrome.json`` holds each language's boilerplate: navigation, a cookie banner, share
buttons, comments, teasers, a newsletter box, an author box, footer links. All of it was written
for this corpus (no page was copied from a site), so it can ship with the repository.

``pages()`` wraps article NN in layout ``NN % len(LAYOUTS)``, six layouts that real sites use:

- ``news``: HTML5 ``header``/``nav``/``main``/``article``/``aside``/``footer``, comments in
  ``main``, a cookie banner first in ``body``;
- ``blog``: a WordPress-like ``div`` soup (``entry-content``, ``widget-area``, ``comments-area``),
  no sectioning elements, an author box;
- ``table``: a 2000s layout: a navigation column in a table, the text in ``font`` with ``<br><br>``
  between paragraphs (no ``p``), no ``lang`` attribute;
- ``docs``: a documentation page: a long sidebar of links, ``role=main``, an "on this page" list,
  a "was this page helpful" box;
- ``corporate``: a mega-menu of links, a hero, product cards with sentences, a consent dialog, and
  ``lang=en`` whatever the language (a CMS default left as it was);
- ``teasers``: the hard case: advertisements and "read also" links inside the article, an author
  box with a biography, and teasers of the site's other articles, each with its first sentence.

``python -m bench.probes.maintext_corpus`` rewrites the ``.html`` files from the ``.txt`` files
and ``chrome.json`` (deterministic: the committed pages are its output;
``tests/bench/test_maintext_corpus.py`` checks that).

Informs: the main-text extractor and language detector (docs/performance.md, "Main text and
language"), through ``python -m bench.probes.maintext``.
"""

from __future__ import annotations

import argparse
import html
import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

DATA = Path(__file__).resolve().parent / "data" / "maintext"
AUTHORS = ("Anna Berg", "Paul Meyer", "Clara Roux", "Diego Ortiz", "Irina Volkova", "Kenji Sato")


@dataclass(frozen=True)
class Article:
    """One labelled page: ``name`` (``NN-LANG``), its language, title and blocks."""

    name: str
    lang: str
    title: str
    blocks: tuple[str, ...]

    @property
    def expected(self) -> str:
        """The main text an extractor should return: the title and every block."""
        return "\n\n".join([self.title, *(b.removeprefix("## ") for b in self.blocks)])

    @property
    def number(self) -> int:
        return int(self.name.split("-")[0])


def load_articles(data: Path = DATA) -> list[Article]:
    articles = []
    for path in sorted(data.glob("*.txt")):
        title, *blocks = [b.strip() for b in path.read_text("utf-8").split("\n\n") if b.strip()]
        articles.append(Article(path.stem, path.stem.split("-")[1], title, tuple(blocks)))
    return articles


def e(text: str) -> str:
    return html.escape(text, quote=True)


class Page:
    """What a layout needs: the article, its language's boilerplate, the site's other articles."""

    def __init__(self, article: Article, chrome: dict[str, object], others: list[Article]):
        self.a = article
        self.c = chrome
        self.others = others

    def s(self, key: str) -> str:
        return e(str(self.c[key]))

    def items(self, key: str) -> list[str]:
        value = self.c[key]
        assert isinstance(value, list)
        return [e(str(v)) for v in value]

    @property
    def author(self) -> str:
        return AUTHORS[self.a.number % len(AUTHORS)]

    @property
    def date(self) -> str:
        return f"2026-{self.a.number % 12 + 1:02d}-{self.a.number % 27 + 1:02d}"

    def links(self, key: str, cls: str = "") -> str:
        attr = f' class="{cls}"' if cls else ""
        return "".join(
            f'<li{attr}><a href="/{i}/">{t}</a></li>' for i, t in enumerate(self.items(key))
        )

    def teaser_links(self) -> str:
        return "".join(f'<li><a href="/a/{o.name}">{e(o.title)}</a></li>' for o in self.others)

    def blocks(self, para: str = "<p>{}</p>", head: str = "<h2>{}</h2>") -> list[str]:
        return [
            head.format(e(b[3:])) if b.startswith("## ") else para.format(e(b))
            for b in self.a.blocks
        ]

    def comments(self) -> str:
        return "".join(
            f'<li class="comment"><div class="comment-author">{AUTHORS[(k + 2) % 6]}</div>'
            f'<div class="comment-body"><p>{t}</p></div><a href="#reply" class="reply">'
            f"{self.s('reply')}</a></li>"
            for k, t in enumerate(self.items("comment_texts"))
        )

    def head(self, lang: str | None, extra: str = "") -> str:
        lang_attr = f" lang={lang}" if lang else ""
        ld = json.dumps({"@type": "Article", "headline": self.a.title, "author": self.author})
        return (
            f"<!DOCTYPE html>\n<html{lang_attr}><head><meta charset=utf-8>\n"
            f"<title>{e(self.a.title)} | {self.s('site')}</title>\n"
            '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
            f'<script type="application/ld+json">{ld}</script>\n'
            "<style>body{font-family:sans-serif;margin:0}.nav a{padding:4px 8px}"
            ".cookie{position:fixed;bottom:0;background:#222;color:#fff}</style>\n"
            f"{extra}</head>\n"
        )

    def tail(self) -> str:
        return (
            '<script>window.dataLayer=window.dataLayer||[];dataLayer.push({"event":"pageview",'
            f'"section":"{self.items("nav")[self.a.number % 8]}",'
            f'"lang":"{self.a.lang}"}});</script>\n'
            "</body></html>\n"
        )

    def cookie(self, cls: str = "cookie") -> str:
        return (
            f'<div class="{cls}" role="dialog"><p>{self.s("cookie")}</p>'
            f"<button>{self.s('accept')}</button> <button>{self.s('reject')}</button></div>\n"
        )

    def footer_links(self) -> str:
        return " | ".join(f'<a href="/f/{i}">{t}</a>' for i, t in enumerate(self.items("footer")))


def news(p: Page) -> str:
    nav = p.items("nav")
    return (
        p.head(p.a.lang)
        + "<body>\n"
        + p.cookie()
        + f'<header class="site-header"><a href="/" class="logo">{p.s("site")}</a>'
        + f'<nav class="nav"><ul>{p.links("nav")}</ul></nav><form role="search">'
        + f'<input name="q" placeholder="{p.s("search")}"><button>{p.s("search")}</button></form>'
        + f'</header>\n<nav class="breadcrumb"><a href="/">{p.s("home")}</a> &rsaquo; '
        + f'<a href="/s/">{nav[p.a.number % 8]}</a></nav>\n<main>\n<article>\n'
        + f'<h1>{e(p.a.title)}</h1>\n<p class="byline">{p.s("by")} <a rel=author href=/au/>'
        + f"{p.author}</a> &middot; <time>{p.date}</time></p>\n"
        + f'<div class="share">{p.s("share")}: <a href="#">Facebook</a> '
        + '<a href="#">Mail</a></div>\n'
        + "\n".join(p.blocks())
        + f'\n<p class="tags">{p.s("tags")}: <a href="/t/1">{nav[3]}</a>, '
        + f'<a href="/t/2">{nav[6]}</a></p>\n</article>\n'
        + f'<section id="comments"><h2>{p.s("comments")} (3)</h2><ol>{p.comments()}</ol>'
        + "</section>\n</main>\n"
        + f'<aside class="sidebar"><h2>{p.s("most_read")}</h2><ol>{p.teaser_links()}</ol>'
        + f'<div class="ad">{p.s("ad")}</div></aside>\n'
        + f'<footer><div class="newsletter"><p>{p.s("newsletter")}</p><form><input type=email>'
        + f"<button>{p.s('subscribe')}</button></form></div><p>{p.footer_links()}</p>"
        + f"<p>&copy; 2026 {p.s('site')}. {p.s('copyright')}</p></footer>\n"
        + p.tail()
    )


def blog(p: Page) -> str:
    prev, nxt = p.others[0], p.others[-1]
    return (
        p.head(p.a.lang)
        + '<body class="single-post">\n<div id="page" class="site">\n'
        + '<div class="top-bar"><a href="#">RSS</a> <a href="#">Mastodon</a></div>\n'
        + '<div id="masthead" class="site-header"><div class="site-branding">'
        + '<p class="site-title">'
        + f'<a href="/">{p.s("site")}</a></p><p class="site-description">{p.s("newsletter")}</p>'
        + f'</div><div class="main-navigation"><ul class="menu">{p.links("nav", "menu-item")}'
        + "</ul></div></div>\n"
        + '<div id="content" class="site-content"><div id="primary" class="content-area">'
        + f'<div class="post hentry">\n<h1 class="entry-title">{e(p.a.title)}</h1>\n'
        + f'<div class="entry-meta"><span class="posted-on">{p.date}</span> '
        + f'<span class="byline">{p.s("by")} {p.author}</span></div>\n<div class="entry-content">\n'
        + "\n".join(p.blocks())
        + f'\n</div>\n<div class="sharedaddy"><h3>{p.s("share")}</h3><a href="#">Facebook</a> '
        + '<a href="#">Pinterest</a></div>\n'
        + f'<div class="author-box"><p><b>{p.author}</b> {p.s("bio")}</p></div>\n'
        + f'<div class="post-navigation"><a href="/a/{prev.name}">&laquo; {e(prev.title)}</a> '
        + f'<a href="/a/{nxt.name}">{e(nxt.title)} &raquo;</a></div>\n'
        + f'<div id="comments" class="comments-area"><h3>{p.s("comments")}</h3>'
        + f'<ol class="comment-list">{p.comments()}</ol><div id="respond"><h3>{p.s("reply")}'
        + "</h3><form><textarea></textarea><button>OK</button></form></div></div>\n"
        + '</div></div>\n<div id="secondary" class="widget-area">'
        + f'<div class="widget"><h4>{p.s("related")}</h4><ul>{p.teaser_links()}</ul></div>'
        + f'<div class="widget tagcloud"><h4>{p.s("tags")}</h4>{p.links("nav")}</div></div></div>\n'
        + f'<div id="colophon" class="site-footer">{p.footer_links()} &copy; {p.s("site")}</div>'
        + f'\n</div>\n<div class="cookie-notice">{p.s("cookie")} <a href="#">{p.s("accept")}</a>'
        + "</div>\n"
        + p.tail()
    )


def table(p: Page) -> str:
    nav = " | ".join(f'<a href="/{i}/">{t}</a>' for i, t in enumerate(p.items("nav")))
    side = "".join(f'<a href="/a/{o.name}">{e(o.title)}</a><br>' for o in p.others)
    body = "<br><br>\n".join(p.blocks(para="{}", head="<b>{}</b>"))
    return (
        p.head(None)
        + '<body bgcolor="#ffffff">\n<table width="100%" border="0" cellpadding="4">\n'
        + f'<tr><td colspan="2"><font size="6">{p.s("site")}</font><br>{nav}</td></tr>\n'
        + f'<tr><td width="180" valign="top" bgcolor="#eeeeee">{"<br>".join(p.items("nav"))}'
        + f'<br><br><b>{p.s("most_read")}</b><br>{side}</td>\n<td valign="top">'
        + f'<font size="2"><a href="/">{p.s("home")}</a> &gt; {p.items("nav")[0]}</font><br>'
        + f'<font size="5"><b>{e(p.a.title)}</b></font><br><font size="2">{p.date}</font>'
        + f'<br><br>\n<font face="Arial">{body}</font><br><br>\n<hr>'
        + f'<font size="1">{p.s("copyright")} | {p.footer_links()}</font></td></tr>\n</table>\n'
        + f'<div style="background:#ffc">{p.s("cookie")} <a href="#">{p.s("accept")}</a></div>\n'
        + p.tail()
    )


def docs(p: Page) -> str:
    subheads = [b[3:] for b in p.a.blocks if b.startswith("## ")] or [p.a.title]
    toc = "".join(f'<li><a href="#s{i}">{e(h)}</a></li>' for i, h in enumerate(subheads))
    prev, nxt = p.others[0], p.others[-1]
    return (
        p.head(p.a.lang)
        + '<body class="docs">\n'
        + p.cookie("consent-bar")
        + f'<div class="topbar"><a href="/">{p.s("site")}</a> {p.links("nav")}</div>\n'
        + '<div class="layout"><div class="sidebar" role="navigation">'
        + f"<h3>{p.s('related')}</h3><ul>{p.teaser_links()}{p.links('nav')}{p.links('footer')}"
        + '</ul></div>\n<div class="content" role="main">'
        + f'<div class="breadcrumbs"><a href="/">{p.s("home")}</a> / {p.items("nav")[3]}</div>\n'
        + f"<h1>{e(p.a.title)}</h1>\n"
        + "\n".join(p.blocks())
        + f'\n<div class="feedback">{p.s("helpful")} <button>{p.s("yes")}</button> '
        + f"<button>{p.s('no')}</button></div>\n"
        + f'<div class="pager"><a href="/a/{prev.name}">&larr; {e(prev.title)}</a> '
        + f'<a href="/a/{nxt.name}">{e(nxt.title)} &rarr;</a></div></div>\n'
        + f'<div class="toc"><ul>{toc}</ul></div></div>\n'
        + f'<div class="footer">{p.footer_links()}<br>&copy; {p.s("site")}</div>\n'
        + p.tail()
    )


def corporate(p: Page) -> str:
    columns = "".join(
        f'<div class="col"><h4>{n}</h4><ul>{p.teaser_links()}</ul></div>'
        for n in p.items("nav")[:4]
    )
    cards = "".join(
        f'<div class="card"><h3>{t}</h3><p>{p.s("newsletter")}</p><a href="#">{p.s("subscribe")}'
        "</a></div>"
        for t in p.items("products")
    )
    return (
        p.head("en")
        + "<body>\n"
        + f'<header><a href="/" class="brand">{p.s("site")}</a><div class="mega-menu">{columns}'
        + "</div></header>\n"
        + f'<div class="hero"><h2>{p.items("products")[0]}</h2><p>{p.s("newsletter")}</p>'
        + f'<a class="btn" href="#">{p.s("subscribe")}</a></div>\n'
        + f'<section class="content"><div class="container">\n<h1>{e(p.a.title)}</h1>\n'
        + "\n".join(p.blocks())
        + f'\n</div></section>\n<section class="cards">{cards}</section>\n'
        + f'<section class="newsletter"><form><label>{p.s("newsletter")}</label><input type=email>'
        + f"<button>{p.s('subscribe')}</button></form></section>\n"
        + f'<footer><div class="cols"><ul>{p.links("footer")}</ul><ul>{p.links("nav")}</ul></div>'
        + f"<p>&copy; 2026 {p.s('site')}. {p.s('copyright')}</p></footer>\n"
        + '<div id="consent-modal"><div class="modal"><h3>Cookies</h3>'
        + p.cookie("consent")
        + "</div></div>\n"
        + p.tail()
    )


def teasers(p: Page) -> str:
    parts = p.blocks()
    others = p.others
    ad = f'<div class="ad-slot"><span>{p.s("ad")}</span><iframe src="/ads/1"></iframe></div>'
    also = f'<p class="read-also"><b>{p.s("read_also")}:</b> <a href="/a/{others[0].name}">'
    also += f"{e(others[0].title)}</a></p>"
    if len(parts) > 2:
        parts[1:1] = [ad]
        parts.insert(len(parts) - 1, also)
    teaser_cards = "".join(
        f'<div class="teaser"><h3><a href="/a/{o.name}">{e(o.title)}</a></h3>'
        f"<p>{e(o.blocks[0].split('. ')[0])}.</p></div>"
        for o in others[:3]
    )
    return (
        p.head(p.a.lang)
        + "<body>\n"
        + f'<div class="header"><div class="logo">{p.s("site")}</div><ul class="nav">'
        + f"{p.links('nav')}</ul></div>\n"
        + f'<div id="story"><div class="kicker">{p.items("nav")[p.a.number % 8]}</div>\n'
        + f'<h1 class="headline">{e(p.a.title)}</h1>\n<div class="meta">{p.s("by")} {p.author}, '
        + f'{p.date}</div>\n<div class="article-body">\n'
        + "\n".join(parts)
        + f'\n</div>\n<div class="author-box"><b>{p.author}</b> {p.s("bio")}</div>\n'
        + f'<div class="share">{p.s("share")}</div></div>\n'
        + f'<div class="more"><h2>{p.s("related")}</h2>{teaser_cards}</div>\n'
        + f'<div class="comments"><h2>{p.s("comments")}</h2><ul>{p.comments()}</ul></div>\n'
        + f'<div class="footer">{p.footer_links()}</div>\n'
        + p.cookie()
        + p.tail()
    )


LAYOUTS: tuple[Callable[[Page], str], ...] = (news, blog, table, docs, corporate, teasers)


@dataclass(frozen=True)
class LabelledPage:
    name: str
    layout: str
    lang: str
    html: str
    expected: str


def pages(data: Path = DATA) -> list[LabelledPage]:
    """Every labelled page, built from the ``.txt`` files and ``chrome.json`` in ``data``."""
    chrome = json.loads((data / "chrome.json").read_text("utf-8"))
    articles = load_articles(data)
    out = []
    for a in articles:
        # A language with one article gets teasers in other languages (a multilingual portal).
        others = [o for o in articles if o.lang == a.lang and o is not a]
        others = others or [o for o in articles if o is not a][:3]
        layout = LAYOUTS[a.number % len(LAYOUTS)]
        text = layout(Page(a, chrome[a.lang], others))
        out.append(LabelledPage(a.name, layout.__name__, a.lang, text, a.expected))
    return out


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", type=Path, default=DATA, help="the folder of .txt and chrome.json")
    args = ap.parse_args(argv)
    for page in pages(args.data):
        (args.data / f"{page.name}.html").write_text(page.html, "utf-8")
    print(f"{len(pages(args.data))} pages in {args.data}")


if __name__ == "__main__":
    main()
