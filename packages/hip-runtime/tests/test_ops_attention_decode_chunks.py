"""attention_decode's chunking, host side: the chunk count from the shapes (_decode_split) and
the mirror of the kernels' split_keys (_split_keys), which spreads each sequence's actual
length over those chunks on the device. The device itself is checked against the mirror in
test_ops_attention_decode.py (which chunks wrote partials, over which keys). No device here.
"""

from __future__ import annotations

import pytest

from hip_runtime.ops import attention_decode as decode_module

INT_MAX = 2**31 - 1
LENGTHS = [*range(70), 127, 128, 129, 255, 256, 257, 1000, 4095, 4096, 4097, 8191, 8192]
COUNTS = [1, 2, 3, 7, 8, 32, 33, 1024]
MINIMA_AND_STEPS = [(1, 1), (4, 4), (16, 4), (1, 16), (256, 128), (64, 64), (100, 128)]


def ranges(length: int, chunks: int, chunk_min: int, chunk_step: int) -> list[range]:
    """The keys of each chunk that holds some: [c · keys, min((c + 1) · keys, length))."""
    keys, used = decode_module._split_keys(length, chunks, chunk_min, chunk_step)
    return [range(c * keys, min((c + 1) * keys, length)) for c in range(used)]


@pytest.mark.parametrize(("chunk_min", "chunk_step"), MINIMA_AND_STEPS)
def test_the_chunks_cover_each_key_once_whatever_the_length(
    chunk_min: int, chunk_step: int
) -> None:
    for chunks in COUNTS:
        for length in LENGTHS:
            keys, used = decode_module._split_keys(length, chunks, chunk_min, chunk_step)
            assert 1 <= used <= chunks, (length, chunks)
            if length == 0:  # chunk 0 alone, over no key: it writes the zeros
                assert (keys, used) == (1, 1)
                continue
            found = ranges(length, chunks, chunk_min, chunk_step)
            assert [k for r in found for k in r] == list(range(length)), (length, chunks)
            assert all(len(r) > 0 for r in found)  # every chunk counted by the merge has keys
            # The keys a chunk takes: whole steps, at least the minimum, at most the length...
            assert keys in (length, chunk_min) or keys % chunk_step == 0
            assert min(chunk_min, length) <= keys <= length
            # ... and no more than it takes to fit the length in the chunks: a step fewer (or
            # the minimum) would leave keys over. So the work spreads as far as it may.
            if keys > max(chunk_min, chunk_step) and keys < length:
                assert (keys - chunk_step) * chunks < length, (length, chunks, keys)


def test_a_long_cache_with_short_sequences_spreads_over_the_grid() -> None:
    """The issue's case: the chunk count comes from a long cache, a short length still fills
    its chunks (before, the keys per chunk came from the cache: 8192 / 32, so 100 keys took
    one chunk, 1000 four)."""
    split = decode_module._split_keys
    assert split(8192, 32, 4, 4) == (256, 32)
    assert split(1000, 32, 4, 4) == (32, 32)  # 32 chunks of 32 keys
    assert split(100, 32, 4, 4) == (4, 25)
    assert split(3, 32, 4, 4) == (3, 1)  # shorter than the minimum: one chunk
    assert split(100, 32, 256, 128) == (100, 1)
    assert split(8300, 32, 256, 128) == (384, 22)  # ceil(8300 / 32) = 260: 3 steps of 128
    assert split(INT_MAX, 1, 256, 128) == (INT_MAX, 1)  # no wrap past the int range
    assert split(INT_MAX, 1024, 256, 128) == (2097152, 1024)


def test_the_launch_passes_the_module_knobs(monkeypatch: pytest.MonkeyPatch) -> None:
    split = decode_module._split_keys
    assert split(1000, 32) == split(1000, 32, decode_module._MIN_CHUNK, decode_module._CHUNK_STEP)
    monkeypatch.setattr(decode_module, "_MIN_CHUNK", 4)
    monkeypatch.setattr(decode_module, "_CHUNK_STEP", 8)
    assert split(1000, 32) == (32, 32) and split(1025, 32) == (40, 26)


def test_chunking_fills_the_device_from_the_shapes(monkeypatch: pytest.MonkeyPatch) -> None:
    split = decode_module._decode_split
    for smax, blocks, sms in [(4096, 256, 132), (32768, 8, 132), (1 << 22, 1, 132), (1, 1, 132)]:
        chunk, chunks = split(smax, blocks, sms)
        assert chunks <= decode_module._MAX_CHUNKS and (chunks - 1) * chunk < smax <= chunk * chunks
        # What it returns is what the kernels make of a full cache.
        assert (chunk, chunks) == decode_module._split_keys(smax, chunks)
    assert split(32768, 8, 132) == (1024, 32)  # one long sequence: one wave of 2 blocks per SM
    assert split(16384, 32, 132) == (2048, 8)  # B4: 256 blocks, not 288 (a second wave)
    assert split(1 << 22, 1, 1000) == (4096, decode_module._MAX_CHUNKS)  # at most 1024
    # Chunks of at least _MIN_CHUNK keys: a cache shorter than that is one chunk, and no chunk
    # that a full cache leaves empty is launched.
    assert split(100, 8, 132) == (100, 1)
    assert split(1000, 8, 132) == (256, 4)
    # A grid that fills the device unsplit stays one chunk (B32 Hkv8 on an H200: 256 blocks).
    assert split(4096, 256, 132) == (4096, 1) and split(4096, 133, 132)[1] == 1
    assert split(4096, 132, 132)[1] == 2  # not more blocks than multiprocessors: split
    monkeypatch.setattr(decode_module, "_BLOCKS_PER_MULTIPROCESSOR", 8)
    assert split(32768, 8, 132) == (256, 128)
    monkeypatch.setattr(decode_module, "_UNSPLIT_ABOVE", 4)  # the override: split it anyway
    assert split(4096, 256, 132) == (1024, 4)
    assert split(4096, 256, 132, per_sm=2, unsplit_above=1) == (4096, 1)  # the arguments win
