"""Where pages and terminal URL states go: the sink contract and its backends (memory, files,
Cassandra)."""
