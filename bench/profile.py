"""Summarize a py-spy ``--format raw`` profile (collapsed stacks: ``f1;f2;f3 COUNT`` per line).

Gives where the CPU goes: self samples by package (site-packages top-level name, ``stdlib``,
or ``<native>``) and by function, and inclusive samples by function.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from bench.tables import entries, table

_FRAME = re.compile(r"^(?P<func>.*?) \((?P<file>[^()]*?)(?::\d+)?\)$")


@dataclass
class ProfileSummary:
    samples: int
    by_package: list[tuple[str, int]]
    self_top: list[tuple[str, int]]
    inclusive_top: list[tuple[str, int]]


def package_of(path: str) -> str:
    """Top-level package of a frame's file (py-spy prints paths relative to sys.path)."""
    if path.startswith("<frozen"):
        return "import machinery"
    if "site-packages/" in path:
        path = path.split("site-packages/", 1)[1]
    elif re.search(r"/lib/python3\.\d+/", path):
        path = re.split(r"/lib/python3\.\d+/", path, maxsplit=1)[1]
    elif path.startswith("/"):
        return "bench" if "/bench/" in path else path.rsplit("/", 1)[-1]
    return path.split("/", 1)[0].removesuffix(".py") or "<unknown>"


def _frames(stack: str) -> list[tuple[str, str]]:
    out = []
    for raw in stack.split(";"):
        if raw.startswith("process ") or raw.startswith("thread "):
            continue  # py-spy --subprocesses/--threads labels
        m = _FRAME.match(raw.strip())
        if m:
            func, file = m["func"], m["file"]
            out.append((f"{func} ({file.rsplit('/', 1)[-1]})", package_of(file)))
        else:
            out.append((raw.strip(), "<native>"))
    return out


def summarize(path: str | Path, top: int = 12) -> ProfileSummary:
    by_pkg: Counter[str] = Counter()
    self_c: Counter[str] = Counter()
    incl: Counter[str] = Counter()
    total = 0
    for line in Path(path).read_text(errors="replace").splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack or not count.isdigit():
            continue
        n = int(count)
        frames = _frames(stack)
        if not frames:
            continue
        total += n
        leaf, pkg = frames[-1]
        self_c[leaf] += n
        by_pkg[pkg] += n
        for name in {f for f, _ in frames}:
            incl[name] += n
    return ProfileSummary(
        total, by_pkg.most_common(top), self_c.most_common(top), incl.most_common(top)
    )


def profile_section(profiles: dict) -> list[str]:
    lines = ["## Where the CPU goes (py-spy, 100 Hz, one extra run each, not timed)", ""]
    if profiles.get("_note"):  # e.g. profiles taken from another run of the harness
        lines += [profiles["_note"], ""]
    for _, p in entries(profiles):
        if p["status"] != "ok":
            lines += [f"**{p['label']}**: {p['status']}: {p.get('reason', '')}", ""]
            continue
        total = p["samples"] or 1
        lines += [f"**{p['label']}** ({total:,} samples)", ""]
        rows = []
        for i in range(max(len(p["by_package"]), len(p["self_top"]))):
            pkg = p["by_package"][i] if i < len(p["by_package"]) else None
            fn = p["self_top"][i] if i < len(p["self_top"]) else None
            rows.append(
                [
                    f"{pkg[0]}" if pkg else "",
                    f"{pkg[1] / total:.0%}" if pkg else "",
                    f"`{fn[0]}`" if fn else "",
                    f"{fn[1] / total:.0%}" if fn else "",
                ]
            )
        lines += [*table(["package (self)", "share", "function (self)", "share"], rows), ""]
    return lines
