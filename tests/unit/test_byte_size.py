"""``--warc-max-size``'s parser: sizes as operators write them."""

from __future__ import annotations

import argparse

import pytest

from streamcrawl.topology.cli.options import byte_size


@pytest.mark.parametrize(
    ("text", "size"),
    [
        ("1", 1),
        ("1000", 1000),
        ("64K", 64 << 10),
        ("500M", 500 << 20),
        ("500m", 500 << 20),
        ("1G", 1 << 30),
        ("1GB", 1 << 30),
        ("1GiB", 1 << 30),
        (" 2 G ", 2 << 30),
        ("1T", 1 << 40),
    ],
)
def test_sizes(text: str, size: int) -> None:
    assert byte_size(text) == size


@pytest.mark.parametrize("text", ["", "0", "-1G", "1.5G", "G", "1X", "ten"])
def test_bad_sizes_are_refused_with_the_expected_form(text: str) -> None:
    with pytest.raises(argparse.ArgumentTypeError, match="such as 500M or 1G"):
        byte_size(text)
