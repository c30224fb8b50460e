"""What archiving costs and whether the archives hold: the main comparison's WARC rows.

Two crawlers of the main table write WARC files: ``embedded-warc`` (the embedded crawl with
``--warc DIR``) and ``wget`` (GNU Wget's ``--warc-file``), in the same run on the same site
(``bench/runners.py``). After the comparison, ``check(main)`` reads every WARC file of every
run of both:

* each file goes through the same validators, ``warcio check`` and ``fastwarc check
  --verify-payloads`` (found beside the running Python, else beside the ``streamcrawl``
  executable under test), and through this module's own reader (``read_records``: the gzip
  members and each record's framing); a file left behind that is not ``.warc.gz`` (an
  unfinished one) counts as a file that did not validate;
* coverage: the WARC-Target-URIs of ``response`` records answered 200 in wget's archive against
  streamcrawl's of the same round, pages and robots.txt apart (``coverage``).

``warc_section(main, warc)`` renders the report's section. The target it reports: ``--warc``
adds at most 15 % to the embedded crawl's CPU per page (``TARGET_RATIO``).
"""

from __future__ import annotations

import contextlib
import gzip
import shutil
import subprocess
import sys
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

ARCHIVING = ("embedded-warc", "wget")
TARGET_RATIO = 1.15  # embedded-warc's CPU per page over embedded's
SUFFIX = ".warc.gz"
OPEN = ".open"
ROBOTS = "/robots.txt"
SAMPLE = 5  # URIs and failures listed in the report
CHECK_TIMEOUT_S = 1800.0


@dataclass(frozen=True)
class Record:
    kind: str  # WARC-Type
    uri: str | None  # WARC-Target-URI as written
    status: int | None  # HTTP status of a response or revisit record
    digest: str | None  # WARC-Payload-Digest

    @property
    def target(self) -> str | None:
        """The target URI without the angle brackets some writers put around it (wget 1.21
        writes ``<http://...>``, the WARC 1.0 grammar's form; WARC 1.1 has none)."""
        if self.uri and self.uri.startswith("<") and self.uri.endswith(">"):
            return self.uri[1:-1]
        return self.uri


def read_records(path: Path) -> Iterator[Record]:
    """The records of a (gzipped) WARC file, in order; ``ValueError`` naming the record where
    the framing breaks (no version line, a header without Content-Length, a short block, a block
    not followed by CRLF CRLF, a broken gzip member)."""
    try:
        with gzip.open(path, "rb") as f:
            n = 0
            while line := f.readline():
                n += 1
                yield _record(f, line, n)
    except (OSError, EOFError, zlib.error) as e:  # gzip.BadGzipFile is an OSError
        raise ValueError(f"{path.name}: {type(e).__name__}: {e}") from None


def _record(f, first: bytes, n: int) -> Record:
    if not first.startswith(b"WARC/"):
        raise ValueError(f"record {n}: no WARC version line: {first[:40]!r}")
    headers: dict[str, str] = {}
    while (line := f.readline()) not in (b"\r\n", b""):
        name, _, value = line.decode("utf-8", "replace").partition(":")
        headers[name.strip().lower()] = value.strip()
    if "content-length" not in headers:
        raise ValueError(f"record {n}: no Content-Length (or a truncated header)")
    length = int(headers["content-length"])
    block = f.read(length)
    if len(block) != length or f.read(4) != b"\r\n\r\n":
        raise ValueError(f"record {n}: the block is not {length} bytes followed by CRLF CRLF")
    kind = headers.get("warc-type", "")
    status = None
    if kind in ("response", "revisit") and block.startswith(b"HTTP/"):
        parts = block.split(b"\r\n", 1)[0].split()
        status = int(parts[1]) if len(parts) > 1 and parts[1].isdigit() else None
    uri, digest = headers.get("warc-target-uri"), headers.get("warc-payload-digest")
    return Record(kind, uri, status, digest)


def warc_files(directory: Path) -> tuple[list[Path], list[str]]:
    """The finished WARC files of ``directory`` (sorted), and the names of unfinished ones
    (``*.warc.gz.open``: the embedded crawl renames a file only once it is complete)."""
    if not directory.is_dir():
        return [], []
    names = sorted(p.name for p in directory.iterdir() if p.is_file())
    done = [directory / n for n in names if n.endswith(SUFFIX)]
    return done, [n for n in names if n.endswith(SUFFIX + OPEN)]


def written(directory: Path) -> dict:
    """What a run wrote: its WARC directory, the number of finished files and their bytes."""
    done, _ = warc_files(directory)
    return {
        "warc_dir": str(directory),
        "warc_files": len(done),
        "warc_bytes": sum(p.stat().st_size for p in done),
    }


def coverage(
    theirs: dict[str, str | None], ours: dict[str, str | None], sample: int = SAMPLE
) -> dict:
    """How much of ``theirs`` ``ours`` holds (URI -> payload digest): counts, the first missing
    URIs (sorted), and the URIs both hold whose payload digests differ (a digest either lacks
    counts as differing: the archives cannot be shown to hold the same bytes)."""
    missing = sorted(theirs.keys() - ours.keys())
    differ = sorted(u for u in theirs.keys() & ours.keys() if not theirs[u] or theirs[u] != ours[u])
    return {
        "theirs": len(theirs),
        "ours": len(ours),
        "missing": len(missing),
        "missing_sample": missing[:sample],
        "extra": len(ours.keys() - theirs.keys()),
        "payload_differs": len(differ),
        "payload_differs_sample": differ[:sample],
    }


def validators() -> dict[str, list[str] | None]:
    """The validators' command lines (``None``: not installed here): the console scripts beside
    the running Python, else beside the streamcrawl under test (its venv has them), else PATH."""
    from bench.context import NotRun, streamcrawl_binary

    dirs = [Path(sys.executable).parent]
    with contextlib.suppress(NotRun):
        dirs.append(Path(streamcrawl_binary()).parent)
    found = {}
    for name, args in (("warcio", ["check"]), ("fastwarc", ["check", "--verify-payloads"])):
        exe = next((d / name for d in dirs if (d / name).exists()), None) or shutil.which(name)
        found[name] = [str(exe), *args] if exe else None
    return found


def version(exe: str, package: str) -> str:
    """``package``'s version in the venv of the console script ``exe`` ("?" if unknown)."""
    python = Path(exe).with_name("python")
    code = f"import importlib.metadata as m; print(m.version({package!r}))"
    try:
        r = subprocess.run([str(python), "-c", code], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.SubprocessError):
        return "?"
    return r.stdout.strip() if r.returncode == 0 else "?"


def _run_check(argv: list[str] | None, path: Path) -> dict:
    if argv is None:
        return {"ok": None, "detail": "not installed"}
    try:
        r = subprocess.run(
            [*argv, str(path)], capture_output=True, text=True, timeout=CHECK_TIMEOUT_S
        )
    except subprocess.TimeoutExpired:
        return {"ok": False, "detail": f"no answer in {CHECK_TIMEOUT_S:.0f} s"}
    if r.returncode == 0:
        return {"ok": True, "detail": ""}
    # fastwarc draws a progress bar on stderr: keep the lines that say what failed
    text = "\n".join(ln for ln in (r.stdout + r.stderr).splitlines() if "record(s)/s" not in ln)
    return {"ok": False, "detail": f"exit {r.returncode}: " + " ".join(text.split())[-400:]}


def check_run(
    directory: Path, tools: dict[str, list[str] | None]
) -> tuple[dict, dict[str, str | None]]:
    """One run's archive: per file its size, records and each validator's verdict; the counts
    of response records; and the WARC-Target-URIs answered 200 with their payload digests."""
    done, leftovers = warc_files(directory)
    files: list[dict] = []
    uris: dict[str, str | None] = {}
    counts = {"responses": 0, "revisits": 0, "responses_200": 0, "bracketed_uris": 0}
    for path in done:
        entry: dict = {"name": path.name, "bytes": path.stat().st_size, "records": 0}
        try:
            for rec in read_records(path):
                entry["records"] += 1
                counts["responses"] += rec.kind == "response"
                counts["revisits"] += rec.kind == "revisit"
                counts["bracketed_uris"] += rec.uri != rec.target
                if rec.kind == "response" and rec.status == 200 and rec.target:
                    counts["responses_200"] += 1
                    uris[rec.target] = rec.digest
        except ValueError as e:
            entry["read_error"] = str(e)
        entry["checks"] = {name: _run_check(argv, path) for name, argv in tools.items()}
        files.append(entry)
    return {"files": files, "leftovers": leftovers, **counts}, uris


def _split(uris: dict[str, str | None]) -> tuple[dict, dict]:
    """(pages, robots.txt) of an archive's URIs."""
    robots = {u: d for u, d in uris.items() if u.endswith(ROBOTS)}
    return {u: d for u, d in uris.items() if u not in robots}, robots


def check(main: dict) -> dict:
    """Validate every WARC file of every run of the archiving crawlers of ``main`` (the
    comparison's results) and compare the archives of each round (wget's against
    embedded-warc's; a crawler stops at its first failed run, so the rounds pair up in order)."""
    tools = validators()
    out: dict = {
        "validators": {
            name: f"{name} {version(argv[0], name)}" if argv else None
            for name, argv in tools.items()
        },
        "runs": {},
        "coverage": [],
    }
    uris: dict[str, list[dict[str, str | None]]] = {}
    for name in ARCHIVING:
        for i, run in enumerate(main.get(name, {}).get("runs", []), 1):
            print(f"[warc] checking {name} run {i} ...", flush=True)
            summary, got = check_run(Path(run["warc_dir"]), tools)
            out["runs"].setdefault(name, []).append(summary)
            uris.setdefault(name, []).append(got)
    rounds = zip(uris.get("wget", []), uris.get("embedded-warc", []), strict=False)
    for i, (theirs, ours) in enumerate(rounds, 1):
        (t_pages, t_robots), (o_pages, o_robots) = _split(theirs), _split(ours)
        pages, robots = coverage(t_pages, o_pages), coverage(t_robots, o_robots)
        out["coverage"].append({"round": i, "pages": pages, "robots": robots})
    return out


# --- the report's section ---------------------------------------------------------------


def _validated(summaries: list[dict], tool: str) -> str:
    """``N/M`` files that passed ``tool``; unfinished files count as failed."""
    total = sum(len(s["files"]) + len(s["leftovers"]) for s in summaries)
    verdicts = [f["checks"].get(tool, {}).get("ok") for s in summaries for f in s["files"]]
    if verdicts and all(v is None for v in verdicts):
        return "not installed"
    return f"{sum(v is True for v in verdicts)}/{total}"


def _ms_range(entry: dict) -> str:
    runs = [r["ms_cpu_per_page"] for r in entry["runs"] if not r.get("excluded")]
    runs = [v for v in runs if v is not None]
    med = entry["median"]["ms_cpu_per_page"]
    if not runs or med is None:
        return "-"
    spread = f" ({min(runs):.2f}-{max(runs):.2f})" if len(runs) > 1 else ""
    return f"{med:.2f}{spread}"


def _round_ratios(main: dict) -> list[float]:
    """embedded-warc's CPU per page over embedded's, per round (runs paired in order)."""
    pairs = zip(main["embedded"]["runs"], main["embedded-warc"]["runs"], strict=False)
    return [
        w["ms_cpu_per_page"] / e["ms_cpu_per_page"]
        for e, w in pairs
        if not e.get("excluded") and not w.get("excluded")
        if e["ms_cpu_per_page"] and w["ms_cpu_per_page"]
    ]


def _ratio(main: dict) -> tuple[float | None, list[float]]:
    try:
        base = main["embedded"]["median"]["ms_cpu_per_page"]
        with_warc = main["embedded-warc"]["median"]["ms_cpu_per_page"]
    except KeyError:
        return None, []
    if not base or not with_warc:
        return None, []
    return with_warc / base, _round_ratios(main)


def _row(name: str, entry: dict, base: float | None, summaries: list[dict] | None) -> list[str]:
    if entry.get("status") != "ok" or "median" not in entry:
        reason = " ".join(str(entry.get("reason", "")).split()).replace("|", "\\|")
        return [entry["label"], f"**{entry.get('status')}**: {reason}", *[""] * 7]
    m = entry["median"]
    ms = m["ms_cpu_per_page"]
    has_warc = m.get("warc_bytes") is not None
    return [
        entry["label"],
        str(len([r for r in entry["runs"] if not r.get("excluded")])),
        _ms_range(entry),
        f"{ms / base:.2f}" if ms and base else "-",
        f"{m['warc_bytes'] / 1e6:,.1f}" if has_warc else "-",
        f"{m['warc_bytes_per_page']:,.0f}" if has_warc and m.get("warc_bytes_per_page") else "-",
        _validated(summaries, "warcio") if summaries is not None else "-",
        _validated(summaries, "fastwarc") if summaries is not None else "-",
        f"{m['pages']:,.0f}",
    ]


def _coverage_lines(rounds: list[dict]) -> list[str]:
    if not rounds:
        return ["Coverage: not measured (needs both `wget` and `embedded-warc` in `--only`).", ""]
    worst = max(rounds, key=lambda c: c["pages"]["missing"])
    pages = worst["pages"]
    listed = ", ".join(f"`{u}`" for u in pages["missing_sample"])
    lines = [
        f"**Pages in wget's archive missing from streamcrawl's: {pages['missing']}** "
        f"(worst of {len(rounds)} round(s), round {worst['round']}: wget archived "
        f"{pages['theirs']:,} pages answered 200, streamcrawl {pages['ours']:,}, of which "
        f"{pages['extra']:,} not in wget's)" + (f"; first: {listed}" if listed else "") + ".",
        "",
    ]
    differ = max(rounds, key=lambda c: c["pages"].get("payload_differs", 0))["pages"]
    if "payload_differs" in differ:  # older results files lack it
        listed = ", ".join(f"`{u}`" for u in differ["payload_differs_sample"])
        lines += [
            f"Pages in both archives whose WARC-Payload-Digest differs: {differ['payload_differs']}"
            + (f" (worst round; first: {listed})" if listed else "")
            + ".",
            "",
        ]
    robots = [c["robots"] for c in rounds]
    lines += [
        "robots.txt answered 200, per round (wget / streamcrawl / wget's missing from "
        "streamcrawl's): "
        + ", ".join(f"{r['theirs']} / {r['ours']} / {r['missing']}" for r in robots)
        + ".",
        "",
    ]
    return lines


def _bracketed(runs: dict[str, list[dict]]) -> list[str]:
    """A note on the crawlers whose WARC-Target-URIs were compared without angle brackets."""
    names = [n for n, summaries in runs.items() if any(s.get("bracketed_uris") for s in summaries)]
    if not names:
        return []
    return [
        f"WARC-Target-URI in angle brackets (`<http://...>`, the WARC 1.0 grammar's form) in "
        f"{', '.join(f'`{n}`' for n in names)}'s archive: compared without them.",
        "",
    ]


def _failures(runs: dict[str, list[dict]]) -> list[str]:
    bad = []
    for name, summaries in runs.items():
        for i, s in enumerate(summaries, 1):
            bad += [f"- `{name}` run {i}: unfinished file `{n}`" for n in s["leftovers"]]
            for f in s["files"]:
                if f.get("read_error"):
                    bad.append(f"- `{name}` run {i} `{f['name']}`: reader: {f['read_error']}")
                for tool, v in f["checks"].items():
                    if v.get("ok") is False:
                        bad.append(f"- `{name}` run {i} `{f['name']}`: {tool}: {v['detail']}")
    if not bad:
        return []
    more = [f"- ... and {len(bad) - 2 * SAMPLE} more"] if len(bad) > 2 * SAMPLE else []
    return ["Files that did not validate:", "", *bad[: 2 * SAMPLE], *more, ""]


def warc_section(main: dict, warc: dict | None) -> list[str]:
    """The report's WARC section: CPU per page with and without ``--warc`` beside wget's,
    bytes written, files validated, coverage of wget's archive by streamcrawl's."""
    names = [n for n in ("embedded", "embedded-warc", "wget", "scrapy") if n in main]
    if not any(n in main for n in ARCHIVING):
        return []
    warc = warc or {"runs": {}, "coverage": [], "validators": {}}
    ratio, per_round = _ratio(main)
    base = main.get("embedded", {}).get("median", {}).get("ms_cpu_per_page")
    tools = " and ".join(v or f"{n} (not installed)" for n, v in warc["validators"].items())
    lines = [
        "## WARC output: cost per page, validity, coverage",
        "",
        "Rows of the main table. *embedded-warc* is the embedded crawl with `--warc DIR`, "
        "otherwise the same command as *embedded*; *wget* is GNU Wget `-r -l inf --warc-file` "
        "on the same site, started from the first root only (wget runs one recursive retrieval "
        "per URL it is given, each with its own seen set, so given every root it fetches the "
        "site once per root; every page is reachable from any root). CPU as in the main table "
        "(the process tree; for wget its one process). *x embedded* = CPU per page over the "
        "embedded crawl's without `--warc`. WARC bytes are the finished `.warc.gz` files. Every "
        f"file of every run is checked by {tools or 'no validator'}.",
        "",
        "| crawler | runs | ms CPU/page (range) | x embedded | WARC MB | WARC bytes/page "
        "| files valid, warcio check | files valid, fastwarc check --verify-payloads | pages |",
        "|" + "---|" * 9,
    ]
    for n in names:
        summaries = warc["runs"].get(n, []) if n in ARCHIVING else None
        lines.append("| " + " | ".join(_row(n, main[n], base, summaries)) + " |")
    lines.append("")
    if ratio is None:
        verdict = "not measured (needs `embedded` and `embedded-warc`)"
    else:
        spread = (
            f", per round {min(per_round):.2f}-{max(per_round):.2f}" if len(per_round) > 1 else ""
        )
        met = "met" if ratio <= TARGET_RATIO else "**not met**"
        verdict = f"{ratio:.2f}x (medians{spread}): {met}"
    lines += [
        f"Target: `--warc` adds at most {TARGET_RATIO - 1:.0%} to the embedded crawl's CPU per "
        f"page (<= {TARGET_RATIO:g}x): {verdict}.",
        "",
    ]
    lines += _coverage_lines(warc["coverage"])
    lines += _bracketed(warc["runs"])
    lines += _failures(warc["runs"])
    return lines
