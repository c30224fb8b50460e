"""The import graph of the installed packages, read from the source (ast), not by importing.

Every ``import`` counts, also those inside functions or under ``TYPE_CHECKING`` (they defer
loading, not dependency): no module may reach itself through imports; each module belongs to a
layer (``LAYERS``) and imports only the layers ``MAY_IMPORT`` allows it; a third-party package
with a layer of its own (``THIRD_PARTY``: Faust, aiokafka, mode, confluent-kafka, aiohttp,
cassandra-driver) is imported only there. docs/architecture.md describes the layers.
"""

from __future__ import annotations

import ast
import tomllib
from pathlib import Path

from streamcrawl.topology.cli.kafka_args import KAFKA_EXTRA

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("agents", "topology", "schemas")
WIRING = "streamcrawl.topology"
API = "streamcrawl"


def package_dirs() -> dict[Path, str]:
    """Folder -> the package it installs as, from pyproject.toml's package-dir (``topology/api``
    is ``streamcrawl`` itself)."""
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text("utf-8"))
    mapping = pyproject["tool"]["setuptools"]["package-dir"]
    return {Path(folder): package for package, folder in mapping.items()}


def module_name(relative: Path, dirs: dict[Path, str]) -> str:
    """The import name of the source file ``relative`` (to the repository), under the deepest
    folder of ``dirs`` that holds it."""
    folder = max((d for d in dirs if relative.is_relative_to(d)), key=lambda d: len(d.parts))
    parts = relative.relative_to(folder).with_suffix("").parts
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join((dirs[folder], *parts))


def modules() -> dict[str, Path]:
    """``streamcrawl.<package>.<module>`` -> source file, for every module of the packages."""
    dirs = package_dirs()
    found = {}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            found[module_name(path.relative_to(ROOT), dirs)] = path
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
    assert "streamcrawl.topology.cli.crawl" in edges[API]


def test_modules_are_named_as_installed() -> None:
    dirs = package_dirs()
    assert module_name(Path("topology/api/__init__.py"), dirs) == "streamcrawl"
    assert module_name(Path("topology/cli/main.py"), dirs) == "streamcrawl.topology.cli.main"
    assert module_name(Path("agents/net/__init__.py"), dirs) == "streamcrawl.agents.net"
    assert "streamcrawl.topology.api" not in modules()


def test_no_import_cycle() -> None:
    assert cycles(graph()) == []


def test_the_cycle_check_finds_a_cycle_through_a_deferred_import() -> None:
    edges = {"a.cli": {"a.commands"}, "a.commands": {"a.demo"}, "a.demo": {"a.cli"}, "b": set()}
    assert cycles(edges) == [["a.cli", "a.commands", "a.demo"]]


def test_stages_and_records_never_import_the_wiring() -> None:
    upward = sorted(
        f"{name} -> {target}"
        for name, targets in graph().items()
        if not name.startswith(WIRING) and name != API
        for target in targets
        if target.startswith(WIRING)
    )
    assert upward == []


def test_nothing_imports_the_api() -> None:
    """``streamcrawl`` is the top: every module is imported after it (its parent package), so
    it may not import anything that imports it back."""
    assert sorted(name for name, targets in graph().items() if API in targets) == []


# --- layers ------------------------------------------------------------------------------------

# Module name prefix -> layer; the longest prefix wins. The package roots themselves (only their
# ``__init__``, not what is below them) are part of ``core``; ``streamcrawl``'s own is the API.
ROOTS = {API, "streamcrawl.agents", "streamcrawl.topology"}
LAYERS = {
    API: "api",
    "streamcrawl.agents": "core",
    "streamcrawl.agents.errors": "core",
    "streamcrawl.agents.tls": "core",
    "streamcrawl.schemas": "schemas",
    "streamcrawl.agents.urls": "urls",
    "streamcrawl.agents.robots": "robots",
    "streamcrawl.agents.plugins": "plugins",
    "streamcrawl.agents.policy": "policy",
    "streamcrawl.agents.content": "content",
    "streamcrawl.agents.frontier": "frontier",
    "streamcrawl.agents.net": "net",
    "streamcrawl.agents.render": "render",
    "streamcrawl.agents.sinks": "sinks",
    "streamcrawl.agents.sinks.cassandra": "cassandra",
    "streamcrawl.agents.sinks.warc": "warc",
    "streamcrawl.agents.stream": "stream",
    "streamcrawl.topology": "core",
    "streamcrawl.topology.settings": "settings",
    "streamcrawl.topology.admin": "admin",
    "streamcrawl.topology.worker": "worker",
    "streamcrawl.topology.embedded": "embedded",
    "streamcrawl.topology.archive": "archive",
    "streamcrawl.topology.cli": "cli",
}

_BASE = {"core", "schemas"}
_PURE = _BASE | {"urls", "robots", "plugins", "policy", "content"}
_STAGES = _PURE | {"frontier", "net", "render", "sinks"}
# Which layers each layer may import (besides itself): the stages bottom-up, then the wiring.
MAY_IMPORT: dict[str, set[str]] = {
    "core": {"core"},
    "schemas": set(),
    "urls": _BASE,
    "robots": _BASE | {"urls"},
    "plugins": _BASE,
    "policy": _BASE | {"urls", "robots", "plugins"},
    "content": _BASE | {"urls", "robots", "plugins", "policy"},
    "frontier": _BASE | {"urls", "robots", "plugins", "policy"},
    # The browser (render) knows nothing of the fetcher: net serves its requests.
    "render": _BASE,
    "net": _PURE | {"frontier", "render"},
    "sinks": _BASE,
    "cassandra": _BASE | {"sinks"},
    "warc": _BASE | {"sinks"},
    "stream": _STAGES,
    "settings": _BASE | {"policy", "net", "cassandra"},
    "admin": _BASE | {"settings", "sinks", "stream", "frontier"},  # reshard reads the queues
    "worker": _STAGES | {"cassandra", "stream", "settings", "admin"},
    "embedded": _STAGES | {"settings", "warc"},
    "archive": _BASE | {"sinks", "warc", "settings", "admin"},
    "cli": _STAGES | {"cassandra", "warc", "settings", "admin", "worker", "embedded", "archive"},
    # ``crawl``: the crawl command's options and the embedded runner; ``pages``: the Kafka
    # reader, imported once the kafka extra is found (``KAFKA_DOOR``).
    "api": _BASE | {"cli", "embedded", "settings", "admin"},
}

# Third-party package -> the layers (or single modules) that may import it.
THIRD_PARTY = {
    "faust": {"worker"},
    "aiokafka": {"stream", "worker"},
    "mode": {"stream", "worker"},
    "confluent_kafka": {"admin", "archive"},
    "warcio": {"warc"},
    "isal": {"warc"},
    # The demo's local web server; the render worker's web port (it has no Faust app to serve
    # its /healthz and /metrics).
    "aiohttp": {"net", "streamcrawl.topology.cli.demo", "streamcrawl.topology.worker.render_web"},
    "cassandra": {"cassandra"},
    "playwright": {"render"},
}


def layer_of(module: str) -> str | None:
    """The layer of ``module`` by the longest matching prefix in ``LAYERS``; None: no layer."""
    matches = [p for p in LAYERS if module == p or (module.startswith(p + ".") and p not in ROOTS)]
    return LAYERS[max(matches, key=len)] if matches else None


def top_level_imports(path: Path) -> set[str]:
    """The top-level name of every package ``path`` imports (``a`` for ``import a.b``)."""
    out = set()
    for node in ast.walk(ast.parse(path.read_text("utf-8"), str(path))):
        if isinstance(node, ast.Import):
            out |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            out.add(node.module.split(".")[0])
    return out


def third_party(path: Path) -> set[str]:
    """The top-level names of every package ``path`` imports that ``THIRD_PARTY`` rules."""
    return top_level_imports(path) & set(THIRD_PARTY)


def layer_violations(edges: dict[str, set[str]]) -> list[str]:
    """``a -> b`` for every import of a layer that ``MAY_IMPORT`` does not allow."""
    return sorted(
        f"{name} ({layer_of(name)}) -> {target} ({layer_of(target)})"
        for name, targets in edges.items()
        for target in targets
        if layer_of(target) != layer_of(name)
        and layer_of(target) not in MAY_IMPORT[layer_of(name) or ""]
    )


def third_party_violations(found: dict[str, set[str]]) -> list[str]:
    """``module imports package`` for every ruled package imported outside its layers."""
    return sorted(
        f"{name} imports {package}"
        for name, packages in found.items()
        for package in packages
        if layer_of(name) not in THIRD_PARTY[package] and name not in THIRD_PARTY[package]
    )


def test_every_module_has_a_layer() -> None:
    assert [name for name in modules() if layer_of(name) is None] == []


def test_layers_import_only_the_layers_below() -> None:
    assert layer_violations(graph()) == []


def test_third_party_packages_stay_in_their_layer() -> None:
    found = {name: third_party(path) for name, path in modules().items()}
    assert third_party_violations(found) == []


def test_the_layer_checks_find_violations() -> None:
    edges = {
        "streamcrawl.agents.urls.canonical": {"streamcrawl.agents.net.fetch"},  # pure -> I/O
        "streamcrawl.agents.net.fetch": {"streamcrawl.agents.urls.canonical"},  # allowed
    }
    assert layer_violations(edges) == [
        "streamcrawl.agents.urls.canonical (urls) -> streamcrawl.agents.net.fetch (net)"
    ]
    found = {
        "streamcrawl.agents.robots.rules": {"aiohttp"},
        "streamcrawl.topology.cli.demo": {"aiohttp"},
        "streamcrawl.topology.cli.kafka_commands": {"faust", "confluent_kafka"},
        "streamcrawl.topology.worker.app": {"faust", "mode"},
    }
    assert third_party_violations(found) == [
        "streamcrawl.agents.robots.rules imports aiohttp",
        "streamcrawl.topology.cli.kafka_commands imports confluent_kafka",
        "streamcrawl.topology.cli.kafka_commands imports faust",
    ]


def test_every_layer_has_its_rules() -> None:
    assert set(LAYERS.values()) == set(MAY_IMPORT)
    assert {layer for allowed in THIRD_PARTY.values() for layer in allowed} - set(MAY_IMPORT) == {
        "streamcrawl.topology.cli.demo",
        "streamcrawl.topology.worker.render_web",
    }


# --- the base install --------------------------------------------------------------------------

# ``pip install streamcrawl`` without extras runs ``crawl``, ``demo``, ``warc index``,
# ``--help`` and ``streamcrawl.crawl``: the modules they load may not import what only the kafka
# extra installs (pyproject.toml). They are every module ``topology.cli.main`` reaches, deferred
# imports and parent packages (``streamcrawl`` itself among them) included, except through the
# doors that ``kafka_args.run`` and ``streamcrawl.pages`` open only once they have found the kafka
# extra installed. tests/test_packaging.py runs the base install for real.
BASE_ENTRY = "streamcrawl.topology.cli.main"
KAFKA_DOOR = {
    ("streamcrawl.topology.cli.kafka_args", "streamcrawl.topology.cli.kafka_commands"),
    (API, "streamcrawl.topology.admin.pages"),
    (API, "streamcrawl.topology.settings"),
}
# The import names of the kafka extra's distributions: those ``kafka_args`` checks for, and what
# faust-streaming and pydantic-settings bring (``mode``, ``pydantic``).
KAFKA_ONLY = {*KAFKA_EXTRA, "mode", "pydantic"}


def with_parents(edges: dict[str, set[str]]) -> dict[str, set[str]]:
    """``edges`` plus an edge from each module to its parent packages (importing ``a.b.c`` runs
    ``a/__init__.py`` and ``a/b/__init__.py`` first), those that are among the modules."""
    out = {}
    for name, targets in edges.items():
        parts = name.split(".")
        parents = {".".join(parts[:i]) for i in range(1, len(parts))} & set(edges)
        out[name] = targets | parents
    return out


def import_paths(
    edges: dict[str, set[str]], start: str, cut: set[tuple[str, str]]
) -> dict[str, list[str]]:
    """Each module reachable from ``start`` along ``edges`` but none in ``cut``, with the chain
    of imports that reaches it (``start`` first)."""
    paths = {start: [start]}
    todo = [start]
    while todo:
        name = todo.pop()
        for target in sorted(edges.get(name, ())):
            if target not in paths and (name, target) not in cut:
                paths[target] = [*paths[name], target]
                todo.append(target)
    return paths


def base_violations(
    edges: dict[str, set[str]], found: dict[str, set[str]], forbidden: set[str]
) -> list[str]:
    """``chain imports package`` for every module of the base install (``BASE_ENTRY`` past no
    ``KAFKA_DOOR``) that imports a package of ``forbidden``."""
    paths = import_paths(with_parents(edges), BASE_ENTRY, KAFKA_DOOR)
    return sorted(
        f"{' -> '.join(path)} imports {package}"
        for name, path in paths.items()
        for package in found.get(name, set()) & forbidden
    )


def test_the_base_install_imports_nothing_of_the_kafka_extra() -> None:
    found = {name: top_level_imports(path) for name, path in modules().items()}
    assert base_violations(graph(), found, KAFKA_ONLY) == []


def test_the_base_install_reaches_the_embedded_crawl_and_stops_at_the_door() -> None:
    reached = import_paths(with_parents(graph()), BASE_ENTRY, KAFKA_DOOR)
    for module in (
        API,  # every module's parent package: ``streamcrawl.crawl`` runs on the base install
        "streamcrawl.topology.cli.crawl",
        "streamcrawl.topology.cli.demo",
        "streamcrawl.topology.cli.warc_index",
        "streamcrawl.topology.embedded.runner",
        "streamcrawl.agents.sinks.warc",  # a parent package, imported before warc.files
    ):
        assert module in reached
    assert "streamcrawl.topology.cli.kafka_commands" not in reached
    assert "streamcrawl.topology.admin.pages" not in reached
    assert "streamcrawl.topology.worker.app" not in reached


def test_the_base_check_finds_an_import_of_the_kafka_extra() -> None:
    edges = {
        BASE_ENTRY: {"streamcrawl.topology.cli.kafka_args", "streamcrawl.topology.cli.crawl"},
        "streamcrawl.topology.cli.kafka_args": {"streamcrawl.topology.cli.kafka_commands"},
        "streamcrawl.topology.cli.kafka_commands": set(),  # behind the door: may import faust
        "streamcrawl.topology.cli.crawl": {"streamcrawl.agents.stream.metrics"},
        "streamcrawl.agents.stream.metrics": set(),
        "streamcrawl.agents.stream": set(),  # imported as metrics' parent package
    }
    found = {
        "streamcrawl.topology.cli.kafka_commands": {"faust"},
        "streamcrawl.agents.stream.metrics": {"prometheus_client", "msgspec"},
        "streamcrawl.agents.stream": {"mode"},
    }
    assert base_violations(edges, found, KAFKA_ONLY) == [
        "streamcrawl.topology.cli.main -> streamcrawl.topology.cli.crawl -> "
        "streamcrawl.agents.stream.metrics -> streamcrawl.agents.stream imports mode",
        "streamcrawl.topology.cli.main -> streamcrawl.topology.cli.crawl -> "
        "streamcrawl.agents.stream.metrics imports prometheus_client",
    ]


def private_names(path: Path) -> list[str]:
    """``module.name`` for every private (``_``) streamcrawl module or name ``path`` imports."""
    out = []
    for node in ast.walk(ast.parse(path.read_text("utf-8"), str(path))):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("streamcrawl"):
            names = [f"{node.module}.{alias.name}" for alias in node.names]
        elif isinstance(node, ast.Import):
            names = [a.name for a in node.names if a.name.startswith("streamcrawl")]
        else:
            continue
        out += [name for name in names if any(p.startswith("_") for p in name.split("."))]
    return out


def test_the_bench_uses_only_public_names() -> None:
    """The bench measures the package as a user has it: a move of private helpers must not
    break it."""
    used = {str(p.relative_to(ROOT)): private_names(p) for p in (ROOT / "bench").rglob("*.py")}
    assert {path: names for path, names in used.items() if names} == {}


def test_private_names_are_found(tmp_path: Path) -> None:
    source = tmp_path / "probe.py"
    source.write_text(
        "from streamcrawl.agents.net.fetch import fetch, _read\n"
        "import streamcrawl.agents._hidden\n"
        "from os import _exit\n"
    )
    assert private_names(source) == [
        "streamcrawl.agents.net.fetch._read",
        "streamcrawl.agents._hidden",
    ]
