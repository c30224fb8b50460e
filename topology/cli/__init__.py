"""The ``streamcrawl`` command line: parsers, the crawl and demo commands, the Kafka commands."""
