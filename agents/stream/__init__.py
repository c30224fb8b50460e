"""The Kafka agents' bodies: frontier, fetch service, sink, control, over tables and topics. They
use aiokafka and mode, never Faust; ``topology.worker`` binds them to a Faust app."""
