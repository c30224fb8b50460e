"""What `admin create-topics` refuses (``ConfigError``, nothing created) or warns about, one line
each: the topics' replication settings against the brokers they meet.

Pure decisions over counts; the command passes what the cluster's metadata says. Each line
names the setting and its chart value. One broker with replication 1 (the settings' defaults,
a laptop) passes silently; docs/kubernetes.md says which failures the production values
survive. The Cassandra side, `admin create-schema`'s: ``agents.sinks.cassandra.replication``.
"""

from __future__ import annotations

from collections.abc import Mapping

from streamcrawl.agents.errors import ConfigError

_RF = "STREAMCRAWL_REPLICATION_FACTOR (kafka.replicationFactor)"
_ISR = "STREAMCRAWL_MIN_INSYNC_REPLICAS (kafka.minInsyncReplicas)"


def _plural(n: int, what: str) -> str:
    return f"{n} {what}{'' if n == 1 else 's'}"


def topic_warnings(replication: int, min_insync: int, acks: str, brokers: int) -> list[str]:
    """Warnings on the topics' replication on a cluster of ``brokers``; raises ConfigError when
    Kafka would refuse to create them (more replicas than brokers)."""
    if replication > brokers:
        raise ConfigError(
            f"{_RF} is {replication} but the cluster has {_plural(brokers, 'broker')}: Kafka "
            f"cannot place the replicas; set it to at most {brokers}"
        )
    warnings = []
    if replication == 1 and brokers > 1:
        warnings.append(
            f"{_RF} is 1 on a cluster of {brokers} brokers: a broker lost loses its partitions; "
            f"set it to 3 and {_ISR} to 2"
        )
    if 1 < replication <= min_insync:
        warnings.append(
            f"{_ISR} {min_insync} with replication {replication}: one broker down stops every "
            f"write to its partitions; set it to {replication - 1}"
        )
    if replication >= 3 and min_insync == 1:
        warnings.append(
            f"{_ISR} is 1 with replication {replication}: acks=all is then met by the leader "
            "alone, whose loss loses the messages only it had; set it to 2"
        )
    if acks != "all" and replication > 1:
        warnings.append(
            f"STREAMCRAWL_KAFKA_ACKS (kafka.acks) is {acks}: a leader lost before its followers "
            "copied a message loses it although it was acknowledged; set it to all"
        )
    return warnings


def existing_topic_warnings(
    replication: int, min_insync: int, replicas: Mapping[str, int]
) -> list[str]:
    """Warnings on existing topics (name -> replicas) created with another replication, which
    `create-topics` does not change; raises ConfigError when ``min_insync`` would exceed a
    topic's replicas (every write to it refused) before anything is changed."""
    short = sorted(name for name, n in replicas.items() if n < min_insync)
    if short:
        raise ConfigError(
            f"topic {short[0]}{_more(short)} has {_plural(replicas[short[0]], 'replica')}, fewer "
            f"than {_ISR} {min_insync}: every acks=all write to it would be refused; add "
            "replicas first (kafka-reassign-partitions) or lower the setting"
        )
    differ = sorted(name for name, n in replicas.items() if n != replication)
    if not differ:
        return []
    return [
        f"topic {differ[0]}{_more(differ)} has {_plural(replicas[differ[0]], 'replica')}, "
        f"{_RF} says {replication}: `admin create-topics` does not change an existing topic's "
        "replication (kafka-reassign-partitions does)"
    ]


def _more(names: list[str]) -> str:
    return f" (and {len(names) - 1} more)" if len(names) > 1 else ""
