"""attention_decode against hip_runtime.testing's float64 attention, under hypothesis: random
batch, heads and grouped-query ratios, 1..16 new queries, per-sequence lengths (0, 1, the whole
cache, anything between) read on the device, head sizes across the three head tiles, each dtype,
and caches read through strided views ([B, Smax, Hkv, D] storage, a longer cache narrowed, rows
that are not 16-byte aligned). Positions past a sequence's length hold NaN: never counted. Keys
split in chunks are merged in the same launch (the last block of each row group) or, before the
merge's counters exist during a capture, by a second kernel: both are covered. How many chunks
there are comes from the shapes, the keys each takes from the length on the device: pass 1's
partials are checked chunk by chunk against the host's mirror of that (_split_keys; its own
arithmetic in test_ops_attention_decode_chunks.py), and a captured step over a long cache
against the reference as its lengths grow.

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
from hip_runtime import ForwardGraph, HipBackend, testing
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
    """Lengths just below, at and past multiples of the smallest chunk (these lengths' chunks
    are that long): the last chunk partial, full, or one key long, chunks past the length
    skipped, one chunk written directly, and (chunks of 4) more chunks than one pass of the
    merge takes; merged in the split launch (fused) or by the combine kernel (no counters: as
    before they exist during a capture)."""
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


def chunk_partials(
    q: np.ndarray, k: np.ndarray, v: np.ndarray, length: int, keys: range, factor: float
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Float64 partials of one sequence (q [Hq, Sq, D], k, v [Hkv, Smax, D]) over `keys`, as
    pass 1 writes them: per (head, query) the max of the base-2 scores it may see (-inf for
    none), the sum of p = exp2(score - max) and the sum of p · v, and that of p · |v| (the
    scale of its rounding)."""
    heads, sq = q.shape[:2]
    group = heads // k.shape[0]
    kk = np.repeat(k[:, keys].astype(np.float64), group, axis=0)  # [Hq, keys, D]
    vv = np.repeat(v[:, keys].astype(np.float64), group, axis=0)
    scores = factor * np.einsum("hid,hjd->hij", q.astype(np.float64), kk)
    seen = np.array(keys)[None, :] <= length - sq + np.arange(sq)[:, None]  # [Sq, keys]
    scores = np.where(seen[None], scores, -np.inf)
    top = scores.max(axis=-1, initial=-np.inf)
    p = np.exp2(scores - np.where(np.isinf(top), 0.0, top)[..., None])
    return top, p.sum(axis=-1), p @ vv, p @ np.abs(vv)


@pytest.mark.parametrize(("chunk_min", "chunk_step"), [(4, 4), (12, 4)])
@pytest.mark.parametrize(
    ("entry", "dtype", "d"), [("d64", "f32", 36), ("mma_d64", "bf16", 64)], ids=["portable", "mma"]
)
def test_each_chunk_takes_its_share_of_the_actual_length(
    backend: HipBackend, entry: str, dtype: str, d: int, chunk_min: int, chunk_step: int
) -> None:
    """The kernels' chunking against its host mirror (_split_keys), pass 1 launched alone
    into NaN-filled partials: a long cache (200 positions, 8 chunks) whose sequences are short
    or empty or nearly full; each chunk holding keys of a sequence writes the partials of
    exactly its share [c · keys, min((c + 1) · keys, len)) (the keys follow the length read on
    the device, not the cache), the chunks past them nothing, and a sequence that fits in one
    chunk is written to out directly. Then the combine kernel, and the merge fused in pass 1,
    over the same partials: the float64 attention, and the counters back at zero. (The
    portable block with element loads and a row group of two rows; the `mma` entry point, on
    NVIDIA the tensor-core block.)"""
    rng = np.random.default_rng(17)
    lengths = np.array([0, 1, 5, 37, 199, 3])
    batch, kv_heads, heads, sq, smax, chunks = len(lengths), 2, 6, 2, 200, 8
    q = testing.random(rng, (batch, heads, sq, d), dtype)
    k = testing.random(rng, (batch, kv_heads, smax, d), dtype, scale=2.0)
    v = testing.random(rng, (batch, kv_heads, smax, d), dtype)
    row_groups, rows, dp = -(-(heads // kv_heads * sq) // 4), batch * heads * sq, -(-d // 4) * 4
    warp = backend.device.properties.warp_size
    threads = 4 * warp if entry.startswith("mma") else min(256, 8 * warp)
    factor = float(np.float32(1 / np.sqrt(d) * 1.4426950408889634))
    qd, kd, vd = (backend.from_numpy(x) for x in (q, k, v))
    lengths_d = backend.from_numpy(lengths.astype(np.int32))
    nan_out = np.full(q.shape, np.nan, q.dtype)
    out = backend.from_numpy(nan_out)
    part = backend.from_numpy(np.full((rows, chunks, dp), np.nan, np.float32))
    stats = backend.from_numpy(np.full((rows, chunks, 2), np.nan, np.float32))
    knobs = (heads, kv_heads, sq, d, smax, chunk_min, chunk_step, chunks)
    strides = (*qd.strides[:3], *kd.strides[:3], *vd.strides[:3], *out.strides[:3])
    pass1 = backend._kernel("attention_decode.hip", f"attention_decode_{entry}_{dtype}")

    def launch(counters: Any) -> None:
        pass1.launch(
            (row_groups * chunks, kv_heads, batch), threads, qd, kd, vd, lengths_d, out, part,
            stats, counters, *knobs, int(dtype == "bf16"), factor, *strides, stream=backend.stream,
        )  # fmt: skip

    launch(None)
    got_out, got_part, got_stats = out.to_numpy(), part.to_numpy(), stats.to_numpy()
    reference = expected(q, k, v, lengths)
    tol = 1e-4 if dtype == "f32" else 2e-2  # (the tensor-core block rounds p to bf16)
    for b, length in enumerate(lengths):
        keys, used = decode_module._split_keys(int(length), chunks, chunk_min, chunk_step)
        at = slice(b * heads * sq, (b + 1) * heads * sq)
        if used == 1:  # out directly; no partials
            testing.assert_close(got_out[b], testing.Reference(*(x[b] for x in reference)), dtype)
            assert np.isnan(got_part[at]).all() and np.isnan(got_stats[at]).all()
            continue
        assert np.isnan(got_out[b].astype(np.float32)).all()  # for the merge to write
        assert np.isnan(got_part[at, used:]).all() and np.isnan(got_stats[at, used:]).all()
        for c in range(used):
            share = range(c * keys, min((c + 1) * keys, int(length)))
            top, total, acc, scale = chunk_partials(q[b], k[b], v[b], int(length), share, factor)
            top_got = got_stats[at, c, 0].reshape(heads, sq)
            total_got = got_stats[at, c, 1].reshape(heads, sq)
            assert np.array_equal(np.isinf(top_got), np.isinf(top)), (b, c)  # rows seeing none
            seen = ~np.isinf(top)
            np.testing.assert_allclose(top_got[seen], top[seen], rtol=1e-5, atol=1e-4)
            # The reference taken to the kernel's max (its sums are relative to it).
            shift = np.exp2(np.where(seen, top - np.where(seen, top_got, 0.0), 0.0))
            np.testing.assert_allclose(total_got, total * shift, rtol=tol, atol=1e-6)
            got = got_part[at, c, :d].reshape(heads, sq, d)
            bound = tol * (scale * shift[..., None]) + 1e-5
            assert (np.abs(got - acc * shift[..., None]) <= bound).all(), (b, c)
    combine = backend._kernel("attention_decode.hip", f"attention_decode_combine_{dtype}")
    combine.launch(
        rows, 256, part, stats, lengths_d, out, heads, sq, d, smax, chunk_min, chunk_step, chunks,
        *out.strides[:3], stream=backend.stream,
    )  # fmt: skip
    merged = out.to_numpy()
    testing.assert_close(merged, reference, dtype)
    testing.assert_bits_equal(merged[lengths <= 1], got_out[lengths <= 1])  # left as they were
    out.copy_from_host(nan_out)
    counters = backend.zeros((batch * kv_heads * row_groups,), np.uint32)
    launch(counters)
    testing.assert_close(out.to_numpy(), reference, dtype)
    assert not counters.to_numpy().any()


@pytest.mark.parametrize("fused", [False, True], ids=["combine", "fused"])
def test_a_captured_step_follows_the_lengths_in_a_long_cache(
    backend: HipBackend, monkeypatch: pytest.MonkeyPatch, fused: bool
) -> None:
    """Issue 38's shape: one decode step captured in a graph over a cache far longer than its
    sequences, replayed as they grow (0, 1, short, near the capacity), checked against the
    float64 attention at each replay: the chunk count stays the capture's, the keys each chunk
    takes follow the lengths on the device (64 chunks of 16 keys at most for a full cache)."""
    monkeypatch.setattr(decode_module, "_UNSPLIT_ABOVE", 1 << 20)
    monkeypatch.setattr(decode_module, "_BLOCKS_PER_MULTIPROCESSOR", 1 << 20)
    monkeypatch.setattr(decode_module, "_MIN_CHUNK", 16)
    monkeypatch.setattr(decode_module, "_CHUNK_STEP", 16)
    monkeypatch.setattr(decode_module, "_FUSED_MERGE_BELOW", 1 << 30 if fused else 0)
    smax, d = 1024, 64
    assert decode_module._decode_split(smax, 1, 1) == (16, 64)
    rng = np.random.default_rng(19)
    q = testing.random(rng, (4, 8, 1, d), "bf16")
    k, v = (testing.random(rng, (4, 2, smax, d), "bf16") for _ in range(2))
    keys, values = backend.from_numpy(k), backend.from_numpy(v)
    attend = backend.attention_decode
    graph = ForwardGraph(
        backend, lambda q, lengths: attend(q, keys, values, lengths), q, np.zeros(4, np.int32)
    )
    for lengths in ([0, 1, 40, 1000], [1, 2, 41, 1001], [1024, 0, 300, 17], [2, 1023, 1, 999]):
        lengths = np.array(lengths, np.int32)
        got = graph(q, lengths).to_numpy()
        testing.assert_close(got, expected(q, k, v, lengths), "bf16")


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
