"""bench/ holds the harness of ``python -m bench.run`` and nothing else; bench/probes/ holds the
one-question probes, each with a docstring naming the docs section whose decision it informs and
the command that runs it (bench/README.md, "The probes").

The harness is found statically, so that the test needs neither the benchmark venv nor the
services: every module ``bench.run`` imports, at the top or inside a function, and every module
the harness starts with ``python -m``, transitively.
"""

from __future__ import annotations

import ast
import re
from itertools import pairwise
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
BENCH = ROOT / "bench"
PROBES = BENCH / "probes"

# ``docs/performance.md, "A heading", "Another heading"``: a file of docs/ and its sections.
SECTION_REF = re.compile(r'(docs/[\w.-]+\.md)((?:, "[^"]+")+)')
COMMAND = re.compile(r"python -m (bench\.probes\.\w+)")


def imported(path: Path) -> set[str]:
    """The dotted names ``path`` imports (anywhere in it) or starts as ``[..., "-m", NAME]``."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text("utf-8"), str(path))):
        if isinstance(node, ast.Import):
            names |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names.add(node.module)
            names |= {f"{node.module}.{alias.name}" for alias in node.names}
        elif isinstance(node, ast.List | ast.Tuple):
            items = [e.value if isinstance(e, ast.Constant) else None for e in node.elts]
            names |= {
                item for flag, item in pairwise(items) if flag == "-m" and isinstance(item, str)
            }
    return names


def module_file(name: str) -> Path | None:
    """The file of bench module ``name`` (``bench.x`` or ``bench.probes.x``), if it has one."""
    parts = name.split(".")
    if parts[0] != "bench" or len(parts) < 2:
        return None
    path = ROOT.joinpath(*parts).with_suffix(".py")
    return path if path.is_file() else None


def harness() -> set[Path]:
    """The files ``python -m bench.run`` uses: its imports and ``-m`` children, transitively."""
    seen: set[Path] = set()
    todo = [BENCH / "run.py"]
    while todo:
        path = todo.pop()
        if path in seen:
            continue
        seen.add(path)
        todo += [f for name in imported(path) if (f := module_file(name)) is not None]
    return seen


def headings(doc: Path) -> set[str]:
    lines = doc.read_text("utf-8").splitlines()
    return {line.lstrip("#").strip() for line in lines if line.startswith("#")}


def docstring(path: Path) -> str:
    """The module docstring of ``path``, its whitespace collapsed (references wrap lines)."""
    text = ast.get_docstring(ast.parse(path.read_text("utf-8"))) or ""
    return " ".join(text.split())


def probe_problems(path: Path) -> list[str]:
    """What ``path``'s docstring lacks: an ``Informs:`` paragraph naming a section of docs/ that
    exists, and the command that runs it (its own if it has a ``__main__`` block)."""
    doc = docstring(path)
    problems = []
    informs = doc.partition("Informs:")[2]
    if not SECTION_REF.search(informs):
        problems.append('no "Informs: ... (docs/FILE.md, "Section")"')
    for match in SECTION_REF.finditer(doc):
        target = ROOT / match.group(1)
        named = re.findall(r'"([^"]+)"', match.group(2))
        missing = [s for s in named if not target.is_file() or s not in headings(target)]
        problems += [f"{match.group(1)} has no section {s!r}" for s in missing]
    commands = set(COMMAND.findall(doc))
    if not commands:
        problems.append("no `python -m bench.probes.NAME` command")
    problems += [f"{c} is no module" for c in sorted(commands) if module_file(c) is None]
    if '__name__ == "__main__"' in path.read_text("utf-8"):
        own = f"bench.probes.{path.stem}"
        if own not in commands:
            problems.append(f"its own command `python -m {own}` is not given")
    return problems


def test_every_module_beside_the_harness_is_part_of_it() -> None:
    beside = {p for p in BENCH.glob("*.py") if p.name != "__init__.py"}
    strays = sorted(p.name for p in beside - harness())
    assert strays == [], f"not used by bench.run: move to bench/probes/: {strays}"


def test_the_harness_uses_no_probe() -> None:
    assert sorted(p.name for p in harness() if p.parent == PROBES) == []


def test_every_probe_names_its_decision_and_its_command() -> None:
    probes = sorted(p for p in PROBES.glob("*.py") if p.name != "__init__.py")
    assert probes
    found = {p.name: problems for p in probes if (problems := probe_problems(p))}
    assert found == {}


def test_the_harness_finder_sees_lazy_imports_and_children(tmp_path: Path) -> None:
    source = tmp_path / "mod.py"
    source.write_text(
        "import os\n"
        "from bench import site, wire as w\n"
        "def f():\n"
        "    from bench.probes.kafka_probe import seed\n"
        "    run([python, '-m', 'bench.kafka_status', '--crawl-id', x])\n"
    )
    assert imported(source) == {
        "os",
        "bench",
        "bench.site",
        "bench.wire",
        "bench.probes.kafka_probe",
        "bench.probes.kafka_probe.seed",
        "bench.kafka_status",
    }


def test_a_probe_without_a_decision_is_found(tmp_path: Path) -> None:
    bare = tmp_path / "bare.py"
    bare.write_text('"""Times something."""\nif __name__ == "__main__":\n    pass\n')
    assert probe_problems(bare) == [
        'no "Informs: ... (docs/FILE.md, "Section")"',
        "no `python -m bench.probes.NAME` command",
        "its own command `python -m bench.probes.bare` is not given",
    ]
    stale = tmp_path / "stale.py"
    stale.write_text(
        '"""Informs: a choice (docs/performance.md, "No such section"); run through\n'
        '``python -m bench.probes.gone``."""\n'
    )
    assert probe_problems(stale) == [
        "docs/performance.md has no section 'No such section'",
        "bench.probes.gone is no module",
    ]
