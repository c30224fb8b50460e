"""JavaScript rendering: one Chromium per process, driven by Playwright, with no network of its
own (``browser.py``), and the rule of which pages to render (``rule.py``). Every request the
browser makes is handed to a ``Serve`` callable, which the fetch stage builds over the crawl's
own fetcher (``agents/net/subrequests.py``). docs/rendering.md describes the design."""
