"""The embedded wiring: every crawl stage in one process, state in RocksDB, output in files."""
