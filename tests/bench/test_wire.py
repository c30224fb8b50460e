"""The bench's capture analysis (bench/wire.py): requests' kernel arrival times read from a
pcap file, one origin's gaps measured from them. Files written here, no capture, no network."""

from __future__ import annotations

import struct
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:  # `bench` is a top-level folder of the repo
    sys.path.insert(0, str(REPO))

from bench import wire  # noqa: E402


def segment(dport: int, payload: bytes, *, sport: int = 40000, seq: int = 1) -> bytes:
    """An Ethernet + IPv4 + TCP packet (what tcpdump -i lo writes) with ``payload``."""
    tcp = struct.pack("!HHIIBBHHH", sport, dport, seq, 0, 5 << 4, 0x18, 65535, 0, 0)
    ip = struct.pack(
        "!BBHHHBBH4s4s",
        0x45,
        0,
        20 + len(tcp) + len(payload),
        0,
        0,
        64,
        6,
        0,
        bytes([127, 0, 0, 1]),
        bytes([127, 0, 0, 1]),
    )
    return b"\0" * 12 + b"\x08\x00" + ip + tcp + payload


def pcap(path: Path, packets: list[tuple[float, bytes]]) -> Path:
    out = [struct.pack("<IHHiIII", 0xA1B23C4D, 2, 4, 0, 0, 262144, 1)]
    for at, pkt in packets:
        sec = int(at)
        out.append(struct.pack("<IIII", sec, round((at - sec) * 1e9), len(pkt), len(pkt)))
        out.append(pkt)
    path.write_bytes(b"".join(out))
    return path


SEQ = iter(range(1000, 10**6, 100))  # each request its own place in its connection's stream


def get(port: int, target: str, seq: int | None = None) -> bytes:
    request = f"GET {target} HTTP/1.1\r\nHost: x\r\n\r\n".encode()
    return segment(port, request, seq=next(SEQ) if seq is None else seq)


def test_gaps_come_from_the_kernel_timestamps_per_origin(tmp_path: Path) -> None:
    t = 1_700_000_000.0
    f = pcap(
        tmp_path / "a.pcap",
        [
            (t, get(21000, "/robots.txt")),
            (t + 0.1, get(21000, "/")),
            (t + 0.2, get(21001, "/")),
            (t + 0.6003, get(21000, "/s1/p1.html", seq=7)),
            (t + 0.6004, get(21000, "/s1/p1.html", seq=7)),  # retransmitted: the same segment
            (t + 0.65, segment(21000, b"body bytes, not a request")),
            (t + 0.69, get(21001, "/s2/p2.html")),
        ],
    )
    arrivals = list(wire.read_pcap(f))
    assert [(a.port, a.path) for a in arrivals][:3] == [
        (21000, "/robots.txt"),
        (21000, "/"),
        (21001, "/"),
    ]
    assert len(arrivals) == 5
    r = wire.analyze(iter(arrivals))
    assert r.requests == 5
    assert r.gaps_by_origin[21000] == pytest.approx(0.5003, abs=1e-6)
    assert r.gaps_by_origin[21001] == pytest.approx(0.49, abs=1e-6)
    assert r.min_gap == pytest.approx(0.49, abs=1e-6)
    assert r.min_gap_with_robots == pytest.approx(0.1, abs=1e-6)  # robots.txt, then /
    assert r.origins_under(0.5) == [21001]
    assert wire.analyze(iter(arrivals)).as_dict(0.5)["origins_under_delay"] == [21001]


def test_not_a_pcap_is_an_error_not_an_empty_report(tmp_path: Path) -> None:
    bad = tmp_path / "bad.pcap"
    bad.write_bytes(b"x" * 40)
    with pytest.raises(ValueError, match="not a pcap"):
        list(wire.read_pcap(bad))


def test_without_tcpdump_the_run_says_why(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def missing(binary: str) -> str:
        raise RuntimeError(f"{binary} is not installed: run `apt-get install -y {binary}`")

    monkeypatch.setattr(wire, "ensure_debian_tool", missing)
    with wire.Capture(tmp_path / "w.pcap", 21000, 21001) as cap:
        pass
    report = cap.report()
    assert report.status == "not run" and "tcpdump" in (report.reason or "")
