"""The rendering bench (bench/render_rows.py, bench/render_site.py, bench/reaper.py) without a
browser: the app site is reachable only through its scripts' data, the subreaper counts the CPU
of orphaned processes, and the targets and the report's section on hand-made results."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from bench import reaper, render_report, render_rows, render_site

BURN = "import time\nt = time.process_time()\nwhile time.process_time() - t < 0.3: pass\n"


def test_the_pages_link_nowhere_and_their_data_reaches_every_page(tmp_path: Path) -> None:
    spec = render_site.generate(tmp_path, origins=2, pages=30, base_port=23900)
    expected = set((tmp_path / "expected.txt").read_text().split())
    assert len(expected) == spec.expected_pages == 60
    seeds = (tmp_path / "seeds.txt").read_text().split()
    assert seeds == ["http://127.0.0.1:23900/", "http://127.0.0.1:23901/"]
    found: set[str] = set()
    for port in spec.ports:
        site = tmp_path / str(port)
        todo, seen = [0], {0}
        while todo:
            n = todo.pop()
            assert "<a" not in (site / render_site.file_path(n)).read_text()
            data = json.loads((site / "data" / f"p{n}.json").read_text())
            for path in data["links"]:
                m = 0 if path == "/" else int(path.rsplit("/p", 1)[1].removesuffix(".html"))
                if m not in seen:
                    seen.add(m)
                    todo.append(m)
        found |= {f"http://127.0.0.1:{port}{render_site.page_path(n)}" for n in seen}
    assert found == expected
    assert 'fetch("/data/p"' in (tmp_path / "23900" / "app.js").read_text()


def _cpu_of(argv: list[str]) -> float:
    proc = subprocess.Popen(argv, start_new_session=True)
    _, status, usage = os.wait4(proc.pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    return usage.ru_utime + usage.ru_stime


def test_the_reaper_counts_the_cpu_of_an_orphan() -> None:
    # The command exits at once and leaves a process that burns 0.3 s of CPU, as a browser's
    # processes outlive the browser.
    orphan = [sys.executable, "-c", BURN]
    command = [
        sys.executable,
        "-c",
        f"import subprocess; subprocess.Popen({orphan!r}, start_new_session=True)",
    ]
    assert _cpu_of(command) < 0.25
    assert _cpu_of(reaper.argv(command)) >= 0.28


def _part(cpu: float, crawlee_cpu: float, rss: list[float]) -> dict:
    def median(name: str, cpu_ms: float) -> dict:
        row = {"status": "ok", "runs": 3, "renders": 80, "wall_s": 60.0, "cpu_s": cpu_ms * 0.08}
        row |= {"cpu_ms": cpu_ms, "wall_ms": 750.0, "peak_rss_mb": 1500}
        row |= {"crawler_cpu_ms": 100.0, "driver_cpu_ms": 20.0, "chromium_cpu_ms": 300.0}
        return row | {"chromium.renderer_cpu_ms": 100.0, "chromium.gpu-process_cpu_ms": 200.0}

    runs = [
        {"crawler": n, "round": 1, "status": "ok", "renders": 80, "wall_s": 60.0, "cpu_ms": c}
        for n, c in (("embedded", cpu), ("crawlee", crawlee_cpu))
    ]
    compare = {"origins": 2, "pages": 80, "runs": runs}
    compare["median"] = {
        "embedded": median("embedded", cpu),
        "crawlee": median("crawlee", crawlee_cpu),
    }
    samples = [
        {"t": 2.0 * i, "renders": 50 * i, "procs": 7, "rss_mb": mb, "pss_mb": mb / 2}
        for i, mb in enumerate(rss)
    ]
    long = {"pages": 2000, "renders": 2000, "wall_s": 2000.0, "wall_ms": 1000.0}
    long |= {"recycle": {"after": 200, "max_pss_mb": 1024, "concurrency": 2}, "samples": samples}
    return {"command": "python -m bench.render_rows", "compare": compare, "long": long}


def test_the_targets_are_cpu_against_crawlee_and_a_flat_browser() -> None:
    # every 50 renders; the level is the median of renders 100-199: 1050
    flat = [500.0, 900.0, 1000.0, 1100.0, 950.0, 1180.0]
    part = _part(400, 500, flat)
    got = [(v["value"], v["bound"], v["met"]) for v in render_report.verdicts(part)]
    assert got == [(400, 500, True), (1065, 1050, True)]
    growing = [*flat, 1300.0]
    got = [(v["value"], v["met"]) for v in render_report.verdicts(_part(600, 500, growing))]
    assert got == [(600, False), (1300, False)]


def test_a_run_short_of_the_level_is_not_measured() -> None:
    part = _part(400, 500, [500.0, 900.0, 1000.0, 1100.0])  # never past renders 100-199
    part.pop("compare")
    assert [v["met"] for v in render_report.verdicts(part)] == [None, None]


def test_the_section_shows_both_crawlers_the_long_run_and_the_verdicts() -> None:
    lines = render_report.section(_part(400, 500, [500.0, 900.0, 1000.0, 1100.0, 1300.0]))
    assert lines[0] == "## Rendering"
    assert (
        "| streamcrawl crawl --render always (embedded) | 3 | 80 / 80 | 60.0 | 750 | 32.0 | 400 "
        "| 100 / 20 / 300 | 1,500 | 0.80x |"
    ) in lines
    by_type = "Chromium's CPU ms per render by process type: gpu-process 200, renderer 100."
    assert f"- Crawlee for Python (PlaywrightCrawler): {by_type}" in lines
    at = lines.index("| 100-199 | 2 | 7 | 1,050 | 1,100 | 525 | 550 |")  # the level
    assert lines[at + 1] == "| 200-299 | 1 | 7 | 1,300 | 1,300 | 650 | 650 |"
    assert "| CPU per rendered page <= Crawlee's in the same run | 400 | 500 | met |" in lines
    verdict = "| browser RSS within 20% of its level after 100 renders (medians of 100 renders) "
    assert f"{verdict}| 1,300 | 1,050 | **not met** |" in lines


def test_a_long_run_taken_from_an_earlier_file_names_its_command() -> None:
    part = _part(400, 500, [500.0, 900.0, 1000.0])
    part["long"]["command"] = "python -m bench.render_rows --runs 0"
    long = next(line for line in render_report.section(part) if line.startswith("Long run"))
    assert long.startswith("Long run (`python -m bench.render_rows --runs 0`): one `streamcrawl")
    assert "every 200 renders" in long


def test_the_section_replaces_its_own_and_keeps_the_others(tmp_path: Path) -> None:
    md = tmp_path / "benchmarks.md"
    md.write_text("# B\n\n## Idle worker\n\nidle\n\n## Memory run\n\nmemory\n")
    render_report.write_section(md, ["## Rendering", "", "first", ""])
    render_report.write_section(md, ["## Rendering", "", "second", ""])
    assert md.read_text() == (
        "# B\n\n## Idle worker\n\nidle\n\n## Rendering\n\nsecond\n\n## Memory run\n\nmemory\n"
    )


def test_processes_are_told_apart_by_name() -> None:
    class Proc:
        def __init__(self, pid: int, name: str, *args: str) -> None:
            self.pid, self._name, self._args = pid, name, [name, *args]

        def name(self) -> str:
            return self._name

        def cmdline(self) -> list[str]:
            return self._args

    kinds = [render_rows.kind(Proc(1, n)) for n in ("chromium", "node-MainThread", "python3")]
    assert kinds == ["chromium", "driver", "crawler"]
    sampler = render_rows.TreeSampler()
    procs = [Proc(1, "chromium", "--headless"), Proc(2, "chromium", "--type=renderer")]
    assert [sampler._kind(p) for p in procs] == ["chromium.browser", "chromium.renderer"]
    sampler.cpu = {1: ("chromium.browser", 1.0), 2: ("chromium.renderer", 2.0), 3: ("driver", 0.5)}
    by_kind = sampler.cpu_by_kind()
    assert by_kind == {
        "chromium.browser": 1.0,
        "chromium.renderer": 2.0,
        "chromium": 3.0,
        "driver": 0.5,
    }


def test_a_process_gone_while_the_tree_is_sampled_is_skipped() -> None:
    import psutil

    class Gone:
        pid = 7

        def name(self) -> str:
            raise psutil.NoSuchProcess(7)

    assert render_rows.kind(Gone()) == "gone"  # the sampler's thread once died of it
