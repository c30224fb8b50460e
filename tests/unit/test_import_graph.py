"""The import graph of the installed packages, read from the source (ast), not by importing.

Every ``import`` counts, also those inside functions (they defer loading, not dependency): no
module may reach itself through imports, and the stages (``agents``) and the records
(``schemas``) never import the wiring (``topology``).
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("agents", "topology", "schemas")
WIRING = "streamcrawl.topology"


def modules() -> dict[str, Path]:
    """``streamcrawl.<package>.<module>`` -> source file, for every module of the packages."""
    found = {}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            parts = path.relative_to(ROOT).with_suffix("").parts
            if parts[-1] == "__init__":
                parts = parts[:-1]
            found[".".join(("streamcrawl", *parts))] = path
    return found


def imports(path: Path, known: set[str]) -> set[str]:
    """The streamcrawl modules that ``path`` imports (``from pkg import mod`` names ``mod``)."""
    out = set()
    for node in ast.walk(ast.parse(path.read_text("utf-8"), str(path))):
        if isinstance(node, ast.Import):
            out |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            assert not node.level and node.module, f"{path}:{node.lineno}: use absolute imports"
            for alias in node.names:
                sub = f"{node.module}.{alias.name}"
                out.add(sub if sub in known else node.module)
    return {name for name in out if name in known}


def graph() -> dict[str, set[str]]:
    known = modules()
    return {name: imports(path, set(known)) - {name} for name, path in known.items()}


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(edges.get(node, ())):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(edges):
        if node not in index:
            visit(node)
    return found


def test_the_graph_is_read() -> None:
    edges = graph()
    assert "streamcrawl.topology.cli.options" in edges["streamcrawl.topology.cli.main"]
    assert "streamcrawl.topology.cli.kafka_commands" in edges["streamcrawl.topology.cli.kafka_args"]
    assert "streamcrawl.schemas.records" in edges["streamcrawl.agents.frontier.frontier"]


def test_no_import_cycle() -> None:
    assert cycles(graph()) == []


def test_the_cycle_check_finds_a_cycle_through_a_deferred_import() -> None:
    edges = {"a.cli": {"a.commands"}, "a.commands": {"a.demo"}, "a.demo": {"a.cli"}, "b": set()}
    assert cycles(edges) == [["a.cli", "a.commands", "a.demo"]]


def test_stages_and_records_never_import_the_wiring() -> None:
    upward = sorted(
        f"{name} -> {target}"
        for name, targets in graph().items()
        if not name.startswith(WIRING)
        for target in targets
        if target.startswith(WIRING)
    )
    assert upward == []
