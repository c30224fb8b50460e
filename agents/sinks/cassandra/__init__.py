"""The Cassandra sink: its settings, driver, request packing and security. The only package that
imports cassandra-driver (``config`` does not, so settings can read it without the driver)."""
