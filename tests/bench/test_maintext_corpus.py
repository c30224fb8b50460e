"""bench/probes/maintext_corpus.py and the scoring of bench/probes/maintext.py: the labelled pages
are the generator's output, and the token score counts what it should."""

from __future__ import annotations

import pytest

from bench.probes.maintext import heavy, prf, tokens
from bench.probes.maintext_corpus import DATA, LAYOUTS, pages


def test_the_committed_pages_are_the_generators_output() -> None:
    built = pages()
    assert sorted(p.name for p in built) == sorted(p.stem for p in DATA.glob("*.html"))
    stale = [p.name for p in built if (DATA / f"{p.name}.html").read_text("utf-8") != p.html]
    assert stale == [], "run python -m bench.probes.maintext_corpus"


def test_every_layout_has_pages_in_several_languages() -> None:
    built = pages()
    for layout in LAYOUTS:
        assert len({p.lang for p in built if p.layout == layout.__name__}) >= 3, layout.__name__


def test_the_article_is_in_its_page_and_the_boilerplate_is_not_in_the_article() -> None:
    for p in pages():
        assert tokens(p.expected) <= tokens(p.html), p.name
        assert "cookie" not in p.expected.lower()


@pytest.mark.parametrize(
    ("text", "counted"),
    [
        ("The cat, the CAT!", {"the": 2, "cat": 2}),
        ("杭州市 bike", {"杭": 1, "州": 1, "市": 1, "bike": 1}),
        ("word杭州", {"word": 1, "杭": 1, "州": 1}),
        ("_ -- 42", {"42": 1}),
    ],
)
def test_tokens_are_lowercased_words_and_cjk_characters(text: str, counted: dict[str, int]) -> None:
    assert dict(tokens(text)) == counted


def test_precision_recall_and_f1() -> None:
    assert prf("a b c d", "a b c d") == (1.0, 1.0, 1.0)
    assert prf("a b menu menu", "a b c d") == (0.5, 0.5, 0.5)
    assert prf("", "a b") == (0.0, 0.0, 0.0)
    assert prf("a a a", "a") == pytest.approx((1 / 3, 1.0, 0.5))


def test_a_heavy_page_keeps_its_article_and_grows() -> None:
    page = pages()[0]
    made = heavy(page)
    assert len(made.html) > 60_000 + len(page.html)
    assert made.html.count("<li>") >= 300 and made.expected == page.expected
