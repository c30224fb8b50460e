"""agents.urls.cookies: a table per RFC 6265 rule, the stored record, Hypothesis properties."""

from __future__ import annotations

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streamcrawl.agents.urls.cookies import (
    MAX_AGE,
    MAX_COOKIES,
    header_for,
    parse_date,
    preset,
    prune,
    receive,
)
from streamcrawl.schemas.records import Cookie

T = 1623233894.0  # Wed, 09 Jun 2021 10:18:14 GMT
HTTP = "http://example.com/"
HTTPS = "https://example.com/"


def jar_of(*lines: str | tuple[str, str], start: float = T) -> tuple[Cookie, ...]:
    """The jar after each Set-Cookie line (from ``HTTP`` unless a (line, url) pair), one second
    apart from ``start``."""
    jar: tuple[Cookie, ...] = ()
    for offset, item in enumerate(lines):
        line, url = (item, HTTP) if isinstance(item, str) else item
        jar = receive(jar, line, url, start + offset)
    return jar


def sent(lines: list[str | tuple[str, str]], url: str, at: float = T + 100) -> str | None:
    return header_for(jar_of(*lines), url, at)


# (Set-Cookie lines, request URL, Cookie header expected)
Case = tuple[list[str | tuple[str, str]], str, str | None]

HOSTS: list[Case] = [
    (["a=1"], "http://example.com/", "a=1"),
    (["a=1"], "http://example.com:8080/x", "a=1"),  # a cookie has no port
    (["a=1"], "http://www.example.com/", None),  # host-only: the exact host
    (["a=1"], "http://example.org/", None),
    (["a=1; Domain=example.com"], "http://example.com/", "a=1"),
    ([("a=1; Domain=example.com", "http://www.example.com/")], "http://example.com/", "a=1"),
    ([("a=1; Domain=example.com", "http://www.example.com/")], "http://x.y.example.com/", "a=1"),
    ([("a=1; Domain=example.com", "http://www.example.com/")], "http://badexample.com/", None),
    (["a=1; Domain=.EXAMPLE.com"], "http://sub.example.com/", "a=1"),  # dot and case dropped
    (["a=1; Domain=example.com."], "http://sub.example.com/", "a=1"),
    (["a=1; Domain=..example.com"], "http://example.com/", None),  # not a host: ignored
    (["a=1; Domain="], "http://example.com/", "a=1"),  # empty: the attribute is ignored
    (["a=1; Domain="], "http://www.example.com/", None),
    (["a=1; Domain=other.com; Domain=example.com"], "http://x.example.com/", "a=1"),  # last one
    # a Domain the host does not domain-match: the cookie is ignored
    (["a=1; Domain=other.com"], "http://example.com/", None),
    (["a=1; Domain=other.com"], "http://other.com/", None),
    (["a=1; Domain=www.example.com"], "http://www.example.com/", None),
    (["a=1; Domain=ample.com"], "http://ample.com/", None),
    # a public suffix: ignored, unless it is the host itself (then host-only)
    ([("a=1; Domain=co.uk", "http://example.co.uk/")], "http://example.co.uk/", None),
    ([("a=1; Domain=com", "http://example.com/")], "http://example.com/", None),
    ([("a=1; Domain=github.io", "https://me.github.io/")], "https://me.github.io/", None),
    ([("a=1; Domain=github.io", "https://github.io/")], "https://github.io/", "a=1"),
    ([("a=1; Domain=github.io", "https://github.io/")], "https://me.github.io/", None),
    ([("a=1; Domain=example.co.uk", "http://a.example.co.uk/")], "http://example.co.uk/", "a=1"),
    # IP addresses match only themselves
    ([("a=1; Domain=127.0.0.1", "http://127.0.0.1:8001/")], "http://127.0.0.1/", "a=1"),
    ([("a=1; Domain=0.0.1", "http://127.0.0.1/")], "http://127.0.0.1/", None),
    ([("a=1", "http://[::1]:8001/")], "http://[0::1]/", "a=1"),
    ([("a=1", "http://[::1]/")], "http://[::2]/", None),
]

PATHS: list[Case] = [
    # the default path: the request's up to its last "/"
    ([("a=1", "http://example.com/dir/page")], "http://example.com/dir/other", "a=1"),
    ([("a=1", "http://example.com/dir/page")], "http://example.com/dir", "a=1"),
    ([("a=1", "http://example.com/dir/page")], "http://example.com/dirx", None),
    ([("a=1", "http://example.com/dir/page")], "http://example.com/", None),
    ([("a=1", "http://example.com/dir/")], "http://example.com/dir/x", "a=1"),
    ([("a=1", "http://example.com/page")], "http://example.com/", "a=1"),
    ([("a=1", "http://example.com")], "http://example.com/any", "a=1"),
    ([("a=1; Path=docs", "http://example.com/d/p")], "http://example.com/d/q", "a=1"),
    ([("a=1; Path=", "http://example.com/d/p")], "http://example.com/e", None),
    # a Path attribute: the path itself and below it as a directory
    (["a=1; Path=/docs"], "http://example.com/docs", "a=1"),
    (["a=1; Path=/docs"], "http://example.com/docs/x", "a=1"),
    (["a=1; Path=/docs"], "http://example.com/docsx", None),
    (["a=1; Path=/docs"], "http://example.com/", None),
    (["a=1; Path=/docs/"], "http://example.com/docs/x", "a=1"),
    (["a=1; Path=/docs/"], "http://example.com/docs", None),
    (["a=1; Path=/x"], "http://example.com/x?y=1", "a=1"),
    (["a=1; Path=/x"], "http://example.com/?/x", None),  # the query is not the path
    (["a=1; Path=/docs; Path=/"], "http://example.com/", "a=1"),  # the last one
]

SECURE: list[Case] = [
    ([("a=1; Secure", HTTPS)], HTTPS, "a=1"),
    ([("a=1; Secure", HTTPS)], HTTP, None),  # sent over https only
    ([("a=1; secure", HTTP)], HTTPS, None),  # an http response cannot set a Secure cookie
    ([("a=1; Secure", HTTPS), ("a=2", HTTP)], HTTPS, "a=1"),  # ... nor replace one
    ([("a=1; Secure", HTTPS), ("a=2", HTTP)], HTTP, None),
    ([("a=1; Secure", HTTPS), ("a=2; Path=/x", HTTP)], "http://example.com/x", None),  # shadow
    ([("a=1; Secure; Path=/x", HTTPS), ("a=2", HTTP)], HTTP, "a=2"),  # a path above it
    ([("a=1; Secure", HTTPS), ("b=2", HTTP)], HTTP, "b=2"),
    ([("a=1; Secure", HTTPS), ("a=2", HTTPS)], HTTP, "a=2"),  # https may replace it
]

DATE = "Wed, 09 Jun 2021 10:20:14 GMT"  # T + 120
FAR = "Fri, 01 Jan 2100 00:00:00 GMT"
PAST = "Thu, 01 Jan 1970 00:00:00 GMT"
# (Set-Cookie lines, when the request is made, header expected); lines set from T on, 1 s apart
EXPIRY: list[tuple[list[str], float, str | None]] = [
    (["a=1"], T + 10**9, "a=1"),  # a session cookie lasts the crawl
    (["a=1; Max-Age=100"], T + 99, "a=1"),
    (["a=1; Max-Age=100"], T + 100, None),
    (["a=1; Max-Age=007"], T + 6, "a=1"),
    ([f"a=1; Expires={DATE}"], T + 119, "a=1"),
    ([f"a=1; Expires={DATE}"], T + 120, None),
    ([f"a=1; Max-Age=10; Expires={FAR}"], T + 10, None),  # Max-Age wins, in either order
    ([f"a=1; Expires={FAR}; Max-Age=10"], T + 10, None),
    ([f"a=1; Expires={DATE}; Expires=soon"], T + 120, None),  # an invalid one is ignored
    (["a=1; Max-Age=1x"], T + 10**9, "a=1"),  # invalid: ignored, a session cookie
    (["a=1; Max-Age=-"], T + 10**9, "a=1"),
    (["a=1; Max-Age=+5"], T + 10**9, "a=1"),
    (["a=1; Expires=tomorrow"], T + 10**9, "a=1"),
    (["a=1; Max-Age=999999999999"], T + MAX_AGE - 1, "a=1"),  # at most 400 days
    (["a=1; Max-Age=999999999999"], T + MAX_AGE, None),
    (["a=1; Max-Age=" + "9" * 5000], T + MAX_AGE - 1, "a=1"),
    ([f"a=1; Expires={FAR}"], T + MAX_AGE, None),
    # deletion: an expiry in the past removes the cookie of the same name, domain and path
    (["a=1; Max-Age=0"], T + 1, None),
    (["a=1", "a=1; Max-Age=0"], T + 2, None),
    (["a=1", "a=; Max-Age=-5"], T + 2, None),
    (["a=1", f"a=1; Expires={PAST}"], T + 2, None),
    (["a=1", "a=1; Max-Age=0; Path=/x"], T + 2, "a=1"),  # another path: another cookie
    (["a=1", "b=1; Max-Age=0"], T + 2, "a=1"),
]

PREFIXES: list[Case] = [
    ([("__Secure-a=1; Secure", HTTPS)], HTTPS, "__Secure-a=1"),
    ([("__Secure-a=1", HTTPS)], HTTPS, None),
    ([("__secure-a=1", HTTPS)], HTTPS, None),  # matched case-insensitively
    ([("__Host-a=1; Secure; Path=/", HTTPS)], HTTPS, "__Host-a=1"),
    ([("__Host-a=1; Secure; Path=/", "https://example.com/d/p")], HTTPS, "__Host-a=1"),
    ([("__Host-a=1; Secure; Path=/", HTTPS)], "https://www.example.com/", None),
    ([("__Host-a=1; Secure", HTTPS)], HTTPS, None),  # no Path attribute
    ([("__Host-a=1; Secure; Path=/x", HTTPS)], "https://example.com/x", None),
    ([("__Host-a=1; Secure; Path=/; Domain=example.com", HTTPS)], HTTPS, None),
    ([("__HOST-a=1; Path=/", HTTPS)], HTTPS, None),  # no Secure
]

MALFORMED = [
    "",
    "novalue",
    "=value",
    "  =value",
    ";a=1",
    "a=1\x00",
    "a=1\r\nX-Injected: 1",
    "a=\x7f",
    "a=\udcff",  # an undecodable byte of the header
    "a=1; Path=/\x01",
    "a=" + "x" * 4084,  # name, value, domain and path over 4096 bytes
    "a=" + "é" * 2042,
    "a=1; x=" + "y" * (8193 - len("a=1; x=")),  # the line over 8192 bytes
]

PARSED: list[Case] = [
    (["  a  =  1  ; Path = /x "], "http://example.com/x", "a=1"),  # spaces and tabs dropped
    (["a=1\t;\tPath\t=\t/x\t"], "http://example.com/y", None),
    (["a=1\t;\tPath\t=\t/x\t"], "http://example.com/x", "a=1"),
    (['a="b c"'], HTTP, 'a="b c"'),  # quotes are part of the value
    (["a=b=c"], HTTP, "a=b=c"),
    (["a="], HTTP, "a="),  # an empty value
    (["a=1; SameSite=Strict; Partitioned; Priority=High; foo"], HTTP, "a=1"),
    (["a=1; HttpOnly"], HTTP, "a=1"),  # HttpOnly does not stop an HTTP request
    (["a=" + "x" * 4083], HTTP, "a=" + "x" * 4083),  # 4096 bytes with domain and path
    (["a=1; x=" + "y" * (8192 - len("a=1; x="))], HTTP, "a=1"),  # 8192 bytes
    (["a=1", "b=2; Path=/x", "c=3; Path=/x/y"], "http://example.com/x/y", "c=3; b=2; a=1"),
    (["b=2", "a=1"], HTTP, "b=2; a=1"),  # the same path: the earlier created first
    (["a=1", "b=2", "a=3"], HTTP, "a=3; b=2"),  # a replaced cookie keeps its creation time
    ([("a=1", HTTP), ("a=2; Domain=example.com", HTTP)], HTTP, "a=2"),  # the same domain
]


@pytest.mark.parametrize(("lines", "url", "expected"), HOSTS + PATHS + SECURE + PREFIXES + PARSED)
def test_header(lines: list[str | tuple[str, str]], url: str, expected: str | None) -> None:
    assert sent(lines, url) == expected


@pytest.mark.parametrize(("lines", "at", "expected"), EXPIRY)
def test_expiry(lines: list[str | tuple[str, str]], at: float, expected: str | None) -> None:
    assert sent(lines, HTTP, at) == expected


@pytest.mark.parametrize("line", MALFORMED)
def test_a_malformed_line_is_ignored(line: str) -> None:
    jar = jar_of("keep=1")
    assert receive(jar, line, HTTP, T + 1) is jar
    assert header_for(jar, HTTP, T + 1) == "keep=1"


@pytest.mark.parametrize(
    "url", ["", "example.com", "ftp://example.com/", "http:///x", "http://[::1"]
)
def test_a_url_that_is_not_http_changes_nothing_and_gets_no_header(url: str) -> None:
    jar = jar_of("a=1")
    assert receive(jar, "b=2", url, T) is jar
    assert header_for(jar, url, T) is None


def test_a_replaced_cookie_keeps_created_and_takes_the_rest() -> None:
    jar = jar_of("a=1", "b=2", "a=3; Max-Age=60; Secure")  # from http: Secure refused
    jar = receive(jar, "a=4; Max-Age=60; HttpOnly", HTTP, T + 5)
    assert [(c.name, c.value, c.created, c.expires, c.http_only) for c in jar] == [
        ("b", "2", T + 1, None, False),
        ("a", "4", T, T + 65, True),
    ]


def test_the_jar_keeps_the_most_recently_created() -> None:
    jar = jar_of(*(f"c{i}=1" for i in range(MAX_COOKIES + 3)))
    assert len(jar) == MAX_COOKIES
    assert [c.name for c in jar] == [f"c{i}" for i in range(3, MAX_COOKIES + 3)]


def test_the_jar_drops_the_expired_before_the_oldest() -> None:
    jar = jar_of("old=1", "short=1; Max-Age=100", *(f"c{i}=1" for i in range(MAX_COOKIES - 2)))
    assert len(jar) == MAX_COOKIES
    jar = receive(jar, "new=1", HTTP, T + 200)
    assert [c.name for c in jar] == ["old", *(f"c{i}" for i in range(MAX_COOKIES - 2)), "new"]


def test_an_ip_address_matches_no_domain_but_itself() -> None:
    jar = (Cookie(name="a", value="1", domain="0.0.1", host_only=False),)
    assert header_for(jar, "http://127.0.0.1/", T) is None
    assert header_for(jar, "http://0.0.0.1/", T) is None


def test_prune() -> None:
    jar = jar_of("a=1", "b=1; Max-Age=10", "c=1; Max-Age=100")
    assert prune(jar, T + 5) is jar
    assert [c.name for c in prune(jar, T + 11)] == ["a", "c"]
    assert [c.name for c in prune(jar, T + 10**6)] == ["a"]


def test_stored_fields() -> None:
    (cookie,) = jar_of(
        ("a=1; Domain=Example.COM; Path=/p; Secure; HttpOnly", "https://www.example.com/")
    )
    assert cookie == Cookie(
        name="a",
        value="1",
        domain="example.com",
        host_only=False,
        path="/p",
        secure=True,
        http_only=True,
        created=T,
    )
    (cookie,) = jar_of(("a=1", "http://WWW.Example.com./x"))
    assert (cookie.domain, cookie.host_only, cookie.path) == ("www.example.com", True, "/")


# --- dates (RFC 6265 5.1.1) -------------------------------------------------------------------

DATES: list[tuple[str, float | None]] = [
    ("Wed, 09 Jun 2021 10:18:14 GMT", T),  # RFC 1123
    ("Wed, 09-Jun-2021 10:18:14 GMT", T),
    ("Wednesday, 09-Jun-21 10:18:14 GMT", T),  # RFC 850
    ("Wed Jun  9 10:18:14 2021", T),  # asctime
    ("Wed, 09 Jun 2021 10:18:14 +0100", T),  # a zone is ignored: always UTC
    ("Wed Jun 09 2021 10:18:14 GMT+0200 (CEST)", T),  # JavaScript's Date.toString
    ("10:18:14 2021 jUNE 09", T),  # any order, any case, a longer month name
    ("Wed, 9 Jun 2021 10:18:14.123 GMT", T),
    ("Wed, 9 Jun 2021 1:2:3 GMT", T - (10 * 3600 + 18 * 60 + 14) + 3723),
    ("Thu, 01 Jan 1970 00:00:00 GMT", 0.0),
    ("01 Jan 69 00:00:00", 3124224000.0),  # 69: 2069
    ("01 Jan 70 00:00:00", 0.0),  # 70: 1970
    ("Mon, 01 Jan 1601 00:00:00 GMT", -11644473600.0),
    ("Fri, 31 Dec 9999 23:59:59 GMT", 253402300799.0),
    ("Sat, 01 Jan 1600 00:00:00 GMT", None),  # before 1601
    ("Wed, 09 Jun 2021 24:00:00 GMT", None),
    ("Wed, 09 Jun 2021 10:60:00 GMT", None),
    ("Wed, 09 Jun 2021 10:00:60 GMT", None),
    ("Wed, 31 Feb 2021 10:00:00 GMT", None),  # no such day
    ("Wed, 00 Jun 2021 10:00:00 GMT", None),
    ("Wed, 32 Jun 2021 10:00:00 GMT", None),
    ("Wed, 09 Jun 02021 10:18:14 GMT", None),  # a five-digit year is no year
    ("Wed,09Jun2021 10:18:14GMT", None),  # "09Jun2021" is one token: a day
    ("Wed, 09 Jun 2021", None),  # no time
    ("tomorrow", None),
    ("", None),
]


@pytest.mark.parametrize(("text", "expected"), DATES)
def test_parse_date(text: str, expected: float | None) -> None:
    assert parse_date(text) == expected


# --- presets ----------------------------------------------------------------------------------


def test_preset() -> None:
    cookie = preset("https://Example.com:8443", " sid = a=b ")
    assert cookie == Cookie(name="sid", value="a=b", domain="example.com")
    assert header_for((cookie,), "http://example.com/x/y", T) == "sid=a=b"
    assert header_for((cookie,), "https://www.example.com/", T) is None


def test_a_preset_goes_first_and_a_server_may_replace_it() -> None:
    jar: tuple[Cookie, ...] = (preset("http://example.com", "sid=pre"),)
    jar = receive(jar, "other=1", HTTP, T)
    assert header_for(jar, HTTP, T) == "sid=pre; other=1"
    jar = receive(jar, "sid=server", HTTP, T + 1)
    assert header_for(jar, HTTP, T + 1) == "sid=server; other=1"


@pytest.mark.parametrize(
    ("origin", "pair", "reason"),
    [
        ("http://example.com", "secret", "no '='"),
        ("http://example.com", " =secret", "empty name"),
        ("http://example.com", "a=secret; b=2", "';' or a control character"),
        ("http://example.com", "a=secret\n", "';' or a control character"),
        ("http://example.com", "a=se\x00cret", "';' or a control character"),
        ("http://example.com", "a=" + "secret" * 700, "longer than 4096 bytes"),
        ("ftp://example.com", "a=secret", "is not an http"),
        ("example.com", "a=secret", "is not an http"),
    ],
)
def test_a_malformed_preset_is_refused_without_quoting_its_value(
    origin: str, pair: str, reason: str
) -> None:
    with pytest.raises(ValueError, match=reason) as raised:
        preset(origin, pair)
    assert "secret" not in str(raised.value) and "\n" not in str(raised.value)


# --- the stored record ------------------------------------------------------------------------

STORED = [
    Cookie(name="a", value="1", domain="example.com"),
    Cookie(
        name="__Host-s",
        value='"q é"',
        domain="[::1]",
        host_only=False,
        path="/p",
        secure=True,
        http_only=True,
        expires=T + 0.5,
        created=T,
    ),
]


@pytest.mark.parametrize("cookie", STORED)
def test_a_cookie_round_trips(cookie: Cookie) -> None:
    for encoder, decoder in (
        (msgspec.json.encode, msgspec.json.decode),
        (msgspec.msgpack.encode, msgspec.msgpack.decode),
    ):
        assert decoder(encoder(cookie), type=Cookie) == cookie
        jar = (cookie, cookie)
        assert decoder(encoder(jar), type=tuple[Cookie, ...]) == jar


def test_defaults_are_not_stored() -> None:
    encoded = msgspec.json.encode(Cookie(name="a", value="1", domain="example.com"))
    assert encoded == b'{"name":"a","value":"1","domain":"example.com"}'


# --- properties -------------------------------------------------------------------------------

_HOSTS = [
    "example.com",
    "www.example.com",
    "a.www.example.com",
    "ample.com",
    "example.org",
    "com",
    "127.0.0.1",
    "[::1]",
]
_URLS = [
    f"{scheme}://{host}{path}"
    for scheme in ("http", "https")
    for host in _HOSTS
    for path in ("/", "/a", "/a/b")
]
_FRAGMENTS = [
    "a=1", "b=", "=", ";", " ", "\t", "; Domain=", "; Path=", "; Max-Age=", "; Expires=",
    "; Secure", "; HttpOnly", "__Host-", "__Secure-", "/", "/a", ".", "-", "0", "9", "Jun",
    "GMT", "10:18:14", "2021", *_HOSTS,
]  # fmt: skip
_VALUES = [
    "", "/", "/a", "a", "0", "-1", "100", "9" * 4400, "Wed, 09 Jun 2021 10:18:14 GMT", "..com",
    ".example.com", "xn--a", "a b", "é.com", "[::1", *_HOSTS,
]  # fmt: skip
_KEYS = ["Domain", "Path", "Max-Age", "Expires", "Secure", "HttpOnly", "domain", "x", ""]
_attributes = st.tuples(st.sampled_from(_KEYS), st.one_of(st.sampled_from(_VALUES), st.text()))
_lines = st.one_of(
    st.text(max_size=60),
    st.lists(st.one_of(st.sampled_from(_FRAGMENTS), st.text(max_size=3)), max_size=14).map("".join),
    st.builds(
        lambda name, value, attributes: (
            f"{name}={value}" + "".join(f"; {k}={v}" for k, v in attributes)
        ),
        st.sampled_from(["a", " a ", "__Host-a", "__secure-a", ""]),
        st.text(max_size=5),
        st.lists(_attributes, max_size=4),
    ),
)
_URL_PARTS = ["[", "]", "::1", "example.com", ":", "/", "%", "@", "a", ".", "0x7f", "xn--"]
_any_urls = st.one_of(
    st.sampled_from(_URLS),
    st.text(max_size=30),
    st.builds(
        "".join,
        st.tuples(st.sampled_from(["http://", "https://", ""]), *[st.sampled_from(_URL_PARTS)] * 3),
    ),
)
_times = st.floats(min_value=0, max_value=4e9, allow_nan=False)


@st.composite
def _jars(draw: st.DrawFn) -> tuple[Cookie, ...]:
    received = draw(st.lists(st.tuples(_lines, st.sampled_from(_URLS)), max_size=8))
    jar: tuple[Cookie, ...] = ()
    for offset, (line, url) in enumerate(received):
        jar = receive(jar, line, url, T + offset)
    return jar


@settings(max_examples=300, deadline=None)
@given(_jars(), _lines, _any_urls, _times)
def test_receive_never_raises_and_keeps_a_storable_jar(
    jar: tuple[Cookie, ...], line: str, url: str, now: float
) -> None:
    result = receive(jar, line, url, now)
    assert len(result) <= MAX_COOKIES
    assert all(c.expires is None or c.expires > now for c in result)
    assert msgspec.msgpack.decode(msgspec.msgpack.encode(result), type=tuple[Cookie, ...]) == result
    assert receive(jar, line, url, now) == result  # deterministic: a replay gives the same jar


def _matches(cookie: Cookie, url: str, now: float) -> bool:
    """An oracle written apart from the module: RFC 6265 5.4 step 1, for the URLs above."""
    scheme, _, rest = url.partition("://")
    host, _, path = rest.partition("/")
    path = "/" + path
    if cookie.host_only:
        host_ok = host == cookie.domain
    else:
        ip = host.startswith("[") or host.replace(".", "").isdigit()
        host_ok = host == cookie.domain or (not ip and host.endswith("." + cookie.domain))
    path_ok = path == cookie.path or (
        path.startswith(cookie.path)
        and (cookie.path.endswith("/") or path[len(cookie.path)] == "/")
    )
    fresh = cookie.expires is None or cookie.expires > now
    return host_ok and path_ok and fresh and (scheme == "https" or not cookie.secure)


_cookies = st.builds(
    Cookie,
    name=st.just("n"),
    value=st.just("v"),
    domain=st.sampled_from([*_HOSTS, "example", "xample.com", "0.0.1", "1"]),
    host_only=st.booleans(),
    path=st.sampled_from(["/", "/a", "/a/", "/a/b", "/ab"]),
    secure=st.booleans(),
    expires=st.one_of(st.none(), st.floats(min_value=T - 10, max_value=T + 10)),
    created=st.floats(min_value=0, max_value=T),
)


@settings(max_examples=300, deadline=None)
@given(
    st.lists(_cookies, max_size=12),
    st.sampled_from(_URLS),
    st.floats(min_value=T - 20, max_value=T + 20),
)
def test_header_for_sends_exactly_the_cookies_that_match(
    cookies: list[Cookie], url: str, now: float
) -> None:
    jar = tuple(
        msgspec.structs.replace(c, name=f"c{i}", value=str(i)) for i, c in enumerate(cookies)
    )
    header = header_for(jar, url, now)
    names = [] if header is None else [pair.partition("=")[0] for pair in header.split("; ")]
    assert sorted(names) == sorted(c.name for c in jar if _matches(c, url, now))
    assert header != ""
    by_name = {c.name: c for c in jar}
    order = [(-len(by_name[n].path), by_name[n].created) for n in names]
    assert order == sorted(order)
