"""Page assets against GNU Wget's page requisites: the same styled site and CDN, what each
fetches, what it leaves on disk, and what it costs per page (docs/benchmarks.md, "Page assets").

``python -m bench.asset_rows [--pages 200] [--runs 3] [--out FILE]`` (project venv) serves
``bench/asset_site.py`` (``--pages`` pages, each with two stylesheets, two scripts, five images
and a font, on the site and a CDN: two local servers, the CDN named ``localhost``) from this
process, then crawls it in rounds with:

* ``wget``: ``wget -r -l inf -p -k -H -D 127.0.0.1,localhost --warc-file`` (``wget_argv``):
  recursive, page requisites, links converted, hosts spanned to the CDN;
* ``streamcrawl``: ``streamcrawl crawl --assets all --save-to DIR --warc DIR --delay 0``
  (``streamcrawl_argv``): the embedded crawl, with its offline copy and archive.

Per run: the asset URLs each asked the servers for (every request that is not a page or
robots.txt; the servers' own log), the requests, the pages, the bytes of the copy (the files a
person opens; streamcrawl's ``.streamcrawl`` resume state apart) and of the WARC files, and the
CPU of the crawler's process tree (``bench/measure.py``) per page. The check: every asset wget
fetched, streamcrawl fetched too. ``--out`` writes ``{"assets": ...}`` for ``python -m
bench.run --report-from RUN.json,FILE`` (``assets_section``).
"""

from __future__ import annotations

import argparse
import json
import shlex
import shutil
import statistics
import sys
import tempfile
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from bench.asset_site import Files, site
from bench.context import streamcrawl_binary
from bench.measure import run_measured
from bench.tables import cell, table

CRAWLERS = ("wget", "streamcrawl")
LABELS = {
    "wget": "GNU Wget -r -p -k -H --warc-file",
    "streamcrawl": "streamcrawl crawl --assets all --save-to --warc",
}
STATE = ".streamcrawl"  # the offline copy's resume state (docs/assets.md)


@dataclass
class Server:
    """One origin of the site on 127.0.0.1, serving ``files`` by path and query, logging every
    request's path."""

    files: Files
    log: list[str] = field(default_factory=list)
    port: int = 0

    @contextmanager
    def running(self) -> Iterator[Server]:
        files, log = self.files, self.log

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_GET(self) -> None:
                log.append(self.path)
                ctype, body = files.get(self.path, ("text/plain", b"not found"))
                self.send_response(200 if self.path in files else 404)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        httpd = ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        self.port = httpd.server_address[1]
        thread = threading.Thread(target=httpd.serve_forever, daemon=True)
        thread.start()
        try:
            yield self
        finally:
            httpd.shutdown()
            httpd.server_close()


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wget_argv(exe: str, root: str, run: Path) -> list[str]:
    """GNU Wget's mirror of ``root`` with page requisites, converted links, hosts spanned to the
    site's two names, a WARC file ``run/wget.warc.gz`` and its files under ``run/wget-files``."""
    return [
        exe, "--recursive", "--level=inf", "--page-requisites", "--convert-links",
        "--span-hosts", "--domains=127.0.0.1,localhost", "--execute=robots=on", "--no-verbose",
        "--user-agent=bench-wget", f"--warc-file={run / 'wget'}", f"--warc-tempdir={run}",
        f"--directory-prefix={run / 'wget-files'}", root,
    ]  # fmt: skip


def streamcrawl_argv(exe: str, root: str, run: Path) -> list[str]:
    """The embedded crawl of ``root`` with every asset type, its offline copy under
    ``run/copy`` and its WARC files under ``run/warc``."""
    return [
        exe, "crawl", root, "--assets", "all", "--delay", "0", "--no-progress",
        "--allow-network", "127.0.0.0/8", "--save-to", str(run / "copy"),
        "--warc", str(run / "warc"), "--out", str(run / "out"), "--state-dir", str(run / "state"),
    ]  # fmt: skip


def tree_bytes(root: Path, skip: str | None = None) -> int:
    """The bytes of the files under ``root`` (none: 0), the folder ``skip`` left out."""
    if not root.exists():
        return 0
    return sum(
        p.stat().st_size
        for p in root.rglob("*")
        if p.is_file() and (skip is None or skip not in p.relative_to(root).parts)
    )


def is_page(path: str) -> bool:
    return path == "/" or path.startswith("/page/")


def requested(servers: dict[str, Server]) -> tuple[set[str], int, int]:
    """The asset URLs the servers were asked for (``base`` + path), the requests and the
    pages answered."""
    assets, requests, pages = set(), 0, 0
    for base, server in servers.items():
        requests += len(server.log)
        pages += sum(1 for p in server.log if is_page(p) and p in server.files)
        assets |= {base + p for p in server.log if not is_page(p) and p != "/robots.txt"}
    return assets, requests, pages


def run_one(name: str, servers: dict[str, Server], root: str, run: Path) -> dict[str, Any]:
    """One crawl by ``name`` of the site (its servers' logs cleared first); its figures."""
    for server in servers.values():
        server.log.clear()
    run.mkdir(parents=True)
    if name == "wget":
        exe = shutil.which("wget")
        if exe is None:
            return {"status": "not run", "reason": "wget not installed (apt-get install wget)"}
        argv = wget_argv(exe, root, run)
    else:
        argv = streamcrawl_argv(streamcrawl_binary(), root, run)
    m = run_measured(argv, cwd=run, timeout=1800.0, log_dir=run / "logs")
    if m.returncode not in (0, 8) or m.timed_out:  # wget: 8, a server answered an error
        return {"status": "failed", "reason": f"exit {m.returncode}: {m.stderr_tail[-300:]}"}
    assets, requests, pages = requested(servers)
    copy = run / ("wget-files" if name == "wget" else "copy")
    warc = sum(p.stat().st_size for p in run.rglob("*.warc.gz"))
    return {
        "status": "ok",
        "assets": sorted(assets),
        "requests": requests,
        "pages": pages,
        "copy_bytes": tree_bytes(copy, STATE),
        "state_bytes": tree_bytes(copy / STATE),
        "warc_bytes": warc,
        "cpu_s": m.cpu_s,
        "cpu_ms_per_page": 1000.0 * m.cpu_s / pages if pages else None,
        "wall_s": m.wall_s,
    }


def median(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """The medians of the ok runs' figures (the assets: the last ok run's); the first failure
    when none is ok."""
    ok = [r for r in runs if r["status"] == "ok"]
    if not ok:
        return runs[0]
    out: dict[str, Any] = {"status": "ok", "runs": len(ok), "assets": ok[-1]["assets"]}
    for key in ("requests", "pages", "copy_bytes", "state_bytes", "warc_bytes", "cpu_ms_per_page"):
        values = [r[key] for r in ok if r[key] is not None]
        out[key] = statistics.median(values) if values else None
    out["cpu_range"] = [
        min(r["cpu_ms_per_page"] for r in ok),
        max(r["cpu_ms_per_page"] for r in ok),
    ]
    return out


def compare(pages: int, runs: int, workdir: Path) -> dict[str, Any]:
    """``runs`` interleaved rounds of every crawler over a site of ``pages`` pages."""
    cdn_port = free_port()
    cdn_base = f"http://localhost:{cdn_port}"
    own, cdn_files = site(cdn_base, pages)
    results: dict[str, list[dict[str, Any]]] = {name: [] for name in CRAWLERS}
    with Server(own).running() as srv, Server(cdn_files, port=cdn_port).running() as cdn:
        base = f"http://127.0.0.1:{srv.port}"
        servers = {base: srv, cdn_base: cdn}
        for n in range(runs):
            for name in CRAWLERS:
                results[name].append(run_one(name, servers, base + "/", workdir / f"{name}-{n}"))
    medians = {name: median(got) for name, got in results.items()}
    return {"pages": pages, "site_assets": len(own) + len(cdn_files) - pages, "median": medians,
            "runs": results, "missing": missing(medians)}  # fmt: skip


def missing(medians: dict[str, Any]) -> list[str] | None:
    """The assets wget fetched that streamcrawl did not (None: one of them did not run)."""
    wget, ours = medians.get("wget", {}), medians.get("streamcrawl", {})
    if wget.get("status") != "ok" or ours.get("status") != "ok":
        return None
    return sorted(set(wget["assets"]) - set(ours["assets"]))


def assets_section(part: dict[str, Any]) -> list[str]:
    """The report's "Page assets" section, from a results file's ``assets``."""
    lines = [
        "## Page assets: streamcrawl against wget's page requisites",
        "",
        f"`bench/asset_site.py` with {part['pages']:,} pages on two local servers, the site and a "
        "CDN (another port, named `localhost`): every page has two stylesheets (the site's "
        "imports another and uses a background image and a font), two scripts and five images "
        f"(one its own), {part['site_assets']:,} asset files in all. *assets* = the asset URLs "
        "the servers were asked for (not pages, not robots.txt); *copy* = the files of the "
        "offline copy (streamcrawl's resume state, the HTML and CSS as received, apart in "
        "*state*); *WARC* = the `.warc.gz` files; CPU per page of the crawler's process tree, "
        "start-up included; medians of the runs. The machine is shared.",
        "",
        ("From `{}`: ".format(part["source"]) if "source" in part else "")
        + f"`{part['command']}`.",
        "",
    ]
    rows = []
    for name, m in part["median"].items():
        if m["status"] != "ok":
            rows.append([LABELS[name], f"**{m['status']}**: {m.get('reason', '')}", *[""] * 7])
            continue
        lo, hi = m["cpu_range"]
        rows.append(
            [
                LABELS[name], str(m["runs"]), cell(int(m["pages"])), cell(len(m["assets"])),
                cell(int(m["requests"])), cell(m["copy_bytes"] / 1e6, 2),
                cell(m["state_bytes"] / 1e6, 2), cell(m["warc_bytes"] / 1e6, 2),
                f"{m['cpu_ms_per_page']:.2f} ({lo:.2f}-{hi:.2f})",
            ]
        )  # fmt: skip
    header = ["crawler", "runs", "pages", "assets", "requests", "copy MB", "state MB", "WARC MB"]
    lines += table([*header, "ms CPU/page (range)"], rows)
    lost = part.get("missing")
    lines.append("")
    if lost is None:
        lines.append(
            "Assets wget fetched that streamcrawl did not: not compared (a crawler did not run)."
        )
    else:
        lines.append(f"**Assets wget fetched that streamcrawl did not: {len(lost)}**{_few(lost)}.")
    wget, ours = part["median"].get("wget", {}), part["median"].get("streamcrawl", {})
    if wget.get("status") == ours.get("status") == "ok":
        extra = sorted(set(ours["assets"]) - set(wget["assets"]))
        lines.append(f"Assets streamcrawl fetched that wget did not: {len(extra)}{_few(extra)}.")
    return [*lines, ""]


def _few(urls: list[str]) -> str:
    """``: `/a`, `/b`...`` for the first few URLs' paths; empty for none."""
    shown = ", ".join(f"`/{u.split('/', 3)[3]}`" for u in urls[:8])
    return f": {shown}" + (", ..." if len(urls) > 8 else "") if urls else ""


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(prog="python -m bench.asset_rows", description=__doc__)
    ap.add_argument("--pages", type=int, default=200, help="pages of the site (default 200)")
    ap.add_argument("--runs", type=int, default=3, help="rounds of both crawlers (default 3)")
    ap.add_argument("--out", type=Path, help='write {"assets": ...} here for --report-from')
    return ap.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    command = "python -m bench.asset_rows " + shlex.join(sys.argv[1:] if argv is None else argv)
    with tempfile.TemporaryDirectory(prefix="asset-rows-") as tmp:
        part = {"command": command.strip(), **compare(args.pages, args.runs, Path(tmp))}
    print("\n".join(assets_section(part)))
    if args.out:
        args.out.write_text(json.dumps({"assets": part}, indent=1))
    return 0 if part["missing"] == [] else 1


if __name__ == "__main__":
    raise SystemExit(main())
