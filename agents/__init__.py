"""Crawl stages: pure logic (canonicalize, scope, robots, frontier, parse) and thin I/O wrappers.

Nothing in this package imports Faust except the agent wiring in ``agents/kafka_*.py``; the embedded
runner and the Kafka topology call the same functions.
"""
