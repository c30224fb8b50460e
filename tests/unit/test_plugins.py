"""Crawl plugins compiled from a spec (``agents/plugins``, docs/plugins.md): found by name in
a registry, their arguments checked by their own schema, in the crawl's order; a bad name or
argument is one line at ``crawl``/``seed`` (exit 2, nothing published)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from streamcrawl.agents.errors import ConfigError
from streamcrawl.agents.plugins.api import PageView
from streamcrawl.agents.plugins.chain import compile_plugins
from streamcrawl.agents.plugins.registry import EntryPoints, PluginMissing, Table
from streamcrawl.agents.policy.rules import CrawlRules
from streamcrawl.schemas.records import MAX_DATA_BYTES, CrawlPolicy, Extractor, PluginSpec
from streamcrawl.topology.cli.main import build_parser
from streamcrawl.topology.cli.options import policy_from_args
from tests.plugin_fixtures import PLUGINS, registry

URL = "https://example.org/"
STREAMCRAWL = str(Path(sys.executable).parent / "streamcrawl")


def test_a_missing_plugin_is_one_line_naming_the_installed_ones() -> None:
    with pytest.raises(PluginMissing) as caught:
        compile_plugins(
            [PluginSpec(name="nope")], Table({"b": PLUGINS["heading"], "a": PLUGINS["raises"]})
        )
    assert str(caught.value) == "plugin nope is not installed (installed: a, b; docs/plugins.md)"
    assert isinstance(caught.value, ConfigError)


def test_a_worker_without_the_plugin_carries_it_as_missing() -> None:
    specs = [PluginSpec(name="heading"), PluginSpec(name="nope")]
    plugins = compile_plugins(specs, registry(), missing_ok=True)
    assert plugins.missing == "missing_plugin: nope is not installed in this worker"
    assert [p.name for p in plugins.page_extractors] == ["heading"]


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        (PluginSpec(name="no_word", args={"word": 3}), "no_word: bad arguments: Expected `str`"),
        (PluginSpec(name="no_word"), "no_word: bad arguments: Object missing required field"),
        (PluginSpec(name="no_word", args={"word": "x", "y": 1}), "contains unknown field `y`"),
        (PluginSpec(name="heading", args={"x": 1}), "plugin heading takes no arguments"),
        (PluginSpec(name="no_word", args={"word": "x" * 9000}), "arguments are over 8192 bytes"),
    ],
)  # fmt: skip
def test_arguments_the_plugin_refuses_are_one_line(spec: PluginSpec, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        compile_plugins([spec], registry())


def test_a_name_given_twice_or_an_extractors_is_refused() -> None:
    with pytest.raises(ConfigError, match="given twice"):
        compile_plugins([PluginSpec(name="heading")] * 2, registry())
    policy = CrawlPolicy(
        crawl_id="c",
        extract=(Extractor(name="heading", selector="h1"),),
        plugins=(PluginSpec(name="heading"),),
    )
    with pytest.raises(ConfigError, match="an extractor's name"):
        CrawlRules.from_policy(policy, registry())


def test_the_rules_hold_the_plugins_by_kind_in_the_spec_order() -> None:
    specs = (
        PluginSpec(name="heading"),
        PluginSpec(name="no_word", args={"word": "a"}),
        PluginSpec(name="raises"),
    )
    rules = CrawlRules.from_policy(CrawlPolicy(crawl_id="c", plugins=specs), registry())
    assert [p.name for p in rules.plugins.page_extractors] == ["heading", "raises"]
    assert [p.name for p in rules.plugins.url_filters] == ["no_word"]
    assert rules.plugins.check("https://a.example/x", 0, "link") == "no_word: has a"


def test_a_page_extractors_object_over_the_data_bound_is_left_out() -> None:
    class Big:
        def extract(self, page: PageView) -> dict[str, object]:
            return {"x": "y" * MAX_DATA_BYTES}

    from streamcrawl.agents.plugins.api import Plugin

    table = Table({"big": Plugin("page_extractor", Big)})
    plugins = compile_plugins([PluginSpec(name="big")], table)
    view = PageView(URL, 200, {}, "", None, URL, None)
    errors: list[str] = []
    assert plugins.extract(view, {"t": "x"}, errors) == {"t": "x", "_truncated": True}
    assert errors == ["big: its object does not fit in the page's data, MAX_DATA_BYTES"]


def test_an_instance_without_its_kinds_method_is_refused() -> None:
    from streamcrawl.agents.plugins.api import Plugin

    table = Table({"odd": Plugin("url_filter", lambda: object())})
    with pytest.raises(ConfigError, match="its url_filter lacks the method"):
        compile_plugins([PluginSpec(name="odd")], table)


@pytest.mark.parametrize("command", ["crawl", "seed"])
def test_the_plugin_flag_keeps_its_order_and_arguments(command: str) -> None:
    flags = ["--plugin", "heading", "--plugin", 'no_word={"word": "x"}']
    args = build_parser().parse_args([command, URL, *flags])
    policy = policy_from_args(args, [URL], "c1", registry())
    assert policy.plugins == (
        PluginSpec(name="heading"),
        PluginSpec(name="no_word", args={"word": "x"}),
    )


@pytest.mark.parametrize(
    ("flag", "message"),
    [
        ("bad name", "plugin name 'bad name' must be"),
        ("x={", "plugin x: its arguments are not JSON"),
        ("x=[1]", "plugin x: its arguments must be a JSON object"),
    ],
)
def test_a_malformed_plugin_flag_is_refused_by_the_parser(
    flag: str, message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit):
        build_parser().parse_args(["crawl", URL, "--plugin", flag])
    assert message in capsys.readouterr().err


@pytest.mark.parametrize("command", ["crawl", "seed"])
def test_an_unknown_plugin_exits_2_with_one_line_and_publishes_nothing(
    command: str, tmp_path: Path
) -> None:
    # seed would need a broker to publish: an unreachable one shows nothing was tried
    env = {"PATH": "/usr/bin:/bin", "STREAMCRAWL_KAFKA_BOOTSTRAP": "127.0.0.1:1"}
    done = subprocess.run(
        [STREAMCRAWL, command, "http://127.0.0.1:1/", "--plugin", "nope", "--out", str(tmp_path)]
        if command == "crawl"
        else [STREAMCRAWL, command, "http://127.0.0.1:1/", "--plugin", "nope"],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=False,
    )
    assert done.returncode == 2
    assert done.stderr.splitlines() == [
        "streamcrawl: error: plugin nope is not installed (installed: none; docs/plugins.md)"
    ]


def test_the_installed_registry_reads_the_entry_point_group() -> None:
    """Nothing in this environment declares a plugin: the group is read and found empty."""
    points = EntryPoints()
    assert points.names() == []
    with pytest.raises(PluginMissing, match="installed: none"):
        points.get("price")
