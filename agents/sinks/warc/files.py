"""WARC files in a directory: naming, rotation, durable close, and recovery after a crash
(docs/warc.md, "Files").

A file is written as ``<name>.open`` and renamed to ``<name>`` only once flushed and fsynced
(then the directory is fsynced), so a file without ``.open`` is always complete. After a crash,
``recover`` cuts each ``.open`` file back to its last complete capture and closes it; the
resumed crawl starts a new file (a new serial), never appends to an old one.
"""

from __future__ import annotations

import logging
import os
import re
import socket
import time
import zlib
from collections.abc import Iterable, Iterator, Mapping
from datetime import UTC, datetime
from pathlib import Path
from types import TracebackType
from typing import BinaryIO

from streamcrawl.agents.sinks.warc.dedupe import PayloadDigests
from streamcrawl.agents.sinks.warc.records import (
    DEFAULT_LEVEL,
    capture_records,
    check_info,
    encode,
    record_type,
    warcinfo_record,
)
from streamcrawl.schemas.records import Capture

log = logging.getLogger(__name__)

EXTENSION = ".warc.gz"
OPEN = ".open"
_READ = 1 << 20
_NAME_PART = re.compile(r"[A-Za-z0-9._-]+")


class WarcFiles:
    """One writer of WARC files into ``directory``: ``{prefix}-{timestamp}-{serial}-{hostname}
    .warc.gz`` (the WARC 1.1 annex's naming; timestamp ``YYYYmmddHHMMSSffffff`` UTC, serial
    5+ digits, continuing after the highest one of the same prefix and hostname there).

    A file starts with its warcinfo record (``info`` adds fields to it, e.g. ``operator``,
    ``isPartOf``) and is closed once it holds ``max_size`` bytes or more, between two captures:
    a capture's records never span files. ``level``: zlib level of the records (a compressed
    payload is stored whatever it is). One writer per directory, prefix and hostname. An
    asset whose payload this writer wrote already is written as a revisit of that response
    (``digests``: agents/sinks/warc/dedupe.py).

    After an OSError from ``write`` or ``sync`` the writer is unusable: drop it, and
    ``recover`` at the next start keeps what was complete.
    """

    def __init__(
        self,
        directory: Path,
        *,
        prefix: str = "streamcrawl",
        max_size: int = 1 << 30,
        hostname: str | None = None,
        level: int = DEFAULT_LEVEL,
        info: Mapping[str, str] | None = None,
    ) -> None:
        if not _NAME_PART.fullmatch(prefix):
            raise ValueError(f"WARC file prefix {prefix!r}: use letters, digits and -_.")
        if max_size < 1 or not 0 <= level <= 9:
            raise ValueError(f"WARC files: max_size {max_size} must be > 0, level {level} 0-9")
        check_info(info or {})
        directory.mkdir(parents=True, exist_ok=True)
        self.directory = directory
        self.prefix = prefix
        self.max_size = max_size
        self.hostname = _safe_name(hostname or socket.gethostname())
        self.level = level
        self.info = dict(info or {})
        self._fh: BinaryIO | None = None
        self._path: Path | None = None  # the open file, with its .open suffix
        self._warcinfo_id = ""
        self._size = 0
        self._closed: list[Path] = []
        self.digests = PayloadDigests()

    @property
    def current(self) -> Path | None:
        """The file being written (its ``.open`` name); None: none is open."""
        return self._path

    @property
    def closed(self) -> tuple[Path, ...]:
        """The files this writer closed, in order (their final names)."""
        return tuple(self._closed)

    def write(self, captures: Iterable[Capture]) -> int:
        """Append the records of ``captures``, opening a file (with its warcinfo) on first
        need and closing it once it reaches ``max_size``; returns the bytes written. Written
        means handed to the OS: durable only after ``sync`` (or ``close``)."""
        written = 0
        for capture in captures:
            if not capture.exchanges:
                continue  # nothing to archive
            if self._fh is None:
                written += self._open()
            assert self._fh is not None
            data = encode(
                capture_records(self.digests.dedupe(capture), self._warcinfo_id), self.level
            )
            self._fh.write(data)
            self._size += len(data)
            written += len(data)
            if self._size >= self.max_size:
                self._close()
        if self._fh is not None:
            # Out of this process's buffer: a kill -9 after the caller commits its state
            # cannot lose what the state says was archived (tests/integration/test_warc_crawl.py).
            self._fh.flush()
        return written

    def sync(self) -> None:
        """Flush and fsync the open file: when it returns, everything written is durable."""
        if self._fh is not None:
            self._fh.flush()
            os.fsync(self._fh.fileno())

    def close(self) -> None:
        """Close the open file durably (flush, fsync, rename, fsync of the directory). Creates
        nothing when nothing was written; a second call does nothing."""
        if self._fh is not None:
            self._close()

    def __enter__(self) -> WarcFiles:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if kind is None:
            self.close()
        elif self._fh is not None:  # maybe mid-record: leave the .open file to ``recover``
            self._fh.close()
            self._fh = self._path = None

    def _open(self) -> int:
        now = time.time()
        stamp = datetime.fromtimestamp(now, UTC).strftime("%Y%m%d%H%M%S%f")
        serial = max(serials(self.directory, self.prefix, self.hostname), default=-1) + 1
        name = f"{self.prefix}-{stamp}-{serial:05d}-{self.hostname}{EXTENSION}"
        info = warcinfo_record(name, date=now, hostname=self.hostname, info=self.info)
        data = info.encode(self.level)
        self._path = self.directory / (name + OPEN)
        self._fh = open(self._path, "xb")  # noqa: SIM115 - closed in _close()
        _fsync_dir(self.directory)  # the new name survives a power cut: ``sync`` relies on it
        self._fh.write(data)
        self._warcinfo_id = info.id
        self._size = len(data)
        return len(data)

    def _close(self) -> None:
        assert self._fh is not None and self._path is not None
        self.sync()
        self._fh.close()
        final = self._path.with_name(self._path.name.removesuffix(OPEN))
        os.replace(self._path, final)
        _fsync_dir(self.directory)
        self._closed.append(final)
        self._fh = self._path = None
        # The Kafka writer logs each close at INFO with its captures (topology/archive/writer.py).
        log.debug("warc file closed: %s (%d bytes)", final.name, self._size)


def serials(directory: Path, prefix: str, hostname: str) -> list[int]:
    """The serial numbers of the WARC files (closed or ``.open``) of ``prefix`` and
    ``hostname`` in ``directory``."""
    pattern = re.compile(
        rf"{re.escape(prefix)}-\d{{20}}-(\d{{5,}})-{re.escape(_safe_name(hostname))}"
        rf"{re.escape(EXTENSION)}(?:{re.escape(OPEN)})?"
    )
    return [int(m.group(1)) for p in directory.iterdir() if (m := pattern.fullmatch(p.name))]


def recover(directory: Path) -> list[Path]:
    """Close every ``*.warc.gz.open`` file a crash left in ``directory``: keep its gzip
    members from the start up to the last complete capture (a member is complete when it
    decompresses to its end and holds exactly one WARC record; a capture, when its last
    record, the metadata, is), cut the rest, fsync, rename it to its final name. A file with
    no complete capture (its warcinfo at most) is deleted. Returns the files closed."""
    closed = []
    for path in sorted(directory.glob(f"*{EXTENSION}{OPEN}")):
        with open(path, "r+b") as fh:
            end, captures = complete_captures(fh)
            if captures:
                fh.truncate(end)
                fh.flush()
                os.fsync(fh.fileno())
        if not captures:
            path.unlink()
            log.warning("warc recovery: %s held no complete capture, deleted", path.name)
        else:
            final = path.with_name(path.name.removesuffix(OPEN))
            os.replace(path, final)
            closed.append(final)
            log.warning("warc recovery: %s closed at %d bytes (%d captures)", final, end, captures)
        _fsync_dir(directory)
    return closed


def complete_captures(fh: BinaryIO) -> tuple[int, int]:
    """(offset just after the last complete capture, number of complete captures) of the WARC
    file ``fh`` as ``WarcFiles`` writes it (a capture ends with its metadata record), read
    from its start; (0, 0) when it holds none."""
    end = captures = 0
    for member_end, kind in members(fh):
        if kind is None:
            break
        if kind == "metadata":
            end, captures = member_end, captures + 1
    return end, captures


def members(fh: BinaryIO) -> Iterator[tuple[int, str | None]]:
    """Each gzip member of ``fh`` from its current position: (offset of its end, WARC-Type of
    the record it holds). The last one is (its start, None) when it is cut, corrupt or not one
    complete WARC record; nothing is read after it."""
    start, buf = fh.tell(), b""
    while True:
        buf = buf or fh.read(_READ)
        if not buf:
            return
        inflate, parts, used = zlib.decompressobj(wbits=31), [], 0
        while not inflate.eof:
            try:
                parts.append(inflate.decompress(buf))
            except zlib.error:
                yield start, None
                return
            used += len(buf) - len(inflate.unused_data)
            buf = inflate.unused_data if inflate.eof else fh.read(_READ)
            if not inflate.eof and not buf:
                yield start, None  # cut short
                return
        kind = record_type(b"".join(parts))
        if kind is None:
            yield start, None
            return
        start += used
        yield start, kind


def _safe_name(hostname: str) -> str:
    """``hostname`` fit for a file name: anything but letters, digits and ``._-`` is ``_``."""
    return re.sub(r"[^A-Za-z0-9._-]", "_", hostname) or "localhost"


def _fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
