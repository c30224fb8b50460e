"""Run a command as a child subreaper, so that ``os.wait4`` on this process counts the CPU of
every process the command started, orphans included.

``python bench/reaper.py ARGV...`` (``argv()`` builds it) runs ARGV and waits for it, then for
every process left behind: with ``PR_SET_CHILD_SUBREAPER`` an orphaned descendant is re-parented
to this process, not to init, and reaping it adds its CPU to this process's children, which the
harness reads with ``os.wait4`` (bench/measure.py). Without it a browser's processes escape the
count: Chromium leaves its zygote and renderers to exit after the browser process, and
Playwright starts the browser in a process group of its own, so their CPU went to init
(bench/render_rows.py measured a crawl's polled Chromium CPU at about twice the ``os.wait4``
total). Descendants still running ``GRACE`` seconds after the command exited are killed.
Exits with the command's exit code.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

PR_SET_CHILD_SUBREAPER = 36
GRACE = 10.0


def argv(command: list[str]) -> list[str]:
    """``command`` run under this reaper by the current Python."""
    return [sys.executable, str(Path(__file__).resolve()), *command]


def children() -> list[int]:
    """Process ids whose parent is this process."""
    me, out = str(os.getpid()), []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            with contextlib.suppress(OSError):
                stat = Path(f"/proc/{entry}/stat").read_text()
                if stat.rpartition(")")[2].split()[1] == me:
                    out.append(int(entry))
    return out


def reap_all(main: int) -> int:
    """Wait for ``main`` and then for every other child (orphans re-parented here), killing
    what is left after ``GRACE`` s; ``main``'s wait status."""
    status, deadline = 0, None
    while True:
        if deadline is not None and time.monotonic() > deadline:
            for pid in children():
                with contextlib.suppress(OSError):
                    os.kill(pid, signal.SIGKILL)
        try:
            pid, st = os.waitpid(-1, 0 if deadline is None else os.WNOHANG)
        except ChildProcessError:
            return status
        if pid == main:
            status, deadline = st, time.monotonic() + GRACE
        elif pid == 0:
            time.sleep(0.05)


def main() -> None:
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    proc = subprocess.Popen(sys.argv[1:])
    signal.signal(signal.SIGTERM, lambda *_: proc.terminate())
    sys.exit(os.waitstatus_to_exitcode(reap_all(proc.pid)))


if __name__ == "__main__":
    main()
