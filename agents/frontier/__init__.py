"""The frontier: dedupe, per-origin durable queues, timing and the in-memory politeness scheduler,
over an abstract key-value store (in memory, RocksDB, or Faust tables in ``agents.stream``)."""
