"""docs/architecture.md stays true to itself and to the code on what a test can check.

- Its contents list is its headings: every ``##``/``###`` heading is listed, at its level, in
  order, under the anchor GitHub gives it, and the list names no heading that does not exist
  (so is docs/performance.md's).
- The schema version it states is ``SCHEMA_VERSION``: the doc names the current schema files
  once, as ``schemas/json/<topic>.v<N>.schema.json``, and N is the version the records carry.
- Every link into a heading of a doc (``architecture.md#...``, ``performance.md#...``, from any
  Markdown file of the repository) lands on a heading that exists.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from streamcrawl.schemas.records import SCHEMA_VERSION, WIRE_RECORDS

ROOT = Path(__file__).resolve().parents[2]
ARCHITECTURE = ROOT / "docs" / "architecture.md"
DOCS_WITH_CONTENTS = ("architecture.md", "performance.md")

Entry = tuple[int, str, str]  # level (2: ##, 3: ###), title, anchor

_HEADING = re.compile(r"^(#{1,6})\s+(.+?)\s*$")
_LISTED = re.compile(r"^(\s*)(?:\d+\.|-)\s+\[(.+)\]\(#([^)\s]+)\)\s*$")
_SCHEMA_FILES = re.compile(r"`schemas/json/<topic>\.v(\d+)\.schema\.json`")
_LINK = re.compile(r"\]\(([^()\s#]*\.md)?#([^)\s]+)\)")


def slug(title: str) -> str:
    """The anchor GitHub gives a heading: lowercase, punctuation but ``-`` and ``_`` dropped,
    each space a hyphen (``The frontier's state`` -> ``the-frontiers-state``)."""
    return re.sub(r"[^\w\- ]", "", title.strip().lower()).replace(" ", "-")


def _outside_code(text: str) -> list[str]:
    """The lines of ``text`` that are not inside a fenced code block."""
    lines, fenced = [], False
    for line in text.splitlines():
        if line.startswith("```"):
            fenced = not fenced
        elif not fenced:
            lines.append(line)
    return lines


def headings(text: str, levels: range = range(2, 4)) -> list[Entry]:
    """Every heading of ``text`` at ``levels`` (by default ``##`` and ``###``), with its anchor
    (GitHub numbers a repeated one: ``-1``, ``-2``...)."""
    out: list[Entry] = []
    used: set[str] = set()
    for line in _outside_code(text):
        m = _HEADING.match(line)
        if m is None:
            continue
        anchor = base = slug(m.group(2))
        n = 0
        while anchor in used:
            n += 1
            anchor = f"{base}-{n}"
        used.add(anchor)
        if len(m.group(1)) in levels:
            out.append((len(m.group(1)), m.group(2), anchor))
    return out


def contents(text: str) -> list[Entry]:
    """The entries of the ``**Contents**`` list: a top-level item is a ``##`` heading, an
    indented one a ``###``."""
    lines = _outside_code(text)
    start = lines.index("**Contents**")
    out: list[Entry] = []
    for line in lines[start + 1 :]:
        if line.startswith("## "):
            break
        m = _LISTED.match(line)
        if m is not None:
            out.append((3 if m.group(1) else 2, m.group(2), m.group(3)))
    return out


def contents_problems(text: str) -> list[str]:
    """What the contents list gets wrong: a heading it misses, an entry with no heading, an
    entry out of order, at the wrong level or under another anchor."""
    listed, found = contents(text), headings(text)
    listed_titles = {title for _, title, _ in listed}
    found_titles = {title for _, title, _ in found}
    problems = [
        f"heading not in the contents: {t!r}" for _, t, _ in found if t not in listed_titles
    ]
    problems += [f"listed, no such heading: {t!r}" for _, t, _ in listed if t not in found_titles]
    if not problems:
        problems += [
            f"contents entry {i + 1} is {entry}, the heading is {heading}"
            for i, (entry, heading) in enumerate(zip(listed, found, strict=True))
            if entry != heading
        ]
    return problems


@pytest.mark.parametrize("name", DOCS_WITH_CONTENTS)
def test_the_contents_list_is_the_headings(name: str) -> None:
    assert contents_problems((ROOT / "docs" / name).read_text("utf-8")) == []


def test_the_contents_check_finds_a_missing_and_a_phantom_heading() -> None:
    doc = (
        "# Title\n\n**Contents**\n\n"
        "1. [One](#one)\n"
        "   - [Sub, listed](#sub-listed)\n"
        "2. [Gone](#gone)\n\n"
        "## One\n\n### Sub, listed\n\n```\n## not a heading\n```\n\n## Two's turn\n"
    )
    assert contents_problems(doc) == [
        'heading not in the contents: "Two\'s turn"',
        "listed, no such heading: 'Gone'",
    ]
    wrong_anchor = doc.replace("2. [Gone](#gone)", "2. [Two's turn](#twos-turns)")
    assert contents_problems(wrong_anchor) == [
        "contents entry 3 is (2, \"Two's turn\", 'twos-turns'), "
        "the heading is (2, \"Two's turn\", 'twos-turn')"
    ]
    right = doc.replace("2. [Gone](#gone)", "2. [Two's turn](#twos-turn)")
    assert contents_problems(right) == []


def stated_schema_versions(text: str) -> list[int]:
    """The versions of every mention of the current schema files,
    ``schemas/json/<topic>.v<N>.schema.json``."""
    return [int(n) for n in _SCHEMA_FILES.findall(text)]


def test_the_doc_states_the_schema_version_of_the_records() -> None:
    stated = stated_schema_versions(ARCHITECTURE.read_text("utf-8"))
    assert stated == [SCHEMA_VERSION], (
        "docs/architecture.md must name the current schema files once, as "
        f"`schemas/json/<topic>.v{SCHEMA_VERSION}.schema.json` (SCHEMA_VERSION)"
    )
    for topic in WIRE_RECORDS:  # the files it names are there
        assert (ROOT / "schemas" / "json" / f"{topic}.v{SCHEMA_VERSION}.schema.json").exists()


def test_the_schema_version_is_read_from_the_marked_sentence() -> None:
    text = "Schemas: `schemas/json/<topic>.v3.schema.json`, generated; v4 = v3 plus revisits."
    assert stated_schema_versions(text) == [3]
    assert stated_schema_versions("no schema files named here, only v5") == []


def _markdown_files() -> list[Path]:
    skip = {".git", ".venv", "node_modules", "build"}
    return sorted(p for p in ROOT.rglob("*.md") if not skip & set(p.relative_to(ROOT).parts))


def broken_links(root: Path, files: list[Path]) -> list[str]:
    """``file: link`` for every Markdown link to a heading of a Markdown file (another, or
    its own) whose anchor no heading of that file has; ``file`` relative to ``root``."""
    anchors: dict[Path, set[str]] = {}
    broken = []
    for path in files:
        for m in _LINK.finditer(path.read_text("utf-8")):
            target = (path.parent / m.group(1)).resolve() if m.group(1) else path
            where = f"{path.relative_to(root)}: {m.group(0)}"
            if not target.exists():
                broken.append(f"{where} (no such file)")
                continue
            if target not in anchors:
                found = headings(target.read_text("utf-8"), range(1, 7))
                anchors[target] = {anchor for _, _, anchor in found}
            if m.group(2) not in anchors[target]:
                broken.append(where)
    return broken


def test_links_to_headings_resolve() -> None:
    assert broken_links(ROOT, _markdown_files()) == []


def test_a_link_to_a_missing_heading_is_found(tmp_path: Path) -> None:
    doc = tmp_path / "doc.md"
    doc.write_text("# Doc\n\n## A heading\n\n[ok](#a-heading), [not](#a-headline)\n")
    other = tmp_path / "other.md"
    other.write_text("[ok](doc.md#a-heading) [bad](doc.md#gone) [none](missing.md#x)\n")
    assert broken_links(tmp_path, [doc, other]) == [
        "doc.md: ](#a-headline)",
        "other.md: ](doc.md#gone)",
        "other.md: ](missing.md#x) (no such file)",
    ]
