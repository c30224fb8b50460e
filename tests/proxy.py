"""A real HTTP forward proxy for the tests: Debian's tinyproxy (``bench/proxy.py``).

``tinyproxy`` is installed by ``.ci/run`` (apt-get); a test that needs one and cannot find the
binary fails (CI) or is skipped (a developer's machine without it), as ``tests/services.py``
does for Kafka.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from bench import proxy
from bench.proxy import Proxy

__all__ = ["Proxy", "tinyproxy"]


@contextmanager
def tinyproxy(folder: Path, *, basic_auth: tuple[str, str] | None = None) -> Iterator[Proxy]:
    """``bench.proxy.tinyproxy``; failed in CI, skipped elsewhere, when it is not installed."""
    if proxy.binary() is None:
        if os.environ.get("CI"):
            pytest.fail(proxy.MISSING)
        pytest.skip(proxy.MISSING)
    with proxy.tinyproxy(folder, basic_auth=basic_auth) as running:
        yield running
