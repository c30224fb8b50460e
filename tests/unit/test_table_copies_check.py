"""The fault tests' check of the workers' table copies (tests/integration/faults.py
``check_table_copies``): a copy must hold every key its changelog wrote, and did not delete,
up to the offset the copy claims. Here against RocksDB copies written as Faust writes them and
a changelog given in place of the broker's."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest
from rocksdict import Options, Rdict

from tests.integration import faults

VALUE = b"1"


class Copies:
    """Stands for a ``Cluster``: its workers' state under ``tmp``, nothing to stop."""

    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp

    def stop_workers(self) -> None:
        pass

    def settings(self) -> SimpleNamespace:
        return SimpleNamespace(topic_prefix="t", generation=1)

    def copy(self, worker: str, partition: int, keys: list[bytes], offset: int) -> None:
        path = self.tmp / worker / "v1" / "tables" / f"seen-{partition}.db"
        path.parent.mkdir(parents=True, exist_ok=True)
        db = Rdict(str(path), options=Options(raw_mode=True))
        for key in keys:
            db[key] = VALUE
        db[faults.FAUST_OFFSET_KEY] = str(offset).encode()
        db.close()


@pytest.fixture
def copies(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Copies:
    changelog = [(0, b"a", VALUE), (1, b"b", VALUE), (2, b"a", None), (3, b"c", VALUE)]

    def records(
        _cluster: object, topic: str, partition: int
    ) -> list[tuple[int, bytes, bytes | None]]:
        assert (topic, partition) == ("t-worker-seen-changelog", 0)
        return changelog

    monkeypatch.setattr(faults, "changelog_records", records)
    return Copies(tmp_path)


def test_whole_copies_pass(copies: Copies) -> None:
    copies.copy("w1", 0, [b"a", b"b"], offset=1)
    copies.copy("w2", 0, [b"b", b"c"], offset=3)  # "a" was deleted at offset 2
    copies.copy("w3", 0, [b"a", b"b", b"c"], offset=1)  # its own writes past its offset
    assert faults.check_table_copies(copies) == 3


def test_a_copy_that_claims_records_it_lacks_fails(copies: Copies) -> None:
    copies.copy("w1", 0, [b"a", b"b"], offset=1)
    copies.copy("w4", 0, [b"c"], offset=3)  # what a standby that skipped the head looks like
    with pytest.raises(AssertionError, match=r"w4 seen-0.db: 1 of 3 keys missing at offset 3"):
        faults.check_table_copies(copies)
