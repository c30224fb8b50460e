"""Run integration tests over and over and count: the Kafka guarantees, N runs each.

    source .services/env            # written by scripts/services.sh start
    .venv/bin/python scripts/loop_tests.py --runs 20 --out /tmp/loop.json
    .venv/bin/python scripts/loop_tests.py --runs 5 --test tests/integration/test_admin.py

Runs are interleaved (each test once, then each again, ...), so a loop cut short by time still
has runs of every test. Each run is one ``pytest`` process with its own ``--basetemp`` under
``--logs`` (not pytest's shared ``/tmp/pytest-of-USER``, whose older directories any other
pytest session on the machine deletes, with a running test's worker state in them); a failed
run's output and directory are kept there. The summary (per test: runs, passed, failed,
longest run of passes, whether all passed in a row, and the fault figures the runs recorded:
URLs lost, duplicate rows and refetches at most, smallest per-origin gap at the server; see
``tests/integration/faults.py``) is printed and, after every run, written to ``--out``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
GUARANTEES = (
    "tests/integration/test_topology_faults.py::test_kill_9_mid_crawl_then_a_new_worker_finishes_it",
    "tests/integration/test_topology_faults.py::test_sigterm_hands_the_crawl_over_to_the_other_worker",
    "tests/integration/test_topology_faults.py::"
    "test_two_workers_split_origins_and_stay_polite_across_the_rebalance",
    "tests/integration/test_topology.py::test_replaying_the_sink_topics_leaves_the_same_rows",
    # continuous crawling: the revisit schedule through the same faults
    "tests/integration/test_recrawl_faults.py::test_kill_9_keeps_every_revisit_and_repeats_none",
    "tests/integration/test_recrawl_faults.py::test_a_rebalance_hands_the_schedule_over",
    "tests/integration/test_recrawl_faults.py::"
    "test_sigterm_hands_the_schedule_over_without_a_repeat",
)


def run_one(
    test: str, logs: Path, index: int, timeout: float, keep: bool = False
) -> tuple[bool, float, list[dict]]:
    """One pytest run of ``test``: passed?, seconds, the fault figures it recorded. ``keep``:
    keep a passed run's directory (the workers' logs) too."""
    started = time.monotonic()
    name = test.rpartition("::")[2]
    basetemp = logs / f"{name}.{index}"
    figures = (logs / f"{name}.{index}.figures.jsonl").resolve()
    figures.unlink(missing_ok=True)
    argv = [sys.executable, "-m", "pytest", test, "-q", "-x", "-p", "no:cacheprovider"]
    argv += ["--basetemp", str(basetemp.resolve())]
    env = {**os.environ, "STREAMCRAWL_FAULT_FIGURES": str(figures)}
    try:
        done = subprocess.run(
            argv, cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout, check=False
        )
        output = done.stdout + done.stderr
        # an xfailed run exits 0 but did not keep every promise: it counts as a failure here
        ok = done.returncode == 0 and " xfailed" not in output
    except subprocess.TimeoutExpired as exc:
        ok, output = False, f"timed out after {timeout} s\n{exc.stdout or ''}"
    if ok and not keep:
        shutil.rmtree(basetemp, ignore_errors=True)
    else:
        (logs / f"{name}.{index}.log").write_text(str(output))
    found = []
    if figures.exists():
        found = [json.loads(line) for line in figures.read_text().splitlines() if line]
    return ok, time.monotonic() - started, found


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--test", action="append", help="pytest node id (default: the guarantees)")
    ap.add_argument("--out", type=Path, default=Path("loop-tests.json"))
    ap.add_argument("--logs", type=Path, default=Path("loop-tests-logs"))
    ap.add_argument("--timeout", type=float, default=900.0, help="seconds per run")
    ap.add_argument("--keep", action="store_true", help="keep passed runs' directories too")
    args = ap.parse_args()
    tests = args.test or list(GUARANTEES)
    args.logs.mkdir(parents=True, exist_ok=True)
    results: dict[str, list[bool]] = {t: [] for t in tests}
    seconds: dict[str, float] = dict.fromkeys(tests, 0.0)
    figures: dict[str, list[dict]] = {t: [] for t in tests}
    for index in range(args.runs):
        for test in tests:
            ok, took, found = run_one(test, args.logs, index, args.timeout, args.keep)
            results[test].append(ok)
            seconds[test] += took
            figures[test] += found
            print(
                f"{time.strftime('%H:%M:%S')} run {index + 1} {'pass' if ok else 'FAIL'} "
                f"{took:.0f}s {test.rpartition('::')[2]}",
                flush=True,
            )
            args.out.write_text(json.dumps(summary(results, seconds, figures), indent=1))
    report = summary(results, seconds, figures)
    print(json.dumps(report, indent=1))
    return 0 if all(r["failed"] == 0 for r in report.values()) else 1


def summary(
    results: dict[str, list[bool]], seconds: dict[str, float], figures: dict[str, list[dict]]
) -> dict[str, dict]:
    out = {}
    for test, runs in results.items():
        streak = best = 0
        for ok in runs:
            streak = streak + 1 if ok else 0
            best = max(best, streak)
        out[test] = {
            "runs": len(runs),
            "passed": sum(runs),
            "failed": len(runs) - sum(runs),
            "longest_run_of_passes": best,
            "all_in_a_row": bool(runs) and all(runs),
            "seconds": round(seconds[test]),
            **worst(figures[test]),
        }
    return out


def worst(figures: list[dict]) -> dict[str, object]:
    """The worst of the runs' fault figures (none if the test records none)."""
    if not figures:
        return {}
    return {
        "figures_recorded": len(figures),
        "max_lost": max(f["lost"] for f in figures),
        "max_duplicates": max(f["duplicates"] for f in figures),
        "max_refetched": max(f["refetched"] for f in figures),
        "min_gap_server": min(f["min_gap"] for f in figures),
        "min_gap_crawler": min(f["min_gap_crawler"] for f in figures),
    }


if __name__ == "__main__":
    sys.exit(main())
