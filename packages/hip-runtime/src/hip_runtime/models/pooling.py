"""Sentence pooling of an encoder's last hidden state [B, S, H] into one vector per sequence.

Every function is a few ops queued on the backend's stream (nothing waits) and returns a
float32 [B, H] whatever the hidden state's dtype: the pooled vectors are what similarity
search consumes, and summing in f32 keeps 16-bit models' means exact in their counts.
"""

from __future__ import annotations

from hip_runtime.backend import HipBackend
from hip_runtime.tensors.dtypes import float32
from hip_runtime.tensors.tensor import DeviceTensor

#: The smallest token count a mean divides by (sentence-transformers' clamp): a row with no
#: real token pools to zeros, not NaN.
MIN_COUNT = 1e-9


def mean_pool(backend: HipBackend, hidden: DeviceTensor, mask: DeviceTensor | None) -> DeviceTensor:
    """The mean of `hidden` [B, S, H] over the tokens whose `mask` [B, S] (any number or bool
    dtype) is non-zero; over every token when `mask` is None."""
    if mask is None:
        return backend.mean(backend.cast(hidden, float32), axis=1)
    # One batched GEMM sums the real tokens ([B, 1, S] @ [B, S, H], f32 accumulation), so no
    # masked copy of the hidden state is ever made; the counts are summed in f32 (a bf16 sum
    # of ones is inexact past 256).
    weights = backend.cast(mask, hidden.dtype)[:, None, :]
    summed = backend.cast(backend.matmul(weights, hidden)[:, 0, :], float32)  # [B, H]
    counts = backend.sum(backend.cast(mask, float32), axis=1)  # [B]
    counts = backend.maximum(counts, MIN_COUNT)
    return backend.div(summed, counts[:, None])


def cls_pool(backend: HipBackend, hidden: DeviceTensor) -> DeviceTensor:
    """The first token's hidden state ([CLS] in BERT's inputs) of each sequence."""
    return backend.cast(hidden[:, 0, :], float32)


def normalize(backend: HipBackend, pooled: DeviceTensor) -> DeviceTensor:
    """Each row scaled to unit L2 length (a zero row stays zero)."""
    return backend.l2_normalize(pooled, axis=-1)


__all__ = ["MIN_COUNT", "cls_pool", "mean_pool", "normalize"]
