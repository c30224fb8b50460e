"""The broker's request log read back: every request a Kafka broker completed, by API and by the
client that sent it (``bench/probes/broker_requests.py`` runs the crawls and reads it).

Kafka's ``kafka.request.logger`` at DEBUG writes one line per completed request, ``Completed
request:{JSON}`` with the request's header (API, client id), its body (topics, group; record
batches as sizes only) and the connection it came on (``broker address-client address-N``).
With the layout ``%d{UNIX_MILLIS} %m%n`` (``broker_requests prepare`` writes it), each line
starts with its time. The worker's clients all call themselves ``faust-*`` or ``aiokafka-*``,
so a client is told by its connection: what the connection asked for (``ROLES``: the group of
its coordinator requests, the topics of its fetches and produces, a metadata request for one
topic), read over the whole log, since a connection's first requests may fall outside the
window counted.

    .venv/bin/python -m bench.probes.broker_log REQUESTS.LOG --prefix PREFIX [--from T0 --to T1]

prints the requests of the window by client and API. Informs: which clients cost the broker
requests per page (docs/performance.md, "The broker's bill").
"""

from __future__ import annotations

import argparse
import json
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

MARK = " Completed request:"
GROUP_APIS = {"JOIN_GROUP", "SYNC_GROUP", "HEARTBEAT", "LEAVE_GROUP", "OFFSET_COMMIT"}


@dataclass(frozen=True)
class Request:
    """One completed request: when (unix ms), which API, on which connection, for what."""

    t_ms: int
    api: str
    client_id: str
    connection: str
    listener: str
    software: str
    topics: tuple[str, ...]
    groups: tuple[str, ...]


def _names(items: object, *keys: str) -> list[str]:
    """The values of the first of ``keys`` each dict of ``items`` has (lists of topics)."""
    out: list[str] = []
    for item in items if isinstance(items, list) else ():
        if isinstance(item, dict):
            out += [str(item[k]) for k in keys if isinstance(item.get(k), str)][:1]
    return out


def parse_line(line: str) -> Request | None:
    """A request of one log line; None for any other line."""
    stamp, mark, body = line.partition(MARK)
    if not mark or not stamp.strip().isdigit():
        return None
    try:
        d = json.loads(body)
    except ValueError:
        return None
    header, req = d.get("requestHeader") or {}, d.get("request") or {}
    topics = _names(req.get("topics"), "topic", "name") + _names(req.get("topicData"), "name")
    groups = [str(req["groupId"])] if isinstance(req.get("groupId"), str) else []
    groups += _names(req.get("groups"), "groupId")
    if isinstance(req.get("key"), str) and req.get("keyType", 0) == 0:
        groups.append(req["key"])  # FindCoordinator of a group
    groups += [k for k in req.get("coordinatorKeys") or () if isinstance(k, str)]
    return Request(
        t_ms=int(stamp.strip()),
        api=str(header.get("requestApiKeyName", header.get("requestApiKey"))),
        client_id=str(header.get("clientId")),
        connection=str(d.get("connection")),
        listener=str(d.get("listener")),
        software=str((d.get("clientInformation") or {}).get("softwareName")),
        topics=tuple(topics),
        groups=tuple(groups),
    )


def read_log(path: Path, start: int = 0) -> tuple[list[Request], int]:
    """The requests of ``path`` from byte ``start`` on, and the byte it ends at."""
    with path.open("rb") as f:
        f.seek(start)
        data = f.read()
    cut = data.rfind(b"\n") + 1  # a line being written is left for the next read
    lines = data[:cut].decode("utf-8", "replace").splitlines()
    return [r for line in lines if (r := parse_line(line)) is not None], start + cut


@dataclass
class Connection:
    """What one connection asked for, over the whole log."""

    apis: Counter[str] = field(default_factory=Counter)
    topics: set[str] = field(default_factory=set)  # short names (the run's prefix taken off)
    metadata_topics: set[str] = field(default_factory=set)
    groups: set[str] = field(default_factory=set)
    client_id: str = ""
    software: str = ""
    listener: str = ""


def short(topic: str, prefix: str) -> str:
    """``frontier`` for ``<prefix>.frontier``, ``changelog`` for ``<prefix>-worker-seen-changelog``;
    ``other`` for a topic of no run of this prefix."""
    if topic.startswith(prefix + ".") and not topic.endswith("-changelog"):
        return topic[len(prefix) + 1 :]
    if topic.startswith(prefix) and topic.endswith("-changelog"):
        return "changelog"
    return "other"


def connections(requests: Iterable[Request], prefix: str) -> dict[str, Connection]:
    out: dict[str, Connection] = {}
    for r in requests:
        c = out.setdefault(r.connection, Connection())
        c.apis[r.api] += 1
        c.client_id, c.listener = r.client_id, r.listener
        c.software = r.software if r.software != "None" else c.software
        names = {short(t, prefix) for t in r.topics}
        if r.api == "METADATA":
            c.metadata_topics |= names
        elif r.api in ("FETCH", "PRODUCE", "LIST_OFFSETS"):
            c.topics |= names
        c.groups |= {g.removeprefix(prefix) for g in r.groups if g.startswith(prefix)}
    return out


SINK_TOPICS = {"pages", "status"}
VIEW_TOPICS = {"control", "budget"}
BULK_TOPICS = {"pages", "captures"}


def role(c: Connection) -> str:
    """Which client a connection belongs to (``ROLES`` lists them)."""
    if c.listener == "CONTROLLER":
        return "controller (the broker's own)"
    if c.client_id.startswith("rdkafka") or "confluent" in c.software or "librdkafka" in c.software:
        if c.apis["PRODUCE"] or c.apis["CREATE_TOPICS"]:
            return "CLI (seed, admin)"
        return "bench status poller"
    if c.groups & {"-sink"} and (c.apis.keys() & (GROUP_APIS | {"OFFSET_FETCH"})):
        return "sink consumer: group"
    if c.groups & {"-worker"} and (c.apis.keys() & (GROUP_APIS | {"OFFSET_FETCH"})):
        return "Faust consumer: group"
    if c.apis["PRODUCE"] or c.apis["INIT_PRODUCER_ID"]:
        return "bulk producer" if c.topics and c.topics <= BULK_TOPICS else "Faust producer"
    if c.apis["FETCH"] or c.apis["LIST_OFFSETS"]:
        if c.topics & VIEW_TOPICS:
            return "control view consumer"
        if c.topics and c.topics <= SINK_TOPICS:
            return "sink consumer: fetch"
        return "Faust consumer: fetch"
    if c.metadata_topics == {"frontier"} and c.apis.keys() <= {"METADATA", "API_VERSIONS"}:
        return "health probe"
    if c.apis["FIND_COORDINATOR"]:
        return "coordinator lookup"
    return "other (bootstrap, metadata only)"


ROLES = (
    "Faust consumer: fetch",
    "Faust consumer: group",
    "Faust producer",
    "bulk producer",
    "sink consumer: fetch",
    "sink consumer: group",
    "control view consumer",
    "health probe",
    "coordinator lookup",
    "other (bootstrap, metadata only)",
    "bench status poller",
    "CLI (seed, admin)",
    "controller (the broker's own)",
)


def window(requests: Iterable[Request], t0: float, t1: float) -> Iterator[Request]:
    """The requests completed in [t0, t1) (unix seconds)."""
    lo, hi = int(t0 * 1000), int(t1 * 1000)
    return (r for r in requests if lo <= r.t_ms < hi)


def by_role_and_api(
    requests: list[Request], prefix: str, t0: float, t1: float
) -> dict[str, dict[str, int]]:
    """Role -> API -> requests completed in [t0, t1), roles told over all of ``requests``."""
    roles = {conn: role(c) for conn, c in connections(requests, prefix).items()}
    out: dict[str, Counter[str]] = {}
    for r in window(requests, t0, t1):
        out.setdefault(roles[r.connection], Counter())[r.api] += 1
    return {k: dict(v.most_common()) for k, v in sorted(out.items())}


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("log", type=Path)
    ap.add_argument("--prefix", required=True, help="the run's STREAMCRAWL_TOPIC_PREFIX")
    ap.add_argument("--from", dest="t0", type=float, default=0.0, help="unix seconds")
    ap.add_argument("--to", dest="t1", type=float, default=1e12, help="unix seconds")
    args = ap.parse_args()
    requests, _ = read_log(args.log)
    print(json.dumps(by_role_and_api(requests, args.prefix, args.t0, args.t1), indent=1))


if __name__ == "__main__":
    main()
