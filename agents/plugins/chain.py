"""A crawl's plugins, built once per crawl from its spec and called in its order, each call
under its time budget and with its errors caught (docs/plugins.md).

``compile_plugins`` checks the spec (names, arguments against each plugin's own schema) and
builds the instances: ``ConfigError`` (one line) for what no worker could run. A plugin this
process lacks is ``PluginMissing``, or, with ``missing_ok`` (a Kafka worker that must not
refuse a spec another worker can run), a ``Plugins`` whose ``missing`` says which: the
frontier then ends the crawl's URLs ``failed`` with that error.

The budget is checked when a call returns (``time.perf_counter``): a call past it has its
result dropped and an error recorded, as for one that raised. Python cannot stop a running
pure-Python call from outside without a thread or a signal, neither of which is safe inside an
event loop and a C parser, so the budget does not cut a call short: it keeps a slow plugin's
answer out of the record and says so (docs/plugins.md, "Budgets").
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any, Final, TypeVar

import msgspec

from streamcrawl.agents.errors import ConfigError
from streamcrawl.agents.plugins.api import (
    JSON,
    LinkExtractor,
    PageExtractor,
    PageView,
    Plugin,
    Source,
    UrlFilter,
)
from streamcrawl.agents.plugins.registry import PluginMissing, Registry
from streamcrawl.schemas.records import (
    DATA_TRUNCATED,
    MAX_DATA_BYTES,
    MAX_PAGE_LINKS,
    MAX_PLUGIN_ARGS_BYTES,
    MAX_PLUGIN_ERROR_CHARS,
    MAX_PLUGIN_ERRORS,
    PluginSpec,
)

log = logging.getLogger(__name__)

MISSING_CLASS: Final = "missing_plugin"  # the error class of a crawl's URLs (docs/plugins.md)
REASON_CHARS: Final = 200  # a URL filter's reason, as recorded
T = TypeVar("T")


@dataclass
class Loaded:
    """One plugin of a crawl: its name, declaration and instance."""

    name: str
    plugin: Plugin
    instance: Any


class PluginFailed(Exception):
    """A plugin call raised, returned what its kind does not, or ran past its budget; the
    message is the record's ``NAME: error``."""


def _call(loaded: Loaded, call: Callable[[], T]) -> T:
    """``call()`` under ``loaded``'s budget; ``PluginFailed`` if it raised or ran past it."""
    started = time.perf_counter()
    try:
        result = call()
    except Exception as exc:
        error = f"{loaded.name}: {type(exc).__name__}: {exc}"
        raise PluginFailed(error[:MAX_PLUGIN_ERROR_CHARS]) from exc
    if time.perf_counter() - started > loaded.plugin.budget_s:
        raise PluginFailed(f"{loaded.name}: ran past its time budget of {loaded.plugin.budget_s} s")
    return result


@dataclass
class Plugins:
    """A crawl's plugins in its order, by kind; ``missing``: the error of a plugin this
    process lacks (None: it has them all)."""

    url_filters: list[Loaded] = field(default_factory=list)
    link_extractors: list[Loaded] = field(default_factory=list)
    page_extractors: list[Loaded] = field(default_factory=list)
    missing: str | None = None
    warned: set[str] = field(default_factory=set)  # URL filters whose error was logged

    def __bool__(self) -> bool:
        return bool(self.url_filters or self.link_extractors or self.page_extractors)

    def check(self, url: str, depth: int, source: Source) -> str | None:
        """None: every URL filter admits ``url``; else ``NAME: reason`` of the first refusal.
        A filter that fails admits (its error is logged once per crawl and filter)."""
        for loaded in self.url_filters:
            filt: UrlFilter = loaded.instance
            try:
                reason = _call(loaded, partial(filt.check, url, depth=depth, source=source))
                if reason is not None and not isinstance(reason, str):
                    raise PluginFailed(f"{loaded.name}: returned {type(reason).__name__}")
            except PluginFailed as exc:
                self._warn(loaded.name, url, str(exc))
                continue
            if reason is not None:
                return f"{loaded.name}: {reason}"[:REASON_CHARS]
        return None

    def _warn(self, name: str, url: str, error: str) -> None:
        if name not in self.warned:
            self.warned.add(name)
            log.warning("URL filter failed on %s, URL admitted: %s (logged once)", url, error)

    def links(self, page: PageView, links: list[str], errors: list[str]) -> list[str]:
        """The links to follow after every link extractor, in order; a failed one leaves the
        list as it was, its error appended to ``errors``."""
        for loaded in self.link_extractors:
            extractor: LinkExtractor = loaded.instance
            try:
                out = _call(loaded, partial(extractor.links, page, list(links)))
                links = _link_list(loaded.name, out)
            except PluginFailed as exc:
                _note(errors, str(exc))
        return links

    def extract(
        self, page: PageView, data: dict[str, JSON] | None, errors: list[str]
    ) -> dict[str, JSON] | None:
        """``data`` with each page extractor's object under its name; one that fails, or whose
        object does not fit in ``MAX_DATA_BYTES``, adds nothing but its error."""
        for loaded in self.page_extractors:
            extractor: PageExtractor = loaded.instance
            view = PageView(page.url, page.status, page.headers, page.text, page.tree,
                            page.base, data)  # fmt: skip
            try:
                out = _call(loaded, partial(extractor.extract, view))
                data = _merged(loaded.name, data, out)
            except PluginFailed as exc:
                _note(errors, str(exc))
                if str(exc).endswith("MAX_DATA_BYTES"):
                    data = (data or {}) | {DATA_TRUNCATED: True}
        return data


def _note(errors: list[str], error: str) -> None:
    if len(errors) < MAX_PLUGIN_ERRORS:
        errors.append(error)


def _link_list(name: str, out: object) -> list[str]:
    if not isinstance(out, list) or not all(isinstance(u, str) for u in out):
        raise PluginFailed(f"{name}: returned {type(out).__name__}, not a list of URLs")
    if len(out) > MAX_PAGE_LINKS:
        raise PluginFailed(f"{name}: returned over {MAX_PAGE_LINKS} links")
    return out


def _merged(name: str, data: dict[str, JSON] | None, out: object) -> dict[str, JSON]:
    if not isinstance(out, dict) or not all(isinstance(k, str) for k in out):
        raise PluginFailed(f"{name}: returned {type(out).__name__}, not a JSON object")
    merged = dict(data or {})
    merged[name] = out
    try:
        size = len(msgspec.json.encode(merged))
    except (TypeError, ValueError) as exc:
        error = f"{name}: returned what is not JSON: {exc}"
        raise PluginFailed(error[:MAX_PLUGIN_ERROR_CHARS]) from None
    if size > MAX_DATA_BYTES:
        raise PluginFailed(f"{name}: its object does not fit in the page's data, MAX_DATA_BYTES")
    return merged


def compile_plugins(
    specs: Sequence[PluginSpec],
    registry: Registry,
    *,
    taken: frozenset[str] = frozenset(),
    missing_ok: bool = False,
) -> Plugins:
    """The crawl's plugins, built; ``taken``: the names ``data`` already uses (the crawl's
    extractors). ``ConfigError`` (one line) for a name given twice or taken, arguments the
    plugin refuses or over ``MAX_PLUGIN_ARGS_BYTES``, or an instance of the wrong kind."""
    plugins = Plugins()
    seen: set[str] = set()
    for spec in specs:
        if spec.name in seen or spec.name in taken:
            raise ConfigError(f"plugin {spec.name} is given twice, or is an extractor's name")
        seen.add(spec.name)
        try:
            plugin = registry.get(spec.name)
        except PluginMissing:
            if not missing_ok:
                raise
            plugins.missing = plugins.missing or (
                f"{MISSING_CLASS}: {spec.name} is not installed in this worker"
            )
            continue
        loaded = Loaded(spec.name, plugin, build(spec, plugin))
        getattr(plugins, plugin.kind + "s").append(loaded)
    return plugins


def build(spec: PluginSpec, plugin: Plugin) -> Any:
    """One plugin's instance from its spec; ``ConfigError`` as ``compile_plugins`` says."""
    name = spec.name
    if len(msgspec.json.encode(spec.args)) > MAX_PLUGIN_ARGS_BYTES:
        raise ConfigError(f"plugin {name}: its arguments are over {MAX_PLUGIN_ARGS_BYTES} bytes")
    if plugin.args is None and spec.args:
        raise ConfigError(f"plugin {name} takes no arguments")
    try:
        if plugin.args is None:
            instance = plugin.create()
        else:
            instance = plugin.create(msgspec.convert(spec.args, plugin.args))
    except msgspec.ValidationError as exc:
        raise ConfigError(f"plugin {name}: bad arguments: {exc}") from None
    except Exception as exc:
        raise ConfigError(f"plugin {name} could not start: {type(exc).__name__}: {exc}") from None
    if not plugin.accepts(instance):
        raise ConfigError(f"plugin {name}: its {plugin.kind} lacks the method its kind calls")
    return instance
