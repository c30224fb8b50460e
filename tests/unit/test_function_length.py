"""No function or method under ``agents/`` or ``topology/`` is longer than ``MAX_LINES``.

A function's length runs from its ``def`` line to its last line (``end_lineno - lineno + 1``):
its docstring, comments, blank lines and nested functions count; its decorators do not. A
nested function or a method is held to the limit on its own too. There is no allowlist: a
function that grows past the limit is split into named helpers a reader can hold.
"""

from __future__ import annotations

import ast
import textwrap
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("agents", "topology")
MAX_LINES = 60

Function = ast.FunctionDef | ast.AsyncFunctionDef


def functions(tree: ast.AST, prefix: str = "") -> Iterator[tuple[str, Function]]:
    """Every function and method of ``tree``, nested ones too, with its qualified name."""
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            name = prefix + node.name
            yield name, node
            yield from functions(node, f"{name}.<locals>.")
        elif isinstance(node, ast.ClassDef):
            yield from functions(node, f"{prefix}{node.name}.")
        else:
            yield from functions(node, prefix)


def too_long(source: str, where: str, limit: int = MAX_LINES) -> list[str]:
    """``where:line name length`` of each function of ``source`` longer than ``limit`` lines."""
    found = []
    for name, node in functions(ast.parse(source, where)):
        assert node.end_lineno is not None
        length = node.end_lineno - node.lineno + 1
        if length > limit:
            found.append(f"{where}:{node.lineno} {name} {length}")
    return found


def test_no_function_is_longer_than_the_limit() -> None:
    found = [
        line
        for package in PACKAGES
        for path in sorted((ROOT / package).rglob("*.py"))
        for line in too_long(path.read_text("utf-8"), str(path.relative_to(ROOT)))
    ]
    assert found == [], f"functions over {MAX_LINES} lines (split them):\n" + "\n".join(found)


def _function(header: str, lines: int) -> str:
    """A function of ``lines`` lines: ``header`` and ``lines - 1`` statements."""
    return header + "\n" + "".join(f"    x{i} = {i}\n" for i in range(lines - 1))


def test_the_check_counts_from_def_to_the_last_line_without_decorators() -> None:
    source = "".join(
        (
            "@decorator\n@another\n",
            _function("def fits():", 60),  # lines 3-62
            _function("async def over():", 61),  # lines 63-123
            "class C:\n",
            textwrap.indent(_function("def method(self):", 61), "    "),  # lines 125-185
        )
    )
    assert too_long(source, "m.py") == ["m.py:63 over 61", "m.py:125 C.method 61"]


def test_a_nested_function_is_named_and_held_to_the_limit_too() -> None:
    inner = textwrap.indent(_function("def inner():", 61), "    ")
    source = "def outer():\n" + inner + "    return inner\n"
    assert too_long(source, "m.py") == ["m.py:1 outer 63", "m.py:2 outer.<locals>.inner 61"]
