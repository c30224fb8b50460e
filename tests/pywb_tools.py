"""pywb, the archive replay tool the tests replay our WARC files with, as its users install it.

pywb cannot share the project's venv: it depends on brotlipy, which installs a module ``brotli``
over Google's ``brotli`` that the project and aiohttp use (``tests/warc_tools.py`` has the same
conflict with warcio). So pywb runs from a venv of its own, ``build/pywb``, made once (from
PyPI) by ``pywb_bin``, with the release range ``PINS`` names (checked on Python 3.11).
"""

from __future__ import annotations

import subprocess
import venv
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TOOLS = ROOT / "build" / "pywb"
PINS = ("pywb>=2.10,<2.11",)


def pywb_bin() -> Path:
    """The ``bin`` folder of ``build/pywb`` (``wayback``, ``wb-manager``), made on first use."""
    script = TOOLS / "bin" / "wayback"
    stamp = TOOLS / "pins.txt"
    if script.exists() and stamp.exists() and stamp.read_text() == "\n".join(PINS):
        return script.parent
    venv.create(TOOLS, with_pip=True, clear=True)
    subprocess.run([str(TOOLS / "bin" / "pip"), "install", "-q", *PINS], check=True)
    stamp.write_text("\n".join(PINS))
    return script.parent
