"""What the renderer's browser contexts cost Chromium: the rendering bench's embedded row
(bench/render_rows.py, one round on its app site) with the renderer as shipped and with its
contexts changed at run time, never in the source:

- ``shipped``: a context per origin, closed after the origin's last render in flight;
- ``kept``: a context per origin, kept open across renders;
- ``shared``: one context for every origin, kept open (pages of the site overlap in it, as in
  Crawlee's PlaywrightCrawler, whose row is measured beside them).

    python -m bench.probes.render_contexts [--pages 40] [--only shipped,kept,shared,crawlee]

(re-executes itself in the benchmark venv; prints one JSON row per variant, CPU and wall ms
per render and Chromium's CPU by process type.) Informs: why a rendered page costs streamcrawl
about twice Crawlee's CPU (docs/rendering.md, "What a render costs").
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path

from bench.context import streamcrawl_binary

# Run by the crawler's Python before its CLI: the variant's ``Renderer._context``.
WRAPPER = """\
import contextlib, sys
from streamcrawl.agents.render import browser as b
VARIANT = {variant!r}

@contextlib.asynccontextmanager
async def kept(self, origin):
    key = "shared" if VARIANT == "shared" else origin
    context = self._contexts.get(key, (None, 0))[0]
    if context is None:
        context = await self._browser.new_context(service_workers="block")
        await context.route("**/*", b._refuse)
        self._contexts[key] = (context, 1)
    yield context

if VARIANT != "shipped":
    b.Renderer._context = kept
from streamcrawl.topology.cli.main import main
sys.argv[0] = "streamcrawl"
sys.exit(main())
"""
VARIANTS = ("shipped", "kept", "shared", "crawlee")


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--pages", type=int, default=40, help="pages per origin (2 origins)")
    ap.add_argument("--only", default=",".join(VARIANTS))
    ap.add_argument("--chromium", default="/usr/bin/chromium")
    args = ap.parse_args(argv)
    from bench.run import ensure_bench_venv

    ensure_bench_venv("bench.probes.render_contexts")
    from bench import render_rows
    from bench.render_site import generate

    work = Path(tempfile.mkdtemp(prefix="render-contexts-"))
    spec = generate(work / "site", 2, args.pages, 23600)
    run_args = argparse.Namespace(chromium=args.chromium, concurrency=2, timeout=900.0)
    python = str(Path(streamcrawl_binary()).with_name("python"))
    shipped = render_rows.embedded_argv
    for variant in args.only.split(","):
        wrapper = work / f"{variant}.py"
        wrapper.write_text(WRAPPER.format(variant=variant))

        def argv(seeds: list[str], run: Path, pages: int, w: Path = wrapper) -> list[str]:
            return [python, str(w), *shipped(seeds, run, pages)[1:]]

        render_rows.embedded_argv = argv
        name = "crawlee" if variant == "crawlee" else "embedded"
        row = render_rows.one_run(name, spec, work / variant, run_args)
        print(json.dumps({"variant": variant, **row}), flush=True)


if __name__ == "__main__":
    main()
