"""Scaled dot-product attention (kernels/attention.hip): flash-style, the scores never stored.

Queued on the backend's stream. The inputs are read in place through their strides (the head
dimension must be contiguous), so the usual [B, S, H, D] projections need no copy:
`q.reshape(B, S, H, D).permute(0, 2, 1, 3)` is already a valid `q`.
"""

from __future__ import annotations

import math
import weakref
from typing import Any

from hip_core import Kernel
from hip_runtime.ops.base import INT_MAX, OpsBase
from hip_runtime.tensors import strides as layout
from hip_runtime.tensors.dtypes import bool_, float_type
from hip_runtime.tensors.tensor import DeviceTensor

_THREADS = 128  # HIPK_ATTENTION_THREADS
#: (largest head size, queries per block) of each kernel tile shape, smallest first: D 32 and
#: 64 are the register-tiled kernel (kernels/attention_tiled.h), 128 and 256 the scalar one.
_TILES = ((32, 64), (64, 64), (128, 16), (256, 8))
#: The scalar kernel's D = 64 tile (attention_scalar_d64, 32 queries per block), which the
#: register-tiled kernel replaced: True sends d <= 64 there (A/B benchmarks only:
#: bench_attention.py's "hip scalar" rows).
_SCALAR_D64 = False
_SCALAR_TILE = (64, 32)
_MAX_GRID_YZ = 65535  # heads and batches are grid axes y and z
#: The 16-bit entry points attention_mma_d<D>_<t> (kernels/attention_mma.h): matrix cores where
#: the compiler has them, the portable kernel elsewhere; 128 queries per block either way.
_MMA_HEAD_SIZES = (32, 64, 128)
_MMA_ROWS = 128  # HIPK_MMA_ROWS
_MMA_TYPES = ("f16", "bf16")
#: Dynamic shared memory of attention_mma_d128 (HIPK_MMA_DYNAMIC_BYTES_D128); a device that
#: cannot opt in to that much gets its per-block limit (attention_mma.h: its path fits 48 KiB).
_MMA_D128_SHARED = 65536
#: The dynamic shared memory each D = 128 kernel is launched with, once it was allowed.
_SHARED: weakref.WeakKeyDictionary[Kernel, int] = weakref.WeakKeyDictionary()


class AttentionOps(OpsBase):
    def scaled_dot_product_attention(
        self,
        q: DeviceTensor,
        k: DeviceTensor,
        v: DeviceTensor,
        *,
        causal: bool = False,
        mask: DeviceTensor | None = None,
        scale: float | None = None,
        out: DeviceTensor | None = None,
    ) -> DeviceTensor:
        """softmax(scale · q kᵀ + mask) v, per batch and head, without materializing scores.

        Args:
            q: [B, Hq, Sq, D] queries; k, v: [B, Hkv, Skv, D] keys and values, Hq a multiple
                of Hkv (grouped-query attention: query head h reads head h // (Hq // Hkv)).
                One float dtype (f32, f16, bf16); any strides with the last axis contiguous;
                D at most 256.
            causal: query i sees key j only when j <= i + Skv - Sq (the queries are the last
                Sq positions, as in a decode step over a cache).
            mask: broadcastable to [B, Hq, Sq, Skv]: bool (True attends) or additive in q's
                dtype (added to the scaled scores; -inf masks).
            scale: the scores' factor, 1/sqrt(D) by default (rounded to f32).
            out: [B, Hq, Sq, D] in q's dtype with a contiguous last axis; must not overlap
                the inputs.

        A query that sees no key at all (every key masked) gives zeros, not NaN. f32
        accumulation and an online softmax whatever the storage type.

        f16 and bf16 with D = 32, 64 or 128, whose q, k, v and out rows all start on 16-byte
        boundaries (16-byte aligned tensors, batch/head/sequence strides multiples of 8
        elements: what contiguous tensors and [B, S, H, D] views have), run on the matrix
        cores where the GPU has them (NVIDIA sm_80+, AMD gfx90a/gfx942): the probabilities
        are rounded to q's dtype before they weight v there, as in FlashAttention.
        """
        q = self._operand(q, "q")
        t = float_type(q.dtype, "q")
        k, v = self._operand(k, "k"), self._operand(v, "v")
        if q.ndim != 4 or k.ndim != 4 or v.ndim != 4:
            raise ValueError(
                f"attention takes q [B, Hq, Sq, D] and k, v [B, Hkv, Skv, D]; got q {q.shape}, "
                f"k {k.shape}, v {v.shape}"
            )
        batch, heads, sq, d = q.shape
        _, kv_heads, skv, _ = k.shape
        if k.dtype != q.dtype or v.dtype != q.dtype:
            raise ValueError(f"q, k and v have dtypes {q.dtype}, {k.dtype}, {v.dtype}; need one")
        if k.shape != v.shape or k.shape[0] != batch or k.shape[3] != d:
            raise ValueError(
                f"k {k.shape} and v {v.shape} must be [B, Hkv, Skv, D] for q {q.shape}"
            )
        if kv_heads == 0 or heads % kv_heads:
            raise ValueError(f"q's {heads} heads are not a multiple of k's {kv_heads}")
        tile = next((tile for tile in _TILES if d <= tile[0]), None)
        if tile is None:
            raise ValueError(f"attention takes head sizes up to {_TILES[-1][0]}, not {d}")
        if max(sq, skv) > INT_MAX or batch > _MAX_GRID_YZ or heads > _MAX_GRID_YZ:
            raise ValueError(f"attention shapes {q.shape}, {k.shape} exceed the kernel's range")
        for name, x in (("q", q), ("k", k), ("v", v)):
            if x.strides[3] != 1 and d > 1:
                raise ValueError(
                    f"{name}'s last axis must be contiguous (strides {x.strides}): pass "
                    f"{name}.contiguous()"
                )
        mask_kind, mask_strides = self._attention_mask(mask, q.dtype, (batch, heads, sq, skv))
        y = self._output(out, q.shape, q.dtype, distinct_from=(q, k, v, mask), strided=True)
        if y.strides[3] != 1 and d > 1:
            raise ValueError(f"out's last axis must be contiguous (strides {y.strides})")
        if y.size == 0:
            return y
        factor = 1.0 / math.sqrt(d) if scale is None else float(scale)
        mma = t.suffix in _MMA_TYPES and d in _MMA_HEAD_SIZES and _attention_rows16(q, k, v, y)
        if mma:
            name, rows = f"attention_mma_d{d}_{t.suffix}", _MMA_ROWS
        elif _SCALAR_D64 and d <= _SCALAR_TILE[0]:
            name, rows = f"attention_scalar_d{_SCALAR_TILE[0]}_{t.suffix}", _SCALAR_TILE[1]
        else:
            name, rows = f"attention_d{tile[0]}_{t.suffix}", tile[1]
        kernel = self._kernel("attention.hip", name)
        shared = _attention_shared(kernel) if mma and d == 128 else 0
        kernel.launch(
            (-(-sq // rows), heads, batch), _THREADS,
            q, k, v, y, mask, mask_kind, heads, kv_heads, sq, skv, d, factor, int(bool(causal)),
            *q.strides[:3], *k.strides[:3], *v.strides[:3], *y.strides[:3], *mask_strides,
            shared_mem=shared, stream=self.stream,
        )  # fmt: skip
        return y

    def _attention_mask(
        self, mask: Any, dtype: Any, scores: tuple[int, int, int, int]
    ) -> tuple[int, tuple[int, ...]]:
        """(the kernel's mask kind, the mask's strides over the scores' shape)."""
        if mask is None:
            return 0, (0, 0, 0, 0)
        mask = self._operand(mask, "mask")
        if mask.dtype not in (bool_, dtype):
            raise ValueError(f"mask has dtype {mask.dtype}; attention takes bool or {dtype}")
        try:
            strides = layout.broadcast_to(mask.shape, mask.strides, scores)
        except ValueError as error:
            raise ValueError(f"mask {mask.shape} does not broadcast to {scores}") from error
        return (2 if mask.dtype == bool_ else 1), strides


def _attention_shared(kernel: Kernel) -> int:
    """The dynamic shared memory attention_mma_d128 `kernel` is launched with; the first call
    per kernel allows it (hipFuncSetAttribute, not stream-ordered)."""
    found = _SHARED.get(kernel)
    if found is None:
        found = _MMA_D128_SHARED
        try:
            kernel.set_max_dynamic_shared_memory(found)
        except ValueError:  # a lower opt-in limit (no sm_80 here): its D = 128 path fits 48 KiB
            found = kernel.module.device.properties.shared_memory_per_block
        _SHARED[kernel] = found
    return found


def _attention_rows16(*tensors: DeviceTensor) -> bool:
    """Whether every row of q, k, v and out (the d axis) starts on a 16-byte boundary: the
    tensors are 16-byte aligned and every batch, head and sequence stride that is ever stepped
    over (axes longer than 1) is a whole number of 16 bytes (attention_mma's tiles move rows
    as 16-byte chunks)."""
    for x in tensors:
        size = x.dtype.itemsize
        if x.ptr % 16 or any(x.shape[i] > 1 and x.strides[i] * size % 16 for i in range(3)):
            return False
    return True


__all__ = ["AttentionOps"]
