"""docs/cli.md documents every command and flag of ``streamcrawl``, and no flag it lacks.

The parser is built as ``streamcrawl`` builds it (``main.build_parser``, sub-parsers included).
The page's convention, which the parsing below reads: a ``##`` or ``###`` heading names the
commands its tables apply to, each as backticked ``streamcrawl ...`` (a heading that names none
applies to its parent's), and a heading that starts with them is their own section; a table row
documents the flags (and the positional choices, such as ``admin create-topics``) that are
backticked in its first cell.
"""

from __future__ import annotations

import argparse
import re
from pathlib import Path

import pytest

from streamcrawl.topology.cli import main as cli

DOC = Path(__file__).resolve().parents[2] / "docs" / "cli.md"
HEADING = re.compile(r"^(#{2,6}) (.*)$")
COMMAND = re.compile(r"`streamcrawl((?: [a-z][a-z-]*)*)`")
OWN = re.compile(r"^(?:`streamcrawl[^`]*`(?:, | and )?)+")  # the commands a heading starts with
CODE = re.compile(r"`([^`]+)`")

Names = dict[str, set[str]]  # command ("" is `streamcrawl` itself, "warc index"...) -> names


def parser_names() -> Names:
    """Every command of the parser, with its option strings and its positionals' choices."""
    names: Names = {}

    def walk(parser: argparse.ArgumentParser, command: str) -> None:
        own = names.setdefault(command, set())
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for name, sub in action.choices.items():
                    walk(sub, f"{command} {name}".strip())
            elif isinstance(action, argparse._HelpAction):
                continue
            elif action.option_strings:
                own.update(action.option_strings)
            elif action.choices is not None:
                own.update(str(choice) for choice in action.choices)

    walk(cli.build_parser(), "")
    return names


def rows(text: str) -> list[tuple[frozenset[str], str]]:
    """(the commands a row applies to, the row) for every table row of the page."""
    out: list[tuple[frozenset[str], str]] = []
    scopes: list[tuple[int, frozenset[str]]] = []  # the enclosing headings: level, commands
    for line in text.splitlines():
        heading = HEADING.match(line)
        if heading:
            level = len(heading.group(1))
            while scopes and scopes[-1][0] >= level:
                scopes.pop()
            named = frozenset(c.strip() for c in COMMAND.findall(heading.group(2)))
            scopes.append((level, named or (scopes[-1][1] if scopes else frozenset())))
        elif line.startswith("|") and scopes:
            out.append((scopes[-1][1], line))
    return out


def documented(row: str) -> set[str]:
    """The flags and choices backticked in a row's first cell (``--out DIR`` -> ``--out``)."""
    first = row.split("|")[1]
    return {code.split()[0] for code in CODE.findall(first)}


def doc_names(text: str) -> tuple[set[str], Names]:
    """The commands that have a section of their own, and what the rows document for each."""
    headed: set[str] = set()
    for line in text.splitlines():
        heading = HEADING.match(line)
        own = OWN.match(heading.group(2)) if heading else None
        if own:
            headed.update(c.strip() for c in COMMAND.findall(own.group(0)))
    names: Names = {}
    for commands, row in rows(text):
        for command in commands:
            names.setdefault(command, set()).update(documented(row))
    return headed, names


def missing(names: Names, elsewhere: Names) -> list[str]:
    """``command: flag`` of each of ``names`` that ``elsewhere`` lacks."""
    return sorted(
        f"{command or 'streamcrawl'}: {name}"
        for command, own in names.items()
        for name in own - elsewhere.get(command, set())
    )


@pytest.fixture(scope="module")
def text() -> str:
    return DOC.read_text("utf-8")


def test_every_command_has_a_section(text: str) -> None:
    headed, _ = doc_names(text)
    parser = parser_names()
    assert sorted(set(parser) - headed) == []
    assert sorted(headed - set(parser)) == [], "docs/cli.md names commands the parser lacks"


def test_every_flag_of_every_command_is_documented(text: str) -> None:
    _, doc = doc_names(text)
    assert missing(parser_names(), doc) == []


def test_no_flag_is_documented_that_the_parser_lacks(text: str) -> None:
    _, doc = doc_names(text)
    assert missing(doc, parser_names()) == []


def test_every_flag_row_says_its_default_and_what_it_does(text: str) -> None:
    for _, row in rows(text):
        cells = [cell.strip() for cell in row.strip().strip("|").split("|")]
        flags = {name for name in documented(row) if name.startswith("-")}
        if flags:
            assert len(cells) == 3 and all(cells), f"flag | default | what: {row}"


def test_removing_any_flag_row_is_caught(text: str) -> None:
    """One row per flag and command: drop any row and some flag is undocumented."""
    parser = parser_names()
    lines = text.splitlines()
    flag_rows = [i for i, line in enumerate(lines) if line.startswith("|") and documented(line)]
    assert len(flag_rows) > 50
    for i in flag_rows:
        _, doc = doc_names("\n".join(lines[:i] + lines[i + 1 :]))
        assert missing(parser, doc), f"nothing is missing without: {lines[i]}"
