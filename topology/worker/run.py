"""``streamcrawl worker``: check the services, tune the collector, build the app and run it."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import faust

from streamcrawl.agents.errors import CrawlError
from streamcrawl.agents.net.core import CrawlCore
from streamcrawl.agents.net.proxy import check_proxy
from streamcrawl.topology.admin import generation
from streamcrawl.topology.admin.topics import CONNECT_TIMEOUT_S
from streamcrawl.topology.settings import Settings
from streamcrawl.topology.worker import app, clients
from streamcrawl.topology.worker.gc_thresholds import tune_gc

log = logging.getLogger(__name__)


def run(settings: Settings) -> None:
    """Run a Faust worker for ``settings`` until SIGTERM/SIGINT; the worker exits the process.

    Raises CrawlError, before anything starts, when Kafka or Cassandra refuses the worker
    (``check_services``) or the proxy does not accept connections, and ConfigError when a proxy
    setting cannot work or ``settings.partitions`` is not the partition
    count of the generation served or a reshard is under way (``generation.resolve``).
    """
    network = settings.network()  # ConfigError: a proxy or credential setting that cannot work
    if network.proxy is not None:
        asyncio.run(check_proxy(network.proxy))
    check_services(settings)
    # The topics of the generation served (topology/admin/generation.py); refuses settings of
    # another partition count, and a generation a reshard has not finished.
    settings = generation.resolve(settings, strict=True)
    if settings.generation > 1:  # Faust makes the last level of its data directory only
        app.table_dir(settings).mkdir(parents=True, exist_ok=True)
    tune_gc()
    worker = make_worker(app.create_app(settings, core=CrawlCore(network)), settings.log_level)
    worker.execute_from_commandline()


def make_worker(faust_app: Any, loglevel: str) -> Any:
    """A ``faust.Worker`` for ``faust_app`` whose root logger stays at ``loglevel``.

    Faust's terminal spinner puts the ROOT logger at DEBUG (its handler ticks on every record),
    so every aiokafka/Faust ``log.debug`` built a LogRecord, for nothing, on a busy worker's
    event loop (bench/notes/crawler-comparison.md). This worker has no spinner.
    """

    class Worker(faust.Worker):  # type: ignore[misc]
        def on_setup_root_logger(self, logger: logging.Logger, level: int) -> None:
            self.spinner = None

    return Worker(faust_app, loglevel=loglevel, redirect_stdouts=False)


def check_services(settings: Settings) -> None:
    """Before the worker starts: can it use Kafka, and will Cassandra take the sink's
    credentials? A refusal (credentials, certificate, TLS) or a Kafka that does not answer is
    then one line and exit 1, not a Faust crash with a traceback. A Cassandra that does not
    answer yet is only logged: the sink connects when it first writes."""
    clients.check_connection(settings, CONNECT_TIMEOUT_S)
    if settings.sink_enabled:
        from streamcrawl.agents.sinks.cassandra.driver import connect, quiet_driver_logs
        from streamcrawl.agents.sinks.cassandra.security import CassandraRefused

        quiet_driver_logs()
        try:
            cluster, _ = connect(settings.cassandra_config())
        except CassandraRefused:
            raise
        except CrawlError as exc:
            log.warning("%s; the sink will try again", exc)
        else:
            cluster.shutdown()
