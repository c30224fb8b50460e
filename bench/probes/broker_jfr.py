"""Where a Kafka broker's CPU went, from a Java Flight Recorder recording of it (``jfr print
--json``): execution samples by thread group (``broker_requests.THREADS``), by what the
sampled code was doing (``WORK``: the first rule that a frame matches, from the leaf up), by
the request API a request handler was serving (``KafkaApis.handle*`` on the stack), and the
hottest leaf methods.

    .venv/bin/python -m bench.probes.broker_jfr /tmp/broker.jfr [--top 25]

(``python -m bench.probes.broker_requests jfr-summary FILE`` prints the same.) JFR samples Java
code only: time in the kernel (socket writes, ``epoll``, ``sendfile``) shows as the Java frame
that called it, and the JVM's own threads (GC, JIT) are not sampled: their CPU is in
``broker_requests``' thread table. Informs: where the broker's CPU per page goes
(docs/performance.md, "The broker's bill").
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
from collections import Counter
from pathlib import Path
from typing import Any

# (what, pattern over "package.Class.method"), from the leaf up: the first frame that matches
# any rule names the sample.
WORK = (
    ("request log (JSON)", r"RequestConvertToJson|JsonConverter|jackson|log4j"),
    ("compression", r"(?i)zstd|lz4|snappy|GZIP|Deflater|Inflater"),
    ("CRC and batch validation", r"Crc32|LogValidator|ensureValid|validateRecords"),
    ("log append", r"(LogSegment|FileRecords|UnifiedLog)\.append|OffsetIndex|TimeIndex"),
    ("log read (fetch)", r"(UnifiedLog|LogSegment)\.read|FileRecords\.slice|readFromLog"),
    ("zero-copy send (sendfile)", r"transferTo|FileRecords\.writeTo|TransferableRecords"),
    ("purgatory and timers", r"Delayed(Operation|Fetch|Produce)|TimingWheel|SystemTimer|TimerTask"),
    ("group coordinator", r"coordinator\.(group|common)|GroupCoordinator|CoordinatorRuntime"),
    ("metadata", r"MetadataCache|handleTopicMetadataRequest|MetadataResponse|metadata\.KRaft"),
    (
        "request parse and response build",
        r"common\.(message|requests|protocol)\.|ObjectSerializationCache|ByteBufferAccessor",
    ),
    ("metrics and quotas", r"common\.metrics|yammer|Histogram|Meter\b|QuotaManager|Sensor"),
    ("network (selector, sockets)", r"common\.network\.|sun\.nio\.ch|SocketServer|java\.nio"),
    (
        "KRaft and controller",
        r"kafka\.raft|QuorumController|kafka\.server\.metadata|kafka\.image|controller\.",
    ),
    ("request dispatch (KafkaApis, handlers)", r"KafkaApis|KafkaRequestHandler|RequestChannel"),
)
HANDLE = re.compile(r"KafkaApis\.(handle\w+)")


def frames(event: dict[str, Any]) -> list[str]:
    """``package.Class.method`` of each frame of a sample, leaf first."""
    trace = event["values"].get("stackTrace") or {}
    out = []
    for f in trace.get("frames") or ():
        method = f.get("method") or {}
        out.append(f"{(method.get('type') or {}).get('name', '?')}.{method.get('name', '?')}")
    return out


def work_of(stack: list[str]) -> str:
    for frame in stack:
        for what, pattern in WORK:
            if re.search(pattern, frame):
                return what
    return "other"


def thread_of(event: dict[str, Any]) -> str:
    from bench.probes.broker_requests import thread_group

    thread = event["values"].get("sampledThread") or {}
    return thread_group(str(thread.get("javaName") or thread.get("osName") or "?"))


def samples(path: Path) -> list[dict[str, Any]]:
    out = subprocess.run(
        ["jfr", "print", "--json", "--stack-depth", "64", "--events", "jdk.ExecutionSample",
         str(path)],
        check=True, capture_output=True, text=True,
    ).stdout  # fmt: skip
    events: list[dict[str, Any]] = json.loads(out)["recording"]["events"]
    return events


def share(counter: Counter[str], total: int, top: int | None = None) -> dict[str, float]:
    return {k: round(v / total, 3) for k, v in counter.most_common(top)}


def summarize(path: Path, top: int = 25) -> dict[str, Any]:
    """Shares of the execution samples by thread group, by work, by request API, and the top
    leaf methods, overall and in the request handlers and network threads."""
    by_thread: Counter[str] = Counter()
    by_work: Counter[str] = Counter()
    work_in: dict[str, Counter[str]] = {}
    by_api: Counter[str] = Counter()
    leaf: Counter[str] = Counter()
    events = samples(path)
    for e in events:
        stack = frames(e)
        group, work = thread_of(e), work_of(stack)
        by_thread[group] += 1
        by_work[work] += 1
        work_in.setdefault(group, Counter())[work] += 1
        if stack:
            leaf[stack[0]] += 1
        handle = next((m.group(1) for f in stack if (m := HANDLE.search(f))), None)
        if handle:
            by_api[handle] += 1
    n = max(len(events), 1)
    return {
        "samples": len(events),
        "by_thread": share(by_thread, n),
        "by_work": share(by_work, n),
        "work_by_thread": {g: share(c, sum(c.values())) for g, c in work_in.items()},
        "request_handlers_by_api": share(by_api, n),
        "top_leaf_methods": share(leaf, n, top),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("jfr", type=Path)
    ap.add_argument("--top", type=int, default=25)
    args = ap.parse_args()
    print(json.dumps(summarize(args.jfr, args.top), indent=1))


if __name__ == "__main__":
    main()
