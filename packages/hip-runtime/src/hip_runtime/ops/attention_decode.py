"""Decode attention over a batch of KV caches with per-sequence lengths (issue 16):
kernels/attention_decode.hip, split over the keys (flash-decoding) so that one long sequence
still fills the GPU.

Queued on the backend's stream and never synchronizes: the lengths are read by the kernels on
the device, so a decode step can be queued (or captured in a graph) while the previous one
runs. k and v are read in place through their strides: the [B, Hkv, Smax, D] views of a cache
stored [B, Smax, Hkv, D] need no copy.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from hip_core import capture_in_progress
from hip_runtime.ops.base import INT_MAX, OpsBase
from hip_runtime.ops.plans import launch_pointers, plan_head, plan_key
from hip_runtime.tensors.dtypes import float32, float_type, int32
from hip_runtime.tensors.tensor import DeviceTensor

_LOG2E = 1.4426950408889634  # the kernels' softmax runs in base 2
_TILES = (64, 128, 256)  # the kernels' head tiles (largest head size each takes)
_ROWS = 4  # query rows per block (HIPK_DECODE_ROWS)
_MAX_QUERIES = 16
_MAX_GRID_YZ = 65535  # kv heads and batches are grid axes y and z
#: Chunk sizing (see _decode_split): no split when one chunk already gives more than
#: _UNSPLIT_ABOVE blocks per multiprocessor; otherwise as many chunks as keep the blocks within
#: _BLOCKS_PER_MULTIPROCESSOR per multiprocessor (one wave: the tensor-core block's 236
#: registers leave two resident on an H100 or H200; a second, partly filled wave costs a
#: block's whole time), at most _MAX_CHUNKS (HIPK_DECODE_MAX_CHUNKS). The keys each chunk takes
#: follow the sequence's length on the device (_split_keys): ceil(length / chunks) rounded up
#: to _CHUNK_STEP (whole steps of the kernels' key loops), at least _MIN_CHUNK.
_UNSPLIT_ABOVE = 1
_BLOCKS_PER_MULTIPROCESSOR = 2
_MIN_CHUNK = 256
_CHUNK_STEP = 128
_MAX_CHUNKS = 1024
_COMBINE_THREADS = 256  # HIPK_DECODE_COMBINE
#: Chunks shorter than this many keys (in a full cache: the choice is made once, from the
#: shapes) are merged by the split's last block of each row group (one launch); longer ones by
#: the combine kernel (a second launch), which costs the device less: H100, bf16 Hq32/Hkv8
#: D128, x cuDNN in the same run, fused / combine kernel: B1 KV32768 (32 chunks of 1024)
#: 0.868 / 0.907, B4 KV16384 (8 of 2048) 0.910 / 0.927, B1 KV131072 (32 of 4096) 0.937 /
#: 0.949; B1 KV8192 (32 of 256: a first pass of 11 us, the step bound by the host's 16 us a
#: call) 1.33 / 1.19, where the second launch's host cost shows. The combine kernel also runs
#: without counters (see _attention_decode_counters).
_FUSED_MERGE_BELOW = 512
#: Warps per block of the `attention_decode_mma_*` entry points (head tiles up to 128, rows in
#: 16-byte vectors): the tensor-core block of kernels/attention_decode_mma.h for 16-bit types on
#: NVIDIA sm_80+, the portable block elsewhere. At most HIPK_DECODE_MMA_WARPS (H200, bf16 B32
#: Hq32/Hkv8 KV4096 D128: 4195 GB/s at 4 warps, 3416 at 2).
_MMA_WARPS = 4
#: Counters of the fused combine: one per row group, kv head and batch.
_COUNTERS = 16384


class AttentionDecodeOps(OpsBase):
    def attention_decode(
        self,
        q: DeviceTensor,
        k: DeviceTensor,
        v: DeviceTensor,
        kv_lengths: DeviceTensor,
        *,
        scale: float | None = None,
        out: DeviceTensor | None = None,
    ) -> DeviceTensor:
        """One decode step's attention over batched KV caches: per sequence b, the Sq new
        queries softmax(scale · q kᵀ) v over keys 0..kv_lengths[b]-1, causal among themselves.

        Args:
            q: [B, Hq, Sq, D] queries, Sq in 1..16: query i of sequence b sits at position
                kv_lengths[b] - Sq + i and sees keys 0..that position (none when negative).
            k, v: [B, Hkv, Smax, D] keys and values, Hq a multiple of Hkv (query head h reads
                head h // (Hq // Hkv)); any strides with the last axis contiguous. Positions
                at or past a sequence's length never count, whatever they hold (NaN
                included); the first few may be read (the tensor-core block loads its first
                keys before the length arrives), so they must be memory of the view.
            kv_lengths: int32 [B] on the device, read by the kernels (never by the host);
                values are clamped to [0, Smax].
            scale: the scores' factor, 1/sqrt(D) by default (rounded to f32).
            out: [B, Hq, Sq, D] in q's dtype with a contiguous last axis; must not overlap
                the inputs.

        One float dtype for q, k, v (f32, f16, bf16), f32 accumulation; D at most 256. A query
        that sees no key (a sequence of length 0) gives zeros, not NaN. The keys may be split
        in chunks: their count comes from the shapes (_decode_split), the keys each takes from
        the sequence's length on the device (_split_keys), so a short sequence in a long cache
        spreads over the launch too, and one that fits a single chunk skips the merge. Short
        chunks are merged by the last block of each row group to finish (one launch), long
        ones by a second, combine kernel (see _FUSED_MERGE_BELOW; also without the fused
        merge's counters: see _attention_decode_counters).
        """
        key = plan_key(q, k, v, kv_lengths, out)
        if key is not None:  # what the chunking reads is part of the key (tests change it)
            knobs = (_UNSPLIT_ABOVE, _BLOCKS_PER_MULTIPROCESSOR, _MIN_CHUNK, _CHUNK_STEP,
                     _FUSED_MERGE_BELOW)  # fmt: skip
            key = ("attention_decode", *key, scale, *knobs, _MMA_WARPS)
            plan = self._planned(key)
            if plan is not None:
                y = self._planned_output(plan, (q, k, v, kv_lengths), out)
                if y is not None:
                    self._attention_decode_launch(plan[4], q, k, v, kv_lengths, y)
                    return y
        q, k, v = self._operand(q, "q"), self._operand(k, "k"), self._operand(v, "v")
        lengths = self._operand(kv_lengths, "kv_lengths")
        t = float_type(q.dtype, "q")
        shapes = {"q": q.shape, "k": k.shape, "v": v.shape}
        if any(len(shape) != 4 for shape in shapes.values()):
            raise ValueError(
                f"attention_decode takes q [B, Hq, Sq, D], k, v [B, Hkv, Smax, D]; got {shapes}"
            )
        batch, heads, sq, d = q.shape
        kv_heads, smax = k.shape[1], k.shape[2]
        if (k.dtype, v.dtype) != (q.dtype, q.dtype):
            raise ValueError(
                f"attention_decode: q, k, v have dtypes {q.dtype}, {k.dtype}, {v.dtype}; need one"
            )
        if v.shape != k.shape or (k.shape[0], k.shape[3]) != (batch, d):
            raise ValueError(
                f"attention_decode: k and v must be [B, Hkv, Smax, D] for q {q.shape}; got {shapes}"
            )
        if not 1 <= sq <= _MAX_QUERIES:
            raise ValueError(
                f"attention_decode takes 1 to {_MAX_QUERIES} queries per sequence, not {sq}"
            )
        if kv_heads == 0 or heads % kv_heads:
            raise ValueError(
                f"attention_decode: q's {heads} heads are not a multiple of k's {kv_heads}"
            )
        if lengths.dtype != int32 or lengths.shape != (batch,):
            raise ValueError(
                f"attention_decode: kv_lengths must be int32 [{batch}]; got {lengths.dtype} "
                f"{list(lengths.shape)}"
            )
        tile = next((tile for tile in _TILES if d <= tile), None)
        if tile is None:
            raise ValueError(f"attention_decode takes head sizes up to {_TILES[-1]}, not {d}")
        if smax > INT_MAX or batch > _MAX_GRID_YZ or kv_heads > _MAX_GRID_YZ:
            raise ValueError(f"attention_decode: shapes {shapes} exceed the kernels' range")
        y = self._output(out, q.shape, q.dtype, distinct_from=(q, k, v, lengths), strided=True)
        for name, x in (("q", q), ("k", k), ("v", v), ("out", y)):
            if x.strides[3] != 1 and d > 1:
                raise ValueError(
                    f"attention_decode: {name}'s last axis must be contiguous (strides {x.strides})"
                )
        if y.size == 0:
            return y
        row_groups = -(-(heads // kv_heads * sq) // _ROWS)
        full, chunks = _decode_split(
            smax, batch * kv_heads * row_groups, self.device.properties.multiprocessors
        )
        dp = -(-d // 4) * 4  # the partials' row stride (whole 16-byte vectors)
        factor = (1.0 / math.sqrt(d) if scale is None else float(scale)) * _LOG2E
        vec = all(_vectorizable(x, d) for x in (q, k, v))
        warp = self.device.properties.warp_size
        if vec and tile <= 128:
            name, threads = f"attention_decode_mma_d{tile}_{t.suffix}", _MMA_WARPS * warp
        else:
            name, threads = f"attention_decode_d{tile}_{t.suffix}", min(256, 8 * warp)
        rows = y.size // d
        launch = (
            self._kernel("attention_decode.hip", name),
            (row_groups * chunks, kv_heads, batch),
            threads,
            (heads, kv_heads, sq, d, smax, _MIN_CHUNK, _CHUNK_STEP, chunks, int(vec), factor,
             *q.strides[:3], *k.strides[:3], *v.strides[:3], *y.strides[:3]),
            (rows * chunks * dp, rows * chunks * 2) if chunks > 1 else None,
            batch * kv_heads * row_groups if full < _FUSED_MERGE_BELOW else None,
            self._kernel("attention_decode.hip", f"attention_decode_combine_{t.suffix}"),
            (rows, heads, sq, d, smax, _MIN_CHUNK, _CHUNK_STEP, chunks, *y.strides[:3]),
        )  # fmt: skip
        self._attention_decode_launch(launch, q, k, v, lengths, y)
        self._keep_plan(key, (*plan_head((q, k, v, lengths), y), launch))
        return y

    def _attention_decode_launch(
        self,
        launch: tuple[Any, ...],
        q: DeviceTensor,
        k: DeviceTensor,
        v: DeviceTensor,
        lengths: DeviceTensor,
        y: DeviceTensor,
    ) -> None:
        """Queue a validated call's launches: pass 1 (and the merge in it, or the combine
        kernel when there are no counters). `launch`: what the shapes decided (the plan)."""
        kernel, grid, threads, ints, partials, blocks, combine, combine_ints = launch
        part = stats = counters = None
        if partials is not None:  # the keys are split: f32 partials from the pool
            part = self._output(None, (partials[0],), float32)
            stats = self._output(None, (partials[1],), float32)
            counters = None if blocks is None else self._attention_decode_counters(blocks)
        pointers = launch_pointers((q, k, v, lengths, y, part, stats, counters))
        kernel.launch(grid, threads, *pointers, *ints, stream=self.stream)
        if partials is not None and counters is None:
            combine.launch(
                combine_ints[0], _COMBINE_THREADS, part, stats, lengths, y, *combine_ints[1:],
                stream=self.stream,
            )  # fmt: skip

    def _attention_decode_counters(self, blocks: int) -> DeviceTensor | None:
        """The fused combine's counters: zeroed once, set back to zero by each launch, kept as
        long as the backend (a captured graph replays with them). None (the combine kernel
        instead) for more row groups than counters, or no counters yet during a capture (their
        zeroing would be captured)."""
        counters: DeviceTensor | None = getattr(self, "_attention_decode_counter_buffer", None)
        if counters is None and not capture_in_progress() and blocks <= _COUNTERS:
            counters = self.zeros((_COUNTERS,), np.uint32)  # type: ignore[attr-defined]
            self._attention_decode_counter_buffer = counters
        return counters if blocks <= _COUNTERS else None


def _decode_split(
    smax: int, blocks_per_chunk: int, multiprocessors: int, *, per_sm: float | None = None,
    unsplit_above: float | None = None,
) -> tuple[int, int]:  # fmt: skip
    """(keys per chunk of a full cache, chunks) for a cache of `smax` positions, chosen from
    the shapes alone: the chunk count is the launch's grid (a captured graph replays it while
    the lengths grow on the device), the keys each chunk takes follow each sequence's length
    on the device (_split_keys). `per_sm` and `unsplit_above` default to
    _BLOCKS_PER_MULTIPROCESSOR and _UNSPLIT_ABOVE.

    When `blocks_per_chunk` (batch · kv heads · row groups) exceeds the multiprocessors
    (`unsplit_above` per multiprocessor), one chunk: the grid fills the device already, and a
    split only adds partials and their merge
    (H200, tensor-core block, bf16 B32 Hq32/Hkv8 KV4096 D128: 4195 GB/s unsplit against 3610
    in 2 chunks, 3421 in 5; H100: 0.97 of cuDNN unsplit, 0.895 in 2). Otherwise the most
    chunks whose blocks stay within `per_sm` per multiprocessor, i.e. one wave (H100, bf16,
    fused merge, x cuDNN: B1 Hq32/Hkv8 KV32768 D128 0.858 in 32 chunks of 1024 (2 per SM),
    0.783 in 64 (4 per SM), 0.715 in 37 (1.1 waves); B4 KV16384 0.90 in 7 or 8 chunks, 0.81
    in 9 (1.1 waves)), at most _MAX_CHUNKS, and no more than a full cache fills (a chunk
    that would never hold a key is not launched)."""
    per_sm = _BLOCKS_PER_MULTIPROCESSOR if per_sm is None else per_sm
    unsplit_above = _UNSPLIT_ABOVE if unsplit_above is None else unsplit_above
    if blocks_per_chunk > multiprocessors * unsplit_above:
        return max(1, smax), 1
    wanted = max(1, int(multiprocessors * per_sm) // blocks_per_chunk)
    chunks = _split_keys(smax, min(wanted, _MAX_CHUNKS))[1]
    return _split_keys(smax, chunks)[0], chunks


def _split_keys(
    length: int, chunks: int, chunk_min: int | None = None, chunk_step: int | None = None
) -> tuple[int, int]:
    """(keys per chunk, chunks used) of a sequence of `length` keys over `chunks` chunks: the
    kernels' split_keys (kernels/attention_decode_merge.h), which reads the length on the
    device; here for the host's choices and the tests. keys = ceil(length / chunks) rounded up
    to whole `chunk_step`s, at least `chunk_min` (defaults _CHUNK_STEP and _MIN_CHUNK, what the
    launches pass), at most the length; chunk c < used takes keys
    [c · keys, min((c + 1) · keys, length)), used <= chunks. An empty sequence has one chunk
    (1, 1): chunk 0 always runs and writes its zeros."""
    chunk_min = _MIN_CHUNK if chunk_min is None else chunk_min
    chunk_step = _CHUNK_STEP if chunk_step is None else chunk_step
    if length <= 0:
        return 1, 1
    keys = max(chunk_min, _ceil(_ceil(length, chunks), chunk_step) * chunk_step)
    keys = min(keys, length)
    return keys, _ceil(length, keys)


def _ceil(a: int, b: int) -> int:
    return -(-a // b)


def _vectorizable(x: DeviceTensor, d: int) -> bool:
    """Whether every row of x (last axis d) starts 16-byte aligned and d fills whole 16-byte
    vectors: the kernels' 16-byte loads."""
    size = x.dtype.itemsize
    return (
        d % (16 // size) == 0 and x.ptr % 16 == 0 and all(s * size % 16 == 0 for s in x.strides[:3])
    )


__all__ = ["AttentionDecodeOps"]
