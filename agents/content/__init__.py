"""What a response holds: body decoding, HTML parsing, links, Link headers, sitemaps and feeds.
Pure."""
