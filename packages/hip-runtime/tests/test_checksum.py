"""CRC-32 combination equals zlib.crc32 of the whole, for any split and any order."""

from __future__ import annotations

import itertools
import zlib

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hip_runtime.loading.checksum import combine_parts, crc32_combine


@given(st.binary(max_size=3000), st.lists(st.integers(0, 3000), max_size=8), st.randoms())
def test_parts_combine_to_the_whole(data: bytes, cuts: list[int], rng: object) -> None:
    points = sorted({0, len(data), *(c % (len(data) + 1) for c in cuts)})
    parts = [(a, zlib.crc32(data[a:b]), b - a) for a, b in itertools.pairwise(points)]
    rng.shuffle(parts)  # type: ignore[attr-defined]
    assert combine_parts(parts) == zlib.crc32(data)


def test_large_lengths_and_gaps() -> None:
    a, b = b"x" * 100, bytes(range(256)) * 4099
    assert crc32_combine(zlib.crc32(a), zlib.crc32(b), len(b)) == zlib.crc32(a + b)
    with pytest.raises(ValueError, match="gap"):
        combine_parts([(0, 0, 4), (5, 0, 1)])
