"""Choosing next tokens on the device: greedy, or temperature / top-k / top-p sampling.

`Sampler(backend, ...)(logits, step)` takes logits [B, vocab] (any float dtype) and returns the
chosen token ids, a device int64 [B], queued on the backend's stream (the host never sees the
logits). Greedy is `argmax`. Sampling, in transformers' order: logits / temperature in f32; the
`top_k` largest (`topk`), or the whole row sorted when only top_p is given; `softmax` over them
(so the kept probabilities are renormalized); then kernels/sampling.hip's `sample_rows`, one
block per row: the smallest prefix of the sorted probabilities whose mass reaches `top_p`
(at least one token), and a draw from it by inverse CDF with a uniform number from a
counter-based hash of (seed, step, row): the same seed gives the same tokens, with no generator
state on the device or the host.
"""

from __future__ import annotations

import math
import secrets
from typing import Any

import numpy as np

from hip_runtime.backend import HipBackend
from hip_runtime.tensors.dtypes import float32
from hip_runtime.tensors.tensor import DeviceTensor

_THREADS = 256  # HIPK_SAMPLE_THREADS
_KEEP_ALL = 2.0  # a top_p above any cumulative probability
_MAX_GRID = 4096  # blocks (the kernel strides over rows)


class Sampler:
    """Chooses tokens from logits rows on `backend` (see the module docstring).

    temperature 0 is greedy (top_k, top_p and seed are then unused); top_k a positive int or
    None; top_p in (0, 1] or None; seed an int or None (a random one). ValueError otherwise.
    """

    def __init__(
        self,
        backend: HipBackend,
        *,
        temperature: float = 0.0,
        top_k: int | None = None,
        top_p: float | None = None,
        seed: int | None = None,
    ) -> None:
        if isinstance(temperature, bool) or not isinstance(temperature, (int, float)):
            raise ValueError(f"temperature must be a number, not {temperature!r}")
        if not (math.isfinite(temperature) and temperature >= 0):
            raise ValueError(f"temperature must be finite and >= 0, not {temperature!r}")
        if top_k is not None and (
            isinstance(top_k, bool) or not isinstance(top_k, int) or top_k < 1
        ):
            raise ValueError(f"top_k must be a positive int or None, not {top_k!r}")
        if top_p is not None and (isinstance(top_p, bool) or not isinstance(top_p, (int, float))
                                  or not 0 < top_p <= 1):  # fmt: skip
            raise ValueError(f"top_p must be in (0, 1] or None, not {top_p!r}")
        if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int)):
            raise ValueError(f"seed must be an int or None, not {seed!r}")
        self.backend = backend
        self.temperature = float(temperature)
        self.top_k, self.top_p = top_k, top_p
        self.seed = (secrets.randbits(63) if seed is None else seed) & (2**63 - 1)

    @property
    def greedy(self) -> bool:
        return self.temperature == 0.0

    def __call__(self, logits: DeviceTensor, step: int = 0) -> DeviceTensor:
        """Token ids int64 [B] chosen from logits [B, vocab]; `step` picks the random numbers
        (a generation's steps 0, 1, ... each get their own). Queued on the backend's stream."""
        backend = self.backend
        if not isinstance(logits, DeviceTensor) or logits.ndim != 2:
            raise ValueError(f"logits must be a DeviceTensor [batch, vocab], not {logits!r}")
        if self.greedy:
            return backend.argmax(logits, axis=-1)
        rows, vocab = logits.shape
        scaled = backend.cast(logits, float32) if logits.dtype != float32 else logits
        scaled = backend.scale(scaled, 1.0 / self.temperature)
        ids: DeviceTensor | None = None
        if self.top_k is not None and self.top_k < vocab:
            scaled, ids = backend.topk(scaled, self.top_k)
        elif self.top_p is not None and self.top_p < 1:
            scaled, ids = backend.topk(scaled, vocab)  # the whole row, largest first
        probs = backend.softmax(scaled, axis=-1)
        chosen = backend.empty((rows,), np.int64)
        top_p = _KEEP_ALL if self.top_p is None or self.top_p >= 1 else float(self.top_p)
        kernel = backend.kernels.get("sampling.hip", "sample_rows")
        if rows:
            kernel.launch(
                min(rows, _MAX_GRID), _THREADS, probs, ids, chosen, rows, probs.shape[1],
                top_p, self.seed, int(step), stream=backend.stream,
            )  # fmt: skip
        return chosen


def sample(
    backend: HipBackend, logits: DeviceTensor, step: int = 0, **options: Any
) -> DeviceTensor:
    """`Sampler(backend, **options)(logits, step)`: one-off sampling of logits [B, vocab]."""
    return Sampler(backend, **options)(logits, step)


__all__ = ["Sampler", "sample"]
