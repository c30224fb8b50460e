"""A page's main text and language (agents/content/maintext.py), including hostile input."""

from __future__ import annotations

import os
import statistics
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bench.probes.maintext import prf
from bench.probes.maintext_corpus import pages
from streamcrawl.agents.content.maintext import (
    MAX_DEPTH,
    MAX_HTML_CHARS,
    MainText,
    _cut,
    language,
    main_text,
)

ARTICLE = (
    "<p>The council voted on Tuesday to build protected cycling lanes along both banks of the "
    "river, ending a debate that had lasted for almost three years.</p>"
    "<p>Work on the embankment road is expected to start in early spring and to take about "
    "eighteen months, with the stretch near the market hall finished first.</p>"
)


def page(body: str, lang: str = "en") -> str:
    return (
        f"<!DOCTYPE html><html lang={lang}><head><title>t</title></head><body>{body}</body></html>"
    )


# --- what is kept and what is dropped ----------------------------------------------------------

BOILERPLATE = [
    ("nav", "<nav><a href=/>Home</a> <a href=/n>Politics</a></nav>", "Politics"),
    (
        "site header",
        '<header class="site-header"><a href=/ class=logo>The Daily Courier</a></header>',
        "Daily Courier",
    ),
    ("footer", "<footer><a href=/p>Privacy policy</a> Imprint</footer>", "Privacy policy"),
    ("aside", "<aside><h2>Most read</h2><ol><li><a href=/x>Other story</a></ol></aside>", "Other"),
    (
        "cookie banner",
        '<div class="cookie-banner"><p>We use cookies.</p><button>Accept all</button></div>',
        "Accept all",
    ),
    (
        "comments",
        '<section id="comments"><h2>Comments</h2><ol><li class="comment"><p>I am not convinced '
        "by any of this, nothing will change.</p></li></ol></section>",
        "not convinced",
    ),
    ("script", "<script>var tracking = 'pageview';</script>", "tracking"),
    ("style", "<style>.nav a { padding: 4px }</style>", "padding"),
]


@pytest.mark.parametrize(
    ("name", "chrome", "dropped"), BOILERPLATE, ids=[b[0] for b in BOILERPLATE]
)
def test_boilerplate_is_dropped_and_the_article_kept(name: str, chrome: str, dropped: str) -> None:
    found = main_text(
        page(f"{chrome}<main><article><h1>Cycling lanes</h1>{ARTICLE}</article></main>")
    )
    assert found is not None
    assert dropped not in found.text
    assert found.text.startswith("Cycling lanes\n\nThe council voted")
    assert found.text.endswith("finished first.")
    assert (found.language, found.chars, found.truncated) == ("en", len(found.text), False)


NO_MAIN_TEXT = [
    ("empty", ""),
    ("white space", " \n\t "),
    ("empty body", page("")),
    ("only a script", page("<script>document.write('hello there')</script>")),
    ("only controls", "\x00\x01\x02\x7f\x9f"),
]


@pytest.mark.parametrize("html", [c[1] for c in NO_MAIN_TEXT], ids=[c[0] for c in NO_MAIN_TEXT])
def test_a_page_without_main_text_gives_none(html: str) -> None:
    assert main_text(html) is None


def test_a_lone_surrogate_is_replaced_not_refused() -> None:
    found = main_text(page("<p>The weather \ud800 is fine today, and tomorrow it will rain.</p>"))
    assert found is not None
    assert found.text == "The weather ? is fine today, and tomorrow it will rain."


def test_text_without_markup_is_its_own_main_text() -> None:
    assert main_text("just a line of text, no markup at all") == MainText(
        "just a line of text, no markup at all", "en", 37
    )


def test_the_labelled_pages_keep_their_article_and_lose_most_boilerplate() -> None:
    """The probe's 29 pages (bench/probes/maintext_corpus.py): every article is found, nearly
    whole (a headline outside the article's element can be lost), in the right language; the
    whole body would score a precision of about half (docs/performance.md, "Main text and
    language")."""
    corpus = pages()
    found = {p.name: main_text(p.html) for p in corpus}
    scores = {p.name: prf(f.text if (f := found[p.name]) else "", p.expected) for p in corpus}
    assert {n: f.language if f else None for n, f in found.items()} == {
        p.name: p.lang for p in corpus
    }
    recalls = [recall for _, recall, _ in scores.values()]
    assert min(recalls) >= 0.8 and statistics.fmean(recalls) >= 0.95
    assert statistics.fmean(precision for precision, _, _ in scores.values()) >= 0.75


# --- language -----------------------------------------------------------------------------------

LANGUAGES = [
    ("English", "The library will stay open until eleven at night during the exams.", "en"),
    ("German", "Die Stadtwerke wollen Wärmepumpen in unsanierten Altbauten testen.", "de"),
    ("Russian", "В понедельник в Казани открылось движение по новой трамвайной линии.", "ru"),  # noqa: RUF001
    ("Ukrainian", "Міська рада ухвалила рішення про ремонт старого мосту через річку.", "uk"),
    ("Japanese", "初めて山に登る人が知っておきたい基本的な準備について説明します。", "ja"),
    ("Chinese", "为了解决共享单车乱停乱放的问题，杭州市近日出台了新的管理办法。", "zh"),  # noqa: RUF001
    (
        "Traditional Chinese: zh, not CLD2's zh-Hant",
        "這是一個繁體中文的句子，我們用來測試語言偵測。",  # noqa: RUF001
        "zh",
    ),
    ("Hebrew: he, not CLD2's iw", "זה משפט בעברית כדי לבדוק את זיהוי השפה בטקסט.", "he"),
    ("Hawaiian: no ISO 639-1 code", "Aloha mai kākou, e komo mai i ka hale o nā kūpuna.", None),
    ("too short to tell", "OK", None),
    ("empty", "", None),
    (
        "a DEL that CLD2 refuses",
        "Happy Tailors Day! Hackett\x7f is celebrating with an offer",
        "en",
    ),
    (
        "C0, C1 controls, noncharacters",
        "Ein \x00kleiner\x85 Satz \ufffe auf Deutsch für\U0001ffff euch",
        "de",
    ),
    ("a lone surrogate", "The weather \ud800 is fine today and tomorrow it will rain", "en"),
]


@pytest.mark.parametrize(
    ("text", "code"), [c[1:] for c in LANGUAGES], ids=[c[0] for c in LANGUAGES]
)
def test_language(text: str, code: str | None) -> None:
    assert language(text) == code


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=300))
def test_language_never_raises(text: str) -> None:
    code = language(text)
    assert code is None or (len(code) == 2 and code.isalpha() and code.islower())


# --- the cut at max_chars -----------------------------------------------------------------------

CUTS = [
    ("short enough", "one two three", 20, "one two three"),
    ("at the limit", "one two three", 13, "one two three"),
    ("at the last space", "one two three four", 12, "one two"),
    ("at a paragraph break", "one two\n\nthree four", 12, "one two"),
    ("no space in the second half: hard", "onetwothreefour five", 10, "onetwothre"),
    ("CJK without spaces", "初めて山に登る人が知っておきたい", 5, "初めて山に"),
    ("never between a letter and its accent", "abcde\u0301f", 5, "abcd"),
    ("never between a letter and its accents", "abcde\u0301\u0323f", 6, "abcd"),
]


@pytest.mark.parametrize(("text", "limit", "cut"), [c[1:] for c in CUTS], ids=[c[0] for c in CUTS])
def test_cut(text: str, limit: int, cut: str) -> None:
    assert _cut(text, limit) == cut


def test_the_text_is_cut_at_max_chars_and_its_length_kept() -> None:
    words = " ".join(f"word{i}" for i in range(5000))
    found = main_text(page(f"<article><p>{words}</p></article>"), max_chars=1000)
    assert found is not None and found.truncated
    assert len(found.text) <= 1000 and words.startswith(found.text + " ")
    assert found.chars == len(words)


def test_limits_must_be_positive() -> None:
    with pytest.raises(ValueError, match="positive"):
        main_text(ARTICLE, max_chars=0)
    with pytest.raises(ValueError, match="positive"):
        main_text(ARTICLE, max_html_chars=0)


# --- hostile input ------------------------------------------------------------------------------


def nested(depth: int) -> str:
    """A page whose paragraphs are ``depth`` elements deep: ``html``, ``body``, divs, ``p``."""
    divs = depth - 3
    return page("<div>" * divs + ARTICLE + "</div>" * divs)


def test_nesting_up_to_max_depth_is_read_and_deeper_is_not() -> None:
    assert main_text(nested(MAX_DEPTH)) is not None
    assert main_text(nested(MAX_DEPTH + 1)) is None


def test_a_huge_page_is_read_up_to_max_html_chars() -> None:
    paragraph = "<p>" + "word " * 200 + "</p>\n"
    html = page(paragraph * (10_000_000 // len(paragraph)) + "<p>the end</p>")
    t0 = time.process_time()
    found = main_text(html)
    assert time.process_time() - t0 < 2.0
    assert found is not None and "the end" not in found.text
    assert MAX_HTML_CHARS // 2 < found.chars < MAX_HTML_CHARS
    assert len(found.text) <= 100_000


def test_a_huge_script_before_the_body_does_not_hide_the_text() -> None:
    html = page(f"<script>{'x' * (2 * MAX_HTML_CHARS)}</script>{ARTICLE}")
    found = main_text(html)
    assert found is not None and found.text.startswith("The council voted")


HOSTILE = [
    ("100k nested divs", "<html><body>" + "<div>" * 100_000 + "x" + "</div>" * 100_000),
    ("100k unclosed divs and spans", "<div><span>x" * 100_000),
    ("200k nested bold", "<b>" * 200_000 + "text"),
    ("50k spans, then 50k block elements", "<span>" * 50_000 + "<div></div>" * 50_000 + "<p>x"),
    ("nested tables", "<table><tr><td>" * 30_000),
    ("100k nested links", "<a href=x>" * 100_000),
    ("1 MB at MAX_DEPTH", ("<div>" * (MAX_DEPTH - 2) + "x " + "</div>" * (MAX_DEPTH - 2)) * 360),
    ("500k unclosed scripts", "<script>" * 500_000),
    ("2 MB of random bytes", os.urandom(2_000_000).decode("latin-1")),
    ("NUL bytes", "<p>" + "a\x00b " * 100_000),
    ("lone surrogates", "<p>abc \ud800 def \udfff ghi and some more words</p>"),
    ("broken markup", "<a href=/1 <a href=/2><title>t<a href='/3><p><<>>><p>text<"),
]


@pytest.mark.timeout(60)
@pytest.mark.parametrize("html", [c[1] for c in HOSTILE], ids=[c[0] for c in HOSTILE])
def test_hostile_input_never_raises_and_is_bounded(html: str) -> None:
    t0 = time.process_time()
    found = main_text(html, max_chars=10_000)
    assert time.process_time() - t0 < 2.0
    if found is not None:
        assert 0 < len(found.text) <= 10_000 and found.chars >= len(found.text)
        assert not any(c in found.text for c in "\x00\x01\x08\x1b\x7f\x85\ud800\ufffe")


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet=st.sampled_from("<>/ \"'=&;#abpdivscript\x00\ud800é語"), max_size=400))
def test_any_string_gives_text_or_none(html: str) -> None:
    found = main_text(html, max_chars=50)
    assert found is None or (0 < len(found.text) <= 50 and found.text == found.text.strip())
