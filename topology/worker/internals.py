"""Every access of the worker to Faust's and aiokafka's private internals, in one place.

Checked against faust-streaming 0.15 and aiokafka 0.14 (``CHECKED_AGAINST``;
tests/unit/test_internals.py fails on another series, so an upgrade starts here). What each
reaches, and why no public API does it:

- aiokafka ``Fetcher`` (``consumer._fetcher``: ``_fetcher_timeout``, ``_fetch_min_bytes``,
  ``_fetch_max_wait_ms``, ``_proc_fetch_request``): the fetch windows (``fetch_in_windows``,
  with the values of the windows, ``FETCH_MIN_BYTES`` and the rest); aiokafka fixes them at
  construction.
- Faust's aiokafka driver (``AIOKafkaConsumerThread._ensure_consumer``,
  ``Consumer._new_consumer_thread``, ``verify_event_path``): the same windows for Faust's own
  consumer, and its livelock check without a task per partition (``fetch_worker_in_windows``).
- Faust ``Consumer._committed_offset`` and ``_read_offset``: the committed and read positions
  of a partition (``committed_offset``, ``read_offset``); Faust exposes neither.
- Faust ``Recovery``'s ``in_recovery``, ``active_offsets`` and ``active_highwaters``: which
  changelog partitions of the running recovery have records left, and how far each was read
  (``recovery_left``, for ``topology.worker.recovery_watch``); Faust only logs them.
- ``faust.streams._current_event``: the event whose partition a table reads and writes
  (``set_current_event``), for the frontier agent's batches.
- aiokafka ``AIOKafkaClient.force_metadata_update`` through ``consumer._client``: metadata of a
  topic created after the consumer started (``refresh_metadata``, for
  ``agents.stream.control.SharedView``, which gets it from the wiring); aiokafka's consumer asks
  only on its own schedule.
- Faust ``Consumer.ack`` replaced on the worker's consumer (``replace_ack``, for
  ``topology.worker.acks``): Faust has no hook for an acknowledgement it should refuse.
- Faust ``Consumer.perform_seek`` wrapped on the worker's consumer (``seek_uncommitted_to_start``):
  after a recovery it seeks only partitions with a committed offset above 0 (aiokafka's
  ``seek_to_committed``), so an event of a partition that never had a commit, read and skipped
  by the stream during the recovery, was never read again.
- Faust ``Store._get`` and ``rocksdb.Store._dbs``: a table read in one store lookup
  (``store_get``, for ``topology.worker.table_reads``), and the open databases of a store
  (``store_databases``, for ``topology.worker.table_stores``); ``Table._new_store_by_url``,
  overridden to make a ``rocksdb://`` table's store (``rocksdb_table``).
- Faust's aiokafka driver ``Producer._settings_extra`` and ``_new_producer``, and aiokafka
  ``AIOKafkaClient._request_timeout_ms``: an idempotent producer, which Faust asks aiokafka for
  only in transactions, and its connections' request timeout apart from its batches' delivery
  timeout, which aiokafka takes from the same argument (``use_producer``, for
  ``topology.worker.clients.use_producer_settings``).

tests/unit/test_private_access.py fails where another module reaches any of these (or another
private name of Faust, mode or aiokafka): they come here, as a small function that names what it
reaches and why.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Mapping, MutableMapping
from time import monotonic
from typing import TYPE_CHECKING, Any

import faust
from faust.streams import _current_event
from faust.types import TP
from yarl import URL

if TYPE_CHECKING:
    from aiokafka import AIOKafkaConsumer

CHECKED_AGAINST = {"faust-streaming": "0.15", "aiokafka": "0.14"}

# Consumer fetches of the worker (Faust's consumer: ``frontier``, ``outcomes``, changelogs; the
# sink's: ``pages``, ``status``; the shared view's: ``control``, ``budget``). With aiokafka's one
# byte, the broker answered a fetch as soon as anything arrived: a worker crawling tens of pages
# a second got an answer, and woke its threads, for nearly every message. After a fetch that
# brought records, the next one waits up to FETCH_MAX_WAIT_MS for FETCH_MIN_BYTES (a saturated
# worker fills them sooner); after one that brought none it waits up to IDLE_FETCH_MAX_WAIT_MS
# (Faust's own 1.5 s; aiokafka's default is 0.5 s) but returns with the first record, so that an
# idle worker fetches rarely and a record is not delayed. Between fetches, aiokafka's fetch
# routine also woke on a 200 ms timer (its ``consumer_timeout_ms``; now FETCHER_TIMEOUT_S) to
# look over every assigned partition, though each event it acts on (a fetch done, records
# consumed, a seek, a resume, a new assignment, a metadata refresh) wakes it through a future
# of its own: those timed wake-ups of each consumer were the largest share of an idle worker's
# loop. Measured in docs/performance.md ("Consumer fetch windows", "An idle worker").
FETCH_MIN_BYTES = 64 * 1024
FETCH_MAX_WAIT_MS = 100
# The sink's consumer (``pages``, ``status``) writes once a ``SINK_WINDOW`` (1 s) whatever its
# fetches bring, so its window is that second: a worker's fetches per second follow its pages,
# not the 100 ms above (docs/performance.md, "The sink's fetch window").
SINK_FETCH_MIN_BYTES = 1024 * 1024
SINK_FETCH_MAX_WAIT_MS = 1000
IDLE_FETCH_MAX_WAIT_MS = 1500
FETCHER_TIMEOUT_S = 1.5


def committed_offset(consumer: Any, topic: str, partition: int) -> int | None:
    """The consumer's committed offset of ``topic``/``partition`` (the next offset to read),
    as the frontier agent's catch-up markers need it (``FrontierAgent``'s ``committed``).

    Faust's own record (``Consumer._committed_offset``): dropped when the partition is revoked,
    set to the group's committed offset by the seek that ends a recovery (``perform_seek``, 0
    read as None), advanced by each commit. So an event read before that seek, at a position
    left over from before the rebalance, is never taken as following the committed offset."""
    value = consumer._committed_offset.get(TP(topic, partition))
    return None if value is None else int(value)


def read_offset(consumer: Any, tp: TP) -> int | None:
    """The offset of the last message the consumer read from ``tp`` (None: none yet)."""
    value = consumer._read_offset.get(tp)
    return None if value is None else int(value)


def recovery_left(app: Any) -> dict[TP, int] | None:
    """Each active changelog partition of the running table recovery that has records left
    -> the offset read up to (-1: none yet); None when no recovery is running."""
    recovery = app.tables.recovery
    if not recovery.in_recovery:
        return None
    offsets = recovery.active_offsets
    assigned = app.consumer.assignment()  # not a partition of an interrupted recovery's
    return {
        tp: offsets[tp]
        for tp, highwater in recovery.active_highwaters.items()
        if tp in assigned
        and highwater is not None
        and offsets[tp] is not None
        and highwater > offsets[tp]
    }


async def seek_changelog(app: Any, tp: TP, offset: int) -> None:
    """Seek the worker's consumer to ``offset`` of changelog partition ``tp`` and fetch it
    (Faust's public consumer calls; the recovery's own first seek and resume)."""
    await app.consumer.seek_wait({tp: offset})
    app.consumer.resume_partitions({tp})


def set_current_event(event: Any) -> None:
    """Make ``event`` the current one of this task: Faust tables read and write (RocksDB and
    changelog) the partition of the current event, which only the stream's own task has."""
    _current_event.set(weakref.ref(event))


def fetch_in_windows(
    consumer: AIOKafkaConsumer, busy: tuple[int, int] = (FETCH_MIN_BYTES, FETCH_MAX_WAIT_MS)
) -> None:
    """Switch a started ``consumer``'s fetches between the ``busy`` window (min bytes, max
    wait in ms; while records come) and the idle wait (once a fetch brought nothing), and slow
    its fetch routine's timer. aiokafka's fetcher reads these values each time it builds a
    fetch request or waits; ``_proc_fetch_request`` says whether records came."""
    fetcher = consumer._fetcher
    fetcher._fetcher_timeout = max(fetcher._fetcher_timeout, FETCHER_TIMEOUT_S)
    fetcher._fetch_max_wait_ms = max(fetcher._fetch_max_wait_ms, IDLE_FETCH_MAX_WAIT_MS)
    idle = (fetcher._fetch_min_bytes, fetcher._fetch_max_wait_ms)
    proc = fetcher._proc_fetch_request

    async def proc_fetch_request(*args: Any) -> bool:
        got: bool = await proc(*args)
        fetcher._fetch_min_bytes, fetcher._fetch_max_wait_ms = busy if got else idle
        return got

    fetcher._proc_fetch_request = proc_fetch_request


def sink_fetch_in_windows(consumer: AIOKafkaConsumer) -> None:
    """``fetch_in_windows`` with the sink's window."""
    fetch_in_windows(consumer, (SINK_FETCH_MIN_BYTES, SINK_FETCH_MAX_WAIT_MS))


def fetch_worker_in_windows(app: faust.App) -> None:
    """``fetch_in_windows`` for Faust's worker consumer (Faust has no setting for its fetches:
    it passes aiokafka a fixed ``fetch_max_wait_ms``): its transport builds the consumer thread
    through these subclasses."""
    from faust.transport.drivers import aiokafka as driver

    class ConsumerThread(driver.AIOKafkaConsumerThread):
        async def on_start(self) -> None:
            await super().on_start()
            fetch_in_windows(self._ensure_consumer())

    class Consumer(driver.Consumer):
        def _new_consumer_thread(self) -> driver.AIOKafkaConsumerThread:
            return ConsumerThread(self, loop=self.loop, beacon=self.beacon)

        async def verify_all_partitions_active(self) -> None:
            """Faust's livelock check (every 2.5 commit intervals: it logs a partition whose
            events stopped), without Faust's ``await self.sleep(0)`` per partition: a task
            and a timer for each partition at every check, a share of an idle worker's
            wake-ups for checks of a few microseconds (docs/performance.md, "An idle worker")."""
            now = monotonic()
            for tp in self.assignment():
                if self.should_stop:
                    return
                self.verify_event_path(now, tp)

    app.transport.Consumer = Consumer  # type: ignore[misc]


async def refresh_metadata(consumer: AIOKafkaConsumer) -> None:
    """Fetch the cluster's metadata now into a started ``consumer``, whose
    ``partitions_for_topic`` knows only what its client last fetched (aiokafka 0.14: the
    client's ``force_metadata_update``; the consumer has no public call for it)."""
    await consumer._client.force_metadata_update()


def replace_ack(consumer: Any, ack: Callable[[Any], bool]) -> None:
    """Make ``ack`` the acknowledgement of Faust's ``consumer``: faust-streaming 0.15's
    messages call ``consumer.ack(message)`` (``Message.on_final_ack``) through the instance,
    so this one sees every acknowledgement and may refuse it (return False)."""
    consumer.ack = ack


def seek_uncommitted_to_start(consumer: Any, topics: set[str]) -> None:
    """After each seek that ends a recovery (Faust's ``Consumer.perform_seek``, called through
    the instance), seek the partitions of ``topics`` with no committed offset (or 0) to their
    log start, as their committed ones are sought.

    Faust's stream skips, unacknowledged, the events it reads while a recovery holds its flow
    (``topology.worker.acks``), counting on that seek to read them again; aiokafka's
    ``seek_to_committed`` leaves a partition without a commit where it was read up to. Seen
    after ``admin reshard``: the event at offset 0 of each new ``outcomes`` partition was read
    during the first recovery and never again, so no catch-up marker after it counted and the
    partition's origins were never dispatched."""
    perform_seek = consumer.perform_seek
    if getattr(perform_seek, "seeks_uncommitted", False):
        return  # installed already (the agent restarted)

    async def seek() -> None:
        await perform_seek()
        committed = consumer._committed_offset  # set by that seek; 0 and none read as None
        fresh = [tp for tp in consumer.assignment() if tp.topic in topics and not committed.get(tp)]
        if fresh:
            starts = await consumer.earliest_offsets(*fresh)
            await consumer.seek_wait({tp: int(starts[tp]) for tp in fresh})

    seek.seeks_uncommitted = True  # type: ignore[attr-defined]
    consumer.perform_seek = seek


def store_get(table: Any) -> Callable[[bytes], bytes | None]:
    """One lookup of ``table``'s key in its store, in the current event's partition, as
    ``Table.get`` reads it (faust-streaming 0.15's ``Store._get``; None: no such key). Faust
    opens the store at the table's first ``data``: call this once the worker runs."""
    get: Callable[[bytes], bytes | None] = table.data._get
    return get


def store_databases(store: Any) -> MutableMapping[int, Any]:
    """The open databases of Faust's RocksDB ``store``, by partition (faust-streaming 0.15's
    ``rocksdb.Store._dbs``); what is removed from it is no longer the store's."""
    dbs: MutableMapping[int, Any] = store._dbs
    return dbs


def rocksdb_table(new_store: Callable[[Any, str | URL], Any]) -> type[Any]:
    """A ``faust.Table`` whose ``rocksdb://`` store ``new_store(table, url)`` makes (for
    ``App(Table=...)``); any other URL keeps Faust's. faust-streaming 0.15 picks a table's
    store by URL in ``Table._new_store_by_url``, with no setting for a store class."""

    class RocksTable(faust.Table):  # type: ignore[misc,type-arg]  # Faust's are untyped
        def _new_store_by_url(self, url: str | URL) -> Any:
            if URL(str(url)).scheme != "rocksdb":
                return super()._new_store_by_url(url)
            return new_store(self, url)

    return RocksTable


def use_producer(app: faust.App, *, idempotent: bool, connection_timeout_ms: int) -> None:
    """Make the worker's Faust producer (``app.producer``, and any its transport creates)
    idempotent if ``idempotent``, and cap its client's request timeout at
    ``connection_timeout_ms`` while its batches keep Faust's ``producer_request_timeout``
    (why: ``topology.worker.clients.use_producer_settings``).

    faust-streaming 0.15 asks aiokafka 0.14 for idempotence only in transactions, through the
    driver's ``Producer._settings_extra``, which this subclass extends; its ``_new_producer``
    builds the aiokafka producer, whose client (``AIOKafkaClient._request_timeout_ms``) hands
    the timeout to each connection it opens, apart from the batches' own."""
    from faust.transport.drivers import aiokafka as driver

    class Producer(driver.Producer):
        def _settings_extra(self) -> Mapping[str, Any]:
            extra = super()._settings_extra()
            return {**extra, "enable_idempotence": True} if idempotent else extra

        def _new_producer(self, transactional_id: str | None = None) -> Any:
            producer = super()._new_producer(transactional_id)
            # The client hands this to each connection it opens; on a timeout it closes
            # that connection and the sender retries the batch (RequestTimedOutError is
            # retriable) on the leader it then knows.
            client = producer.client
            client._request_timeout_ms = min(client._request_timeout_ms, connection_timeout_ms)
            return producer

    app.transport.Producer = Producer  # type: ignore[misc]
