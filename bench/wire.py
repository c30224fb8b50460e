"""Request arrival times on the wire: a packet capture of loopback during a politeness run.

nginx's access log times a request with its cached clock (updated once per turn of its event
loop), so on this loaded 2-core machine a request's logged start can be late by 10-30 ms and
a gap between two requests can look shorter than it was. The kernel's capture timestamps are
taken when the packet crosses loopback: ``tcpdump`` (root or CAP_NET_RAW) records the first
segment of every ``GET`` sent to the site's ports, and the gaps between one origin's arrivals
are measured from those. Without tcpdump, or without the right to capture, the run says so
(``status``) and the access log's figures stand alone.

``python -m bench.wire FILE.pcap [--delay D]`` prints the figures of a saved capture.
"""

from __future__ import annotations

import argparse
import json
import signal
import struct
import subprocess
import time
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from bench.logs import ROBOTS, origin_gaps
from bench.server import ensure_debian_tool
from bench.tables import cell, entries, reason, table

_GET = 0x47455420  # "GET " as the first four bytes of the TCP payload
_NANO_MAGIC = 0xA1B23C4D
_MICRO_MAGIC = 0xA1B2C3D4
_DLT_EN10MB = 1  # what tcpdump -i lo writes on Linux
_DLT_LINUX_SLL = 113


@dataclass
class Arrival:
    at: float  # kernel timestamp, epoch seconds
    port: int  # the site's port: one origin
    path: str


@dataclass
class WireReport:
    status: str  # "ok", or why nothing was captured
    reason: str | None = None
    requests: int = 0
    min_gap: float | None = None  # smallest gap between one origin's arrivals (robots excluded)
    min_gap_with_robots: float | None = None
    gaps_by_origin: dict[int, float] = field(default_factory=dict)

    def origins_under(self, delay: float, tolerance: float = 0.0005) -> list[int]:
        """Ports whose smallest gap fell under ``delay`` (the capture's clock: microseconds)."""
        return sorted(p for p, g in self.gaps_by_origin.items() if g < delay - tolerance)

    def as_dict(self, delay: float | None = None) -> dict:
        out: dict = {
            "status": self.status,
            "reason": self.reason,
            "requests": self.requests,
            "min_gap": self.min_gap,
            "min_gap_with_robots": self.min_gap_with_robots,
        }
        if delay:
            out["origins_under_delay"] = self.origins_under(delay)
        return out


def _filter(first_port: int, last_port: int) -> str:
    # Only the first segment of each request: its payload starts with "GET ".
    return (
        f"tcp dst portrange {first_port}-{last_port} and "
        f"tcp[((tcp[12:1] & 0xf0) >> 2):4] = {_GET:#x}"
    )


class Capture:
    """``tcpdump`` on loopback for the ports ``[first_port, last_port]`` while in the block."""

    def __init__(self, path: Path, first_port: int, last_port: int) -> None:
        self.path = path
        self.ports = (first_port, last_port)
        self.proc: subprocess.Popen[bytes] | None = None
        self.reason: str | None = None

    def __enter__(self) -> Capture:
        try:
            exe = ensure_debian_tool("tcpdump")
        except RuntimeError as exc:
            self.reason = str(exc)
            return self
        self.path.parent.mkdir(parents=True, exist_ok=True)
        err = self.path.with_suffix(".stderr")
        argv = [exe, "-i", "lo", "-n", "-U", "-s", "256", "--time-stamp-precision=nano"]
        argv += ["-w", str(self.path), _filter(*self.ports)]
        with err.open("wb") as e:
            self.proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=e)
        deadline = time.monotonic() + 10.0
        while time.monotonic() < deadline:  # tcpdump says "listening on lo" once it captures
            if b"listening on" in err.read_bytes():
                return self
            if self.proc.poll() is not None:
                break
            time.sleep(0.05)
        self._stop()
        self.reason = f"tcpdump did not start: {err.read_text(errors='replace').strip()[-300:]}"
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop()

    def _stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            time.sleep(0.2)  # the last request's packet is written (-U: per packet)
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()

    def report(self) -> WireReport:
        if self.reason is not None:
            return WireReport(status="not run", reason=self.reason)
        try:
            return analyze(read_pcap(self.path))
        except (OSError, ValueError) as e:
            return WireReport(status="failed", reason=f"{type(e).__name__}: {e}"[:300])


def read_pcap(path: Path) -> Iterator[Arrival]:
    """Each captured segment's kernel timestamp, destination port and request path (IPv4)."""
    data = path.read_bytes()
    if len(data) < 24:
        raise ValueError(f"{path}: not a pcap file ({len(data)} bytes)")
    for endian in ("<", ">"):
        magic = struct.unpack(endian + "I", data[:4])[0]
        if magic in (_NANO_MAGIC, _MICRO_MAGIC):
            break
    else:
        raise ValueError(f"{path}: not a pcap file (magic {data[:4].hex()})")
    scale = 1e-9 if magic == _NANO_MAGIC else 1e-6
    link = struct.unpack(endian + "I", data[20:24])[0]
    if link == _DLT_EN10MB:
        l2 = 14
    elif link == _DLT_LINUX_SLL:
        l2 = 16
    else:
        raise ValueError(f"{path}: link type {link} not handled")
    seen: set[tuple[int, int, int]] = set()  # (source port, port, TCP seq): retransmissions
    offset = 24
    record = struct.Struct(endian + "IIII")
    while offset + 16 <= len(data):
        sec, frac, caplen, _ = record.unpack_from(data, offset)
        pkt = data[offset + 16 : offset + 16 + caplen]
        offset += 16 + caplen
        ip = pkt[l2:]
        if len(ip) < 20 or ip[0] >> 4 != 4 or ip[9] != 6:
            continue
        tcp = ip[(ip[0] & 0x0F) * 4 :]
        if len(tcp) < 20:
            continue
        sport, dport, seq = struct.unpack("!HHI", tcp[:8])
        payload = tcp[(tcp[12] >> 4) * 4 :]
        if not payload.startswith(b"GET ") or (sport, dport, seq) in seen:
            continue
        seen.add((sport, dport, seq))
        target = payload[4:].split(b" ", 1)[0].decode("latin-1")
        yield Arrival(at=sec + frac * scale, port=dport, path=target)


def analyze(arrivals: Iterator[Arrival]) -> WireReport:
    pages: dict[int, list[float]] = defaultdict(list)
    every: dict[int, list[float]] = defaultdict(list)
    n = 0
    for a in arrivals:
        n += 1
        every[a.port].append(a.at)
        if a.path != ROBOTS:
            pages[a.port].append(a.at)
    r = WireReport(status="ok", requests=n)
    r.gaps_by_origin, r.min_gap, r.min_gap_with_robots = origin_gaps(pages, every)
    return r


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("pcap", type=Path)
    ap.add_argument("--delay", type=float)
    args = ap.parse_args()
    report = analyze(read_pcap(args.pcap))
    print(json.dumps(report.as_dict(args.delay), indent=1))


if __name__ == "__main__":
    main()


def _wire_cells(wire: dict | None) -> list[str]:
    """The capture's min gap and origins under delay; why not, for a run without one."""
    if not wire:
        return ["not captured", "-"]
    if wire.get("status") != "ok":
        return [f"{wire.get('status')}: {wire.get('reason', '')}", "-"]
    return [cell(wire.get("min_gap"), 4), str(len(wire.get("origins_under_delay") or ()))]


def politeness_section(pol: dict) -> list[str]:
    s = pol["_site"]
    lines = [
        f"## Politeness-bound run: {s['origins']} origins x {s['pages']} pages, "
        f"delay {s['delay']} s",
        "",
        f"Ideal throughput = origins / delay = **{s['ideal_pages_per_s']:.0f} pages/s**. Gaps are "
        "between request *starts* on one origin (`$msec - $request_time` in the access log, 1 ms "
        "resolution), robots.txt excluded; *origins under delay* counts origins whose smallest gap "
        "is under the delay minus 2 ms. nginx's clock is cached per turn of its event loop, so "
        "on a loaded machine a logged start can be late by 10-30 ms; *on the wire* gives the "
        "same gaps from the kernel's timestamps of a loopback capture of the requests "
        "(`bench/wire.py`, tcpdump), robots.txt excluded, under the delay if by more than 0.5 ms.",
        "",
    ]
    rows = []
    for _, e in entries(pol):
        if e["status"] != "ok":
            rows.append([e["label"], f"**{e['status']}**: {reason(e)}", *[""] * 9])
            continue
        rows.append(
            [
                e["label"],
                f"{e['pages']:,} / {s['expected']:,}",
                cell(e["span_s"]),
                cell(e["span_pages_per_s"], 0),
                f"{e['span_pages_per_s'] / s['ideal_pages_per_s']:.0%}",
                cell(e["min_gap"], 3),
                cell(e["min_gap_with_robots"], 3),
                str(len(e["origins_under_delay"])),
                *_wire_cells(e.get("wire")),
                f"{e['cpu_s'] / e['span_s']:.0%}" if e["span_s"] else "-",
            ]
        )
    lines += table(
        [
            "crawler",
            "pages",
            "log span s",
            "pages/s",
            "of ideal",
            "min gap s",
            "min gap incl. robots.txt s",
            "origins under delay",
            "min gap on the wire s",
            "origins under delay on the wire",
            "crawler CPU / span",
        ],
        rows,
    )
    lines += [
        "",
        "*crawler CPU / span* near 100% (one core) means the crawler was bound by its own CPU, "
        "not by the delay. Scrapy here puts each origin (host:port) in its own download slot with "
        "CONCURRENT_REQUESTS_PER_DOMAIN=1, DOWNLOAD_DELAY=delay, DOWNLOAD_DELAY_JITTER=0 and "
        "SCHEDULER_PRIORITY_QUEUE=DownloaderAwarePriorityQueue (Scrapy's broad-crawl advice).",
        "",
    ]
    return lines
