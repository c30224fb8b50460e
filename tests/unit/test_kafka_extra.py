"""The kafka extra (pyproject.toml): the Kafka commands name it in one line when it is missing,
and the names ``kafka_args`` checks are those the extra installs and the base does not.

tests/test_packaging.py installs the base for real; tests/unit/test_import_graph.py holds the
base commands' modules to importing nothing of the extra.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import re
import sys
import tomllib
from importlib.machinery import ModuleSpec
from pathlib import Path

import pytest

from streamcrawl.topology.cli import kafka_args
from streamcrawl.topology.cli.main import main

ROOT = Path(__file__).resolve().parents[2]

# One invocation of every Kafka command, with the arguments its parser requires.
COMMANDS = [
    ["worker"],
    ["render-worker"],
    ["seed", "http://127.0.0.1/"],
    ["pages"],
    ["status"],
    ["pause", "--crawl-id", "c"],
    ["resume", "--crawl-id", "c"],
    ["stop", "--crawl-id", "c"],
    ["recrawl", "--crawl-id", "c"],
    ["admin", "create-topics"],
    ["admin", "create-schema"],
    ["admin", "reshard", "--partitions", "4"],
    ["warc", "--out", "warcs"],
]


@pytest.fixture
def without_faust(monkeypatch: pytest.MonkeyPatch) -> None:
    """As if faust were not installed, and the Kafka commands' module could not be imported:
    a command that got past the check would fail with an ImportError, not the one line."""
    real = importlib.util.find_spec

    def find_spec(name: str, package: str | None = None) -> ModuleSpec | None:
        return None if name == "faust" else real(name, package)

    monkeypatch.setattr(importlib.util, "find_spec", find_spec)
    monkeypatch.delitem(sys.modules, "faust", raising=False)
    monkeypatch.setitem(sys.modules, "streamcrawl.topology.cli.kafka_commands", None)


@pytest.mark.parametrize("argv", COMMANDS, ids=" ".join)
def test_a_kafka_command_without_the_extra_says_what_to_install(
    argv: list[str], without_faust: None, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(argv) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert err == (
        f"streamcrawl: error: {argv[0]} needs the kafka extra (faust is not installed): "
        "pip install 'streamcrawl[kafka]'\n"
    )


def test_every_kafka_command_is_checked() -> None:
    assert {argv[0] for argv in COMMANDS} == set(kafka_args.KAFKA_COMMANDS)


def test_warc_index_needs_no_kafka_extra(
    without_faust: None, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["warc", "index", str(tmp_path)]) == 0
    assert capsys.readouterr() == ("", "")


def test_with_the_extra_installed_nothing_is_missing() -> None:
    assert kafka_args.missing_kafka_extra() is None
    import faust  # noqa: F401  (faust's module then has no __spec__: find_spec would raise)

    assert kafka_args.missing_kafka_extra() is None


def _names(requirements: list[str]) -> set[str]:
    """The normalized distribution names of PEP 508 requirement strings."""
    out = set()
    for requirement in requirements:
        match = re.match(r"[A-Za-z0-9._-]+", requirement)
        assert match, requirement
        out.add(re.sub(r"[-_.]+", "-", match.group()).lower())
    return out


def test_the_names_checked_are_installed_by_the_kafka_extra_only() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text("utf-8"))["project"]
    extras = project["optional-dependencies"]
    base, kafka = _names(project["dependencies"]), _names(extras["kafka"])
    providers = importlib.metadata.packages_distributions()
    for name in kafka_args.KAFKA_EXTRA:
        assert _names(providers[name]) & kafka, f"{name} is not installed by the kafka extra"
        assert not _names(providers[name]) & base, f"{name} is installed by the base"
    assert not base & kafka
    # [test] pulls every other extra: the tests run the Kafka wiring too.
    assert {f"streamcrawl[{extra}]" for extra in extras if extra != "test"} <= set(extras["test"])
