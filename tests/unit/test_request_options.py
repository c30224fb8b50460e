"""Request options, pure parts (docs/requests.md): which headers a crawl may send, how a spec's
options compile per origin, credentials held by the process, the proxy setting, and what one
dispatch's requests carry."""

from __future__ import annotations

import base64
from pathlib import Path

import pytest

from streamcrawl.agents.errors import ConfigError
from streamcrawl.agents.net.credentials import Credential, Credentials, parse_credential
from streamcrawl.agents.net.proxy import parse_proxy, proxy_setting
from streamcrawl.agents.net.request import SECRET_HEADERS, RequestContext
from streamcrawl.agents.policy.requests import (
    FORBIDDEN,
    RequestPlan,
    check_cookie,
    parse_header,
    parse_origin,
)
from streamcrawl.agents.policy.rules import CrawlRules
from streamcrawl.agents.urls.cookies import preset
from streamcrawl.schemas.records import (
    CookiePreset,
    CrawlPolicy,
    OriginAuth,
    RequestHeader,
)

A = "http://a.test"
B = "https://b.test"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("X-Team: blue", ("X-Team", "blue")),
        ("  X-Team  :  blue  ", ("X-Team", "blue")),
        ("Accept: text/html", ("Accept", "text/html")),
        ("X-Empty:", ("X-Empty", "")),
        ("X-Colons: a:b:c", ("X-Colons", "a:b:c")),
    ],
)
def test_a_header_parses(text: str, expected: tuple[str, str]) -> None:
    assert parse_header(text) == expected


@pytest.mark.parametrize("name", sorted(FORBIDDEN))
def test_each_forbidden_header_is_refused_with_its_reason(name: str) -> None:
    with pytest.raises(ConfigError, match=f"header {name.title()} cannot be set by a crawl: "):
        parse_header(f"{name.title()}: x")


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("no colon", "is not 'Name: value'"),
        ("Bad Name: x", "is not an HTTP token"),
        (": x", "is not an HTTP token"),
        ("X-A: one\r\nX-B: two", "must be one line"),
        ("X-A: " + "v" * 9000, "must be one line of at most 8192 characters"),
    ],
)
def test_a_malformed_header_is_one_line_error(text: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message) as caught:
        parse_header(text)
    assert "\n" not in str(caught.value)


@pytest.mark.parametrize(
    ("pair", "ok"),
    [("sid=abc", True), ("sid=", True), ("=abc", False), ("sid", False),
     ("sid=a;b", False), ("sid=a b", False), ('sid="a"', False), ("s d=a", False)],
)  # fmt: skip
def test_cookie_presets_follow_rfc_6265(pair: str, ok: bool) -> None:
    if ok:
        assert check_cookie(pair) == tuple(pair.split("=", 1))
    else:
        with pytest.raises(ConfigError):
            check_cookie(pair)


@pytest.mark.parametrize(
    ("text", "origin"),
    [("HTTP://A.test:80", A), ("https://b.test/", B), ("http://a.test:8080", A + ":8080")],
)
def test_an_origin_is_canonical(text: str, origin: str) -> None:
    assert parse_origin(text) == origin


@pytest.mark.parametrize("text", ["http://a.test/path", "ftp://a.test", "not a url"])
def test_an_origin_with_a_path_or_another_scheme_is_refused(text: str) -> None:
    with pytest.raises(ConfigError):
        parse_origin(text)


def policy(**fields: object) -> CrawlPolicy:
    return CrawlPolicy(crawl_id="c", seeds=(A + "/", B + "/"), **fields)  # type: ignore[arg-type]


def test_headers_compile_per_origin_the_origins_over_the_crawls() -> None:
    plan = RequestPlan.from_policy(
        policy(
            headers=(
                RequestHeader(name="X-All", value="1"),
                RequestHeader(name="accept", value="text/plain"),
                RequestHeader(name="X-All", value="2", origin=B),
                RequestHeader(name="X-B", value="b", origin=B),
            )
        )
    )
    a, b = plan.headers_for(A), plan.headers_for(B)
    assert a["X-All"] == "1" and "X-B" not in a
    assert a["accept"] == "text/plain" and "Accept" not in a  # replaced, whatever its case
    assert b["X-All"] == "2" and b["X-B"] == "b" and b["User-Agent"] == a["User-Agent"]
    assert plan.headers_for("http://other.test") is plan.common


def test_a_spec_from_another_producer_cannot_smuggle_a_forbidden_header() -> None:
    spec = policy(headers=(RequestHeader(name="Authorization", value="Bearer x"),))
    with pytest.raises(ConfigError, match="credentials never travel in a crawl spec"):
        CrawlRules.from_policy(spec)


@pytest.mark.parametrize(
    "fields",
    [
        {"headers": (RequestHeader(name="X", value="1", origin="http://else.test"),)},
        {"cookie_presets": (CookiePreset(origin="http://else.test", cookie="a=b"),)},
        {"auth": (OriginAuth(origin="http://else.test", credential="X"),)},
    ],
)
def test_an_option_for_an_origin_outside_the_scope_is_refused(fields: dict[str, object]) -> None:
    with pytest.raises(ConfigError, match="not a host this crawl fetches"):
        CrawlRules.from_policy(policy(**fields))


def test_two_credentials_for_one_origin_are_refused() -> None:
    auth = (OriginAuth(origin=A, credential="X"), OriginAuth(origin=A, credential="Y"))
    with pytest.raises(ConfigError, match=r"two credentials named for http://a\.test"):
        CrawlRules.from_policy(policy(auth=auth))


@pytest.mark.parametrize(
    ("text", "header", "value"),
    [
        ("basic:u:p:w", "Authorization", "Basic " + base64.b64encode(b"u:p:w").decode()),
        ("bearer:t0k3n", "Authorization", "Bearer t0k3n"),
        ("header:X-Api-Key: k3y", "X-Api-Key", "k3y"),
        ("BASIC:u:p\n", "Authorization", "Basic " + base64.b64encode(b"u:p").decode()),
    ],
)
def test_a_credential_value_names_its_form(text: str, header: str, value: str) -> None:
    credential = parse_credential("C", text)
    assert (credential.header, credential.value) == (header, value)
    assert value not in repr(credential) and "C" in repr(credential)


@pytest.mark.parametrize(
    "text", ["s3cret", "basic:s3cret", "bearer:", "header:s3cret", "xy:s3cret"]
)
def test_a_malformed_credential_never_quotes_its_value(text: str) -> None:
    with pytest.raises(ConfigError, match=r"\(STREAMCRAWL_CREDENTIAL_C\) is not one of") as caught:
        parse_credential("C", text)
    assert "s3cret" not in str(caught.value)


def test_credentials_come_from_the_environment_before_the_folder(tmp_path: Path) -> None:
    (tmp_path / "SITE").write_text("bearer:from-file\n")
    (tmp_path / "OTHER").write_text("bearer:other\n")
    creds = Credentials({"STREAMCRAWL_CREDENTIAL_SITE": "bearer:from-env"}, tmp_path)
    site, other = creds.get("SITE"), creds.get("OTHER")
    assert site is not None and site.value == "Bearer from-env"
    assert other is not None and other.value == "Bearer other"
    assert creds.get("MISSING") is None
    with pytest.raises(ConfigError, match="credential MISSING is not set on this process"):
        creds.require(["SITE", "MISSING"])


def test_a_credential_name_never_reaches_outside_the_folder(tmp_path: Path) -> None:
    (tmp_path / "secret").write_text("bearer:x")
    folder = tmp_path / "creds"
    folder.mkdir()
    assert Credentials({}, folder).get("../secret") is None


def test_a_proxy_setting_is_checked() -> None:
    proxy = parse_proxy("http://proxy.internal:3128", ["Example.com", ".b.test"])
    assert (proxy.host, proxy.port) == ("proxy.internal", 3128)
    assert proxy.route("http://a.test/") == "http://proxy.internal:3128"
    assert proxy.route("https://www.example.com/") is None
    assert proxy.route("https://b.test/") is None
    assert proxy.route("https://notb.test/") == proxy.url
    for bad in ("socks5://p:1", "http://u:p@p:1", "http://p:1/path", "https://p:1"):
        with pytest.raises(ConfigError):
            parse_proxy(bad)


def test_a_proxy_credential_must_be_held_and_basic() -> None:
    environ = {"STREAMCRAWL_CREDENTIAL_PX": "basic:u:pw0rd", "STREAMCRAWL_CREDENTIAL_T": "bearer:t"}
    creds = Credentials(environ)
    proxy = proxy_setting("http://p:1", "", "PX", creds)
    assert proxy is not None and proxy.auth is not None and proxy.auth.login == "u"
    assert "pw0rd" not in repr(proxy)
    with pytest.raises(ConfigError, match="must be basic"):
        proxy_setting("http://p:1", "", "T", creds)
    with pytest.raises(ConfigError, match="proxy's credential NOPE is not set"):
        proxy_setting("http://p:1", "", "NOPE", creds)
    with pytest.raises(ConfigError, match="no proxy"):
        proxy_setting(None, "", "PX", creds)


def context(**fields: object) -> RequestContext:
    return RequestContext(origin=A, headers={"User-Agent": "ua"}, **fields)  # type: ignore[arg-type]


def test_the_credential_goes_to_its_origin_only() -> None:
    ctx = context(credential=Credential("C", "Authorization", "Bearer t"))
    assert ctx.headers_for(A + "/x")["Authorization"] == "Bearer t"
    assert ctx.headers_for("http://A.TEST:80/y")["Authorization"] == "Bearer t"
    for elsewhere in ("http://a.test:8080/", "https://a.test/", "http://b.a.test/", "mailto:x"):
        assert "Authorization" not in ctx.headers_for(elsewhere), elsewhere


def test_the_jar_sends_and_keeps_cookies_of_its_origin() -> None:
    ctx = context(jar=(preset(A, "sid=1"),))
    assert ctx.headers_for(A + "/")["Cookie"] == "sid=1"
    assert "Cookie" not in context().headers_for(A + "/")  # no jar: no cookies
    assert "Cookie" not in context(jar=()).headers_for(A + "/")


def test_secret_headers_include_a_header_credentials_name() -> None:
    assert context().secret_headers() == SECRET_HEADERS
    api = context(credential=Credential("K", "X-Api-Key", "k"))
    assert api.secret_headers() == SECRET_HEADERS | {"x-api-key"}
