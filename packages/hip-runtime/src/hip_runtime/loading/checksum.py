"""CRC-32 (zlib's) of a byte string from the CRC-32s of its parts, in any order of computing.

The loader's threads checksum the chunks of one tensor independently and out of order;
`combine` joins them as if one `zlib.crc32` had run over the whole. Python's zlib does not expose
zlib's crc32_combine, so this is that algorithm: appending n zero bytes to a message is a linear
map on its CRC over GF(2); the maps for 2^k bytes are computed once and cached.
"""

from __future__ import annotations

from collections.abc import Iterable
from functools import cache

_POLYNOMIAL = 0xEDB88320  # CRC-32, reflected


def _apply(matrix: tuple[int, ...], vector: int) -> int:
    result, row = 0, 0
    while vector:
        if vector & 1:
            result ^= matrix[row]
        vector >>= 1
        row += 1
    return result


def _square(matrix: tuple[int, ...]) -> tuple[int, ...]:
    return tuple(_apply(matrix, column) for column in matrix)


@cache
def _zeros_operator(power: int) -> tuple[int, ...]:
    """The map taking a CRC to the CRC after 2**power more zero bytes."""
    if power == 0:
        one_bit = (_POLYNOMIAL, *(1 << n for n in range(31)))  # one zero bit
        two_bits = _square(one_bit)
        four_bits = _square(two_bits)
        return _square(four_bits)  # eight bits: one byte
    return _square(_zeros_operator(power - 1))


def crc32_combine(first: int, second: int, second_length: int) -> int:
    """CRC-32 of A + B from crc32(A), crc32(B) and len(B) in bytes."""
    power = 0
    while second_length:
        if second_length & 1:
            first = _apply(_zeros_operator(power), first)
        second_length >>= 1
        power += 1
    return first ^ second


def combine_parts(parts: Iterable[tuple[int, int, int]]) -> int:
    """CRC-32 of a whole from (offset, crc, length) of parts that tile it without gaps."""
    crc, expected = 0, 0
    for offset, part_crc, length in sorted(parts):
        if offset != expected:
            raise ValueError(f"parts leave a gap or overlap at byte {expected}")
        crc = crc32_combine(crc, part_crc, length)
        expected += length
    return crc


__all__ = ["combine_parts", "crc32_combine"]
