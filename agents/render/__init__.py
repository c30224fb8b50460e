"""JavaScript rendering: one Chromium per process, driven by Playwright, with no network of its
own (``browser.py``), and the route handler of a page (``page.py``). Every request the browser
makes is handed to a ``Serve`` callable, which the fetch stage builds over the crawl's own
fetcher (``agents/net/subrequests.py``); which pages are rendered is a policy
(``agents/policy/rendering.py``). docs/rendering.md describes the design."""
