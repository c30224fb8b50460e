"""``streamcrawl plugin test NAME URL|FILE`` on the example plugins (``examples/plugins``, given
to the process by entry point): what it prints for a page read from a file and for a page
fetched from a local server (docs/plugins.md, "Testing a plugin")."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.httpserver import RecordingServer, html
from tests.integration.site import STREAMCRAWL
from tests.plugin_fixtures import example_plugins_env

pytestmark = pytest.mark.integration

PAGE = (
    "<title>Mug</title><p class=price>1.234,50 €</p><a href=/a>a</a>"
    "<a href='/facets?a=1&b=2&c=3&d=4'>facets</a>"
    '<script type="application/json">{"links": ["/listed", "https://other.test/x"]}</script>'
)


def plugin_test(tmp: Path, *args: str) -> list[dict[str, Any]]:
    """The JSON lines ``streamcrawl plugin test ARGS`` prints (it must exit 0)."""
    done = subprocess.run(
        [STREAMCRAWL, "plugin", "test", *args],
        env={**os.environ, **example_plugins_env(tmp)},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return [json.loads(line) for line in done.stdout.splitlines()]


def test_plugin_test_runs_each_example_plugin_on_a_file(tmp_path: Path) -> None:
    page = tmp_path / "page.html"
    page.write_text(f"<!doctype html><html><body>{PAGE}</body></html>", "utf-8")
    shop = "http://127.0.0.1/shop/"
    assert plugin_test(tmp_path, "price", str(page)) == [
        {"data": {"price": {"amount": 1234.5, "currency": "EUR", "raw": "1.234,50 €"}}}
    ]
    assert plugin_test(tmp_path, "json_links", str(page), "--url", shop) == [
        {
            "links": ["http://127.0.0.1/a", "http://127.0.0.1/facets?a=1&b=2&c=3&d=4",
                      "http://127.0.0.1/listed", "https://other.test/x"],
            "added": ["http://127.0.0.1/listed", "https://other.test/x"],
            "dropped": [],
        }
    ]  # fmt: skip
    refused = plugin_test(tmp_path, "max_query_params", str(page), "--args", '{"max": 0}')
    assert refused == [
        {"url": "http://127.0.0.1/page.html", "admitted": True, "reason": None}
    ]  # the URL a FILE stands for (--url) is the one asked about
    facets = plugin_test(tmp_path, "max_query_params", str(page), "--url", f"{shop}?q=1&p=2",
                         "--args", '{"max": 1}')  # fmt: skip
    assert facets == [
        {"url": f"{shop}?q=1&p=2", "admitted": False,
         "reason": "max_query_params: 2 query parameters, over 1"}
    ]  # fmt: skip


def test_plugin_test_fetches_a_local_url(tmp_path: Path) -> None:
    with RecordingServer({"/": html(PAGE), "/facets": html("<title>F</title>")}) as srv:
        price = plugin_test(tmp_path, "price", srv.url("/"), "--args", '{"currency": "USD"}')
        facets = plugin_test(tmp_path, "max_query_params", srv.url("/facets?a=1&b=2&c=3&d=4"))
        paths = srv.paths()
    assert price == [
        {"data": {"price": {"amount": 1234.5, "currency": "EUR", "raw": "1.234,50 €"}}}
    ]  # the page's € wins over the default currency
    assert facets == [
        {"url": srv.url("/facets?a=1&b=2&c=3&d=4"), "admitted": False,
         "reason": "max_query_params: 4 query parameters, over 3"}
    ]  # fmt: skip
    assert paths == ["/", "/facets?a=1&b=2&c=3&d=4"]
