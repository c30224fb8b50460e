"""What a crawl costs the Kafka broker: its requests by API and by client, idle and per page,
and where its CPU goes, around any bench row that crawls through ``bench.kafka_runner``.

``run`` executes a bench module (``bench.worker_rows``, ``bench.doc_site``) in this process
with ``bench.kafka_runner.seed`` and ``drain`` wrapped: before each seed it waits ``--settle``
seconds, then measures ``--idle`` seconds of the ready, idle topology; the crawl is measured
from the seed to the end of ``drain``. At each of these moments it reads:

* the broker's own request counts, ``kafka.network:type=RequestMetrics,name=RequestsPerSec``
  (``Count``, summed over versions), with Kafka's ``JmxTool`` (``--jmx HOST:PORT``);
* the CPU of each broker thread (``jcmd PID Thread.print``: ``cpu=`` per thread), grouped
  (``THREADS``: network, request handlers, purgatory, group coordinator, KRaft, GC, JIT...);
* the topics' end offsets (messages, changelogs included: ``bench.probes.kafka_probe``), and
  the workers' ``/metrics`` counts (frontier-agent events and batches, messages sent by topic).

``--request-log`` (the broker's ``kafka.request.logger`` at DEBUG) splits the requests by
client (``bench.probes.broker_log``); ``--jfr FILE`` records the crawl with Java Flight
Recorder (``profile`` settings, Java code sampled every 2 ms; started before the settle so that
its own start-up is not in the crawl, dumped from the seed on), summarised by ``jfr-summary``.
The request log and JMX polling cost the broker CPU of their own, and JFR's start compiles
code (the JIT's CPU): take CPU figures from runs with neither, and read the broker's threads
without the JIT's.

The broker must be one of your own, not a shared one: its pid and request log are read and it
gets a JMX port. Set-up, once (a private broker on free ports, the bench's rows pointed at it)::

    export STREAMCRAWL_SERVICES_DIR=$PWD/.services PYTHON=$PWD/.venv/bin/python
    scripts/services.sh start kafka
    .venv/bin/python -m bench.probes.broker_requests prepare --services-dir .services
    scripts/services.sh stop kafka && scripts/services.sh resume kafka   # reads the new log4j2
    .venv/bin/python -m bench.probes.broker_requests jmx --services-dir .services --port 39999
    export STREAMCRAWL_KAFKA_BOOTSTRAP=$(cat .services/kafka/endpoint)
    export STREAMCRAWL_CASSANDRA_HOSTS=...                               # a Cassandra to write to

Then (``.services/kafka/pid`` is the broker the bench meters, ``bench.kafka_topology``)::

    .venv/bin/python -m bench.probes.broker_requests run --services-dir .services \\
        --jmx 127.0.0.1:39999 --request-log --out bench/results/broker-4x500.json -- \\
        bench.worker_rows --politeness 4x500@0 --per-origin-concurrency 1
    .venv/bin/python -m bench.probes.broker_requests run --services-dir .services \\
        --jfr /tmp/doc.jfr --out bench/results/broker-doc-cpu.json -- \\
        bench.doc_site --package python3.11-doc --runs 1
    .venv/bin/python -m bench.probes.broker_requests jfr-summary /tmp/doc.jfr

Informs: what to change to cut the broker's requests and CPU per page (docs/performance.md,
"The broker's bill").
"""

from __future__ import annotations

import argparse
import json
import os
import re
import runpy
import shutil
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

from bench.probes import broker_log

JARS = Path.home() / ".cache/streamcrawl/jars/kafka-4.1.1-log4j-2.24.3"
TOOLS_JAR = Path.home() / ".m2/repository/org/apache/kafka/kafka-tools/4.1.1/kafka-tools-4.1.1.jar"
REQUESTS_PER_SEC = "kafka.network:type=RequestMetrics,name=RequestsPerSec,*"
# Fetches counted a second time by who sent them (a consumer, a follower): not in the totals.
SUBCOUNTS = {"FetchConsumer", "FetchFollower"}
LOGGER_LEVEL = "logger.req.level"

# Broker threads by name (Kafka 4.1, combined broker and controller), first match wins.
THREADS = (
    ("network (client listener)", r"network-thread-\d+-PLAINTEXT"),
    ("network (controller listener)", r"network-thread-\d+-CONTROLLER"),
    ("acceptors", r"socket-acceptor"),
    ("request handlers", r"request-handler"),
    ("purgatory and executors", r"ExpirationReaper|ThrottledChannelReaper|reaper|^executor-"),
    ("group coordinator", r"group-coordinator"),
    ("KRaft and metadata", r"raft|quorum|controller|metadata|snapshot|lifecycle|to-controller"),
    ("log cleaner, scheduler, flush", r"log-cleaner|kafka-scheduler|LogDirFailure"),
    ("GC", r"^GC |G1 |VM Periodic"),
    ("JIT", r"CompilerThread"),
    ("metrics", r"metrics|SensorExpiry"),
)


def prepare(services_dir: Path) -> None:
    """Append a request logger of its own (off: INFO) to the broker's log4j2 file, with a
    2 s monitor so that ``run`` can turn it on and off; the broker reads it at its next start."""
    props = services_dir / "kafka" / "log4j2.properties"
    text = props.read_text()
    if "kafka.request.logger" in text:
        return
    log = services_dir.resolve() / "kafka" / "requests.log"
    props.write_text(
        text
        + "monitorInterval = 2\n"
        + "appender.req.type = File\nappender.req.name = REQ\n"
        + f"appender.req.fileName = {log}\n"
        + "appender.req.layout.type = PatternLayout\n"
        + "appender.req.layout.pattern = %d{UNIX_MILLIS} %m%n\n"
        + "logger.req.name = kafka.request.logger\n"
        + f"{LOGGER_LEVEL} = INFO\nlogger.req.additivity = false\n"
        + "logger.req.appenderRef.req.ref = REQ\n"
    )


def set_request_log(services_dir: Path, level: str) -> None:
    """Switch the request logger (DEBUG: every request logged; INFO: none); log4j2 rereads
    the file within its 2 s monitor."""
    props = services_dir / "kafka" / "log4j2.properties"
    lines = props.read_text().splitlines()
    new = [f"{LOGGER_LEVEL} = {level}" if ln.startswith(LOGGER_LEVEL) else ln for ln in lines]
    if new != lines:
        props.write_text("\n".join(new) + "\n")
        time.sleep(5)


def jcmd(pid: int, *args: str) -> str:
    return subprocess.run(
        ["jcmd", str(pid), *args], check=True, capture_output=True, text=True
    ).stdout


def jfr_settings(period_ms: int = 2) -> Path:
    """JFR's ``profile`` settings with Java code sampled every ``period_ms`` (``profile``
    samples every 10 ms, too few samples of a broker at a few percent of a core)."""
    import tempfile

    home = Path(os.path.realpath(shutil.which("java") or "java")).parent.parent
    text = (home / "lib" / "jfr" / "profile.jfc").read_text()
    text = re.sub(r'(control="method-sampling-java-interval">)[^<]+', rf"\g<1>{period_ms} ms", text)
    out = Path(tempfile.gettempdir()) / f"broker-bill-{period_ms}ms.jfc"
    out.write_text(text)
    return out


def broker_pid(services_dir: Path) -> int:
    return int((services_dir / "kafka" / "pid").read_text().split()[0])


def start_jmx(pid: int, port: int) -> None:
    """A JMX connector on 127.0.0.1:``port`` in the running broker (no restart)."""
    subprocess.run(
        ["jcmd", str(pid), "ManagementAgent.start", "jmxremote.host=127.0.0.1",
         f"jmxremote.port={port}", f"jmxremote.rmi.port={port}",
         "jmxremote.authenticate=false", "jmxremote.ssl=false"],
        check=True, capture_output=True,
    )  # fmt: skip


def jmx_counts(address: str) -> dict[str, float]:
    """API -> requests the broker has counted (``RequestsPerSec`` ``Count``, all versions)."""
    out = subprocess.run(
        ["java", "-cp", f"{JARS}/*:{TOOLS_JAR}", "org.apache.kafka.tools.JmxTool",
         "--jmx-url", f"service:jmx:rmi:///jndi/rmi://{address}/jmxrmi",
         "--object-name", REQUESTS_PER_SEC, "--attributes", "Count", "--one-time", "true",
         "--report-format", "properties"],
        check=True, capture_output=True, text=True, timeout=60,
    ).stdout  # fmt: skip
    counts: Counter[str] = Counter()
    for m in re.finditer(r"request=(\w+),version=\d+:Count=(\d+)", out):
        counts[m.group(1)] += int(m.group(2))
    return dict(counts)


THREAD_LINE = re.compile(r'^"(?P<name>[^"]+)".*?cpu=(?P<cpu>[\d.]+)ms.*?nid=(?P<nid>0x[0-9a-f]+)')


def thread_cpu(pid: int) -> dict[str, tuple[str, float]]:
    """nid -> (thread name, CPU-seconds) of every thread of the JVM ``pid``."""
    text = subprocess.run(
        ["jcmd", str(pid), "Thread.print"], check=True, capture_output=True, text=True
    ).stdout
    out = {}
    for line in text.splitlines():
        if m := THREAD_LINE.match(line):
            out[m["nid"]] = (m["name"], float(m["cpu"]) / 1000)
    return out


def thread_group(name: str) -> str:
    return next((g for g, pattern in THREADS if re.search(pattern, name)), "other")


def threads_between(a: dict[str, tuple[str, float]], b: dict[str, tuple[str, float]]) -> dict:
    """CPU-seconds by thread group between two ``thread_cpu`` readings."""
    out: Counter[str] = Counter()
    for nid, (name, cpu) in b.items():
        out[thread_group(name)] += cpu - a.get(nid, (name, 0.0))[1]
    return {k: round(v, 3) for k, v in out.most_common()}


def proc_cpu(pid: int) -> float:
    import psutil

    t = psutil.Process(pid).cpu_times()
    return t.user + t.system


class Probe:
    """The readings around each seed and drain of a bench row, kept in ``rows``."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.dir = args.services_dir
        self.pid = broker_pid(self.dir)
        self.log = self.dir / "kafka" / "requests.log" if args.request_log else None
        self.rows: list[dict[str, Any]] = []
        self.pending: dict[int, dict[str, Any]] = {}

    def reading(self) -> dict[str, Any]:
        out: dict[str, Any] = {"t": time.time(), "cpu_s": proc_cpu(self.pid)}
        out["threads"] = thread_cpu(self.pid)
        if self.args.jmx:
            out["jmx"] = jmx_counts(self.args.jmx)
        out["t_end"] = time.time()
        return out

    def between(self, a: dict[str, Any], b: dict[str, Any], per: float) -> dict[str, Any]:
        """What the broker did from reading ``a`` to ``b``, divided by ``per``."""
        out: dict[str, Any] = {
            "seconds": round(b["t"] - a["t"], 2),
            "broker_cpu_s": round(b["cpu_s"] - a["cpu_s"], 3),
            "threads_cpu_s": threads_between(a["threads"], b["threads"]),
        }
        if "jmx" in a and "jmx" in b:
            diff = {k: v - a["jmx"].get(k, 0) for k, v in b["jmx"].items()}
            out["requests"] = {k: v for k, v in sorted(diff.items(), key=lambda x: -x[1]) if v}
            out["requests_per"] = {k: round(v / per, 3) for k, v in out["requests"].items()}
            total = sum(v for k, v in diff.items() if k not in SUBCOUNTS)
            out["requests_total_per"] = round(total / per, 3)
        out["broker_cpu_ms_per"] = round(1000 * out["broker_cpu_s"] / per, 3)
        # the JIT compiles for a young broker (and for JFR's start): not a cost of the load
        jit = out["threads_cpu_s"].get("JIT", 0.0)
        out["broker_cpu_ms_per_less_jit"] = round(1000 * (out["broker_cpu_s"] - jit) / per, 3)
        return out

    def on_seed(self, topo: Any) -> None:
        from bench.probes.kafka_probe import topic_sizes

        if self.args.jfr:  # started before the settle: its own start-up (JIT) is not measured
            jcmd(self.pid, "JFR.start", "name=bill", f"settings={jfr_settings()}")
        time.sleep(self.args.settle)
        row: dict[str, Any] = {"prefix": topo.env["STREAMCRAWL_TOPIC_PREFIX"],
                               "workers": len(topo.procs)}  # fmt: skip
        row["log_start"] = self.log.stat().st_size if self.log and self.log.exists() else 0
        if self.args.idle:
            a = self.reading()
            time.sleep(self.args.idle)
            b = self.reading()
            row["idle"] = self.between(a, b, b["t"] - a["t"])
            row["idle_window"] = (a["t_end"], b["t"])
        row["sizes0"] = topic_sizes(topo)
        row["start"] = self.reading()
        self.pending[id(topo)] = row

    def _jfr_file(self) -> Path:
        base = Path(self.args.jfr).resolve()
        n = len(self.rows) + 1
        return base if n == 1 else base.with_name(f"{base.stem}.{n}{base.suffix}")

    def on_drain(self, topo: Any, seeded: Any, drained: Any) -> None:
        from bench.kafka_topology import worker_pages
        from bench.probes.kafka_probe import topic_sizes

        end = self.reading()
        row = self.pending.pop(id(topo))
        if self.args.jfr:  # the crawl only: from the start reading on
            since = int(time.time() - row["start"]["t"]) + 1
            jcmd(self.pid, "JFR.dump", "name=bill", f"filename={self._jfr_file()}",
                 f"begin=-{since}s")  # fmt: skip
            jcmd(self.pid, "JFR.stop", "name=bill")
        pages = drained.states.get("fetched", 0) or 1
        row["pages"] = pages
        row["states"] = drained.states
        row["crawl"] = self.between(row.pop("start"), end, pages)
        row["crawl_window"] = (seeded.t0_unix, drained.last_t, end["t"])
        sizes1 = topic_sizes(topo)
        sizes0 = row.pop("sizes0")
        row["messages_per_page"] = {
            k: round((v - sizes0.get(k, 0)) / pages, 3) for k, v in sorted(sizes1.items())
        }
        row["messages_total_per_page"] = round(sum(row["messages_per_page"].values()), 3)
        _, counts = worker_pages(topo)
        row["worker_counts_per_page"] = {k: round(v / pages, 3) for k, v in counts.items()}
        if self.args.jfr:
            row["jfr"] = str(self._jfr_file())
        self.rows.append(row)
        print("broker_requests: " + json.dumps(summary(row)), flush=True)

    def by_client(self) -> None:
        """Each row's requests by client, from the request log (read once the rows are done)."""
        if not self.log:
            return
        for row in self.rows:
            requests, _ = broker_log.read_log(self.log, row["log_start"])
            prefix = row["prefix"]
            t0, last, _end = row["crawl_window"]
            pages = row["pages"]
            crawl = broker_log.by_role_and_api(requests, prefix, t0, last)
            row["crawl_by_client_per_page"] = per(crawl, pages)
            # to the end of the drain, as the JMX counts: the 3 s quiet of ``drain`` included
            whole = broker_log.by_role_and_api(requests, prefix, t0, _end)
            row["crawl_to_drain_end_by_client_per_page"] = per(whole, pages)
            if "idle_window" in row:
                a, b = row["idle_window"]
                idle = broker_log.by_role_and_api(requests, prefix, a, b)
                row["idle_by_client_per_s"] = per(idle, b - a)


def per(table: dict[str, dict[str, int]], n: float) -> dict[str, dict[str, float]]:
    return {
        role: {"all": round(sum(apis.values()) / n, 3)}
        | {api: round(c / n, 3) for api, c in apis.items()}
        for role, apis in table.items()
    }


def summary(row: dict[str, Any]) -> dict[str, Any]:
    crawl = row["crawl"]
    return {
        "pages": row["pages"],
        "workers": row["workers"],
        "broker_cpu_ms_per_page": crawl["broker_cpu_ms_per"],
        "less_jit": crawl["broker_cpu_ms_per_less_jit"],
        "requests_per_page": crawl.get("requests_total_per"),
        "messages_per_page": row["messages_total_per_page"],
        "frontier_events_per_page": row["worker_counts_per_page"].get("frontier_events"),
        "idle_requests_per_s": (row.get("idle") or {}).get("requests_total_per"),
    }


def run(args: argparse.Namespace, module_argv: list[str]) -> None:
    import bench.kafka_runner as runner
    import bench.kafka_topology as topology

    if args.poll_interval:
        topology.STATUS_POLL_S = args.poll_interval
    probe = Probe(args)
    if args.request_log:
        set_request_log(args.services_dir, "DEBUG")
    real_seed, real_drain = runner.seed, runner.drain

    def seed(topo: Any, *a: Any, **kw: Any) -> Any:
        probe.on_seed(topo)
        return real_seed(topo, *a, **kw)

    def drain(topo: Any, seeded: Any, **kw: Any) -> Any:
        drained = real_drain(topo, seeded, **kw)
        probe.on_drain(topo, seeded, drained)
        return drained

    runner.seed, runner.drain = seed, drain  # type: ignore[assignment]
    sys.argv = [module_argv[0], *module_argv[1:]]
    try:
        runpy.run_module(module_argv[0], run_name="__main__", alter_sys=True)
    finally:
        runner.seed, runner.drain = real_seed, real_drain
        if args.request_log:
            set_request_log(args.services_dir, "INFO")
        probe.by_client()
        for row in probe.rows:
            for key in ("crawl", "idle"):
                row.get(key, {}).pop("threads", None)
        result = {"command": " ".join(sys.orig_argv), "rows": probe.rows}
        if args.out:
            args.out.parent.mkdir(parents=True, exist_ok=True)
            args.out.write_text(json.dumps(result, indent=1, default=str))
        print(json.dumps([summary(r) for r in probe.rows], indent=1))


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    own, _, module_argv = (
        (argv[: argv.index("--")], None, argv[argv.index("--") + 1 :]) if "--" in argv else
        (argv, None, [])
    )  # fmt: skip
    ap = argparse.ArgumentParser(prog="python -m bench.probes.broker_requests",
                                 description=(__doc__ or "").splitlines()[0])  # fmt: skip
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("prepare", help="add the request logger to the broker's log4j2 file")
    p.add_argument("--services-dir", type=Path, default=Path(".services"))
    p = sub.add_parser("jmx", help="start a JMX connector in the running broker")
    p.add_argument("--services-dir", type=Path, default=Path(".services"))
    p.add_argument("--port", type=int, default=39999)
    p = sub.add_parser("run", help="run a bench module (after --) with the readings")
    p.add_argument("--services-dir", type=Path, default=Path(".services"))
    p.add_argument("--jmx", metavar="HOST:PORT", help="read RequestsPerSec there")
    p.add_argument("--request-log", action="store_true", help="log every request (by client)")
    p.add_argument("--jfr", metavar="FILE", help="record each crawl with JFR (FILE, FILE.2...)")
    p.add_argument("--idle", type=float, default=30.0, help="seconds idle before each seed")
    p.add_argument("--settle", type=float, default=15.0, help="seconds before the idle window")
    p.add_argument(
        "--poll-interval",
        type=float,
        help="seconds between the bench's status polls (bench.kafka_topology.STATUS_POLL_S)",
    )
    p.add_argument("--out", type=Path)
    p = sub.add_parser("jfr-summary", help="where the recorded CPU went")
    p.add_argument("jfr", type=Path)
    p.add_argument("--top", type=int, default=25)
    args = ap.parse_args(own)
    if args.cmd == "prepare":
        prepare(args.services_dir)
    elif args.cmd == "jmx":
        start_jmx(broker_pid(args.services_dir), args.port)
    elif args.cmd == "run":
        if not module_argv:
            ap.error("run needs a bench module after --, e.g. -- bench.worker_rows ...")
        os.environ.setdefault("PYTHONUNBUFFERED", "1")
        run(args, module_argv)
    else:
        from bench.probes.broker_jfr import summarize

        print(json.dumps(summarize(args.jfr, args.top), indent=1))


if __name__ == "__main__":
    main()
