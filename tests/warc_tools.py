"""The WARC readers the tests check our archives with, as their users install them.

``warcio check`` reads every record's payload through warcio's content decoders, and warcio's
brotli decoder is written for brotlipy's API (a settable ``unused_data``, ``decompress``:
warcio's docs, "brotli"). The project itself uses Google's ``brotli`` package (what aiohttp
uses), and both packages install the module ``brotli``: in the project's venv ``warcio check``
fails on any ``br`` response with an AttributeError of its own. So warcio runs from a venv of
its own, ``build/warc-tools``, with warcio and brotlipy, made once (from PyPI) by
``warcio_bin``. FastWARC does not decode payloads: it runs from the project's venv
(``tests/warc_conformance.py`` runs both).
"""

from __future__ import annotations

import subprocess
import venv
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TOOLS = ROOT / "build" / "warc-tools"
PINS = ("warcio==1.8.1", "brotlipy==0.7.0")


def warcio_bin() -> Path:
    """The ``warcio`` console script of ``build/warc-tools``, made on first use."""
    script = TOOLS / "bin" / "warcio"
    stamp = TOOLS / "pins.txt"
    if script.exists() and stamp.exists() and stamp.read_text() == "\n".join(PINS):
        return script
    venv.create(TOOLS, with_pip=True, clear=True)
    subprocess.run([str(TOOLS / "bin" / "pip"), "install", "-q", *PINS], check=True)
    stamp.write_text("\n".join(PINS))
    return script


def check(path: Path) -> None:
    """``path`` keeps the WARC 1.1 rules ``tests/warc_conformance.py`` checks, and ``warcio
    check`` and FastWARC's digest checks accept it."""
    from tests.warc_conformance import assert_valid

    assert_valid(path)


_REPLAY = """
import sys
from warcio.archiveiterator import ArchiveIterator
target = sys.argv[1]
for path in sys.argv[2:]:
    with open(path, "rb") as f:
        for rec in ArchiveIterator(f):
            if rec.rec_type == "response" and rec.rec_headers["WARC-Target-URI"] == target:
                sys.stdout.buffer.write(rec.content_stream().read())
                sys.exit(0)
sys.exit(3)
"""


def replay(files: list[Path], target: str) -> bytes:
    """What a replay of ``target`` from ``files`` serves: the response payload through
    warcio's content decoders (gzip, br...), as pywb hands it to a browser."""
    python = warcio_bin().parent / "python"
    done = subprocess.run(
        [str(python), "-c", _REPLAY, target, *map(str, files)], capture_output=True
    )
    assert done.returncode == 0, f"no response for {target}: {done.stderr.decode()}"
    return done.stdout
