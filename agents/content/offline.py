"""An offline copy of pages and their assets: the file each URL is saved as, and HTML and CSS
with their references rewritten to those files (as ``wget --convert-links`` does).

Pure: no I/O (the embedded crawl's ``--save-to`` writes the files: ``topology/embedded/
offline.py``). Names (``local_path``): ``host[_port]/path``, a path ending in ``/`` saved as its
``index.html``; every character outside ``[A-Za-z0-9._-]`` becomes ``_``; a query string
becomes a hash before the extension (``a.css?v=2`` -> ``a-1f0e3dad.css``); a segment longer
than ``MAX_SEGMENT_CHARS`` is cut and ends in a hash of the whole; ``.``/``..`` segments cannot
occur (canonical URLs) and would be renamed. A page saved under a name without an HTML
extension gets ``.html`` added, so that a browser opens it as HTML from ``file://``.

Rewriting changes only the references: in HTML the ``href``, ``src``, ``poster``, ``srcset``
and ``style`` attributes of every tag and the text of ``<style>`` elements; in CSS its
``url()`` and ``@import`` references. A reference to a URL in the copy becomes a relative path;
any other becomes absolute (it still works online). Every other character is left as it was.
"""

from __future__ import annotations

import hashlib
import html
import posixpath
import re
from collections.abc import Callable
from typing import Final

from streamcrawl.agents.content.assets import srcset_spans
from streamcrawl.agents.content.css import CssRef, rewrite_css

MAX_SEGMENT_CHARS: Final = 100
_UNSAFE: Final = re.compile(r"[^A-Za-z0-9._-]")
_HTML_EXTENSIONS: Final = (".html", ".htm", ".xhtml")
# A comment, a raw-text element (its start tag, text and end tag), or any other start tag.
_MARKUP: Final = re.compile(
    r"<!--.*?(?:-->|\Z)"
    r"|<(?P<raw>script|style|textarea|title)\b(?P<rawattrs>(?:[^>\"']|\"[^\"]*\"|'[^']*')*)>"
    r"(?P<text>.*?)(?=</(?P=raw)\s*>|\Z)"
    r"|<(?P<tag>[A-Za-z][A-Za-z0-9-]*)(?P<attrs>(?:[^>\"']|\"[^\"]*\"|'[^']*')*)>",
    re.IGNORECASE | re.DOTALL,
)
_ATTR: Final = re.compile(
    r"""(?P<name>[^\s"'>/=]+)(?:\s*=\s*(?:"(?P<dq>[^"]*)"|'(?P<sq>[^']*)'|(?P<uq>[^\s"'=<>`]+)))?"""
)
_URL_ATTRS: Final = frozenset({"href", "src", "poster"})

# New text for a reference as written (raw, unescaped), or None: leave it.
NewUrl = Callable[[str], str | None]


def _hash(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:8]


def _safe(segment: str) -> str:
    name = _UNSAFE.sub("_", segment)
    if name in ("", ".", ".."):
        name = "_" + name
    if len(name) > MAX_SEGMENT_CHARS:
        _, dot, ext = name.rpartition(".")
        ext = ext if dot and len(ext) <= 8 else ""
        keep = MAX_SEGMENT_CHARS - 10 - len(ext)
        name = f"{name[:keep]}-{_hash(segment)}" + (f".{ext}" if ext else "")
    return name


def local_path(url: str, *, page: bool = False) -> str:
    """The relative file path (``/``-separated) a canonical http(s) ``url`` is saved as; a
    ``page`` (HTML) gets an HTML extension (see the module docstring)."""
    rest = url.split("://", 1)[-1].split("#", 1)[0]
    authority, slash, path_query = rest.partition("/")
    path, question, query = path_query.partition("?")
    segments = path.split("/") if slash else [""]
    if segments[-1] == "":
        segments[-1] = "index.html"
    last = segments[-1]
    if question:
        stem, dot, ext = last.rpartition(".")
        last = f"{stem}-{_hash(query)}.{ext}" if dot and stem else f"{last}-{_hash(query)}"
    if page and not last.lower().endswith(_HTML_EXTENSIONS):
        last += ".html"
    segments[-1] = last
    return "/".join([_safe(authority.replace(":", "_")), *map(_safe, segments)])


def relative(from_file: str, to_file: str) -> str:
    """The relative reference from the file ``from_file`` to ``to_file`` (both local paths)."""
    return posixpath.relpath(to_file, posixpath.dirname(from_file) or ".")


def _attr_value(m: re.Match[str]) -> tuple[str, int, int] | None:
    for group in ("dq", "sq", "uq"):
        if m.group(group) is not None:
            return m.group(group), m.start(group), m.end(group)
    return None


def _new_value(name: str, value: str, new_url: NewUrl) -> str | None:
    """The attribute's new (unescaped) value, or None: unchanged."""
    if name in _URL_ATTRS:
        return new_url(value.strip())
    if name == "srcset":
        return _replace_spans(value, srcset_spans(value), new_url)
    if name == "style":
        text = rewrite_css(value, lambda ref: new_url(ref.url))
        return None if text == value else text
    return None


def _replace_spans(text: str, spans: list[tuple[int, int]], new_url: NewUrl) -> str | None:
    parts, at, changed = [], 0, False
    for start, end in spans:
        new = new_url(text[start:end])
        if new is not None:
            parts += [text[at:start], new]
            at, changed = end, True
    return "".join([*parts, text[at:]]) if changed else None


def _rewrite_attrs(attrs: str, new_url: NewUrl) -> str:
    parts, at = [], 0
    for m in _ATTR.finditer(attrs):
        name, value = m.group("name").lower(), _attr_value(m)
        if value is None:
            continue
        new = _new_value(name, html.unescape(value[0]), new_url)
        if new is None:
            continue
        escaped = html.escape(new, quote=True)
        if m.group("uq") is not None:
            escaped = f'"{escaped}"'
        parts += [attrs[at : value[1]], escaped]
        at = value[2]
    return "".join([*parts, attrs[at:]])


def rewrite_html(text: str, new_url: NewUrl) -> str:
    """``text`` (HTML) with its references replaced by what ``new_url`` answers for each (as
    written, unescaped; None: left as it is), every other character unchanged."""
    parts, at = [], 0
    for m in _MARKUP.finditer(text):
        if m.group("raw") is not None:
            attrs, start = m.group("rawattrs"), m.start("rawattrs")
            parts += [text[at:start], _rewrite_attrs(attrs, new_url)]
            at = m.end("rawattrs")
            if m.group("raw").lower() == "style":
                parts += [text[at : m.start("text")], rewrite_css(m.group("text"), _css(new_url))]
                at = m.end("text")
        elif m.group("tag") is not None:
            parts += [text[at : m.start("attrs")], _rewrite_attrs(m.group("attrs"), new_url)]
            at = m.end("attrs")
    return "".join([*parts, text[at:]])


def _css(new_url: NewUrl) -> Callable[[CssRef], str | None]:
    return lambda ref: new_url(ref.url)
