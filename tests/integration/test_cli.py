"""``streamcrawl crawl`` as a user runs it: exit codes, one-line errors, resume after kill -9."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from tests.httpserver import RecordingServer, html

pytestmark = pytest.mark.integration

CLI = [sys.executable, "-m", "streamcrawl.topology.cli.main"]


def run(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*CLI, *args], capture_output=True, text=True, timeout=timeout)


def chain_site(n: int) -> dict[str, object]:
    """Page i links to i+1 (and back to 0): a crawl that takes n * delay seconds."""
    return {
        f"/{i}": html(f'<title>{i}</title><a href="/{i + 1}">n</a><a href="/0">h</a>')
        for i in range(n)
    } | {f"/{n}": html("<title>end</title>")}


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["crawl", "ftp://example.com/"], "invalid seed URL"),
        (["crawl", "http://user:pw@example.com/"], "invalid seed URL"),
        (["crawl", "http://exa mple.com/"], "invalid seed URL"),
        (["crawl", "http://example.com:99999/"], "invalid seed URL"),
        (["crawl", "http://127.0.0.1/", "--delay", "soon"], "expected seconds"),
        (["crawl", "http://127.0.0.1/", "--concurrency", "0"], "at least 1"),
        (["crawl", "http://127.0.0.1/", "--include", "("], "is not a valid regex"),
        (["crawl", "http://127.0.0.1/", "--crawl-id", "../etc"], "crawl id"),
        (["crawl"], "required"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(args: list[str], message: str, tmp_path: Path) -> None:
    result = run(*args, "--out", str(tmp_path / "o"), "--state-dir", str(tmp_path / "s"))
    assert result.returncode == 2, result
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and message in lines[0], result.stderr
    assert "Traceback" not in result.stderr


def test_json_summary(tmp_path: Path) -> None:
    with RecordingServer(chain_site(3)) as srv:
        result = run(
            "crawl",
            srv.url("/0"),
            "--delay",
            "0",
            "--json",
            "--out",
            str(tmp_path / "o"),
            "--state-dir",
            str(tmp_path / "s"),
        )
    assert result.returncode == 0, result.stderr
    summary = json.loads(result.stdout)
    assert summary["pages"] == 4 and summary["states"] == {"fetched": 4}
    assert summary["interrupted"] is False


def _start(srv: RecordingServer, tmp_path: Path, delay: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [
            *CLI,
            "crawl",
            srv.url("/0"),
            "--crawl-id",
            "resume",
            "--delay",
            delay,
            "--json",
            "--out",
            str(tmp_path / "o"),
            "--state-dir",
            str(tmp_path / "s"),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _wait_for_requests(srv: RecordingServer, n: int, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while len(srv.log) < n:
        assert time.monotonic() < deadline, "the crawl made no progress"
        time.sleep(0.02)


def test_resume_after_kill_9_refetches_nothing_completed(tmp_path: Path) -> None:
    n = 40
    with RecordingServer(chain_site(n)) as srv:
        proc = _start(srv, tmp_path, "0.05")
        _wait_for_requests(srv, 15)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(10)
        before_kill = Counter(r.path for r in srv.log)
        done_lines = (tmp_path / "o/urls.jsonl").read_text().splitlines()
        completed = {json.loads(line)["url"] for line in done_lines}
        proc = _start(srv, tmp_path, "0.05")
        _out, err = proc.communicate(timeout=60)
        assert proc.returncode == 0, err
    counts = Counter(r.path for r in srv.log if r.path != "/robots.txt")
    refetched = [p for p, c in counts.items() if c > 1]
    # At most the one request in flight at the kill is fetched again (per-origin concurrency 1).
    assert len(refetched) <= 1, refetched
    for url in completed:
        path = "/" + url.rsplit("/", 1)[1]
        assert counts[path] == 1, (path, counts[path], before_kill[path])
    urls = [json.loads(x) for x in (tmp_path / "o/urls.jsonl").read_text().splitlines()]
    pages = [json.loads(x) for x in (tmp_path / "o/pages.jsonl").read_text().splitlines()]
    assert len(urls) == len({u["url"] for u in urls}) == n + 1  # no duplicate lines survive
    assert len(pages) == len({p["url"] for p in pages}) == n + 1


def test_ctrl_c_stops_cleanly_with_130_and_resumes(tmp_path: Path) -> None:
    n = 30
    with RecordingServer(chain_site(n)) as srv:
        proc = _start(srv, tmp_path, "0.1")
        _wait_for_requests(srv, 5)
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=30)
        assert proc.returncode == 130, err
        summary = json.loads(out)
        assert summary["interrupted"] is True and summary["queued"] >= 1
        proc = _start(srv, tmp_path, "0")
        out, err = proc.communicate(timeout=60)
        assert proc.returncode == 0, err
    counts = Counter(r.path for r in srv.log if r.path != "/robots.txt")
    assert set(counts) == {f"/{i}" for i in range(n + 1)}
    assert max(counts.values()) == 1, counts


def test_demo_runs(tmp_path: Path) -> None:
    result = run("demo", "--out", str(tmp_path / "demo"), "--json", timeout=120)
    assert result.returncode == 0, result.stderr
    summary = json.loads(result.stdout.strip().splitlines()[-1])
    assert summary["states"]["fetched"] == 60
    assert summary["states"]["robots_denied"] == 2


def test_a_continuous_crawl_runs_until_ctrl_c_and_reports_its_revisits(tmp_path: Path) -> None:
    """The README's command that keeps a site fresh: `crawl URL --recrawl-after ...` does not
    end when every page is fetched; Ctrl-C stops it (130) with its revisits in the summary."""
    with RecordingServer(chain_site(3)) as srv:
        proc = subprocess.Popen(
            [*CLI, "crawl", srv.url("/0"), "--delay", "0.05", "--recrawl-after", "1s",
             "--recrawl-min", "1s", "--json", "--out", str(tmp_path / "o"),
             "--state-dir", str(tmp_path / "s")],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        _wait_for_requests(srv, 12)  # 4 pages, each fetched, then revisited twice or more
        assert proc.poll() is None, "a continuous crawl must not end by itself"
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=30)
    assert proc.returncode == 130, err
    summary = json.loads(out)
    assert summary["states"]["fetched"] == 4 and summary["revisits"] >= 4
    assert summary["changes"]["new"] == 4 and summary["changes"]["unchanged"] >= 4
