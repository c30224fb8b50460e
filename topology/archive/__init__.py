"""The Kafka wiring's WARC writer: ``streamcrawl warc`` (docs/warc.md)."""
