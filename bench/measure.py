"""Measure a crawler process: wall time, CPU-seconds of its whole process tree, peak RSS.

CPU comes from ``os.wait4`` on the crawler's process: on Linux its rusage includes every
descendant the crawler itself waited for, so a crawler that forks helpers is fully counted.
Peak RSS is the larger of (a) the sum of RSS over the process tree, polled every ``interval``
seconds with psutil, and (b) ``ru_maxrss`` of the process (kernel-tracked, exact for one
process).  ``rss_samples`` keeps the polled series for the memory run.

``ServiceMeter`` measures long-lived processes the harness did not start (a Kafka broker,
Cassandra, topology workers): CPU-seconds between ``start()`` and ``stop()`` and peak tree RSS.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import psutil


@dataclass
class Measured:
    argv: list[str]
    returncode: int
    wall_s: float
    cpu_s: float
    user_s: float
    sys_s: float
    peak_rss_mb: float
    timed_out: bool = False
    rss_samples: list[tuple[float, float]] = field(default_factory=list)  # (seconds, MB)
    stdout: str = ""
    stderr_tail: str = ""


def _tree(pid: int) -> list[psutil.Process]:
    try:
        root = psutil.Process(pid)
        return [root, *root.children(recursive=True)]
    except psutil.NoSuchProcess:
        return []


def _tree_rss(procs: list[psutil.Process]) -> float:
    total = 0
    for p in procs:
        with contextlib.suppress(psutil.Error):
            total += p.memory_info().rss
    return total / 2**20


def run_measured(
    argv: list[str],
    *,
    env: dict[str, str] | None = None,
    cwd: str | Path | None = None,
    timeout: float = 1800.0,
    interval: float = 0.05,
    log_dir: str | Path,
    on_sample: Callable[[list[psutil.Process], float], None] | None = None,
) -> Measured:
    """Run ``argv`` to completion (killing its process group after ``timeout`` s) and measure it.

    stdout is captured and returned; stderr goes to ``log_dir/stderr.log`` (its tail is returned).
    ``on_sample(tree, seconds)``, if given, is called at every poll with the process tree (for
    figures of its own, e.g. per-process CPU or a browser's memory: bench/render_rows.py).
    """
    log_dir = Path(log_dir)
    log_dir.mkdir(parents=True, exist_ok=True)
    out_path, err_path = log_dir / "stdout.log", log_dir / "stderr.log"
    samples: list[tuple[float, float]] = []
    done = threading.Event()
    timed_out = False
    with open(out_path, "wb") as out, open(err_path, "wb") as err:
        t0 = time.monotonic()
        proc = subprocess.Popen(
            argv,
            env=env,
            cwd=cwd,
            stdout=out,
            stderr=err,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )

        def poll() -> None:
            while not done.is_set():
                tree = _tree(proc.pid)
                rss = _tree_rss(tree)
                if rss:  # 0 once the process has gone
                    samples.append((time.monotonic() - t0, rss))
                if on_sample is not None and tree:
                    on_sample(tree, time.monotonic() - t0)
                done.wait(interval)

        def watchdog() -> None:
            nonlocal timed_out
            if not done.wait(timeout):
                timed_out = True
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)

        threads = [
            threading.Thread(target=poll, daemon=True),
            threading.Thread(target=watchdog, daemon=True),
        ]
        for t in threads:
            t.start()
        try:
            _, status, usage = os.wait4(proc.pid, 0)
        except BaseException:  # interrupted harness: leave no crawler behind
            os.killpg(proc.pid, signal.SIGKILL)
            os.waitpid(proc.pid, 0)
            raise
        finally:
            done.set()
        wall = time.monotonic() - t0
        for t in threads:
            t.join()
        proc.returncode = os.waitstatus_to_exitcode(status)
    peak = max([mb for _, mb in samples] + [usage.ru_maxrss / 1024])
    stdout = out_path.read_text(errors="replace")
    stderr_tail = err_path.read_text(errors="replace")[-3000:]
    return Measured(
        argv,
        proc.returncode,
        wall,
        usage.ru_utime + usage.ru_stime,
        usage.ru_utime,
        usage.ru_stime,
        peak,
        timed_out,
        samples,
        stdout,
        stderr_tail,
    )


def machine_busy_cpu_s() -> float:
    """CPU-seconds all processes of the machine have used since boot (idle and iowait excluded)."""
    t = psutil.cpu_times()
    return sum(t) - t.idle - getattr(t, "iowait", 0.0)


class ServiceMeter:
    """CPU-seconds and peak RSS of running process trees (broker, database, workers)."""

    def __init__(self, pids: list[int], interval: float = 0.1) -> None:
        self.pids = pids
        self.interval = interval
        self._cpu0: dict[int, float] = {}
        self._last: dict[int, float] = {}
        self.peak_rss_mb = 0.0
        self.rss_samples: list[tuple[float, float]] = []  # (seconds since start(), MB)
        self._t0 = 0.0
        self._done = threading.Event()
        self._thread: threading.Thread | None = None

    def _cpu(self) -> dict[int, float]:
        cpu: dict[int, float] = {}
        for root in self.pids:
            for p in _tree(root):
                try:
                    t = p.cpu_times()
                    cpu[p.pid] = t.user + t.system + t.children_user + t.children_system
                except psutil.Error:
                    pass
        return cpu

    def start(self) -> ServiceMeter:
        self._cpu0 = self._cpu()
        self._last = dict(self._cpu0)
        self._t0 = time.monotonic()

        def poll() -> None:
            while not self._done.is_set():
                self._last.update(self._cpu())  # keeps the last value of processes that exit
                rss = sum(_tree_rss(_tree(pid)) for pid in self.pids)
                self.peak_rss_mb = max(self.peak_rss_mb, rss)
                if rss:
                    self.rss_samples.append((time.monotonic() - self._t0, rss))
                self._done.wait(self.interval)

        self._thread = threading.Thread(target=poll, daemon=True)
        self._thread.start()
        return self

    def cpu_now(self) -> float:
        """CPU-seconds used since ``start()`` so far (polling goes on)."""
        now = {**self._last, **self._cpu()}
        return sum(v - self._cpu0.get(pid, 0.0) for pid, v in now.items())

    def stop(self) -> float:
        """Stop polling; CPU-seconds used since ``start()``."""
        self._done.set()
        if self._thread:
            self._thread.join()
        self._last.update(self._cpu())
        return sum(v - self._cpu0.get(pid, 0.0) for pid, v in self._last.items())
