"""agents.urls.canonical against the WHATWG URL Standard's conformance data (WPT urltestdata.json).

The data is not in the repository (fetched data is not committed): the test set-up takes it
from a package a registry serves. No PyPI or npm package ships a current copy (``whatwg-url``
on PyPI has a 2018 one; ``@wordpress/url`` a 326-case subset), so it comes from the ``url``
crate on crates.io, pinned below, which ships the standard's file as ``tests/urltestdata.json``:
``cargo metadata`` on a throw-away manifest downloads the crate into cargo's cache (once) and
says where it is. ``STREAMCRAWL_URLTESTDATA`` may name the file instead (offline machines).

For every case whose input or base is http(s): our crawl key of the input must equal our crawl
key of the URL browsers produce (``href``), and a case browsers reject must be rejected. So two
spellings a browser treats as one URL are one crawl key. The only differences allowed are the
deliberate ones listed in ``agents/urls/canonical.py``'s docstring, each matched by a rule here.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from streamcrawl.agents.errors import InvalidURL
from streamcrawl.agents.urls.canonical import canonicalize

URL_CRATE = "2.5.8"  # the url crate's version whose tests/urltestdata.json is the reference
# Our agreement on this data (cases where our key equals the browser's key, or both reject).
EXPECTED_AGREEMENT = (392, 423)
# The other cases, by deliberate difference: browsers accept them, we refuse them.
EXPECTED_DELIBERATE = {"userinfo": 25, "port 0": 2, "host not a DNS name": 4}


def _cargo() -> str:
    found = shutil.which("cargo") or str(Path.home() / ".cargo" / "bin" / "cargo")
    if not Path(found).exists():
        pytest.fail("cargo is needed to fetch the WPT URL data (or set STREAMCRAWL_URLTESTDATA)")
    return found


@pytest.fixture(scope="session")
def urltestdata(tmp_path_factory: pytest.TempPathFactory) -> list[dict[str, Any]]:
    override = os.environ.get("STREAMCRAWL_URLTESTDATA")
    if override:
        path = Path(override)
    else:
        project = tmp_path_factory.mktemp("wpt-url")
        (project / "src").mkdir()
        (project / "src" / "lib.rs").write_text("")
        (project / "Cargo.toml").write_text(
            '[package]\nname = "wpt-url-data"\nversion = "0.0.0"\nedition = "2021"\n'
            f'[dependencies]\nurl = "={URL_CRATE}"\n'
        )
        out = subprocess.run(
            [_cargo(), "metadata", "--format-version", "1", "--quiet"],
            cwd=project,
            check=True,
            capture_output=True,
            text=True,
            timeout=300,
        )
        packages = json.loads(out.stdout)["packages"]
        manifest = next(p["manifest_path"] for p in packages if p["name"] == "url")
        path = Path(manifest).parent / "tests" / "urltestdata.json"
    return [case for case in json.loads(path.read_text()) if isinstance(case, dict)]


def _http(case: dict[str, Any]) -> bool:
    if case.get("failure"):
        scheme = re.match(r"\s*([A-Za-z][A-Za-z0-9+.-]*):", case["input"])
        base = case.get("base") or ""
        return base.startswith(("http:", "https:")) or (
            scheme is not None and scheme.group(1).lower() in ("http", "https")
        )
    return case["protocol"] in ("http:", "https:")


def _key(url: str, base: str | None = None) -> str | None:
    try:
        return canonicalize(url, base).url
    except InvalidURL:
        return None


_DNS_LABEL = re.compile(r"[A-Za-z0-9_-]{1,63}")
_IPV4 = re.compile(r"[0-9]{1,3}(?:\.[0-9]{1,3}){3}")


def _deliberate(case: dict[str, Any]) -> str | None:
    """Which deliberate difference (agents/urls/canonical.py's docstring) explains a case we refuse
    although browsers accept it; None if none does."""
    if case.get("username") or case.get("password"):
        return "userinfo"
    if case.get("port") == "0":
        return "port 0"
    host = case["hostname"].removesuffix(".")
    if host.startswith("[") or _IPV4.fullmatch(host):
        return None
    if not all(_DNS_LABEL.fullmatch(label) for label in host.split(".")):
        return "host not a DNS name"
    return None


def test_agreement_with_the_url_standard(urltestdata: list[dict[str, Any]]) -> None:
    cases = [case for case in urltestdata if _http(case)]
    agree, unexplained = 0, []
    deliberate: Counter[str] = Counter()
    for case in cases:
        got = _key(case["input"], case.get("base"))
        if case.get("failure"):
            same = got is None
        else:
            want = _key(case["href"])
            reason = _deliberate(case) if want is None else None
            if reason is not None and got is None:
                deliberate[reason] += 1
                continue
            same = want is not None and got == want
        if same:
            agree += 1
        else:
            unexplained.append((case["input"], case.get("base"), case.get("href"), got))
    assert unexplained == []
    assert (agree, len(cases)) == EXPECTED_AGREEMENT
    assert deliberate == EXPECTED_DELIBERATE


def test_a_browser_accepted_url_we_refuse_is_refused_whole(
    urltestdata: list[dict[str, Any]],
) -> None:
    # A refused href is never "fixed" into another URL: its browser form is refused as well.
    for case in urltestdata:
        if _http(case) and not case.get("failure") and _deliberate(case) is not None:
            assert _key(case["input"], case.get("base")) is None
            assert _key(case["href"]) is None
