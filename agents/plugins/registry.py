"""Where plugins are found by name: the entry points of the group ``streamcrawl.plugins``
(``EntryPoints``, read lazily, each loaded once), or a fixed table (``Table``: tests, and
embedding code that registers plugins without a package).

``get`` raises ``PluginMissing`` (a ``ConfigError``: one line, naming the plugins found) for a
name nothing declares, and ``ConfigError`` for an entry point that fails to load or names
something that is not a ``Plugin``.
"""

from __future__ import annotations

import functools
import importlib.metadata
from collections.abc import Mapping
from typing import Protocol

from streamcrawl.agents.errors import ConfigError
from streamcrawl.agents.plugins.api import GROUP, Plugin


class PluginMissing(ConfigError):
    """A crawl names a plugin this process does not have."""

    def __init__(self, name: str, installed: list[str]) -> None:
        found = ", ".join(sorted(installed)) if installed else "none"
        super().__init__(f"plugin {name} is not installed (installed: {found}; docs/plugins.md)")
        self.name = name


class Registry(Protocol):
    def get(self, name: str) -> Plugin:
        """The plugin declared under ``name``; ``PluginMissing`` if none is."""
        ...

    def names(self) -> list[str]:
        """Every plugin name this registry knows, sorted."""
        ...


class Table:
    """A registry of plugins given by name (no entry point)."""

    def __init__(self, plugins: Mapping[str, Plugin]) -> None:
        self.plugins = dict(plugins)

    def get(self, name: str) -> Plugin:
        plugin = self.plugins.get(name)
        if plugin is None:
            raise PluginMissing(name, self.names())
        return plugin

    def names(self) -> list[str]:
        return sorted(self.plugins)


class EntryPoints:
    """The plugins installed in this Python environment, by entry point name; each loaded
    once, at first use."""

    def __init__(self, group: str = GROUP) -> None:
        self.group = group
        self.loaded: dict[str, Plugin] = {}

    def _points(self) -> dict[str, importlib.metadata.EntryPoint]:
        return {ep.name: ep for ep in importlib.metadata.entry_points(group=self.group)}

    def get(self, name: str) -> Plugin:
        if name in self.loaded:
            return self.loaded[name]
        point = self._points().get(name)
        if point is None:
            raise PluginMissing(name, self.names())
        try:
            plugin = point.load()
        except Exception as exc:  # an import error of the plugin's own code, any exception
            raise ConfigError(
                f"plugin {name} ({point.value}) failed to load: {type(exc).__name__}: {exc}"
            ) from None
        if not isinstance(plugin, Plugin):
            raise ConfigError(
                f"plugin {name}: entry point {point.value} names a {type(plugin).__name__}, "
                "not a streamcrawl Plugin (docs/plugins.md)"
            )
        self.loaded[name] = plugin
        return plugin

    def names(self) -> list[str]:
        return sorted(self._points())


@functools.cache
def installed() -> EntryPoints:
    """The process's registry: the installed entry points (one per process, loaded lazily)."""
    return EntryPoints()
