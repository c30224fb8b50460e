"""WARC/1.1 archives of what a crawl fetched (docs/warc.md)."""
