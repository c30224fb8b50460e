"""Scope patterns (``include``/``exclude``) compiled for RE2, which matches in time linear in the
URL's length whatever the pattern: a pattern from whoever starts a crawl is evaluated on every
discovered URL, and with a backtracking engine one like ``(a+)+$`` can hold a worker for hours on
a single URL (a "regex bomb").

RE2 takes the Python syntax of everyday patterns (classes, groups, ``(?i)``, ``(?P<name>)``,
anchors, counted repetition) but not the features that need backtracking: backreferences
(``\\1``) and look-around (``(?=``, ``(?!``, ``(?<=``). Those are refused with a ``ConfigError``
that says so; the CLI prints it as one line and exits 2, a worker refuses the crawl spec with a
logged reason.
"""

from __future__ import annotations

import re
from typing import Final, Protocol, cast

import re2

# Memory RE2 may use per pattern (compiled program + lazily built DFA states); past it the DFA
# is rebuilt, or the NFA used: slower, still linear. A spec holds at most MAX_PATTERNS of them.
MAX_PATTERN_MEMORY: Final = 2 * 1024 * 1024


class UrlPattern(Protocol):
    """A compiled scope pattern: ``search`` finds a match anywhere in the URL, or None."""

    def search(self, text: str) -> object | None: ...


def _options() -> object:
    options = re2.Options()
    options.log_errors = False  # our ConfigError says it once; RE2 would also print to stderr
    options.max_mem = MAX_PATTERN_MEMORY
    return cast(object, options)


_OPTIONS: Final = _options()


def compile_pattern(pattern: str, what: str = "pattern") -> UrlPattern:
    """Compile ``pattern`` for RE2; ``ConfigError`` names ``what`` and why it cannot be used."""
    from streamcrawl.agents.errors import ConfigError

    try:
        return cast(UrlPattern, re2.compile(pattern, options=_OPTIONS))
    except re2.error as exc:
        reason = exc.args[0].decode() if exc.args and isinstance(exc.args[0], bytes) else exc
        try:
            re.compile(pattern)
        except re.error as py_exc:
            raise ConfigError(f"{what} {pattern!r} is not a valid regex: {py_exc}") from None
        raise ConfigError(
            f"{what} {pattern!r} is not supported: patterns run on RE2, in linear time, which "
            f"has no backreferences or look-around ({reason})"
        ) from None


class PatternSet:
    """Several patterns searched in ONE RE2 pass (``re2.Set``): ``search(url)`` is truthy when
    any of them matches. One call per URL instead of one per pattern: each call into RE2 costs
    about a microsecond, the matching itself next to nothing."""

    __slots__ = ("_match", "patterns")

    def __init__(self, patterns: tuple[str, ...], what: str = "pattern") -> None:
        for pattern in patterns:
            compile_pattern(pattern, what)  # one clear error per pattern RE2 cannot take
        matcher = re2.Set.SearchSet(_OPTIONS)
        for pattern in patterns:
            matcher.Add(pattern)
        matcher.Compile()
        self.patterns = patterns
        self._match = matcher.Match

    def search(self, text: str) -> object | None:
        """The indices of the patterns that match somewhere in ``text``, or None."""
        found: object | None = self._match(text)
        return found


def compile_patterns(patterns: tuple[str, ...], what: str = "pattern") -> tuple[UrlPattern, ...]:
    """``()`` for no patterns, else one ``PatternSet`` of them all (``ConfigError`` as for
    ``compile_pattern``)."""
    return (PatternSet(patterns, what),) if patterns else ()
