"""Process settings: one frozen object, built once from flags then ``STREAMCRAWL_*`` environment.

Per-crawl behaviour (scope, delay, robots...) is not here: it is a
``streamcrawl.schemas.records.CrawlPolicy`` published with the crawl. These settings say where the
services are and how big the worker is, and (``seed_*``) the policy fields ``streamcrawl seed``
gives a crawl whose command line does not set them.
"""

from __future__ import annotations

from collections.abc import Collection
from pathlib import Path
from typing import Any, Literal

import msgspec
from pydantic import Field, SecretStr, ValidationError, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from streamcrawl.agents.errors import ConfigError
from streamcrawl.agents.net.credentials import Credentials
from streamcrawl.agents.net.guard import AddressGuard, parse_networks
from streamcrawl.agents.net.network import Network
from streamcrawl.agents.net.proxy import proxy_setting
from streamcrawl.agents.policy.revisit import parse_duration
from streamcrawl.agents.sinks.cassandra.config import (
    CassandraConfig,
    ReadConsistency,
    WriteConsistency,
)
from streamcrawl.agents.sinks.cassandra.replication import replicas_per_dc
from streamcrawl.schemas.records import Interval, RecrawlMode

ENV_PREFIX = "STREAMCRAWL_"


class Settings(BaseSettings):
    """Where Kafka, Cassandra and the state live, and how much one worker may do at once."""

    model_config = SettingsConfigDict(
        env_prefix=ENV_PREFIX, frozen=True, extra="forbid", validate_default=True
    )

    kafka_bootstrap: str = Field(
        "127.0.0.1:9092", description="Kafka bootstrap servers, comma-separated host:port."
    )
    kafka_security_protocol: Literal["PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"] = Field(
        "PLAINTEXT", description="Kafka security protocol."
    )
    kafka_sasl_mechanism: Literal["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"] | None = Field(
        None, description="SASL mechanism when the protocol is SASL_*."
    )
    kafka_sasl_username: str | None = Field(None, description="SASL user name.")
    kafka_sasl_password: SecretStr | None = Field(None, description="SASL password.")
    kafka_ssl_cafile: Path | None = Field(None, description="CA bundle to verify the brokers.")
    topic_prefix: str = Field(
        "streamcrawl", pattern=r"^[A-Za-z0-9._-]{1,100}$", description="Prefix of every topic."
    )
    partitions: int = Field(
        12, ge=1, le=10000, description="Partition count of every topic (the worker ceiling)."
    )
    generation: int = Field(
        1,
        ge=1,
        le=1_000_000,
        description="Topic generation of the frontier topics, changelogs and worker group; "
        "the workers and commands take it from `<prefix>.generation`, which `admin reshard` "
        "writes, over this value (leave it unset).",
    )
    replication_factor: int = Field(
        1,
        ge=1,
        le=16,
        description="Replicas of every topic the project creates, Faust's changelogs included "
        "(`admin create-topics`, the worker): 3 on a cluster of 3+ brokers, 1 on one broker.",
    )
    min_insync_replicas: int = Field(
        1,
        ge=1,
        le=16,
        description="`min.insync.replicas` of every topic the project creates: replicas that "
        "must hold a message before an acks=all write succeeds. At most the replication "
        "factor; 2 with replication 3 (one broker may be down, writes still on two copies).",
    )
    kafka_acks: Literal["all", "1"] = Field(
        "all",
        description="Acknowledgement every producer waits for (the worker's, the CLI's): all "
        "(every in-sync replica) or 1 (the leader alone: a leader lost before its followers "
        "copied a message loses it).",
    )
    kafka_idempotence: bool = Field(
        True,
        description="Idempotent producers: a retried send is neither duplicated nor reordered. "
        "Needs kafka_acks all (and, before Kafka 3.0, the IdempotentWrite ACL).",
    )
    standby_replicas: int = Field(
        0,
        ge=0,
        le=8,
        description="Faust table standby replicas: faster failover, but faust-streaming 0.15's "
        "standby reads can skip a changelog's head (docs/architecture.md, 'Standby replicas').",
    )
    cassandra_hosts: str = Field(
        "127.0.0.1:9042", description="Cassandra contact points, comma-separated host[:port]."
    )
    cassandra_keyspace: str = Field(
        "streamcrawl", pattern=r"^[a-z][a-z0-9_]{0,47}$", description="Keyspace of the sink."
    )
    cassandra_replication: str = Field(
        "{'class': 'SimpleStrategy', 'replication_factor': 1}",
        description="Replication map used by `admin create-schema` when creating the keyspace "
        "(it never alters an existing one); {'class': 'NetworkTopologyStrategy', '<dc>': 3} "
        "on a cluster of 3+ nodes.",
    )
    cassandra_write_consistency: WriteConsistency = Field(
        "LOCAL_QUORUM",
        description="Consistency level of every Cassandra write. LOCAL_QUORUM with 3 replicas "
        "survives one node down; ONE or ANY acknowledge a write one node holds.",
    )
    cassandra_read_consistency: ReadConsistency = Field(
        "LOCAL_QUORUM",
        description="Consistency level of every Cassandra read (`status --exact`, `pages`, the "
        "sink's version reads); with LOCAL_QUORUM writes, LOCAL_QUORUM reads see every write.",
    )
    cassandra_username: str | None = Field(None, description="Cassandra user name.")
    cassandra_password: SecretStr | None = Field(None, description="Cassandra password.")
    cassandra_local_dc: str | None = Field(None, description="Local data centre for routing.")
    cassandra_ssl: bool = Field(
        False, description="Connect to Cassandra over TLS (its client_encryption_options)."
    )
    cassandra_ssl_cafile: Path | None = Field(
        None, description="CA bundle to verify the Cassandra nodes (default: the system CAs)."
    )
    state_dir: Path = Field(Path("state"), description="Directory of RocksDB state.")
    table_memory_mb: int = Field(
        8,
        ge=2,
        le=4096,
        description="RocksDB memory per table partition a worker holds (memtables + block "
        "cache), MiB; a worker holds 3 tables x its partitions.",
    )
    allow_networks: str = Field(
        "",
        description="CIDRs the SSRF guard lets fetches connect to although they are not "
        "public addresses (loopback, private, link-local...), comma-separated; "
        "empty: public addresses only.",
    )
    proxy: str | None = Field(
        None,
        description="Egress proxy of every fetch, http://host:port (https targets through "
        "CONNECT); its password is a credential (proxy_credential), never in the URL. The SSRF "
        "guard still judges each target before the proxy is asked (docs/requests.md).",
    )
    no_proxy_for: str = Field(
        "",
        description="Hosts fetched directly, not through the proxy, comma-separated (a name "
        "matches itself and its subdomains).",
    )
    proxy_credential: str | None = Field(
        None,
        pattern=r"^[A-Za-z0-9][A-Za-z0-9_]{0,63}$",
        description="Name of the credential (a basic:USER:PASSWORD value) the proxy is sent.",
    )
    credentials_dir: Path | None = Field(
        None,
        description="Folder of credential files (a mounted Secret): the file NAME holds the "
        "credential a crawl names with --auth-for ORIGIN NAME, unless "
        "STREAMCRAWL_CREDENTIAL_<NAME> is set (docs/requests.md).",
    )
    web_host: str = Field("0.0.0.0", description="Bind address of the worker's web port.")
    web_port: int = Field(6066, ge=1, le=65535, description="Worker web port: health, /metrics.")
    concurrency: int = Field(
        64, ge=1, le=10000, description="Fetches in flight per worker, all origins together."
    )
    sink_concurrency: int = Field(32, ge=1, le=1024, description="Cassandra writes in flight.")
    render_concurrency: int = Field(
        2,
        ge=1,
        le=64,
        description="Pages a render worker (streamcrawl render-worker) renders at once, in its "
        "one browser (docs/rendering.md).",
    )
    render_web_port: int = Field(
        6067,
        ge=1,
        le=65535,
        description="A render worker's web port: /healthz and /metrics (not web_port: a fetch "
        "worker and a render worker may share a host).",
    )
    render_wait: float = Field(
        120.0,
        ge=1.0,
        le=3600.0,
        description="Seconds a fetch worker waits for a render worker to render a page (its "
        "origin's slot held meanwhile); then it publishes the page's HTTP copy with "
        'render_error (docs/rendering.md, "The Kafka wiring").',
    )
    max_origins_in_memory: int = Field(
        100_000,
        ge=100,
        le=100_000_000,
        description="Origins with queued work the scheduler holds in memory per worker; the "
        "others wait in the origins table (RocksDB) and take turns.",
    )
    sink_enabled: bool = Field(True, description="Run the Cassandra sink agent in this worker.")
    fetch_enabled: bool = Field(True, description="Run the scheduler and fetcher in this worker.")
    max_message_bytes: int = Field(
        16 * 1024 * 1024, ge=1024 * 1024, description="Max Kafka message size (pages topic)."
    )
    unready_after_s: float = Field(
        30.0,
        ge=1.0,
        le=3600.0,
        description="Seconds Kafka or Cassandra may be unreachable before /readyz fails.",
    )
    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = Field(
        "INFO", description="Log level."
    )
    # Seed defaults: each is ``seed_`` + the CrawlPolicy field it fills (``seed_policy``).
    seed_recrawl_after: float | None = Field(
        None,
        description="`streamcrawl seed` without --recrawl-after: revisit each fetched URL after "
        "this duration (90s, 15m, 2h, 1d, 1w; read as seconds); unset or empty: each URL once.",
    )
    seed_recrawl_min: float | None = Field(
        None,
        description="`streamcrawl seed` without --recrawl-min: the shortest revisit interval of "
        "a crawl that revisits (a duration); unset: the crawl's recrawl-after / 8.",
    )
    seed_recrawl_max: float | None = Field(
        None,
        description="`streamcrawl seed` without --recrawl-max: the longest revisit interval of "
        "a crawl that revisits (a duration); unset: the crawl's recrawl-after x 14.",
    )
    seed_recrawl_mode: RecrawlMode | None = Field(
        None,
        description="`streamcrawl seed` without --recrawl-mode: adaptive or fixed revisits; "
        "unset: adaptive.",
    )
    seed_keep_versions: int = Field(
        0,
        ge=0,
        le=100,  # CrawlPolicy.keep_versions' own bounds
        description="`streamcrawl seed` without --keep-versions: Cassandra keeps the digest, "
        "status and fetch time of each page's N newest versions; 0: the latest copy only.",
    )
    seed_warc: bool = Field(
        False,
        description="`streamcrawl seed` archives every crawl as with --warc: the workers publish "
        "each fetch's HTTP exchanges on the captures topic for `streamcrawl warc`.",
    )

    @field_validator("kafka_bootstrap", "cassandra_hosts")
    @classmethod
    def _hosts_not_empty(cls, value: str) -> str:
        hosts = [h.strip() for h in value.split(",") if h.strip()]
        if not hosts:
            raise ValueError("needs at least one host")
        return ",".join(hosts)

    @model_validator(mode="after")
    def _cafile_needs_tls(self) -> Settings:
        if self.cassandra_ssl_cafile is not None and not self.cassandra_ssl:
            raise ValueError(
                "STREAMCRAWL_CASSANDRA_SSL_CAFILE is set but STREAMCRAWL_CASSANDRA_SSL is not "
                "true: set it to connect over TLS, or drop the CA file"
            )
        return self

    @field_validator("cassandra_replication")
    @classmethod
    def _replication_map(cls, value: str) -> str:
        replicas_per_dc(value)  # its ValueError says what is wrong
        return value

    @model_validator(mode="after")
    def _writes_can_succeed(self) -> Settings:
        if self.min_insync_replicas > self.replication_factor:
            raise ValueError(
                f"{ENV_PREFIX}MIN_INSYNC_REPLICAS ({self.min_insync_replicas}) exceeds "
                f"{ENV_PREFIX}REPLICATION_FACTOR ({self.replication_factor}): every acks=all "
                "write would be refused; lower it or raise the replication"
            )
        if self.kafka_idempotence and self.kafka_acks != "all":
            raise ValueError(
                f"{ENV_PREFIX}KAFKA_IDEMPOTENCE needs {ENV_PREFIX}KAFKA_ACKS=all: set "
                f"{ENV_PREFIX}KAFKA_IDEMPOTENCE=false to use acks {self.kafka_acks}"
            )
        return self

    @field_validator("allow_networks")
    @classmethod
    def _cidrs(cls, value: str) -> str:
        try:
            return ",".join(str(net) for net in parse_networks([value]))
        except ConfigError as exc:
            raise ValueError(str(exc)) from None

    @field_validator("seed_recrawl_after", "seed_recrawl_min", "seed_recrawl_max", mode="before")
    @classmethod
    def _duration(cls, value: object) -> object:
        """Duration text in seconds, within a crawl spec's bounds (``Interval``); empty: unset."""
        if not isinstance(value, str):
            return value
        if not value.strip():
            return None
        seconds = parse_duration(value)  # its ValueError names the value and the syntax
        try:
            return msgspec.convert(seconds, Interval)
        except msgspec.ValidationError as exc:
            raise ValueError(f"{value!r} is out of bounds: {exc} seconds") from None

    @field_validator("seed_recrawl_mode", mode="before")
    @classmethod
    def _empty_mode(cls, value: object) -> object:
        return None if isinstance(value, str) and not value.strip() else value

    @model_validator(mode="after")
    def _seed_bounds_hold(self) -> Settings:
        """Those of the seed's min, after and max that are set must be in that order (the
        unset ones follow from recrawl-after and always fit)."""
        given = [
            (f"{ENV_PREFIX}SEED_RECRAWL_{name} ({seconds:g} s)", seconds)
            for name, seconds in (
                ("MIN", self.seed_recrawl_min),
                ("AFTER", self.seed_recrawl_after),
                ("MAX", self.seed_recrawl_max),
            )
            if seconds is not None
        ]
        if [s for _, s in given] != sorted(s for _, s in given):
            raise ValueError(
                "seed revisit bounds do not hold: need " + " <= ".join(n for n, _ in given)
            )
        return self

    def seed_policy(self) -> dict[str, Any]:
        """The ``CrawlPolicy`` fields the ``seed_*`` settings set (field -> value; a setting
        left unset, None or 0, is absent). ``streamcrawl seed`` applies each where its command
        line left the field at its default."""
        values = {
            name.removeprefix("seed_"): getattr(self, name)
            for name in type(self).model_fields
            if name.startswith("seed_")
        }
        return {name: value for name, value in values.items() if value}

    def address_guard(self) -> AddressGuard:
        """The SSRF guard of this worker's fetches (``allow_networks`` allowed)."""
        return AddressGuard(parse_networks([self.allow_networks]))

    def network(self) -> Network:
        """This process's side of every request: the guard, its credentials, the proxy.
        ``ConfigError`` (one line) for a proxy setting that cannot work."""
        credentials = Credentials(directory=self.credentials_dir)
        return Network(
            guard=self.address_guard(),
            credentials=credentials,
            proxy=proxy_setting(self.proxy, self.no_proxy_for, self.proxy_credential, credentials),
            limit=self.concurrency,
        )

    def cassandra_contact_points(self) -> tuple[list[str], int]:
        """Hosts and the (single) port of ``cassandra_hosts``; the driver takes one port."""
        hosts, port = [], 9042
        for item in self.cassandra_hosts.split(","):
            host, sep, maybe_port = item.rpartition(":")
            if sep and maybe_port.isdigit() and not host.endswith(":"):
                hosts.append(host.strip("[]"))
                port = int(maybe_port)
            else:
                hosts.append(item.strip("[]"))
        return hosts, port

    def cassandra_config(self) -> CassandraConfig:
        """The Cassandra sink's own config (the stages never import these settings)."""
        hosts, port = self.cassandra_contact_points()
        password = self.cassandra_password
        return CassandraConfig(
            hosts=tuple(hosts),
            port=port,
            where=self.cassandra_hosts,
            keyspace=self.cassandra_keyspace,
            replication=self.cassandra_replication,
            username=self.cassandra_username,
            password=password.get_secret_value() if password else None,
            local_dc=self.cassandra_local_dc,
            ssl=self.cassandra_ssl,
            ssl_cafile=str(self.cassandra_ssl_cafile) if self.cassandra_ssl_cafile else None,
            concurrency=self.sink_concurrency,
            write_consistency=self.cassandra_write_consistency,
            read_consistency=self.cassandra_read_consistency,
        )


def load_settings(**overrides: Any) -> Settings:
    """Build the settings from ``overrides`` (flags; ``None`` values ignored), then environment.

    Raises ``ConfigError`` with one line per bad value. It is raised outside the ``except``
    block so that it carries no ``__context__``: pydantic's ``ValidationError`` quotes the bad
    input, which may be a password, and an error reporter walking the chain would print it.
    """
    given = {k: v for k, v in overrides.items() if v is not None}
    try:
        return Settings(**given)
    except ValidationError as exc:
        message = format_validation_error(exc, flags=set(given))
    raise ConfigError(message)


def format_validation_error(exc: ValidationError, flags: Collection[str] = ()) -> str:
    """One readable line per problem, naming where the bad value came from: the flag when it
    was given as one (``flags``: the fields given as flags), else the environment variable
    (most settings have no flag).

    ``invalid setting --partitions (STREAMCRAWL_PARTITIONS): Input should be ...``
    """
    lines = []
    for err in exc.errors():
        loc = ".".join(str(p) for p in err["loc"])
        if not loc:  # a rule over several settings names them itself
            lines.append(f"invalid settings: {err['msg'].removeprefix('Value error, ')}")
            continue
        name = f"{ENV_PREFIX}{loc.upper()}"
        if loc in flags:
            name = f"--{loc.replace('_', '-')} ({name})"
        lines.append(f"invalid setting {name}: {err['msg']}")
    return "; ".join(lines)


def env_names() -> list[str]:
    """Every environment variable the settings read (used by the Helm chart tests)."""
    return [ENV_PREFIX + name.upper() for name in Settings.model_fields]
