"""Generate the published JSON Schemas of the Kafka values from ``streamcrawl.schemas.records``.

``python -m streamcrawl.schemas.generate`` writes ``schemas/json/<topic>.v<N>.schema.json`` for
every entry of ``WIRE_RECORDS`` and ``schemas/json/index.json`` (topic -> schema file, key format,
value encoding, compression), and deletes stale schema files. The files of earlier versions the
decoder still accepts (``codec.KNOWN_VERSIONS``) stay as they were published: frozen, not
regenerated, not deleted. ``--check`` writes nothing and exits 1
if the files on disk differ from what the records produce (for CI).

A consumer in any language reads a topic with: key = UTF-8 bytes (origin, or crawl id on
``control``), value = one UTF-8 JSON object valid against the topic's schema, ``v`` = version.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import msgspec

from streamcrawl.schemas.codec import KNOWN_VERSIONS
from streamcrawl.schemas.records import ALSO_ON, SCHEMA_VERSION, WIRE_RECORDS

JSON_DIR = Path(__file__).parent / "json"
DIALECT = "https://json-schema.org/draft/2020-12/schema"

_KEYS = {
    "control": ("crawl_id", "the crawl id as UTF-8 bytes; the topic is compacted by it"),
    "grants": ("worker_id", "the id of the render worker the grant answers, as UTF-8 bytes"),
}
_ORIGIN_KEY = ("origin", "the origin scheme://host[:port] (lowercase, IDNA) as UTF-8 bytes")
_TOPIC_CONFIGS = {
    "pages": {"compression.type": "zstd"},
    "captures": {"compression.type": "zstd"},
    "render": {"compression.type": "zstd"},
    "control": {"cleanup.policy": "compact"},
}


def schema_file(topic: str) -> str:
    """File name of the topic's current schema, e.g. ``pages.v1.schema.json``."""
    return f"{topic}.v{SCHEMA_VERSION}.schema.json"


def record_schema(topic: str) -> dict[str, Any]:
    """The JSON Schema (2020-12) of the value of ``topic``; ``v`` is pinned to the version. A
    topic with other records (``records.ALSO_ON``) takes one of them (``oneOf``)."""
    records = [WIRE_RECORDS[topic], *(record for record, _since in ALSO_ON.get(topic, ()))]
    names = [record.__name__ for record in records]
    if len(records) == 1:
        shape: dict[str, Any] = msgspec.json.schema(records[0])
        description = (records[0].__doc__ or "").strip().splitlines()[0]
    else:
        refs, defs = msgspec.json.schema_components(records, ref_template="#/$defs/{name}")
        shape = {"oneOf": list(refs), "$defs": defs}
        description = f"One of {', '.join(names)}, told apart by ``kind``; each in $defs."
    for name in names:
        shape["$defs"][name]["properties"]["v"] = {
            "const": SCHEMA_VERSION,
            "default": SCHEMA_VERSION,
            "description": "Schema version; readers reject versions they do not know.",
        }
    return {
        "$schema": DIALECT,
        "title": f"{topic} v{SCHEMA_VERSION} ({' | '.join(names)})",
        "description": description,
        **shape,
    }


def index() -> dict[str, Any]:
    """Topic -> schema file, record, key format, value encoding and topic configs."""
    topics = {}
    for topic, record in WIRE_RECORDS.items():
        key, key_doc = _KEYS.get(topic, _ORIGIN_KEY)
        configs = _TOPIC_CONFIGS.get(topic, {})
        topics[topic] = {
            "topic": f"<prefix>.{topic}",
            "schema": schema_file(topic),
            "record": f"streamcrawl.schemas.records.{record.__name__}",
            **_also_records(topic),
            "key": {"format": key, "encoding": "utf-8", "description": key_doc},
            "partitioner": "murmur2 of the key bytes (Kafka's Java default; librdkafka: "
            "murmur2_random)",
            "value": {"encoding": "json", "charset": "utf-8"},
            "compression": configs.get("compression.type", "producer"),
            "cleanup_policy": configs.get("cleanup.policy", "delete"),
        }
    return {
        "schema_version": SCHEMA_VERSION,
        "accepted_versions": sorted(KNOWN_VERSIONS),
        "topics": topics,
    }


def _also_records(topic: str) -> dict[str, Any]:
    """The index's ``also``: a topic's other records, with the version that brought each."""
    others = ALSO_ON.get(topic, ())
    if not others:
        return {}
    return {
        "also": [
            {"record": f"streamcrawl.schemas.records.{record.__name__}", "since": since}
            for record, since in others
        ]
    }


def _dump(data: dict[str, Any]) -> str:
    return json.dumps(data, indent=2, ensure_ascii=False) + "\n"


def build() -> dict[str, str]:
    """Every generated file: name -> content."""
    files = {schema_file(topic): _dump(record_schema(topic)) for topic in WIRE_RECORDS}
    files["index.json"] = _dump(index())
    return files


def stale(directory: Path = JSON_DIR) -> list[str]:
    """Names of files that differ from ``build()``, are missing, or are no longer generated."""
    files = build()
    wrong = [
        name
        for name, text in files.items()
        if not (directory / name).is_file() or (directory / name).read_text("utf-8") != text
    ]
    frozen = tuple(f".v{v}.schema.json" for v in KNOWN_VERSIONS if v != SCHEMA_VERSION)
    extra = [
        p.name
        for p in directory.glob("*.json")
        if p.name not in files and not p.name.endswith(frozen)
    ]
    return sorted(wrong + extra)


def write(directory: Path = JSON_DIR) -> list[str]:
    """Write the generated files, delete stale ones; returns the names changed."""
    directory.mkdir(parents=True, exist_ok=True)
    changed = stale(directory)
    files = build()
    for name in changed:
        path = directory / name
        if name in files:
            path.write_text(files[name], "utf-8")
        else:
            path.unlink()
    return changed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m streamcrawl.schemas.generate", description=__doc__
    )
    parser.add_argument("--check", action="store_true", help="exit 1 if the files are stale")
    args = parser.parse_args(argv)
    if args.check:
        changed = stale()
        for name in changed:
            print(f"stale: schemas/json/{name} (run `python -m streamcrawl.schemas.generate`)")
        return 1 if changed else 0
    for name in write():
        print(f"wrote schemas/json/{name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
