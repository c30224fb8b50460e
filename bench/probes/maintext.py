"""Which library should extract a page's main text and detect its language: quality and CPU.

Runs every candidate that is installed on the same pages and prints markdown tables:

- **Extraction quality** on the labelled pages of ``bench/probes/maintext_corpus.py`` (29
  articles in 9 languages, six layouts), alone (``corpus``) and made heavy (``heavy``: a 60 KB
  inline script and a 300-link menu added to each, as many real pages have): token-level
  precision, recall and F1 of the extracted text against the article (title and paragraphs; a
  bag of lowercased words, each CJK character a word), the mean over pages and the worst page;
  F1 by layout.
- **Language accuracy** of each detector on the article text, on its first 100 characters, on
  the whole page's text (boilerplate included), and on the text each extractor returned.
- **CPU** per page: process time of one candidate over a whole page set, in rounds (A, B, C, A,
  B, C... with the order rotated each round), the median ms a page over rounds and the spread
  (min-max); on the corpus, on the heavy pages and on the bench's synthetic pages
  (``bench/site.py``, about 24 KB of text each, CPU only).
- **Hostile input**: Resiliparse's main-content pass on nested ``div``, and ``main_text`` on the
  shapes its bounds are for.
- **Cost to install and load**: the bytes that a fresh install of the library adds to the
  project's base dependencies (its distributions and their dependencies, from their RECORD
  files), and, in a child process, the CPU and peak RSS of importing it and handling one page.

A candidate that is not installed is listed as not installed. All of them install into a scratch
venv outside the project's:

    python3 -m venv /tmp/maintext-venv
    /tmp/maintext-venv/bin/pip install -e . -r bench/probes/maintext-requirements.txt
    /tmp/maintext-venv/bin/python -m bench.probes.maintext [--rounds 7] [--site-pages 40]

Informs: the choice of the main-text extractor and language detector behind
``agents/content/maintext.py`` (docs/performance.md, "Main text and language").
"""

from __future__ import annotations

import argparse
import gc
import json
import random
import re
import statistics
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable
from importlib import metadata
from pathlib import Path

from bench.probes.maintext_corpus import DATA, LabelledPage, pages
from bench.site import SiteSpec, _PageWriter

Fn = Callable[[str], str | None]
_CJK = "\u3040-\u30ff\u3400-\u9fff\uf900-\ufaff"
_TOKEN = re.compile(rf"[{_CJK}]|(?:(?![{_CJK}])[^\W_])+")
_JUSTEXT = {
    "en": "English",
    "de": "German",
    "fr": "French",
    "es": "Spanish",
    "it": "Italian",
    "pt": "Portuguese",
    "ru": "Russian",
}


# --- candidates: name -> (distribution, factory); a factory imports and returns the callable ---


def _resiliparse(**options: bool) -> Fn:
    from resiliparse.extract.html2text import extract_plain_text

    return lambda html: extract_plain_text(html, main_content=True, **options)


def _trafilatura(**options: bool) -> Fn:
    import trafilatura

    return lambda html: trafilatura.extract(html, include_comments=False, **options)


def _justext(lang_of: Callable[[str], str] | None) -> Fn:
    import justext

    def run(html: str) -> str:
        name = _JUSTEXT.get(lang_of(html)) if lang_of else None
        stoplist = justext.get_stoplist(name) if name else frozenset()
        # Without a stoplist jusText has its language-independent mode: no stopword thresholds.
        thresholds = {} if name else {"stopwords_low": 0, "stopwords_high": 0}
        paragraphs = justext.justext(html.encode(), stoplist, **thresholds)
        return "\n".join(p.text for p in paragraphs if not p.is_boilerplate)

    return run


def _readability() -> Fn:
    import lxml.html
    from readability import Document

    return lambda html: lxml.html.fromstring(Document(html).summary()).text_content()


def _boilerpy3() -> Fn:
    from boilerpy3 import extractors

    return extractors.ArticleExtractor(raise_on_failure=False).get_content


def _body_text(drop: str) -> Fn:
    from selectolax.lexbor import LexborHTMLParser

    def run(html: str) -> str:
        tree = LexborHTMLParser(html)
        for node in tree.css(drop):
            node.decompose()
        return tree.body.text(separator=" ") if tree.body else ""

    return run


def _streamcrawl() -> Fn:
    from streamcrawl.agents.content.maintext import main_text

    return lambda html: m.text if (m := main_text(html)) else None


# The extractors whose text the language detectors are also run on.
LANGUAGE_ON = ("resiliparse, comments=False", "trafilatura, fast", "streamcrawl main_text")
_LANG_OF: dict[str, str] = {}  # page html -> its language, for jusText's oracle stoplist

EXTRACTORS: dict[str, tuple[str, Callable[[], Fn]]] = {
    "whole body (selectolax)": ("selectolax", lambda: _body_text("script, style")),
    "HTML5 tags dropped (selectolax)": (
        "selectolax",
        lambda: _body_text("script, style, nav, header, footer, aside, form"),
    ),
    "resiliparse": ("resiliparse", lambda: _resiliparse()),
    "resiliparse, comments=False": ("resiliparse", lambda: _resiliparse(comments=False)),
    "trafilatura": ("trafilatura", lambda: _trafilatura()),
    "trafilatura, fast": ("trafilatura", lambda: _trafilatura(fast=True)),
    "justext, known language": ("justext", lambda: _justext(lambda h: _LANG_OF.get(h, ""))),
    "justext, no stoplist": ("justext", lambda: _justext(None)),
    "readability-lxml": ("readability-lxml", _readability),
    "boilerpy3": ("boilerpy3", _boilerpy3),
    "streamcrawl main_text": ("streamcrawl", _streamcrawl),
}


def _py3langid() -> Fn:
    import py3langid

    return lambda text: str(py3langid.classify(text)[0])


def _lingua(low: bool) -> Fn:
    from lingua import LanguageDetectorBuilder

    builder = LanguageDetectorBuilder.from_all_languages()
    detector = (builder.with_low_accuracy_mode() if low else builder).build()

    def run(text: str) -> str | None:
        found = detector.detect_language_of(text)
        return found.iso_code_639_1.name.lower() if found else None

    return run


def _resiliparse_lang() -> Fn:
    from resiliparse.parse.lang import detect_fast

    return lambda text: str(detect_fast(text)[0])


def _pycld2() -> Fn:
    import pycld2

    return lambda text: str(pycld2.detect(text)[2][0][1])


def _cld3(reliable_only: bool) -> Fn:
    import gcld3

    detector = gcld3.NNetLanguageIdentifier(min_num_bytes=0, max_num_bytes=4000)

    def run(text: str) -> str | None:
        found = detector.FindLanguage(text=text)
        return str(found.language) if found.is_reliable or not reliable_only else None

    return run


DETECTORS: dict[str, tuple[str, Callable[[], Fn]]] = {
    "py3langid": ("py3langid", _py3langid),
    "lingua, high accuracy": ("lingua-language-detector", lambda: _lingua(low=False)),
    "lingua, low accuracy": ("lingua-language-detector", lambda: _lingua(low=True)),
    "resiliparse detect_fast": ("resiliparse", _resiliparse_lang),
    "pycld2": ("pycld2", _pycld2),
    "cld3-py": ("cld3-py", lambda: _cld3(reliable_only=False)),
    "cld3-py, reliable only": ("cld3-py", lambda: _cld3(reliable_only=True)),
}


def load(table: dict[str, tuple[str, Callable[[], Fn]]]) -> dict[str, Fn | None]:
    out: dict[str, Fn | None] = {}
    for name, (_, factory) in table.items():
        try:
            out[name] = factory()
        except ImportError:
            out[name] = None
    return out


def safe(fn: Fn, arg: str) -> str:
    try:
        return fn(arg) or ""
    except Exception as exc:  # a failure scores as an empty answer, and is counted
        return f"\0{type(exc).__name__}"


# --- quality ---------------------------------------------------------------------------------


def tokens(text: str) -> Counter[str]:
    return Counter(t.lower() for t in _TOKEN.findall(text))


def prf(got: str, expected: str) -> tuple[float, float, float]:
    g, x = tokens(got), tokens(expected)
    common = sum((g & x).values())
    p = common / sum(g.values()) if g else 0.0
    r = common / sum(x.values()) if x else 0.0
    return p, r, (2 * p * r / (p + r) if p + r else 0.0)


def heavy(page: LabelledPage) -> LabelledPage:
    """The page with a 60 KB inline script in its head and a 300-link menu first in its body."""
    rng = random.Random(page.name)
    script = "".join(f"var v{i}=function(a){{return a*{rng.random():.6f}}};\n" for i in range(1500))
    words = re.findall(r">([^<>]{3,40})</a>", page.html) or ["menu"]
    menu = "".join(f'<li><a href="/m/{i}">{rng.choice(words)}</a></li>' for i in range(300))
    text = page.html.replace("</head>", f"<script>{script}</script></head>", 1)
    text = re.sub(r"(<body[^>]*>)", rf'\1<div class="mega"><ul>{menu}</ul></div>', text, count=1)
    return LabelledPage(page.name, page.layout, page.lang, text, page.expected)


def quality_rows(fns: dict[str, Fn | None], labelled: list[LabelledPage]) -> list[str]:
    rows = []
    for name, fn in fns.items():
        if fn is None:
            rows.append(f"| {name} | not installed | | | | |")
            continue
        outs = [safe(fn, p.html) for p in labelled]
        scores = [prf(o, p.expected) for o, p in zip(outs, labelled, strict=True)]
        worst = min(range(len(scores)), key=lambda i: scores[i][2])
        errors = sum(o.startswith("\0") for o in outs)
        mean = [statistics.fmean(s[k] for s in scores) for k in range(3)]
        rows.append(
            f"| {name} | {mean[0]:.3f} | {mean[1]:.3f} | **{mean[2]:.3f}** | "
            f"{scores[worst][2]:.2f} ({labelled[worst].name}, {labelled[worst].layout}) | "
            f"{errors} |"
        )
    return rows


def layout_rows(fns: dict[str, Fn | None], labelled: list[LabelledPage]) -> list[str]:
    """F1 by layout: where each extractor keeps boilerplate or loses text."""
    layouts = sorted({p.layout for p in labelled})
    rows = [f"| extractor | {' | '.join(layouts)} |", "|---" * (len(layouts) + 1) + "|"]
    for name, fn in fns.items():
        if fn is None:
            continue
        cells = []
        for layout in layouts:
            mine = [p for p in labelled if p.layout == layout]
            f1 = statistics.fmean(prf(safe(fn, p.html), p.expected)[2] for p in mine)
            cells.append(f"{f1:.2f}")
        rows.append(f"| {name} | " + " | ".join(cells) + " |")
    return rows


def openings(corpus: list[LabelledPage]) -> list[tuple[str, str]]:
    """The first sentence of every paragraph of the corpus: short texts, 20-150 characters."""
    out = []
    for page in corpus:
        for block in page.expected.split("\n\n")[1:]:
            first = re.split(r"(?<=[.!?\u3002\uff01\uff1f])\s*", block, maxsplit=1)[0]
            out.append((first, page.lang))
    return out


def more_languages() -> list[tuple[str, str]]:
    """Sentences in 15 languages the articles lack, some close to others (uk, bg; cs; da, sv;
    ca; ro)."""
    found = json.loads((DATA / "languages.json").read_text("utf-8"))
    return [(text, lang) for lang, texts in found.items() for text in texts]


_NO_ANSWER = {"", "un", "und", "unknown"}  # what the detectors say when they abstain


def language_rows(
    detectors: dict[str, Fn | None], texts: dict[str, list[tuple[str, str]]]
) -> list[str]:
    rows = []
    for name, fn in detectors.items():
        if fn is None:
            rows.append(f"| {name} | not installed |" + " |" * (len(texts) - 1))
            continue
        cells = []
        for pairs in texts.values():
            answers = [(safe(fn, text), lang) for text, lang in pairs]
            right = sum(got == lang for got, lang in answers)
            wrong = sum(got not in _NO_ANSWER and got != lang for got, lang in answers)
            cells.append(f"{right}, {wrong} wrong")
        rows.append(f"| {name} | " + " | ".join(cells) + " |")
    return rows


# --- CPU -------------------------------------------------------------------------------------


def cpu_rows(fns: dict[str, Fn | None], sets: dict[str, list[str]], rounds: int) -> list[str]:
    """ms a page per candidate and set: median over interleaved rounds, and the min-max."""
    live = {n: f for n, f in fns.items() if f is not None}
    samples: dict[tuple[str, str], list[float]] = {(n, s): [] for n in live for s in sets}
    names = list(live)
    for fn in live.values():  # warm-up: lazy model loads and caches are not per-page costs
        for docs in sets.values():
            safe(fn, docs[0])
    for r in range(rounds):
        for name in names[r % len(names) :] + names[: r % len(names)]:
            for set_name, docs in sets.items():
                gc.collect()
                t0 = time.process_time()
                for doc in docs:
                    safe(live[name], doc)
                samples[name, set_name].append((time.process_time() - t0) * 1000 / len(docs))
    rows = []
    for name in fns:
        if name not in live:
            rows.append(f"| {name} | not installed |" + " |" * (len(sets) - 1))
            continue
        cells = []
        for set_name in sets:
            s = samples[name, set_name]
            cells.append(f"{statistics.median(s):.2f} ({min(s):.2f}-{max(s):.2f})")
        rows.append(f"| {name} | " + " | ".join(cells) + " |")
    return rows


# --- install and load ------------------------------------------------------------------------


def _closure(names: list[str]) -> set[str]:
    seen: set[str] = set()
    todo = list(names)
    while todo:
        name = _name(todo.pop())
        if name in seen:
            continue
        try:
            dist = metadata.distribution(name)
        except metadata.PackageNotFoundError:
            continue
        seen.add(name)
        todo += [r for r in dist.requires or [] if "extra ==" not in r]
    return seen


def _base_dependencies() -> list[str]:
    """The project's base dependencies, less the candidates (so that the chosen ones are
    measured like the others)."""
    import tomllib

    project = tomllib.loads(Path("pyproject.toml").read_text("utf-8"))["project"]
    candidates = {d for d, _ in (*EXTRACTORS.values(), *DETECTORS.values())} - {"selectolax"}
    return [d for d in project["dependencies"] if _name(d) not in candidates]


def _name(requirement: str) -> str:
    return re.split(r"[\s\[<>=!~;(]", requirement, maxsplit=1)[0].lower().replace("_", "-")


def install_mb(distribution: str, base: set[str]) -> tuple[float, list[str]]:
    """MB that ``distribution`` and the dependencies not in ``base`` take once installed."""
    extra = sorted(_closure([distribution]) - base)
    size = 0
    for name in extra:
        for file in metadata.distribution(name).files or []:
            path = Path(str(file.locate()))
            size += path.stat().st_size if path.is_file() else 0
    return size / 1e6, extra


_LOAD = r"""
import re, sys, time
from bench.probes import maintext as m
def now():  # VmHWM, not ru_maxrss: a child's ru_maxrss starts at its parent's peak
    status = open("/proc/self/status").read()
    return time.process_time(), int(re.search(r"VmHWM:\s+(\d+)", status)[1]) / 1024
t0, rss0 = now()
table = m.EXTRACTORS if sys.argv[1] == "x" else m.DETECTORS
table[sys.argv[2]][1]()(sys.argv[3])
t1, rss1 = now()
print(t1 - t0, rss1 - rss0)
"""


def load_cost(kind: str, name: str, arg: str) -> str:
    """CPU and peak RSS added by importing a candidate and running it once, in a child process
    (after the probe's own imports)."""
    done = subprocess.run([sys.executable, "-c", _LOAD, kind, name, arg], capture_output=True)
    if done.returncode:
        return "failed"
    cpu, rss = (float(v) for v in done.stdout.split())
    return f"{cpu:.2f} s, +{rss:.0f} MB"


def cost_rows(table: dict[str, tuple[str, Callable[[], Fn]]], kind: str, arg: str) -> list[str]:
    base = _closure(_base_dependencies())
    rows = []
    for name, (distribution, _) in table.items():
        if distribution == "streamcrawl":
            continue  # its dependencies are the chosen candidates'
        try:
            metadata.distribution(distribution)
        except metadata.PackageNotFoundError:
            rows.append(f"| {name} | not installed | | |")
            continue
        mb, extra = install_mb(distribution, base)
        shown = ", ".join(extra) if len(extra) <= 6 else ", ".join(extra[:6]) + ", ..."
        rows.append(f"| {name} | {mb:.1f} | {shown} | {load_cost(kind, name, arg)} |")
    return rows


def hostile_rows() -> list[str]:
    """CPU s of Resiliparse's main-content pass on nested ``div``, and of ``main_text`` (if
    installed) on the shapes its bounds are for."""
    rows = []
    try:
        from resiliparse.extract.html2text import extract_plain_text
        from resiliparse.parse.html import HTMLTree
    except ImportError:
        return ["| Resiliparse | not installed |"]
    for depth in (2000, 4000, 8000):
        tree = HTMLTree.parse("<div>" * depth + "x" + "</div>" * depth)
        t0 = time.process_time()
        extract_plain_text(tree, main_content=True, comments=False)
        rows.append(f"| Resiliparse, {depth:,} nested div | {time.process_time() - t0:.3f} |")
    fn = load(EXTRACTORS)["streamcrawl main_text"]
    stack = "<div>" * 254 + "x " + "</div>" * 254  # at the depth bound with html and body
    paragraph = "<p>" + "word " * 200 + "</p>"
    shapes = {
        "100,000 nested div": "<div>" * 100_000 + "x" + "</div>" * 100_000,
        "1 M characters of stacks at the depth bound": stack * (1_000_000 // len(stack)),
        "10 MB of paragraphs": paragraph * (10_000_000 // len(paragraph)),
    }
    for name, html in shapes.items() if fn else ():
        t0 = time.process_time()
        safe(fn, html)
        rows.append(f"| main_text, {name} | {time.process_time() - t0:.3f} |")
    return rows


def site_pages(count: int) -> list[str]:
    spec = SiteSpec("", 1, count, 20000, 6, 0, count)
    writer = _PageWriter(spec, random.Random(6))
    return [writer.html(0, n) for n in range(count)]


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rounds", type=int, default=7, help="interleaved CPU rounds")
    ap.add_argument("--site-pages", type=int, default=40, help="synthetic pages for CPU")
    ap.add_argument("--no-load", action="store_true", help="skip the child processes")
    ap.add_argument("--json", type=Path, help="also write the per-page extracted texts here")
    args = ap.parse_args(argv)
    corpus = pages()
    heavy_corpus = [heavy(p) for p in corpus]
    _LANG_OF.update({p.html: p.lang for p in corpus + heavy_corpus})
    extractors, detectors = load(EXTRACTORS), load(DETECTORS)
    kb = statistics.fmean(len(p.html.encode()) for p in corpus) / 1024
    hkb = statistics.fmean(len(p.html.encode()) for p in heavy_corpus) / 1024
    print(f"{len(corpus)} labelled pages (mean {kb:.1f} KB; heavy {hkb:.1f} KB)\n")
    head = "| extractor | precision | recall | F1 | worst F1 (page) | errors |\n" + "|---" * 6 + "|"
    for label, labelled in (("corpus", corpus), ("heavy", heavy_corpus)):
        print(f"Extraction quality, {label}:\n\n{head}")
        print("\n".join(quality_rows(extractors, labelled)) + "\n")

    print("Extraction F1 by layout, corpus:\n")
    print("\n".join(layout_rows(extractors, corpus)) + "\n")
    body = extractors["whole body (selectolax)"]
    texts = {
        "article": [(p.expected, p.lang) for p in corpus],
        "first 100 chars": [(p.expected[:100], p.lang) for p in corpus],
        "first sentences": openings(corpus),
        "15 more languages": more_languages(),
        "whole page": [(safe(body, p.html) if body else "", p.lang) for p in corpus],
    }
    for name in LANGUAGE_ON:
        if fn := extractors.get(name):
            texts[f"{name} text"] = [(safe(fn, p.html), p.lang) for p in corpus]
    cols = " | ".join(f"{k} ({len(v)})" for k, v in texts.items())
    print(
        "Language, texts right and texts wrong (the rest: no answer):\n\n"
        + f"| detector | {cols} |\n|---|"
        + "---|" * len(texts)
    )
    print("\n".join(language_rows(detectors, texts)) + "\n")

    sets = {
        "corpus": [p.html for p in corpus],
        "heavy": [p.html for p in heavy_corpus],
        "bench site": site_pages(args.site_pages),
    }
    cols = " | ".join(sets)
    print(f"Extraction CPU, ms a page, median (min-max) of {args.rounds} interleaved rounds:\n")
    print(f"| extractor | {cols} |\n|---|" + "---|" * len(sets))
    print("\n".join(cpu_rows(extractors, sets, args.rounds)) + "\n")
    articles = {"article": [p.expected for p in corpus]}
    print("Language CPU, ms a page:\n\n| detector | article |\n|---|---|")
    print("\n".join(cpu_rows(detectors, articles, args.rounds)) + "\n")

    print("Hostile input, CPU s:\n\n| run | s |\n|---|---|")
    print("\n".join(hostile_rows()) + "\n")
    if not args.no_load:
        print("Install and load (import and one page, child process):\n")
        print(
            "| candidate | MB added | distributions added | load CPU, peak RSS |\n|---|---|---|---|"
        )
        print("\n".join(cost_rows(EXTRACTORS, "x", corpus[0].html)))
        print("\n".join(cost_rows(DETECTORS, "d", corpus[0].expected)))
    if args.json:
        found = {n: {p.name: safe(f, p.html) for p in corpus} for n, f in extractors.items() if f}
        args.json.write_text(json.dumps(found, ensure_ascii=False, indent=1), "utf-8")


if __name__ == "__main__":
    main()
