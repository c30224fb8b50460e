"""What `admin create-schema` refuses (``ConfigError``, nothing created) or warns about, one line
each: the keyspace's replication and the consistency levels against the ring they meet.

Pure decisions over counts (``check_ring`` is the one the command runs, on what the driver's
metadata says: ``driver.ring``). Each line names the setting and its Helm chart value. One node
with one replica (the settings' defaults, a laptop) passes silently; docs/kubernetes.md says
which failures the production values survive. Importing this module does not load the driver.
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Mapping

from streamcrawl.agents.errors import ConfigError
from streamcrawl.agents.sinks.cassandra.config import CassandraConfig

ALL_DCS = "*"
"""The key of ``replicas_per_dc``'s answer for SimpleStrategy: one ring, whatever the DCs."""
# nodes per data centre, the existing keyspace's replication map (None: no keyspace yet)
RingCheck = Callable[[dict[str, int], str | None], None]

_MAP = "STREAMCRAWL_CASSANDRA_REPLICATION (cassandra.replication)"
_LEVEL = {
    "write": "STREAMCRAWL_CASSANDRA_WRITE_CONSISTENCY (cassandra.writeConsistency)",
    "read": "STREAMCRAWL_CASSANDRA_READ_CONSISTENCY (cassandra.readConsistency)",
}
_PER_DC = ("LOCAL_ONE", "LOCAL_QUORUM", "EACH_QUORUM")
_ONE_COPY = ("ANY", "ONE", "LOCAL_ONE")


def replicas_per_dc(replication: str) -> dict[str, int]:
    """Replicas per data centre of a CQL replication map: ``{'class': 'NetworkTopologyStrategy',
    'dc1': 3}`` -> ``{"dc1": 3}``; SimpleStrategy -> ``{ALL_DCS: rf}``; another strategy -> ``{}``.

    Raises ValueError for text that is not a map literal with a ``class``, or a count that is
    not a number (``'3/1'``, transient replication, counts its full replicas: 3).
    """
    try:
        given = ast.literal_eval(replication.strip())
    except (ValueError, SyntaxError):
        given = None
    if not isinstance(given, dict) or not isinstance(given.get("class"), str):
        raise ValueError(f"{replication!r} is not a CQL map like {CassandraConfig.replication}")
    strategy = given.pop("class").rsplit(".", 1)[-1]
    try:
        counts = {str(k): int(str(v).split("/")[0]) for k, v in given.items()}
    except ValueError:
        raise ValueError(f"{replication!r}: replica counts must be numbers") from None
    if strategy == "SimpleStrategy":
        return {ALL_DCS: counts.get("replication_factor", 1)}
    if strategy == "NetworkTopologyStrategy":
        default = counts.pop("replication_factor", None)  # Cassandra 4's "every DC" shorthand
        return counts or ({ALL_DCS: default} if default else {})
    return {}


def _plural(n: int, what: str) -> str:
    return f"{n} {what}{'' if n == 1 else 's'}"


def replicas_needed(level: str, replicas: int) -> int:
    """Replicas that must answer a statement at ``level`` among ``replicas`` (of its scope:
    the data centre for LOCAL_* and EACH_QUORUM, else the whole keyspace). ANY counts 1: a
    write only hinted is not counted as durable."""
    fixed = {"ANY": 1, "ONE": 1, "LOCAL_ONE": 1, "TWO": 2, "THREE": 3}
    if level in fixed:
        return fixed[level]
    return replicas if level == "ALL" else replicas // 2 + 1


def consistency_warnings(
    replication: Mapping[str, int], nodes: Mapping[str, int], write: str, read: str
) -> list[str]:
    """Warnings on a keyspace's replication (data centre -> replicas, ``ALL_DCS`` for
    SimpleStrategy) read and written at the given levels on a ring of ``nodes`` (data centre
    -> nodes); raises ConfigError when a level can never be met (more replicas needed than
    there are replicas or nodes: every statement would fail)."""
    unknown = sorted(dc for dc in replication if dc != ALL_DCS and not nodes.get(dc))
    if unknown:
        raise ConfigError(
            f"{_MAP} names data centre {unknown[0]}, which has no node (the ring's: "
            f"{', '.join(sorted(nodes)) or 'none'}); name the data centres the ring has"
        )
    warnings = [_single_copy(scope, rf, n) for scope, rf, n in _scopes(replication, nodes, True)]
    for kind, level in (("write", write), ("read", read)):
        for scope, rf, n in _scopes(replication, nodes, level in _PER_DC):
            warnings.append(_level_problem(kind, level, scope, rf, n))
        if kind == "write" and level in _ONE_COPY and max(replication.values(), default=1) > 1:
            warnings.append(
                f"{_LEVEL[kind]} is {level}: a write acknowledged by one replica is lost if that "
                "node fails before the others have it; use LOCAL_QUORUM"
            )
    return [w for w in warnings if w]


def _scopes(
    replication: Mapping[str, int], nodes: Mapping[str, int], per_dc: bool
) -> list[tuple[str, int, int]]:
    """(where, replicas, nodes) over which a level counts: each data centre, or all of them."""
    if ALL_DCS in replication:
        return [("the cluster", replication[ALL_DCS], sum(nodes.values()))]
    each = [(f"data centre {dc}", rf, nodes.get(dc, 0)) for dc, rf in sorted(replication.items())]
    if per_dc or len(each) < 2:
        return each
    return [("the keyspace", sum(rf for _, rf, _ in each), sum(n for _, _, n in each))]


def _single_copy(scope: str, rf: int, n: int) -> str:
    if rf != 1 or n < 2:
        return ""
    return (
        f"{_MAP} keeps 1 replica in {scope} of {n} nodes: a node lost loses its rows, and one "
        "node down stops their reads and writes; use {'class': 'NetworkTopologyStrategy', "
        "'<dc>': 3}"
    )


def _level_problem(kind: str, level: str, scope: str, rf: int, n: int) -> str:
    needed, available = replicas_needed(level, rf), min(rf, n)
    if needed > available:
        raise ConfigError(
            f"{_LEVEL[kind]} {level} needs {_plural(needed, 'replica')} but {scope} has "
            f"{_plural(rf, 'replica')} on {_plural(n, 'node')}: every {kind} would fail; lower "
            f"the level or raise {_MAP}"
        )
    if rf > 1 and needed == available and n > 1:
        return (
            f"{_LEVEL[kind]} {level} needs {needed} of the {available} replicas {scope} can "
            f"answer with: one node down stops every {kind}; use LOCAL_QUORUM with 3 replicas"
        )
    return ""


def replication_drift(setting: str, existing: str | None) -> list[str]:
    """A warning when the keyspace exists with another replication than the setting (which
    `create-schema` only uses to create it), compared as data centre -> replicas."""
    if existing is None or replicas_per_dc(existing) == replicas_per_dc(setting):
        return []
    return [
        f"the keyspace exists with replication {existing}, {_MAP} says {setting}: "
        "`admin create-schema` does not alter it (ALTER KEYSPACE, then nodetool repair, does) "
        "and checks the levels against the keyspace's"
    ]


def check_ring(config: CassandraConfig, warn: Callable[[str], None]) -> RingCheck:
    """The check `admin create-schema` runs on the ring before creating anything: the
    keyspace's replication (the existing keyspace's, else the setting's) against the nodes and
    the configured levels; each warning goes to ``warn``."""

    def check(nodes: dict[str, int], existing: str | None) -> None:
        drift = replication_drift(config.replication, existing)
        replication = replicas_per_dc(existing or config.replication)
        levels = (config.write_consistency, config.read_consistency)
        for line in drift + consistency_warnings(replication, nodes, *levels):
            warn(line)

    return check
