"""Port helpers and readiness probes for scripts/services.sh.

Usage:
    probe.py free-ports N                    print N distinct free 127.0.0.1 TCP ports
    probe.py port-free PORT                  exit 0 if 127.0.0.1:PORT can be bound, else 1
    probe.py kafka HOST:PORT TIMEOUT         exit 0 once a Kafka admin call succeeds
    probe.py cassandra HOST:PORT TIMEOUT     exit 0 once `SELECT release_version` succeeds

The port commands need only the standard library; the probes need confluent-kafka (or aiokafka)
and cassandra-driver, i.e. the project's venv. Exit 2 means "cannot probe with this python".
"""

from __future__ import annotations

import logging
import socket
import sys
import time
from collections.abc import Callable

NO_CLIENT = 2


def free_ports(count: int) -> list[int]:
    # Hold every socket open until all are bound, so that the ports are distinct.
    socks = [socket.socket() for _ in range(count)]
    try:
        for sock in socks:
            sock.bind(("127.0.0.1", 0))
        return [int(sock.getsockname()[1]) for sock in socks]
    finally:
        for sock in socks:
            sock.close()


def port_free(port: int) -> bool:
    with socket.socket() as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True


def _until_ready(what: str, attempt: Callable[[], bool], timeout: float) -> int:
    """Call ``attempt`` every 0.5 s until it returns True (exit 0) or ``timeout`` passes (exit 1,
    with the last error)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            if attempt():
                return 0
        except Exception as exc:
            if time.monotonic() > deadline:
                print(f"{what} not ready: {exc}", file=sys.stderr)
                return 1
        time.sleep(0.5)


def kafka_ready(bootstrap: str, timeout: float) -> int:
    try:
        from confluent_kafka.admin import AdminClient
    except ImportError:
        return _kafka_ready_aiokafka(bootstrap, timeout)
    quiet = logging.getLogger("probe.kafka")
    quiet.addHandler(logging.NullHandler())
    quiet.propagate = False
    admin = AdminClient({"bootstrap.servers": bootstrap, "logger": quiet})
    return _until_ready(
        f"kafka at {bootstrap}", lambda: bool(admin.list_topics(timeout=5).brokers), timeout
    )


def _kafka_ready_aiokafka(bootstrap: str, timeout: float) -> int:
    try:
        import asyncio

        from aiokafka.admin import AIOKafkaAdminClient
    except ImportError:
        print(f"{sys.executable} has neither confluent_kafka nor aiokafka", file=sys.stderr)
        return NO_CLIENT

    async def probe() -> None:
        admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=5000)
        await admin.start()
        try:
            await admin.list_topics()
        finally:
            await admin.close()

    def attempt() -> bool:
        asyncio.run(probe())
        return True

    return _until_ready(f"kafka at {bootstrap}", attempt, timeout)


def cassandra_ready(endpoint: str, timeout: float) -> int:
    try:
        from cassandra.cluster import Cluster
    except ImportError:
        print(f"{sys.executable} has no cassandra-driver", file=sys.stderr)
        return NO_CLIENT
    logging.getLogger("cassandra").setLevel(logging.CRITICAL)
    host, _, port = endpoint.rpartition(":")

    def attempt() -> bool:
        cluster = Cluster([host], port=int(port), connect_timeout=5, control_connection_timeout=5)
        try:
            row = cluster.connect().execute("SELECT release_version FROM system.local").one()
            return row is not None
        finally:
            cluster.shutdown()

    return _until_ready(f"cassandra at {endpoint}", attempt, timeout)


def main(argv: list[str]) -> int:
    match argv:
        case ["free-ports", count]:
            print(*free_ports(int(count)))
            return 0
        case ["port-free", port]:
            return 0 if port_free(int(port)) else 1
        case ["kafka", endpoint, timeout]:
            return kafka_ready(endpoint, float(timeout))
        case ["cassandra", endpoint, timeout]:
            return cassandra_ready(endpoint, float(timeout))
    print(__doc__, file=sys.stderr)
    return 64


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
