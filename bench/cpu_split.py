"""A Kafka worker's CPU split into a per-page and a per-second part, and the rows it explains.

The worker's CPU over a crawl is modelled as ``a * pages + b * seconds``: ``a`` is what a page
costs (fetch, parse, state, messages), ``b`` what a running crawl costs per second whatever its
rate (timers, polls, commits, the event loop turning). The not-saturated shape is crawled at two
delays (``bench.run --not-saturated 16x100@0.5 --split 2``): the same pages and the same code at
two rates, so the medians of the two rows are two equations in ``a`` and ``b``. Any cost a run
pays once (robots.txt, seeding) does not depend on the delay: it cancels out of ``b`` and lands
in ``a`` spread over the pages. ``b`` also holds the worker's idle cost, which ``idle_rates``
measures apart before each seed (shown beside it).

The broker's and Cassandra's CPU is shown less their idle rate (measured in the same window,
before the seed): the rest is what the crawl cost them. Everything here is arithmetic on
``bench.run``'s results dict; ``split_section`` renders it.
"""

from __future__ import annotations

import itertools
import statistics

# Medians of the runs of one row (keys absent from a run are left out of its median).
ROW_KEYS = (
    "pages",
    "wall_s",
    "span_s",
    "span_pages_per_s",
    "pages_per_s",
    "cpu_s",
    "ms_cpu_per_page",
    "peak_rss_mb",
    "kafka_cpu_s",
    "cassandra_cpu_s",
    "nginx_cpu_s",
    "missed",
    "duplicates",
    "other_cpu_s",
    "loadavg_1m",
)
# The two rows' seconds per page must differ by this factor, or noise would decide the split.
MIN_RATE_RATIO = 1.5
SERVICES = ("kafka", "cassandra")


def _median(values: list) -> float | None:
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def _smallest(values: list[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return min(present) if present else None


def median_row(label: str, runs: list[dict]) -> dict:
    """One row from the results of its runs (``suite._try`` dicts): status ``ok`` only if every
    run was; the medians of ``ROW_KEYS`` and of each idle rate over the runs that finished;
    ``min_gap`` and the capture's ``wire.min_gap`` the smallest of any run."""
    ok = [r for r in runs if r.get("status") == "ok"]
    bad = next((r for r in runs if r.get("status") != "ok"), None)
    row: dict = {"label": label, "status": "ok" if bad is None else bad["status"]}
    if bad is not None:
        row["reason"] = " ".join(bad.get("reason", "").split())  # one table cell
    row["runs"] = [{k: v for k, v in r.items() if k != "status"} for r in ok]
    if not ok:
        return row
    row.update({k: _median([r.get(k) for r in ok]) for k in ROW_KEYS})
    rates = [r["idle_rates"] for r in ok if r.get("idle_rates")]
    if rates:
        row["idle_rates"] = {k: _median([x.get(k) for x in rates]) for k in rates[0]}
    row["min_gap"] = _smallest([r.get("min_gap") for r in ok])
    wire_gap = _smallest([(r.get("wire") or {}).get("min_gap") for r in ok])
    if wire_gap is not None:
        row["wire"] = {"status": "ok", "min_gap": wire_gap}
    return row


def solve(
    first: tuple[float, float, float], second: tuple[float, float, float]
) -> tuple[float, float] | None:
    """``(a, b)`` with ``cpu = a * pages + b * seconds`` for both ``(pages, seconds, cpu)``
    points; None when their seconds per page differ by less than ``MIN_RATE_RATIO``."""
    (p1, t1, c1), (p2, t2, c2) = first, second
    if min(p1, p2, t1, t2) <= 0:
        return None
    slow, fast = max(t1 / p1, t2 / p2), min(t1 / p1, t2 / p2)
    if slow < MIN_RATE_RATIO * fast:
        return None
    det = p1 * t2 - p2 * t1
    return (c1 * t2 - c2 * t1) / det, (p1 * c2 - p2 * c1) / det


def _point(row: dict) -> tuple[float, float, float]:
    return (row["pages"], row["wall_s"], row["cpu_s"])


def fit(first: dict, second: dict) -> dict:
    """The split of one worker count from its rows at the two delays (``median_row`` dicts):
    ``a_ms_per_page``, ``b_ms_per_s`` from the medians; their range over every pairing of a
    run at one delay with a run at the other; the worker's median idle rate (ms CPU per s)."""
    rows = (first, second)
    if any(r.get("status") != "ok" or r.get("cpu_s") is None for r in rows):
        return {"status": "not measured", "reason": "a row at one of the delays did not finish"}
    ab = solve(_point(first), _point(second))
    if ab is None:
        return {
            "status": "not measured",
            "reason": f"the two delays' seconds per page differ by less than {MIN_RATE_RATIO}x",
        }
    out: dict = {"status": "ok", "a_ms_per_page": 1000 * ab[0], "b_ms_per_s": 1000 * ab[1]}
    runs = (first.get("runs") or [], second.get("runs") or [])
    solved = [solve(_point(x), _point(y)) for x, y in itertools.product(*runs)]
    pairs = [pair for pair in solved if pair is not None]
    if len(pairs) > 1:  # a single pair is the medians' own solution
        a_s, b_s = (sorted(1000 * v for v in part) for part in zip(*pairs, strict=True))
        out["a_range"], out["b_range"] = [a_s[0], a_s[-1]], [b_s[0], b_s[-1]]
    idle = [(r.get("idle_rates") or {}).get("worker") for r in rows]
    out["worker_idle_ms_per_s"] = 1000 * m if (m := _median(idle)) is not None else None
    out["points"] = [
        {"delay": r.get("delay"), "pages": r["pages"], "seconds": r["wall_s"], "cpu_s": r["cpu_s"]}
        for r in rows
    ]
    return out


def split(not_saturated: dict) -> dict:
    """Per worker count (``kafka-1``, ``kafka-2``), ``fit`` of the not-saturated section's rows
    at its delay and at the split delay (``not_saturated["split"]``); {} without the latter."""
    second = not_saturated.get("split")
    if not second:
        return {}
    d1, d2 = not_saturated["_site"]["delay"], second["_site"]["delay"]
    out = {}
    for name in ("kafka-1", "kafka-2"):
        if name in not_saturated and name in second:
            rows = ({**not_saturated[name], "delay": d1}, {**second[name], "delay": d2})
            out[name] = fit(*rows)
    return out


def less_idle(cpu: float | None, rate: float | None, seconds: float) -> dict:
    """A service's CPU-seconds ``cpu`` during a row of ``seconds``, split into its idle part
    (``rate`` x seconds) and the rest (``crawl_s``); the parts None without a rate."""
    idle_s = rate * seconds if rate is not None else None
    crawl = cpu - idle_s if cpu is not None and idle_s is not None else None
    return {"cpu_s": cpu, "idle_s": idle_s, "crawl_s": crawl}


def less_idle_cell(s: dict) -> str:
    """``less_idle`` as a table cell: the crawl's part, the idle part in brackets."""
    if s["crawl_s"] is None:
        return _f(s["cpu_s"])
    return f"{s['crawl_s']:.1f} ({s['idle_s']:.1f})"


def predict(title: str, name: str, row: dict, fits: dict, idle: dict | None = None) -> dict:
    """``row`` (medians: pages, wall_s, cpu_s, service CPU) against ``a * pages + b * seconds``
    of its worker count; ``idle``: the services' idle rates when the row has none of its own."""
    f = fits.get(name) or {}
    pages, seconds, cpu = row["pages"], row["wall_s"], row["cpu_s"]
    out = {"row": title, "name": name, "workers": int(name[-1])}
    out |= {"pages": pages, "seconds": seconds, "cpu_s": cpu, "predicted_s": None}
    if f.get("status") == "ok":
        per_page = f["a_ms_per_page"] * pages / 1000
        per_second = f["b_ms_per_s"] * seconds / 1000
        out |= {"per_page_s": per_page, "per_second_s": per_second}
        out["predicted_s"] = per_page + per_second
    rates = row.get("idle_rates") or idle or {}
    out["idle_own"] = bool(row.get("idle_rates"))
    out["services"] = {
        svc: less_idle(row.get(f"{svc}_cpu_s"), rates.get(svc), seconds) for svc in SERVICES
    }
    return out


def _pooled_idle(not_saturated: dict, name: str) -> dict:
    """The services' median idle rates over the not-saturated runs of worker count ``name``."""
    runs = [
        r["idle_rates"]
        for part in (not_saturated, not_saturated.get("split") or {})
        for r in (part.get(name) or {}).get("runs", [])
        if r.get("idle_rates")
    ]
    return {svc: _median([r.get(svc) for r in runs]) for svc in SERVICES} if runs else {}


def kafka_rows(results: dict) -> list[dict]:
    """Every Kafka row of one run of the harness, with ``predict``: the saturated main rows
    (idle rates pooled from the not-saturated runs), few origins at delay 0 and the two
    not-saturated rows the split is fitted on. Rows merged from another results file are left
    out: a model is never applied to another run's rows."""
    ns = results.get("not_saturated") or {}
    fits = split(ns)
    if not fits:
        return []
    source = ns.get("source")
    rows = []
    main = results.get("main") or {}
    if source is None and main.get("_site"):
        s = main["_site"]
        for name in fits:
            m = (main.get(name) or {}).get("median")
            if m and m.get("cpu_s") is not None:
                title = f"saturated, {s['origins']} x {s['pages']}"
                rows.append(predict(title, name, m, fits, _pooled_idle(ns, name)))
    dz = results.get("delay_zero") or {}
    if dz.get("source") == source and dz.get("_site"):
        s = dz["_site"]
        for name in fits:
            if (dz.get(name) or {}).get("status") == "ok":
                title = f"few origins, {s['origins']} x {s['pages']} at delay 0"
                rows.append(predict(title, name, dz[name], fits))
    for part in (ns, ns["split"]):
        s = part["_site"]
        for name in fits:
            if (part.get(name) or {}).get("status") == "ok":
                title = f"not saturated, {s['origins']} x {s['pages']} at {s['delay']:g} s (fit)"
                rows.append(predict(title, name, part[name], fits))
    return rows


def _f(v: float | None, digits: int = 1) -> str:
    return "-" if v is None else f"{v:,.{digits}f}"


def _range(r: list[float] | None, digits: int) -> str:
    return f"{r[0]:.{digits}f} .. {r[1]:.{digits}f}" if r else "-"


def _fit_rows(fits: dict) -> list[str]:
    lines = []
    for name, f in fits.items():
        if f["status"] != "ok":
            lines.append(f"| {name[-1]} | **{f['status']}**: {f['reason']} |||||")
            continue
        pts = "; ".join(
            f"{p['delay']:g} s: {p['pages']:,.0f} pages, {p['seconds']:.1f} s, "
            f"{p['cpu_s']:.2f} CPU s"
            for p in f["points"]
        )
        lines.append(
            f"| {name[-1]} | **{f['a_ms_per_page']:.2f}** ({_range(f.get('a_range'), 2)}) | "
            f"**{f['b_ms_per_s']:.1f}** ({_range(f.get('b_range'), 1)}) | "
            f"{_f(f.get('worker_idle_ms_per_s'))} | {pts} |"
        )
    return lines


def _prediction_row(r: dict) -> str:
    pred = r["predicted_s"]
    ratio = f"{r['cpu_s'] / pred:.2f}" if pred else "-"
    share = f"{r['per_second_s'] / pred:.0%}" if pred else "-"
    mark = "" if r["idle_own"] else " †"
    svc = r["services"]
    return (
        f"| {r['row']} | {r['workers']} | {r['pages']:,.0f} | {r['seconds']:.1f} | "
        f"{r['pages'] / r['seconds'] if r['seconds'] else 0:.0f} | {r['cpu_s']:.2f} | "
        f"{_f(pred, 2)} | {share} | {ratio} | {less_idle_cell(svc['kafka'])}{mark} | "
        f"{less_idle_cell(svc['cassandra'])}{mark} |"
    )


def split_section(results: dict) -> list[str]:
    """Markdown: the fitted parts per worker count, then every Kafka row measured vs predicted."""
    ns = results.get("not_saturated") or {}
    lines = ["## Worker CPU: per page and per second", ""]
    fits = split(ns)
    if not fits:
        return [*lines, "Not part of this run (`--split DELAY`).", ""]
    d1, d2 = ns["_site"]["delay"], ns["split"]["_site"]["delay"]
    lines += [
        f"A worker's CPU over a crawl = *a* x pages + *b* x seconds, solved from the medians of "
        f"the not-saturated rows at {d1:g} s and {d2:g} s (same pages, two rates; "
        "bench/cpu_split.py). *a* is what a page costs, *b* what a running crawl costs per "
        "second whatever the rate; in brackets, the range over every pairing of one run at each "
        "delay. *idle worker*: the workers' CPU rate with nothing to crawl, measured before "
        "each seed (part of *b*).",
        "",
        "| workers | *a*: ms CPU per page | *b*: ms CPU per second | idle worker, ms CPU per "
        "second | fitted on (medians: pages, s, worker CPU s) |",
        "|---|---|---|---|---|",
        *_fit_rows(fits),
        "",
        "Every Kafka row of this run against *a* x pages + *b* x seconds of its worker count. "
        "Seconds: from the seed to the last new page state (the interval the CPU is measured "
        "over). Broker and Cassandra: their CPU during the row less their idle rate x seconds, "
        "the idle part in brackets; the rate is the row's own (measured before each seed), or "
        "where marked † (the saturated rows, which have no idle window) the median of the "
        "not-saturated runs with as many workers. The machine is shared: other work on the "
        "broker and Cassandra shows in both parts.",
        "",
        "| row | workers | pages | s | pages/s | worker CPU s | predicted s | per-second share "
        "| measured / predicted | broker CPU s less idle (idle) | Cassandra CPU s less idle "
        "(idle) |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
        *(_prediction_row(r) for r in kafka_rows(results)),
        "",
    ]
    return lines
