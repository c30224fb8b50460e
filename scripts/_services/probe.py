"""Port helpers and readiness probes for scripts/services.sh.

Usage:
    probe.py free-ports N [HOST...]          print N distinct TCP ports free on every HOST
                                             (default: 127.0.0.1)
    probe.py port-free PORT [HOST...]        exit 0 if PORT can be bound on every HOST, else 1
    probe.py kafka HOST:PORT TIMEOUT [ID...] exit 0 once a Kafka admin call succeeds and the
                                             metadata lists the brokers ID... (unfenced)
    probe.py cassandra HOST:PORT TIMEOUT     exit 0 once `SELECT release_version` succeeds on
                                             that node
    probe.py cassandra-ring TIMEOUT HOST:PORT...
                                             exit 0 once each node lists all the others as
                                             peers with its own schema version
    probe.py cassandra-roles HOST:PORT TIMEOUT
                                             as the default superuser (TLS): create the client
                                             role, then change the superuser's password

The probes connect as a client would, with the security settings of the environment (the
``STREAMCRAWL_*`` names the application reads: SASL, CA files, Cassandra credentials).
``cassandra-roles`` reads SERVICES_CLIENT_PASSWORD, SERVICES_SUPERUSER_PASSWORD and
SERVICES_CAFILE. The port commands need only the standard library; the probes need
confluent-kafka (or aiokafka) and cassandra-driver, i.e. the project's venv. Exit 2 means
"cannot probe with this python".
"""

from __future__ import annotations

import logging
import os
import socket
import ssl
import sys
import time
from collections.abc import Callable
from typing import Any

NO_CLIENT = 2


LOOPBACK = ("127.0.0.1",)


def free_ports(count: int, hosts: tuple[str, ...] = LOOPBACK) -> list[int]:
    """Ports the kernel picks on the first host and that bind on the others too."""
    # Hold every socket open until all are bound, so that the ports are distinct.
    held: list[socket.socket] = []
    ports: list[int] = []
    try:
        while len(ports) < count:
            first = socket.socket()
            held.append(first)
            first.bind((hosts[0], 0))
            port = int(first.getsockname()[1])
            if _bind_all(port, hosts[1:], held):
                ports.append(port)
        return ports
    finally:
        for sock in held:
            sock.close()


def _bind_all(port: int, hosts: tuple[str, ...], held: list[socket.socket]) -> bool:
    for host in hosts:
        sock = socket.socket()
        held.append(sock)
        try:
            sock.bind((host, port))
        except OSError:
            return False
    return True


def port_free(port: int, hosts: tuple[str, ...] = LOOPBACK) -> bool:
    held: list[socket.socket] = []
    try:
        return _bind_all(port, hosts, held)
    finally:
        for sock in held:
            sock.close()


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


def kafka_ready(bootstrap: str, timeout: float, broker_ids: set[int] | None = None) -> int:
    """Ready once the metadata lists a broker, or all of ``broker_ids`` when given (a broker of
    a cluster appears there once the controller quorum has unfenced it)."""
    try:
        from confluent_kafka.admin import AdminClient
    except ImportError:
        return _kafka_ready_aiokafka(bootstrap, timeout)
    quiet = logging.getLogger("probe.kafka")
    quiet.addHandler(logging.NullHandler())
    quiet.propagate = False
    admin = AdminClient({"bootstrap.servers": bootstrap, "logger": quiet, **_librdkafka_security()})

    def attempt() -> bool:
        brokers = admin.list_topics(timeout=5).brokers
        if broker_ids and not broker_ids <= set(brokers):
            raise RuntimeError(f"brokers {sorted(brokers)}, waiting for {sorted(broker_ids)}")
        return bool(brokers)

    return _until_ready(f"kafka at {bootstrap}", attempt, timeout)


def _librdkafka_security() -> dict[str, str]:
    env = os.environ
    conf = {"security.protocol": env.get("STREAMCRAWL_KAFKA_SECURITY_PROTOCOL", "PLAINTEXT")}
    if "STREAMCRAWL_KAFKA_SASL_MECHANISM" in env:
        conf["sasl.mechanism"] = env["STREAMCRAWL_KAFKA_SASL_MECHANISM"]
        conf["sasl.username"] = env.get("STREAMCRAWL_KAFKA_SASL_USERNAME", "")
        conf["sasl.password"] = env.get("STREAMCRAWL_KAFKA_SASL_PASSWORD", "")
    if "STREAMCRAWL_KAFKA_SSL_CAFILE" in env:
        conf["ssl.ca.location"] = env["STREAMCRAWL_KAFKA_SSL_CAFILE"]
    return conf


def _kafka_ready_aiokafka(bootstrap: str, timeout: float) -> int:
    try:
        import asyncio

        from aiokafka.admin import AIOKafkaAdminClient
    except ImportError:
        print(f"{sys.executable} has neither confluent_kafka nor aiokafka", file=sys.stderr)
        return NO_CLIENT

    async def probe() -> None:
        env = os.environ
        security: dict[str, object] = {}
        protocol = env.get("STREAMCRAWL_KAFKA_SECURITY_PROTOCOL", "PLAINTEXT")
        if protocol != "PLAINTEXT":
            security = {
                "security_protocol": protocol,
                "ssl_context": ssl.create_default_context(
                    cafile=env.get("STREAMCRAWL_KAFKA_SSL_CAFILE")
                ),
                "sasl_mechanism": env.get("STREAMCRAWL_KAFKA_SASL_MECHANISM", "PLAIN"),
                "sasl_plain_username": env.get("STREAMCRAWL_KAFKA_SASL_USERNAME"),
                "sasl_plain_password": env.get("STREAMCRAWL_KAFKA_SASL_PASSWORD"),
            }
        admin = AIOKafkaAdminClient(
            bootstrap_servers=bootstrap, request_timeout_ms=5000, **security
        )
        await admin.start()
        try:
            await admin.list_topics()
        finally:
            await admin.close()

    def attempt() -> bool:
        asyncio.run(probe())
        return True

    return _until_ready(f"kafka at {bootstrap}", attempt, timeout)


def _cassandra_session(
    endpoint: str, user: str | None, password: str | None, cafile: str | None
) -> tuple[Any, Any]:
    """A (cluster, session) that queries one node, with a password and TLS when given."""
    from cassandra.auth import PlainTextAuthProvider
    from cassandra.cluster import EXEC_PROFILE_DEFAULT, Cluster, ExecutionProfile
    from cassandra.policies import WhiteListRoundRobinPolicy

    host, _, port = endpoint.rpartition(":")
    # Only this node answers: of a cluster, the node being probed and not one of its peers.
    only_this = ExecutionProfile(load_balancing_policy=WhiteListRoundRobinPolicy([host]))
    cluster = Cluster(
        [host],
        port=int(port),
        execution_profiles={EXEC_PROFILE_DEFAULT: only_this},
        protocol_version=5,
        connect_timeout=5,
        control_connection_timeout=5,
        auth_provider=PlainTextAuthProvider(user, password or "") if user else None,
        ssl_context=ssl.create_default_context(cafile=cafile) if cafile else None,
    )
    try:
        return cluster, cluster.connect()
    except Exception:
        cluster.shutdown()
        raise


def cassandra_ready(endpoint: str, timeout: float) -> int:
    try:
        import cassandra.cluster  # noqa: F401
    except ImportError:
        print(f"{sys.executable} has no cassandra-driver", file=sys.stderr)
        return NO_CLIENT
    logging.getLogger("cassandra").setLevel(logging.CRITICAL)
    env = os.environ
    tls = env.get("STREAMCRAWL_CASSANDRA_SSL", "").lower() == "true"

    def attempt() -> bool:
        cluster, session = _cassandra_session(
            endpoint,
            env.get("STREAMCRAWL_CASSANDRA_USERNAME"),
            env.get("STREAMCRAWL_CASSANDRA_PASSWORD"),
            env.get("STREAMCRAWL_CASSANDRA_SSL_CAFILE") if tls else None,
        )
        try:
            return session.execute("SELECT release_version FROM system.local").one() is not None
        finally:
            cluster.shutdown()

    return _until_ready(f"cassandra at {endpoint}", attempt, timeout)


def cassandra_roles(endpoint: str, timeout: float) -> int:
    """Create the role ``streamcrawl`` as the default superuser, then rotate its password.

    The superuser ``cassandra``/``cassandra`` exists once the node has set up its auth tables;
    until then the login fails, hence the retries. ``CREATE`` on all keyspaces is enough for
    the sink, ``admin create-schema`` and the tests: a role owns the keyspaces it creates.
    """
    try:
        import cassandra.cluster  # noqa: F401
    except ImportError:
        print(f"{sys.executable} has no cassandra-driver", file=sys.stderr)
        return NO_CLIENT
    logging.getLogger("cassandra").setLevel(logging.CRITICAL)
    client_password = os.environ["SERVICES_CLIENT_PASSWORD"]
    superuser_password = os.environ["SERVICES_SUPERUSER_PASSWORD"]
    cafile = os.environ["SERVICES_CAFILE"]

    def attempt() -> bool:
        cluster, session = _cassandra_session(endpoint, "cassandra", "cassandra", cafile)
        try:
            session.execute(
                "CREATE ROLE IF NOT EXISTS streamcrawl WITH LOGIN = true AND PASSWORD = %s",
                (client_password,),
            )
            session.execute("GRANT CREATE ON ALL KEYSPACES TO streamcrawl")
            session.execute("ALTER ROLE cassandra WITH PASSWORD = %s", (superuser_password,))
            return True
        finally:
            cluster.shutdown()

    return _until_ready(f"cassandra roles at {endpoint}", attempt, timeout)


def cassandra_ring(endpoints: list[str], timeout: float) -> int:
    """Ready once each node lists the others in ``system.peers_v2``, all with its own schema
    version (the driver waits for that agreement after DDL; a QUORUM write needs the peers)."""
    try:
        import cassandra.cluster  # noqa: F401
    except ImportError:
        print(f"{sys.executable} has no cassandra-driver", file=sys.stderr)
        return NO_CLIENT
    logging.getLogger("cassandra").setLevel(logging.CRITICAL)

    def node_agrees(endpoint: str) -> bool:
        cluster, session = _cassandra_session(endpoint, None, None, None)
        try:
            local = session.execute("SELECT schema_version FROM system.local").one()
            peers = list(session.execute("SELECT peer, schema_version FROM system.peers_v2"))
        finally:
            cluster.shutdown()
        versions = {row.schema_version for row in peers}
        if len(peers) != len(endpoints) - 1 or versions != {local.schema_version}:
            raise RuntimeError(f"{endpoint}: {len(peers)} peers, schema versions {versions}")
        return True

    return _until_ready(
        f"cassandra ring of {len(endpoints)}",
        lambda: all(node_agrees(endpoint) for endpoint in endpoints),
        timeout,
    )


def main(argv: list[str]) -> int:
    match argv:
        case ["free-ports", count, *hosts]:
            print(*free_ports(int(count), tuple(hosts) or LOOPBACK))
            return 0
        case ["port-free", port, *hosts]:
            return 0 if port_free(int(port), tuple(hosts) or LOOPBACK) else 1
        case ["kafka", endpoint, timeout, *ids]:
            return kafka_ready(endpoint, float(timeout), {int(i) for i in ids})
        case ["cassandra", endpoint, timeout]:
            return cassandra_ready(endpoint, float(timeout))
        case ["cassandra-roles", endpoint, timeout]:
            return cassandra_roles(endpoint, float(timeout))
        case ["cassandra-ring", timeout, *endpoints] if endpoints:
            return cassandra_ring(endpoints, float(timeout))
    print(__doc__, file=sys.stderr)
    return 64


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
