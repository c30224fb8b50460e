"""The Kafka worker: the Faust app, its tables and the plumbing around its agents. The only package
that imports Faust."""
