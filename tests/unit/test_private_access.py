"""One wall for private access: of all the installed modules, only
``topology/worker/internals.py`` uses a private name of Faust, mode or aiokafka.

Read from the source (ast) of every module under agents/, topology/ and schemas/. A private name
begins with an underscore and is not a dunder (``_fetcher``, ``__x``; not ``__init__``). In any
module but internals.py, each of these is a finding:

- an import from faust, mode or aiokafka of a private module or name
  (``from faust.streams import _current_event``, ``import faust._cython``);
- ``x._name`` (read, written or deleted), and ``getattr``/``setattr``/``hasattr``/``delattr``
  of ``x`` and the literal ``"_name"``, where ``x`` is not ``self``, ``cls`` or ``super()``. An
  ast walk cannot know the type of ``x`` (the worker's Faust objects are mostly ``Any``), so
  every such access counts, except: ``x`` rooted in a name imported from another package
  (``zlib._Decompress``, confluent-kafka's ``KafkaError._PARTITION_EOF``), a name of
  namedtuple's public API (``_replace``, ``_asdict``...), and the few ``ALLOWED`` below, each
  with the reason it is no Faust, mode or aiokafka name;
- in a class with a Faust, mode or aiokafka class among its bases (found by importing them),
  ``self._name``, ``cls._name``, ``super()._name``, or a method or class attribute ``_name``,
  when ``_name`` belongs to one of those classes (in its ``__dict__``, or used as
  ``self._name`` in its source): overriding ``Table._new_store_by_url`` or reading
  ``Store._dbs`` reaches into Faust, a private attribute of our own in a ``mode.Service`` does
  not;
- a monkeypatch, whatever the name: assigning a function, lambda or class of the module to an
  attribute of something not ``self``/``cls`` (``consumer.ack = guarded``,
  ``app.transport.Producer = Producer``), or anything to an attribute of a name imported from
  Faust, mode or aiokafka (``driver.Consumer.ack = ...``).

Out of its sight: a name built at run time (``getattr(x, f"_{step}")``), ``self._name`` in a
function defined outside any class, and a Faust object reached through a name imported from one
of our modules (exempt like any other package's). Setting a public data attribute
(``producer.max_batch_size = ...``) is no monkeypatch here. internals.py says which release of
each package its accesses were checked against (tests/unit/test_internals.py).
"""

from __future__ import annotations

import ast
import builtins
import contextlib
import importlib
import inspect
import re
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("agents", "topology", "schemas")
WALL = "topology/worker/internals.py"
FOREIGN = frozenset({"faust", "mode", "aiokafka"})
REFLECTION = frozenset({"getattr", "setattr", "hasattr", "delattr"})
NAMEDTUPLE_API = frozenset({"_asdict", "_replace", "_fields", "_make", "_field_defaults"})
# (module, private name) -> why it is not a Faust, mode or aiokafka name.
ALLOWED = {
    ("agents/urls/canonical.py", "_strip"): "a field of our own CanonicalOptions",
    ("agents/content/charset.py", "_is_text_encoding"): "the standard library's CodecInfo",
    ("agents/net/capture.py", "_protocol"): "aiohttp's response (test_capture.py checks it)",
}
_ON_SELF = re.compile(r"\b(?:self|cls)\.(_\w+)")


def private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def foreign(qualified: str) -> bool:
    return qualified.split(".")[0] in FOREIGN


def imported_names(tree: ast.AST) -> dict[str, str]:
    """Each name an import binds anywhere in the module -> what it names (``a.b.c``)."""
    names = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.asname:
                    names[alias.asname] = alias.name
                else:
                    top = alias.name.split(".")[0]
                    names[top] = top
        elif isinstance(node, ast.ImportFrom) and node.module:
            for alias in node.names:
                names[alias.asname or alias.name] = f"{node.module}.{alias.name}"
    return names


def load(qualified: str) -> Any:
    """The object ``a.b.c`` names: the longest importable module prefix, then attributes."""
    parts = qualified.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for part in parts[cut:]:
            obj = getattr(obj, part)
        return obj
    raise ImportError(qualified)


def dotted(node: ast.expr) -> list[str] | None:
    """``a.b.c`` as ``["a", "b", "c"]``; None for anything but names and attributes."""
    if isinstance(node, ast.Name):
        return [node.id]
    if isinstance(node, ast.Attribute):
        head = dotted(node.value)
        return None if head is None else [*head, node.attr]
    return None


def root(node: ast.expr) -> str | None:
    """The name an expression starts from (``a`` of ``a.b().c[0]``), if any."""
    while isinstance(node, ast.Attribute | ast.Call | ast.Subscript):
        node = node.func if isinstance(node, ast.Call) else node.value
    return node.id if isinstance(node, ast.Name) else None


def is_super(node: ast.expr) -> bool:
    return (
        isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "super"
    )


def own_names(cls: type) -> set[str]:
    """The private names of a class: in its ``__dict__``, or on ``self``/``cls`` in its
    source."""
    names = {name for name in vars(cls) if private(name)}
    with contextlib.suppress(OSError, TypeError):  # compiled, or no source installed
        names |= set(_ON_SELF.findall(inspect.getsource(cls)))
    return names


class Finder(ast.NodeVisitor):
    """The findings (``path:line: what``) of one module, by the rules of the module docstring."""

    def __init__(self, path: str, tree: ast.Module) -> None:
        self.path = path
        self.imports = imported_names(tree)
        self.local_classes = {n.name: n for n in ast.walk(tree) if isinstance(n, ast.ClassDef)}
        self.defined = {
            n.name
            for n in ast.walk(tree)
            if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)
        }
        self.class_names: list[set[str]] = []  # per enclosing class: its foreign bases' names
        self.found: list[str] = []
        self.visit(tree)

    def flag(self, node: ast.AST, what: str) -> None:
        self.found.append(f"{self.path}:{getattr(node, 'lineno', 0)}: {what}")

    # -- which classes are Faust's, mode's or aiokafka's ---------------------------------------
    def foreign_bases(self, cls: ast.ClassDef, seen: frozenset[str] = frozenset()) -> set[type]:
        """The Faust, mode and aiokafka classes among the bases of ``cls`` and theirs."""
        out: set[type] = set()
        for base in cls.bases:
            expr = base.value if isinstance(base, ast.Subscript) else base
            parts = dotted(expr)
            assert parts, f"{self.path}:{cls.lineno}: base {ast.unparse(base)} not resolved"
            head, rest = parts[0], parts[1:]
            if head in self.imports:
                obj = load(".".join([self.imports[head], *rest]))
            elif head in self.local_classes and not rest and head not in seen:
                out |= self.foreign_bases(self.local_classes[head], seen | {cls.name})
                continue
            elif hasattr(builtins, head) and not rest:
                obj = getattr(builtins, head)
            else:
                raise AssertionError(f"{self.path}:{cls.lineno}: base {head} not resolved")
            if isinstance(obj, type):
                out |= {k for k in obj.__mro__ if foreign(k.__module__)}
        return out

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        names: set[str] = set()
        for cls in self.foreign_bases(node):
            names |= own_names(cls)
        for item in node.body:
            if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef) and item.name in names:
                self.flag(item, f"overrides {item.name} of a Faust/mode/aiokafka base")
            elif isinstance(item, ast.Assign | ast.AnnAssign):
                for target in item.targets if isinstance(item, ast.Assign) else [item.target]:
                    if isinstance(target, ast.Name) and target.id in names:
                        self.flag(item, f"sets {target.id} of a Faust/mode/aiokafka base")
        self.class_names.append(names)
        self.generic_visit(node)
        self.class_names.pop()

    # -- private names -------------------------------------------------------------------------
    def check(self, base: ast.expr, name: str, node: ast.AST) -> None:
        if not private(name):
            return
        if (isinstance(base, ast.Name) and base.id in ("self", "cls")) or is_super(base):
            if self.class_names and name in self.class_names[-1]:
                self.flag(node, f"{ast.unparse(base)}.{name} of a Faust/mode/aiokafka base")
            return
        head = root(base)
        if head in self.imports and not foreign(self.imports[head]):
            return  # another package's, or our own module's
        if name in NAMEDTUPLE_API or (self.path, name) in ALLOWED:
            return
        self.flag(node, f"{ast.unparse(base)}.{name}")

    def visit_Attribute(self, node: ast.Attribute) -> None:
        self.check(node.value, node.attr, node)
        self.generic_visit(node)

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            if foreign(alias.name) and any(map(private, alias.name.split("."))):
                self.flag(node, f"import {alias.name}")

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        module = node.module or ""
        if foreign(module):
            for alias in node.names:
                if any(map(private, [*module.split("."), alias.name])):
                    self.flag(node, f"from {module} import {alias.name}")

    def visit_Call(self, node: ast.Call) -> None:
        func, args = node.func, node.args
        if isinstance(func, ast.Name) and func.id in REFLECTION and len(args) >= 2:
            name = args[1]
            if isinstance(name, ast.Constant) and isinstance(name.value, str):
                self.check(args[0], name.value, node)
                if func.id == "setattr" and len(args) == 3:
                    self.patch(args[0], name.value, args[2], node)
        self.generic_visit(node)

    # -- monkeypatches -------------------------------------------------------------------------
    def patch(self, owner: ast.expr, name: str, value: ast.expr | None, node: ast.AST) -> None:
        if isinstance(owner, ast.Name) and owner.id in ("self", "cls"):
            return
        head = root(owner)
        ours = isinstance(value, ast.Lambda) or (
            isinstance(value, ast.Name) and value.id in self.defined
        )
        if ours or (head in self.imports and foreign(self.imports[head])):
            self.flag(node, f"monkeypatch of {ast.unparse(owner)}.{name}")

    def assigned(self, targets: list[ast.expr], value: ast.expr | None, node: ast.AST) -> None:
        for target in targets:
            if isinstance(target, ast.Tuple | ast.List):
                self.assigned(list(target.elts), None, node)
            elif isinstance(target, ast.Attribute):
                self.patch(target.value, target.attr, value, node)

    def visit_Assign(self, node: ast.Assign) -> None:
        self.assigned(node.targets, node.value, node)
        self.generic_visit(node)

    def visit_AnnAssign(self, node: ast.AnnAssign) -> None:
        self.assigned([node.target], node.value, node)
        self.generic_visit(node)

    def visit_AugAssign(self, node: ast.AugAssign) -> None:
        self.assigned([node.target], node.value, node)
        self.generic_visit(node)

    def visit_Delete(self, node: ast.Delete) -> None:
        self.assigned(node.targets, None, node)
        self.generic_visit(node)


def findings(source: str, path: str = "agents/example.py") -> list[str]:
    return Finder(path, ast.parse(source)).found


def sources() -> dict[str, str]:
    """Each module under the packages, by its path in the repository."""
    return {
        path.relative_to(ROOT).as_posix(): path.read_text("utf-8")
        for package in PACKAGES
        for path in sorted((ROOT / package).rglob("*.py"))
    }


def test_only_internals_uses_private_faust_mode_or_aiokafka_names() -> None:
    found = [f for path, text in sources().items() if path != WALL for f in findings(text, path)]
    assert found == [], "move these into topology/worker/internals.py:\n" + "\n".join(found)


def test_the_check_sees_what_internals_does() -> None:
    """The accesses internals.py is there for are findings anywhere else."""
    found = "\n".join(findings((ROOT / WALL).read_text("utf-8")))
    for access in ("consumer._committed_offset", "consumer._fetcher", "_current_event"):
        assert access in found


def test_every_allowed_name_is_still_used() -> None:
    text = sources()
    for path, name in ALLOWED:
        assert name in text[path], f"{path} no longer uses {name}: drop it from ALLOWED"


@pytest.mark.parametrize(
    "source",
    [
        "from faust.streams import _current_event",
        "import faust._cython.streams",
        "from aiokafka._private import thing",
        "def f(consumer):\n    return consumer._fetcher",
        "def f(client):\n    client._request_timeout_ms = 1",
        "def f(x):\n    setattr(x, '_y', 1)",
        "def f(x):\n    return getattr(x, '_y', None)",
        "class A:\n    def f(self):\n        return self._table.data._get",
        "from faust.transport.drivers import aiokafka as d\nd.Consumer._x = 1",
        "from faust.transport.drivers import aiokafka as d\nd.Consumer.ack = print",
        "def f(consumer):\n    def g(m):\n        return True\n    consumer.ack = g",
        "def f(app):\n    class P:\n        pass\n    app.transport.Producer = P",
        "def f(c):\n    setattr(c, 'ack', lambda m: True)",
        "from faust.stores import rocksdb\n"
        "class S(rocksdb.Store):\n    def f(self):\n        return self._dbs",
        "import faust\nclass T(faust.Table):\n    def _new_store_by_url(self, url):\n"
        "        return super()._new_store_by_url(url)",
        "from faust.stores import rocksdb\nclass S(rocksdb.Store):\n    pass\n"
        "class U(S):\n    def f(self):\n        return self._dbs",
        "from mode import Service\nclass S(Service):\n    def f(self):\n"
        "        return self._started",
    ],
)
def test_the_check_finds(source: str) -> None:
    assert findings(source) != []


@pytest.mark.parametrize(
    "source",
    [
        "class A:\n    def __init__(self):\n        self._x = 1\n    def f(self):\n"
        "        return self._x",
        "from mode import Service\nclass S(Service):\n    def __init__(self):\n"
        "        self._consumer = None\n    def _read(self):\n        return self._consumer",
        "import zlib\nx = zlib._Decompress",
        "def f(tp):\n    return tp._replace(partition=1)",
        "def f(consumer):\n    consumer.ack(1)\n    return consumer.__class__",
        "def f(producer):\n    producer.max_batch_size = 10",
        "def f(g):\n    g.refuses_untracked = True",
    ],
)
def test_the_check_passes(source: str) -> None:
    assert findings(source) == []
