"""Extraction without code: the NAME=SELECTOR syntax and its checks
(agents/policy/extractors.py), what a selector reads from a page, the bounds of ``Page.data``
and the work a hostile page may cost (agents/content/extract.py)."""

from __future__ import annotations

import json
import logging

import msgspec
import pytest

from streamcrawl.agents.content.extract import READ_CHARS, WORK, Data, _Page, extract, nothing
from streamcrawl.agents.content.parse import HtmlTree, parse_tree
from streamcrawl.agents.errors import ConfigError
from streamcrawl.agents.policy.extractors import (
    _branches,
    compile_extractor,
    compile_extractors,
    parse_extractor,
)
from streamcrawl.agents.policy.rules import CrawlRules
from streamcrawl.agents.stream.control import SharedView
from streamcrawl.agents.stream.metrics import Metrics
from streamcrawl.schemas.records import (
    MAX_DATA_BYTES,
    MAX_EXTRACT_CHARS,
    MAX_EXTRACT_VALUES,
    CrawlPolicy,
    Extractor,
)
from streamcrawl.topology.worker.internals import refresh_metadata

PAGE = """<!doctype html><html lang=en><head><title> A  page
 title </title><meta name=description content="  about it "></head><body>
<h1 id=top>Hello <b>big</b>
  world</h1>
<p class=price>9,99&nbsp;&euro;</p>
<a>no href</a> <a href=" /one ">One</a> <a href=/two rel=tag>Two</a>
<span class=tag>red</span><span class=tag></span><span class=tag> green
 blue </span>
<input type=checkbox checked>
</body></html>"""


def run(html: str, *specs: str) -> Data:
    return extract(compile_extractors([parse_extractor(s) for s in specs]), parse_tree(html))


@pytest.mark.parametrize(
    ("text", "extractor"),
    [
        ("title=title", Extractor(name="title", selector="title")),
        (" price = .price::text ", Extractor(name="price", selector=".price::text")),
        ("tags=all:.tag", Extractor(name="tags", selector=".tag", all=True)),
        ("tags=all: .tag::text", Extractor(name="tags", selector=".tag::text", all=True)),
        ("og.image=meta[property='og:image']::attr(content)",
         Extractor(name="og.image", selector="meta[property='og:image']::attr(content)")),
        ("_x-1=a[href*='=']", Extractor(name="_x-1", selector="a[href*='=']")),
    ],
)  # fmt: skip
def test_the_cli_syntax(text: str, extractor: Extractor) -> None:
    assert parse_extractor(text) == extractor


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("title", r"^extractor 'title' is not NAME=SELECTOR$"),
        ("t=", r"^extractor t has no selector$"),
        ("t=all:", r"^extractor t has no selector$"),
        ("=h1", r"^extractor name '' must be 1-64 letters"),
        ("9t=h1", r"^extractor name '9t' must be"),
        ("a b=h1", r"^extractor name 'a b' must be"),
        ("x" * 65 + "=h1", r"^extractor name 'x+' must be"),
        ("_truncated=h1", r"^extractor name _truncated is taken"),
        ("t=a,,b", r"^extractor t: selector 'a,,b' is not CSS lexbor parses$"),
        ("t=:not(", r"is not CSS lexbor parses$"),
        ("t=div >", r"is not CSS lexbor parses$"),
        ("t=p::before", r"'p::before' may end only in ::text or ::attr\(NAME\)$"),
        ("t=p::text::text", r"may end only in ::text or ::attr\(NAME\)$"),
        ("t=::text", r"names no element before its ::text or ::attr\(\)$"),
        ("t=a::attr()", r"names no attribute in ::attr\(\)$"),
        ("t=p:lexbor-contains('x')", r"uses :lexbor-contains\(\), whose cost grows"),
        ("t=" + "p" * 1025, r"^extractor t: its selector is over 1024 characters$"),
    ],
)
def test_a_bad_extractor_is_one_line_naming_it(text: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message) as exc:
        parse_extractor(text)
    assert "\n" not in str(exc.value)


def test_a_spec_from_another_producer_is_checked_as_the_cli_checks_it() -> None:
    """A spec need not come from the CLI: compile refuses what parse_extractor would."""
    with pytest.raises(ConfigError, match="is not CSS lexbor parses"):
        compile_extractors([Extractor(name="t", selector="a,,b")])
    with pytest.raises(ConfigError, match="extractor name t is given twice"):
        compile_extractors([Extractor(name="t", selector="a"), Extractor(name="t", selector="b")])
    with pytest.raises(ConfigError, match="extractor name '1' must be"):
        compile_extractor(Extractor(name="1", selector="a"))
    assert compile_extractors([]) == ()


@pytest.mark.parametrize(
    ("spec", "value"),
    [
        # text, whitespace collapsed, entities decoded (the default and ::text)
        ("t=title", "A page title"),
        ("t=h1::text", "Hello big world"),
        ("t=h1::TEXT", "Hello big world"),
        ("t=.price", "9,99 €"),  # a no-break space is whitespace too
        ("t=h1 b", "big"),
        ("t=h2, h1", "Hello big world"),  # a selector list: the first in document order
        # attributes: surrounding whitespace stripped, names case-insensitive
        ("t=html::attr(lang)", "en"),
        ("t=meta[name=description]::attr(content)", "about it"),
        ("t=a::attr(href)", "/one"),  # the first <a> has none: the first match that has it
        ("t=a::attr(HREF)", "/one"),
        ("t=input::attr(checked)", ""),  # present without a value
        ("t=a::attr(data-x)", None),
        # no match
        ("t=.nothing", None),
        ("t=all:.nothing", []),
        ("t=all:.nothing::attr(x)", []),
        # every match
        ("t=all:.tag", ["red", "", "green blue"]),
        ("t=all:a::attr(href)", ["/one", "/two"]),  # elements without it are left out
        ("t=all:a[rel~=tag]::text", ["Two"]),
        ("t=all:title", ["A page title"]),
    ],
)
def test_what_a_selector_reads(spec: str, value: object) -> None:
    assert run(PAGE, spec) == {"t": value}


def test_values_come_in_the_crawls_order() -> None:
    data = run(PAGE, "z=title", "a=all:.tag", "m=.nothing")
    assert list(data) == ["z", "a", "m"]
    assert data == {"z": "A page title", "a": ["red", "", "green blue"], "m": None}


def test_a_long_text_is_cut_and_the_data_says_so() -> None:
    html = f"<p>{'word ' * 2000}</p><h1>h</h1>"
    data = run(html, "p=p", "h=h1")
    assert data["p"] == ("word " * 2000)[:MAX_EXTRACT_CHARS].rstrip()
    assert data["h"] == "h" and data["_truncated"] is True
    assert run(f"<p>{'x' * MAX_EXTRACT_CHARS}</p>", "p=p") == {"p": "x" * MAX_EXTRACT_CHARS}


def test_a_long_attribute_is_cut() -> None:
    data = run(f"<a href='/{'x' * 5000}'>", "h=a::attr(href)")
    assert data == {"h": "/" + "x" * (MAX_EXTRACT_CHARS - 1), "_truncated": True}


def test_a_text_padded_with_whitespace_is_read_within_its_bound() -> None:
    """An element's text is read up to 16 x its bound before the whitespace goes: a page of
    megabytes of spaces costs that, and what was not read makes the data say it was cut."""
    data = run("<p>" + " " * 100_000 + "late</p>", "p=p")
    assert data == {"p": "", "_truncated": True}


def test_lists_hold_at_most_max_values() -> None:
    tags = "".join(f"<i>{i}</i>" for i in range(MAX_EXTRACT_VALUES + 1))
    data = run(tags, "i=all:i")
    assert data["i"] == [str(i) for i in range(MAX_EXTRACT_VALUES)]
    assert data["_truncated"] is True
    exact = "".join(f"<i>{i}</i>" for i in range(MAX_EXTRACT_VALUES))
    assert "_truncated" not in run(exact, "i=all:i")
    # a list of attributes is cut only if one more element has the attribute
    links = exact.replace("<i>", "<a href=x>") + "<a>no href</a>"
    assert "_truncated" not in run(links, "a=all:a::attr(href)")


def test_the_whole_data_stays_within_max_data_bytes() -> None:
    """32 extractors of 256 strings of 4,096 characters would be 32 MiB: the values are kept in
    order, the first that does not fit is cut, and the encoded object is at most 64 KiB."""
    html = "".join(f"<p class=c{i % 4}>{chr(0x4E00 + i) * 3000}</p>" for i in range(300))
    specs = [f"v{i}=all:p.c{i % 4}" for i in range(32)]
    data = run(html, *specs)
    encoded = msgspec.json.encode(data)
    assert MAX_DATA_BYTES - 9_000 < len(encoded) <= MAX_DATA_BYTES
    assert list(data) == [f"v{i}" for i in range(32)] + ["_truncated"]
    assert data["_truncated"] is True
    first = data["v0"]
    assert isinstance(first, list) and 0 < len(first) < 75 and first[0] == chr(0x4E00) * 3000
    assert data["v31"] == []


def test_a_long_string_is_cut_to_the_room_left() -> None:
    html = "".join(f"<p id=p{i}>{'é' * 4000}</p>" for i in range(20))
    specs = [f"v{i}=#p{i}" for i in range(20)]
    data = run(html, *specs)
    assert len(msgspec.json.encode(data)) <= MAX_DATA_BYTES
    whole = [v for v in data.values() if v == "é" * 4000]
    assert len(whole) == 8  # 8 x 8,002 bytes of JSON; the 9th is cut
    cut = data["v8"]
    assert isinstance(cut, str) and 0 < len(cut) < 4000
    # later values get the room left: the 4 bytes each had as null
    assert all(len(msgspec.json.encode(data[f"v{i}"])) <= 4 for i in range(9, 20))
    assert data["_truncated"] is True


def test_the_text_read_from_a_page_is_bounded() -> None:
    """Nested elements share their text: ``all:div`` over 100 nested <div> around 100 KB of
    text would read 10 MB; the read stops past READ_CHARS."""
    html = "<div>" * 100 + "x" * 100_000
    data = run(html, "d=all:div", "after=div")
    values = data["d"]
    assert isinstance(values, list)
    assert len(values) == READ_CHARS // 100_000 + 1  # the read that passed the bound is kept
    assert data["after"] is None and data["_truncated"] is True


@pytest.mark.parametrize(
    ("css", "branches"),
    [
        ("a", ((0, 0),)),
        ("a b", ((1, 0),)),
        ("  a   b  ", ((1, 0),)),
        ("a > b + c", ((0, 0),)),
        ("a>b", ((0, 0),)),
        ("a ~ b", ((0, 1),)),
        ("a b c d", ((3, 0),)),
        ("a b, c d e", ((1, 0), (2, 0))),
        ("li:nth-child(2n + 1)", ((0, 1),)),
        ("li:nth-last-of-type( odd ) a", ((1, 1),)),
        ("div:has(> p)", ((1, 0),)),
        ("a:not(b c)", ((1, 0),)),
        ("a:is(b, c) d", ((1, 0),)),
        ("[title='a b ~ c'] d", ((1, 0),)),
        ('[title="a\\" b"] d', ((1, 0),)),
        ("a[class~=x]", ((0, 0),)),
        ("a\\ b c", ((1, 0),)),
    ],
)
def test_what_makes_a_selectors_cost_grow(css: str, branches: tuple[tuple[int, int], ...]) -> None:
    assert _branches(css) == branches


def test_a_selectors_worst_case() -> None:
    linear = compile_extractor(Extractor(name="t", selector="div > p"))
    assert linear.work(1_000, 500, 500, WORK) == 1_000
    chain = compile_extractor(Extractor(name="t", selector="a div div"))  # 1 + 32 + 496
    assert chain.work(1_000, 32, 1_000, WORK) == 1_000 * 529
    nth = compile_extractor(Extractor(name="t", selector="li:nth-child(2)"))
    assert nth.work(1_000, 5, 64, WORK) == 1_000 * 65
    assert chain.work(10**6, 10**6, 1, WORK) == WORK + 1  # capped, not computed


def nested(depth: int, inner: str = "<span>x</span>") -> str:
    return "<div>" * depth + inner


@pytest.mark.parametrize(
    ("html", "spec", "runs"),
    [
        # three descendant combinators: C(depth, 3) ancestor paths per element
        (nested(30), "t=div div div span", True),  # probed: under 32 deep
        # every <div> a candidate, no <a> to end a path: C(1000, 3) paths, a second of lexbor
        # (with one combinator more, hours)
        (nested(1_000, "<span>x</span>"), "t=a div div div", False),
        (nested(1_000), "t=div div div span", False),  # would match: the bound is a worst case
        (nested(1_000), "t=div > div > div > span", True),  # child combinators: linear
        (nested(1_000), "t=div span", True),  # one: 1,000 x 1,000 steps
        # :nth-child counts the siblings before each element
        ("<ul>" + "<li>i" * 2_000, "t=li:nth-child(2)", True),
        ("<ul>" + "<li>i" * 40_000, "t=li:nth-child(2)", False),
        ("<ul>" + "<li>i" * 20_000, "t=li:first-child", True),
        ("<ul>" + "<li>i" * 40_000, "t=b ~ li", False),
        ("<ul><li>a</ul>" * 5_000, "t=li:nth-child(1)", True),  # probed: narrow lists
    ],
)
def test_a_page_too_deep_or_wide_for_a_selector_is_not_matched_by_it(
    html: str, spec: str, runs: bool
) -> None:
    data = run(html, spec, "after=div > span, li")
    if runs:
        assert data["t"] is not None and "_truncated" not in data
    else:
        assert data["t"] is None and data["_truncated"] is True
    assert data["after"] is not None  # the extractors after it still run


@pytest.mark.parametrize(
    "html",
    [
        "",
        "\x00" * 1000 + "<p>\x00a\x00</p>",
        "<p <p <<>>> <a href='/x><title>t",
        "<title>a\udc80b</title>",
        "".join(chr(i) for i in range(0x10000) if not 0xD800 <= i < 0xE000),
        "<div>" * 200_000 + "deep",  # parsed only to MAX_DEPTH
        "<script><p>not a tag</p></script><p>real</p>",
    ],
)
def test_hostile_html_gives_values_within_bounds_and_never_raises(html: str) -> None:
    data = run(html, "t=title", "p=all:p", "a=a::attr(href)", "d=div div div div")
    assert len(msgspec.json.encode(data)) <= MAX_DATA_BYTES
    assert set(data) - {"_truncated"} == {"t", "p", "a", "d"}
    assert all(isinstance(v, (str, list, type(None), bool)) for v in data.values())


def test_a_page_lexbor_could_not_parse_has_every_value_empty_and_cut() -> None:
    extractors = compile_extractors([parse_extractor("t=title"), parse_extractor("l=all:a")])
    assert extract(extractors, HtmlTree(None, 0)) == {"t": None, "l": [], "_truncated": True}
    assert nothing(extractors) == {"t": None, "l": []}


def test_the_crawls_rules_hold_its_extractors_compiled() -> None:
    policy = CrawlPolicy(crawl_id="c", extract=(Extractor(name="t", selector="h1::attr(id)"),))
    (compiled,) = CrawlRules.from_policy(policy).extractors
    assert (compiled.name, compiled.css, compiled.attr, compiled.all) == ("t", "h1", "id", False)
    assert CrawlRules.from_policy(CrawlPolicy(crawl_id="c")).extractors == ()


@pytest.mark.parametrize(
    ("extract", "why"),
    [
        ([{"name": "t", "selector": "a,,b"}], "is not CSS lexbor parses"),
        ([{"name": "t", "selector": "p::after"}], "may end only in ::text or ::attr"),
        ([{"name": "t", "selector": "a"}, {"name": "t", "selector": "b"}], "given twice"),
        ([{"name": "_truncated", "selector": "a"}], "is taken"),
    ],
)
def test_the_worker_refuses_a_spec_with_a_bad_extractor_in_one_line(
    extract: list[dict[str, str]], why: str, caplog: pytest.LogCaptureFixture
) -> None:
    """A spec from another producer than the CLI: refused with one log line, never applied."""
    view = SharedView(None, "p.control", "p.budget", Metrics(), refresh_metadata=refresh_metadata)
    caplog.set_level(logging.WARNING, "streamcrawl.agents.stream.control")
    spec = {"v": 6, "crawl_id": "c1", "seeds": ["https://example.org/"], "extract": extract}
    assert not view._apply("p.control", 0, 0, b"c1", json.dumps(spec).encode())
    assert "c1" not in view.policies
    (refused,) = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert "'c1'" in refused.getMessage() and why in refused.getMessage()
    assert "\n" not in refused.getMessage()


def test_a_page_is_probed_when_that_lowers_a_selectors_charge() -> None:
    """50 tables of 30 rows: 32 deep at most, 64 wide at most. Unprobed, ``table
    td:nth-child(2)``'s worst case would take most of the page's work (elements x 33 x
    elements); probed, the charge is elements x 33 x 65, and the probes cost elements x 96."""
    html = ("<table>" + "<tr><td>a<td>b" * 30 + "</table>") * 50
    page = _Page(parse_tree(html), "")
    nth = compile_extractor(Extractor(name="t", selector="table td:nth-child(2)"))
    assert page._afford(nth)
    assert (page.depth.high, page.width.high) == (32, 64)
    assert WORK - page.work == page.elements * 33 * 65 + page.elements * (32 + 64)
    small = _Page(parse_tree("<table><tr><td>a<td>b</table>"), "")
    assert small._afford(nth) and small.depth.high == small.elements  # not worth a probe
