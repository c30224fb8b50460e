"""Crawl plugins: URL filters, link extractors and page extractors a crawl names in its spec
(docs/plugins.md). Pure: no I/O; entry points are read by ``registry``."""
