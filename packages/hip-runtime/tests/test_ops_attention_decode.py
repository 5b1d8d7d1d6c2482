"""attention_decode against hip_runtime.testing's float64 attention, under hypothesis: random
batch, heads and grouped-query ratios, 1..16 new queries, per-sequence lengths (0, 1, the whole
cache, anything between) read on the device, head sizes across the three head tiles, each dtype,
and caches read through strided views ([B, Smax, Hkv, D] storage, a longer cache narrowed, rows
that are not 16-byte aligned). Positions past a sequence's length hold NaN: never read. Keys
split in chunks are merged in the same launch (the last block of each row group) or, before the
merge's counters exist during a capture, by a second kernel: both are covered.

On the cpu platform in CI; the same tests run on nvidia (marked gpu) through the device fixture.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hip_core import Device
from hip_runtime import HipBackend, testing
from hip_runtime.ops import attention_decode as decode_module

SETTINGS = settings(
    max_examples=20, deadline=None, database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)  # fmt: skip
HEAD_SIZES = [8, 64, 80, 128, 256]
LAYOUTS = ["contiguous", "bshd", "longer", "unaligned"]


@pytest.fixture(scope="module")
def backend(device: Device) -> Iterator[HipBackend]:
    with HipBackend(device) as backend:
        yield backend


def expected(
    q: np.ndarray, k: np.ndarray, v: np.ndarray, lengths: np.ndarray, scale: float | None = None
) -> testing.Reference:
    """The float64 reference: query i of sequence b sees keys j < lengths[b] with
    j <= lengths[b] - Sq + i. The cache's unused positions are zeroed first (they hold NaN)."""
    sq, smax = q.shape[2], k.shape[2]
    keys, queries = np.arange(smax), np.arange(sq)
    length = lengths[:, None, None, None]
    seen = (keys < length) & (keys <= length - sq + queries[:, None])  # [B, 1, Sq, Smax]
    used = (keys < lengths[:, None])[:, None, :, None]
    k, v = np.where(used, k, 0).astype(k.dtype), np.where(used, v, 0).astype(v.dtype)
    return testing.attention(q, k, v, mask=seen, scale=scale)


def cache(backend: HipBackend, x: np.ndarray, lengths: np.ndarray, how: str) -> Any:
    """x [B, Hkv, Smax, D] on the device as `how` lays it out, NaN past each length."""
    x = x.copy()
    for b, length in enumerate(lengths):
        x[b, :, length:] = np.nan
    if how == "contiguous":
        return backend.from_numpy(x)
    stored = x.transpose(0, 2, 1, 3)  # [B, Smax, Hkv, D], as a KV cache keeps it
    if how == "longer":  # a cache with room for 3 more positions, narrowed to Smax
        room = np.full((x.shape[0], 3, *stored.shape[2:]), np.nan, x.dtype)
        stored = np.concatenate([stored, room], axis=1)
    if how == "unaligned":  # one element before each row: rows start off 16-byte boundaries
        pad = np.zeros((*stored.shape[:3], 1), x.dtype)
        stored = np.concatenate([pad, stored], axis=3)
    view = backend.from_numpy(np.ascontiguousarray(stored)).permute(0, 2, 1, 3)
    view = view.narrow(2, 0, x.shape[2])
    return view.narrow(3, 1, x.shape[3]) if how == "unaligned" else view


def run(
    backend: HipBackend, q: np.ndarray, k: np.ndarray, v: np.ndarray, lengths: np.ndarray,
    how: str = "contiguous", **kwargs: Any,
) -> np.ndarray:  # fmt: skip
    got = backend.attention_decode(
        backend.from_numpy(q), cache(backend, k, lengths, how), cache(backend, v, lengths, how),
        backend.from_numpy(lengths.astype(np.int32)), **kwargs,
    )  # fmt: skip
    result: np.ndarray = got.to_numpy()
    return result


@SETTINGS
@given(data=st.data())
def test_decode_matches_the_reference(backend: HipBackend, data: Any) -> None:
    dtype = data.draw(st.sampled_from(["f32", "f16", "bf16"]))
    batch, kv_heads = data.draw(st.integers(1, 3)), data.draw(st.integers(1, 2))
    heads = kv_heads * data.draw(st.sampled_from([1, 2, 3, 4, 5, 8]))
    sq = data.draw(st.one_of(st.integers(1, 4), st.integers(5, 16)))
    smax = data.draw(st.integers(1, 90))
    d = data.draw(st.sampled_from(HEAD_SIZES))
    lengths = np.array(
        data.draw(st.lists(st.sampled_from([0, 1, smax, -1]), min_size=batch, max_size=batch))
    )
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1)))
    lengths = np.where(lengths < 0, rng.integers(0, smax + 1, batch), lengths)
    q = testing.random(rng, (batch, heads, sq, d), dtype)
    k = testing.random(rng, (batch, kv_heads, smax, d), dtype)
    v = testing.random(rng, (batch, kv_heads, smax, d), dtype)
    how = data.draw(st.sampled_from(LAYOUTS))
    scale = data.draw(st.sampled_from([None, 0.3]))
    got = run(backend, q, k, v, lengths, how, scale=scale)
    testing.assert_close(got, expected(q, k, v, lengths, scale), dtype)


@pytest.mark.parametrize("fused", [False, True], ids=["combine", "fused"])
@pytest.mark.parametrize(
    ("chunk", "d"), [(4, 256), (16, 64), (256, 64)], ids=["chunks-of-4", "of-16", "of-256"]
)
def test_lengths_around_chunk_boundaries(
    backend: HipBackend, monkeypatch: pytest.MonkeyPatch, chunk: int, d: int, fused: bool
) -> None:
    """Lengths just below, at and past multiples of the chunk: the last chunk partial, full,
    or one key long, chunks past the length skipped, and (chunks of 4) more chunks than one
    pass of the merge takes; merged in the split launch (fused) or by the combine kernel (no
    counters: as before they exist during a capture)."""
    # Split whatever the device, into enough chunks that they are the smallest allowed.
    monkeypatch.setattr(decode_module, "_UNSPLIT_ABOVE", 1 << 20)
    monkeypatch.setattr(decode_module, "_BLOCKS_PER_MULTIPROCESSOR", 1 << 20)
    if not fused:
        monkeypatch.setattr(type(backend), "_attention_decode_counters", lambda *_: None)
    monkeypatch.setattr(decode_module, "_MIN_CHUNK", chunk)
    monkeypatch.setattr(decode_module, "_CHUNK_STEP", min(chunk, 128))
    smax = 600 if chunk == 256 else 100
    assert decode_module._decode_split(smax, 1, 1) == (chunk, -(-smax // chunk))
    lengths = np.array([chunk - 1, chunk, chunk + 1, 2 * chunk, 2 * chunk + 1, smax, 0, 1])
    rng = np.random.default_rng(7)
    q = testing.random(rng, (len(lengths), 4, 3, d), "f32")
    k = testing.random(rng, (len(lengths), 2, smax, d), "f32", scale=2.0)
    v = testing.random(rng, (len(lengths), 2, smax, d), "f32")
    got = run(backend, q, k, v, lengths, "bshd")
    testing.assert_close(got, expected(q, k, v, lengths), "f32")
    if fused:  # the counters are back at zero: a second call gives the same bits
        testing.assert_bits_equal(run(backend, q, k, v, lengths, "bshd"), got)


@pytest.mark.parametrize(("chunk", "fused"), [(256, True), (512, False)], ids=["short", "long"])
def test_long_chunks_take_the_combine_kernel(
    backend: HipBackend, monkeypatch: pytest.MonkeyPatch, chunk: int, fused: bool
) -> None:
    """Chunks shorter than _FUSED_MERGE_BELOW keys are merged in the split launch (it asks
    for the counters), longer ones by the combine kernel (it does not): the same results."""
    monkeypatch.setattr(decode_module, "_UNSPLIT_ABOVE", 1 << 20)
    monkeypatch.setattr(decode_module, "_BLOCKS_PER_MULTIPROCESSOR", 1 << 20)
    monkeypatch.setattr(decode_module, "_MIN_CHUNK", chunk)
    asked: list[int] = []
    counters = type(backend)._attention_decode_counters

    def recorded(self: HipBackend, blocks: int) -> Any:
        asked.append(blocks)
        return counters(self, blocks)

    monkeypatch.setattr(type(backend), "_attention_decode_counters", recorded)
    lengths = np.array([1100, 700, 1])
    rng = np.random.default_rng(13)
    q = testing.random(rng, (3, 4, 1, 16), "f32")
    k, v = (testing.random(rng, (3, 2, 1100, 16), "f32") for _ in range(2))
    got = run(backend, q, k, v, lengths, "contiguous")
    testing.assert_close(got, expected(q, k, v, lengths), "f32")
    assert bool(asked) == fused


def test_empty_sequences_give_zeros_and_out_is_written(backend: HipBackend) -> None:
    rng = np.random.default_rng(3)
    q = testing.random(rng, (2, 2, 4, 16), "bf16")
    k = testing.random(rng, (2, 1, 8, 16), "bf16")
    lengths = np.array([0, 2])  # and sequence 1 has fewer keys than queries
    got = run(backend, q, k, k, lengths, "bshd")
    assert np.all(got[0] == 0) and np.all(got[1, :, :2] == 0) and np.isfinite(got).all()
    testing.assert_close(got, expected(q, k, k, lengths), "bf16")
    out = backend.zeros((2, 2, 4, 16), "bfloat16")
    same = backend.attention_decode(
        backend.from_numpy(q), backend.from_numpy(k), backend.from_numpy(k),
        backend.from_numpy(lengths.astype(np.int32)), out=out,
    )  # fmt: skip
    assert same is out
    testing.assert_bits_equal(out.to_numpy(), got)


def test_lengths_past_the_cache_are_clamped(backend: HipBackend) -> None:
    rng = np.random.default_rng(5)
    q, k, v = (testing.random(rng, shape, "f32") for shape in [(2, 1, 1, 8), *[(2, 1, 6, 8)] * 2])
    lengths = backend.from_numpy(np.array([99, -4], np.int32))
    got = backend.attention_decode(*map(backend.from_numpy, (q, k, v)), lengths).to_numpy()
    testing.assert_close(got, expected(q, k, v, np.array([6, 0])), "f32")


def test_chunking_fills_the_device_from_the_shapes(monkeypatch: pytest.MonkeyPatch) -> None:
    split = decode_module._decode_split
    for smax, blocks, sms in [(4096, 256, 132), (32768, 8, 132), (1 << 22, 1, 132), (1, 1, 132)]:
        chunk, chunks = split(smax, blocks, sms)
        assert chunks <= decode_module._MAX_CHUNKS and (chunks - 1) * chunk < smax <= chunk * chunks
    assert split(32768, 8, 132) == (1024, 32)  # one long sequence: one wave of 2 blocks per SM
    assert split(16384, 32, 132) == (2048, 8)  # B4: 256 blocks, not 288 (a second wave)
    assert split(1 << 22, 1, 1000) == (4096, decode_module._MAX_CHUNKS)  # at most 1024
    assert split(100, 8, 132) == (256, 1)  # chunks of at least _MIN_CHUNK keys
    # A grid that fills the device unsplit stays one chunk (B32 Hkv8 on an H200: 256 blocks).
    assert split(4096, 256, 132) == (4096, 1) and split(4096, 133, 132)[1] == 1
    assert split(4096, 132, 132)[1] == 2  # not more blocks than multiprocessors: split
    monkeypatch.setattr(decode_module, "_BLOCKS_PER_MULTIPROCESSOR", 8)
    assert split(32768, 8, 132) == (256, 128)
    monkeypatch.setattr(decode_module, "_UNSPLIT_ABOVE", 4)  # the override: split it anyway
    assert split(4096, 256, 132) == (1024, 4)
    assert split(4096, 256, 132, per_sm=2, unsplit_above=1) == (4096, 1)  # the arguments win


def test_bad_inputs_are_refused_before_launch(backend: HipBackend) -> None:
    q, k = backend.zeros((2, 4, 3, 8)), backend.zeros((2, 2, 5, 8))
    lengths = backend.from_numpy(np.array([5, 3], np.int32))
    decode = backend.attention_decode
    cases = [
        (dict(q=backend.zeros((4, 3, 8))), r"q \[B, Hq, Sq, D\]"),
        (dict(v=backend.zeros((2, 2, 5, 8), "float16")), "dtypes"),
        (dict(k=backend.zeros((2, 2, 6, 8))), r"k and v must be \[B, Hkv, Smax, D\]"),
        (dict(k=backend.zeros((3, 2, 5, 8)), v=backend.zeros((3, 2, 5, 8))), "k and v must"),
        (dict(q=backend.zeros((2, 4, 17, 8))), "1 to 16 queries"),
        (dict(k=backend.zeros((2, 3, 5, 8)), v=backend.zeros((2, 3, 5, 8))), "multiple"),
        (dict(kv_lengths=backend.zeros((2,), "int64")), "kv_lengths must be int32"),
        (dict(kv_lengths=backend.zeros((3,), "int32")), r"kv_lengths must be int32 \[2\]"),
        (dict(kv_lengths=np.array([5, 3], np.int32)), "kv_lengths must be a DeviceTensor"),
        (dict(q=backend.zeros((1, 1, 1, 300)), k=backend.zeros((1, 1, 2, 300)),
              v=backend.zeros((1, 1, 2, 300)), kv_lengths=lengths.narrow(0, 0, 1)), "up to 256"),
        (dict(k=backend.zeros((2, 2, 8, 5)).mT), "k's last axis must be contiguous"),
        (dict(q=backend.zeros((2, 4, 3), "int32").unsqueeze(3)), "q"),
        (dict(out=backend.zeros((2, 4, 3, 7))), "out is"),
    ]  # fmt: skip
    for change, message in cases:
        args: dict[str, Any] = dict(q=q, k=k, v=k, kv_lengths=lengths) | change
        with pytest.raises((ValueError, TypeError), match=message):
            decode(args.pop("q"), args.pop("k"), args.pop("v"), args.pop("kv_lengths"), **args)


@pytest.mark.gpu
@pytest.mark.parametrize("fused", [False, True], ids=["combine", "fused"])
def test_large_decode_matches_the_reference(
    backend: HipBackend, monkeypatch: pytest.MonkeyPatch, platform: str, fused: bool
) -> None:
    """The benchmark's shape, smaller batch: bf16 Hq32/Hkv8 D128 over a 4096-position cache
    stored [B, S, Hkv, D], with lengths across the cache (one query: 48 blocks a chunk, split
    on an H200, merged in the split launch or by the combine kernel; four: 192, unsplit)."""
    if platform == "cpu":
        pytest.skip("a GPU-sized shape")
    if fused:  # whatever the chunks' length
        monkeypatch.setattr(decode_module, "_FUSED_MERGE_BELOW", 1 << 30)
    else:
        monkeypatch.setattr(type(backend), "_attention_decode_counters", lambda *_: None)
    rng = np.random.default_rng(11)
    lengths = np.array([4096, 1, 0, 2049, 777, 4000])
    q = testing.random(rng, (6, 32, 1, 128), "bf16")
    k, v = (testing.random(rng, (6, 8, 4096, 128), "bf16") for _ in range(2))
    got = run(backend, q, k, v, lengths, "bshd")
    testing.assert_close(got, expected(q, k, v, lengths), "bf16")
    q = testing.random(rng, (6, 32, 4, 128), "bf16")  # four new tokens each (speculative)
    got = run(backend, q, k, v, lengths, "bshd")
    testing.assert_close(got, expected(q, k, v, lengths), "bf16")


@pytest.mark.parametrize("warps", [4, 2, 1])
@pytest.mark.parametrize("split", [False, True], ids=["unsplit", "split"])
def test_the_tensor_core_block_matches_the_reference(
    backend: HipBackend, monkeypatch: pytest.MonkeyPatch, warps: int, split: bool
) -> None:
    """The `attention_decode_mma_*` block (tensor cores on NVIDIA sm_80+, the portable block
    elsewhere) at 1, 2 and 4 warps on 16-bit inputs: grouped-query ratios 1, 4 and 8 (one and
    two row groups), 1 to 16 queries, head sizes below and at the tiles, lengths that end
    inside a 16-key step, keys unsplit or in chunks of 64 merged in the launch; a second call
    (the launch plan) gives the same bits."""
    monkeypatch.setattr(decode_module, "_MMA_WARPS", warps)
    if split:
        monkeypatch.setattr(decode_module, "_UNSPLIT_ABOVE", 1 << 20)
        monkeypatch.setattr(decode_module, "_BLOCKS_PER_MULTIPROCESSOR", 1 << 20)
        monkeypatch.setattr(decode_module, "_MIN_CHUNK", 64)
        monkeypatch.setattr(decode_module, "_CHUNK_STEP", 64)
    rng = np.random.default_rng(13)
    cases = [("bf16", 1, 1, 128), ("f16", 4, 3, 64), ("bf16", 8, 16, 80), ("bf16", 4, 1, 128)]
    for dtype, group, sq, d in cases:
        lengths = np.array([0, 1, 17, 200, 131])
        q = testing.random(rng, (5, 2 * group, sq, d), dtype)
        k = testing.random(rng, (5, 2, 200, d), dtype, scale=2.0)
        v = testing.random(rng, (5, 2, 200, d), dtype)
        inputs = [backend.from_numpy(q), cache(backend, k, lengths, "contiguous"),
                  cache(backend, v, lengths, "contiguous"),
                  backend.from_numpy(lengths.astype(np.int32))]  # fmt: skip
        got = backend.attention_decode(*inputs).to_numpy()
        testing.assert_close(got, expected(q, k, v, lengths), dtype)
        testing.assert_bits_equal(backend.attention_decode(*inputs).to_numpy(), got)
