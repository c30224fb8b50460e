"""Kafka administration over confluent-kafka: topics, the control topic, status, one-line errors."""
