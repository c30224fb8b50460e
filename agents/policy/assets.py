"""A crawl's page assets (docs/assets.md): which queued URLs are assets, how deep a stylesheet's
own assets are followed, and how many asset URLs a crawl may queue.

An asset is a URL of kind ``asset`` or ``stylesheet``: fetched like a page (its origin's
robots.txt, politeness and seen-set) but never read for page links; a stylesheet is read for
its own assets only. Its ``depth`` counts the steps from the page that needs it (1: the page's
own; 2: what that stylesheet imports...), not the links from the seeds: ``max_depth`` does not
apply, ``MAX_ASSET_DEPTH`` does, so an ``@import`` chain of any length, or a stylesheet that
imports itself, ends there.
"""

from __future__ import annotations

import functools
from typing import Final

import msgspec

from streamcrawl.schemas.records import CrawlPolicy

ASSET_KINDS: Final = frozenset({"asset", "stylesheet"})
# A page's own assets are at 1; a stylesheet at MAX_ASSET_DEPTH is fetched, its assets are not.
MAX_ASSET_DEPTH: Final = 4
# A fetch's ``content_types`` that takes any type (an asset is what the page asked for).
ANY_TYPE: Final = "*/*"
# Without --max-assets, a crawl with a page budget may queue this many assets per page of it.
ASSETS_PER_PAGE: Final = 10


def is_asset(kind: str) -> bool:
    """Whether a URL of ``kind`` is a page asset (it has the asset budget and scope)."""
    return kind in ASSET_KINDS


def asset_budget(policy: CrawlPolicy) -> int | None:
    """How many asset URLs the crawl may queue in all: ``max_assets``, else ``ASSETS_PER_PAGE``
    per page of ``max_pages``; None: unbounded (no page budget either)."""
    if policy.max_assets is not None:
        return policy.max_assets
    if policy.max_pages is not None:
        return policy.max_pages * ASSETS_PER_PAGE
    return None


@functools.lru_cache(maxsize=64)
def asset_policy(policy: CrawlPolicy) -> CrawlPolicy:
    """``policy`` for fetching an asset: any content type, the same ``max_body`` cap."""
    return msgspec.structs.replace(policy, content_types=(ANY_TYPE,))
