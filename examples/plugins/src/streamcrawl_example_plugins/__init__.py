"""Example streamcrawl plugins, one of each kind (docs/plugins.md):

- ``max_query_params`` (URL filter): refuses a URL with more than ``max`` query parameters,
  a rule a regex states badly (faceted navigation multiplies such URLs);
- ``json_links`` (link extractor): adds the URLs a page lists in a
  ``<script type="application/json">`` blob, under ``key``;
- ``price`` (page extractor): the first ``selector`` match read as a price, normalized to
  ``{"amount": 1234.5, "currency": "EUR", "raw": "1.234,50 €"}``.

Each is deterministic: the same page gives the same answer.
"""

from __future__ import annotations

import json
import re
from urllib.parse import parse_qsl, urlsplit

import msgspec

from streamcrawl.agents.plugins.api import PageView, Plugin, Source


class QueryArgs(msgspec.Struct, forbid_unknown_fields=True):
    max: int = 3


class MaxQueryParams:
    def __init__(self, args: QueryArgs) -> None:
        if args.max < 0:
            raise ValueError("max must be 0 or more")
        self.max = args.max

    def check(self, url: str, *, depth: int, source: Source) -> str | None:
        n = len(parse_qsl(urlsplit(url).query, keep_blank_values=True))
        return f"{n} query parameters, over {self.max}" if n > self.max else None


class JsonLinksArgs(msgspec.Struct, forbid_unknown_fields=True):
    key: str = "links"


class JsonLinks:
    def __init__(self, args: JsonLinksArgs) -> None:
        self.key = args.key

    def links(self, page: PageView, links: list[str]) -> list[str]:
        if page.tree is None:
            return links
        out = list(links)
        for node in page.tree.css('script[type="application/json"]'):
            try:
                blob = json.loads(node.text() or "null")
            except ValueError:
                continue  # not JSON: not ours
            listed = blob.get(self.key) if isinstance(blob, dict) else None
            if isinstance(listed, list):
                out += [u for u in listed if isinstance(u, str)]
        return out


class PriceArgs(msgspec.Struct, forbid_unknown_fields=True):
    selector: str = ".price"
    currency: str = "EUR"


_SYMBOLS = {"€": "EUR", "$": "USD", "£": "GBP"}
_NUMBER = re.compile(r"\d[\d.,\s]*")


class Price:
    def __init__(self, args: PriceArgs) -> None:
        self.selector, self.currency = args.selector, args.currency

    def extract(self, page: PageView) -> dict[str, object]:
        node = page.tree.css_first(self.selector) if page.tree is not None else None
        raw = " ".join((node.text() or "").split()) if node is not None else ""
        currency = next((c for s, c in _SYMBOLS.items() if s in raw), self.currency)
        return {"amount": amount(raw), "currency": currency, "raw": raw or None}


def amount(raw: str) -> float | None:
    """``"1.234,50 €"`` -> 1234.5, ``"$1,234.50"`` -> 1234.5; None: no number."""
    found = _NUMBER.search(raw)
    if found is None:
        return None
    digits = re.sub(r"\s", "", found.group()).rstrip(".,")
    decimal = max(digits.rfind(","), digits.rfind("."))
    if decimal != -1 and len(digits) - decimal - 1 in (1, 2):  # a decimal part
        whole, cents = digits[:decimal], digits[decimal + 1 :]
    else:
        whole, cents = digits, ""
    whole = re.sub(r"[.,]", "", whole)
    return float(f"{whole}.{cents or 0}")


MAX_QUERY_PARAMS = Plugin(
    "url_filter", MaxQueryParams, QueryArgs, description="refuse URLs with over max parameters"
)
JSON_LINKS = Plugin(
    "link_extractor", JsonLinks, JsonLinksArgs, description="follow URLs listed in JSON blobs"
)
PRICE = Plugin("page_extractor", Price, PriceArgs, description="a page's price, normalized")
