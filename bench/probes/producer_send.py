"""CPU per awaited send: aiokafka's producer against confluent-kafka's, as the worker sends.

The worker awaits every send's ack (a page's links before its outcome, a batch's changelog
records before its offsets), so what a message costs is one send and one ack: this sends
``--messages`` values (a third ~3 KB, the rest ~300 B, like a page's outcome and its status),
keyed by 50 origins, from 8 concurrent senders that each await their ack, acks from all
replicas, idempotent, no linger, into a fresh 12-partition topic; and prints the process's CPU
seconds per message. confluent-kafka's delivery callbacks run in a thread that polls and hand
each result to the event loop (``call_soon_threadsafe``), as an asyncio wiring would.

    source .services/env      # or the shared services' env file
    .venv/bin/python -m bench.probes.producer_send aiokafka --messages 10000
    .venv/bin/python -m bench.probes.producer_send confluent --messages 10000

Informs: whether a C Kafka client (confluent-kafka) would make the worker's awaited sends
cheaper than aiokafka's (docs/performance.md, "Producer settings and compression": it would
not).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import resource
import threading
import time
import uuid
from collections.abc import Awaitable, Callable

SENDERS = 8


def _cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def _values() -> list[bytes]:
    return [
        os.urandom(150).hex().encode() if i % 3 else b"x" * 1000 + os.urandom(1000).hex().encode()
        for i in range(64)
    ]


async def _drive(send: Callable[[bytes, bytes], Awaitable[object]], n: int) -> tuple[float, float]:
    values = _values()

    async def sender(w: int) -> None:
        for i in range(w, n, SENDERS):
            await send(values[i % 64], b"origin-%d" % (i % 50))

    cpu, wall = _cpu(), time.monotonic()
    await asyncio.gather(*(sender(w) for w in range(SENDERS)))
    return _cpu() - cpu, time.monotonic() - wall


async def aiokafka_run(bootstrap: str, topic: str, n: int, compression: str | None) -> tuple:
    from aiokafka import AIOKafkaProducer

    producer = AIOKafkaProducer(
        bootstrap_servers=bootstrap,
        acks="all",
        enable_idempotence=True,
        compression_type=compression,
        linger_ms=0,
    )
    await producer.start()
    try:

        async def send(value: bytes, key: bytes) -> object:
            return await (await producer.send(topic, value, key=key))

        return await _drive(send, n)
    finally:
        await producer.stop()


async def confluent_run(bootstrap: str, topic: str, n: int, compression: str | None) -> tuple:
    from confluent_kafka import KafkaException, Producer

    loop = asyncio.get_running_loop()
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "acks": "all",
            "enable.idempotence": True,
            "compression.type": compression or "none",
            "linger.ms": 0,
        }
    )
    stop = threading.Event()

    def poll() -> None:
        while not stop.is_set():
            producer.poll(0.05)

    poller = threading.Thread(target=poll, daemon=True)
    poller.start()

    def send(value: bytes, key: bytes) -> asyncio.Future[object]:
        fut: asyncio.Future[object] = loop.create_future()

        def delivered(err: object, msg: object) -> None:
            if err is None:
                loop.call_soon_threadsafe(fut.set_result, msg)
            else:
                loop.call_soon_threadsafe(fut.set_exception, KafkaException(err))

        producer.produce(topic, value, key, on_delivery=delivered)
        return fut

    try:
        return await _drive(send, n)
    finally:
        stop.set()
        poller.join()
        producer.flush(10)


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("client", choices=("aiokafka", "confluent"))
    ap.add_argument("--messages", type=int, default=10_000)
    ap.add_argument("--compression", default="zstd", help="'' for none")
    args = ap.parse_args()
    from confluent_kafka.admin import AdminClient, NewTopic

    bootstrap = os.environ["STREAMCRAWL_KAFKA_BOOTSTRAP"]
    admin = AdminClient({"bootstrap.servers": bootstrap})
    topic = f"bench-producer-{uuid.uuid4().hex[:8]}"
    admin.create_topics([NewTopic(topic, 12, 1)])[topic].result()
    try:
        run = aiokafka_run if args.client == "aiokafka" else confluent_run
        cpu, wall = asyncio.run(run(bootstrap, topic, args.messages, args.compression or None))
    finally:
        admin.delete_topics([topic])
    us = 1e6 * cpu / args.messages
    print(f"{args.client}: {args.messages} sends, {cpu:.2f} CPU-s, {us:.0f} us each, {wall:.1f} s")


if __name__ == "__main__":
    main()
