"""matmul at model sizes on the GPU (nvidia platform, marked gpu): the batched bf16 product of
issue 14's benchmark (64 x 2048 x 2048 @ 2048 x 128) and grouped-query attention's scores
over projections viewed as heads (permuted, split and expanded views), with no copy (a copy
would fail the test). The float64
reference is computed for a few sampled batches, which catches batch-stride and fold errors
without minutes of host arithmetic.
"""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

from hip_core import Device
from hip_runtime import DeviceTensor, HipBackend

pytestmark = pytest.mark.parametrize(
    "platform", [pytest.param("nvidia", marks=pytest.mark.gpu)], indirect=True
)
BF16 = np.dtype(ml_dtypes.bfloat16)


@pytest.fixture(scope="module")
def backend(device: Device, program_cache: Path) -> Iterator[HipBackend]:
    with HipBackend(device) as backend:
        yield backend


@pytest.fixture
def no_copies(monkeypatch: pytest.MonkeyPatch) -> None:
    """`contiguous()` of a strided tensor fails the test: proof that nothing was copied."""
    original = DeviceTensor.contiguous

    def contiguous(tensor: DeviceTensor) -> DeviceTensor:
        assert tensor.is_contiguous, f"a strided {tensor.shape} tensor was copied"
        return original(tensor)

    monkeypatch.setattr(DeviceTensor, "contiguous", contiguous)


def check(got: np.ndarray, a: np.ndarray, b: np.ndarray) -> None:
    """bf16 results against float64: the output's rounding plus f32 accumulation over k."""
    wide_a, wide_b = a.astype(np.float64), b.astype(np.float64)
    magnitude = np.abs(wide_a) @ np.abs(wide_b)
    bound = (2.0**-7 + 2 * a.shape[-1] * 2.0**-24) * magnitude + 1e-30
    assert (np.abs(got.astype(np.float64) - wide_a @ wide_b) <= bound).all()


def test_batched_bf16_benchmark_shape(backend: HipBackend, no_copies: None) -> None:
    rng = np.random.default_rng(secrets.randbits(32))
    a = rng.standard_normal((64, 2048, 2048), np.float32).astype(BF16)
    b = rng.standard_normal((64, 2048, 128), np.float32).astype(BF16)
    got = backend.matmul(backend.from_numpy(a), backend.from_numpy(b)).to_numpy()
    for i in (0, 37, 63):
        rows = rng.integers(0, 2048, 64)
        check(got[i, rows], a[i, rows], b[i])


def test_grouped_query_attention_products(backend: HipBackend, no_copies: None) -> None:
    rng = np.random.default_rng(secrets.randbits(32))
    batch, heads, group, s, d = 2, 8, 4, 1024, 128
    q = rng.standard_normal((batch, s, heads * group, d), np.float32).astype(BF16)
    k = rng.standard_normal((batch, s, heads, d), np.float32).astype(BF16)
    # [B, S, H, D] projections viewed as [B, H, S, D] (permutes, no copy); k expanded over G.
    dq = backend.from_numpy(q).permute(0, 2, 1, 3).reshape(batch, heads, group, s, d)
    dk = backend.from_numpy(k).permute(0, 2, 1, 3).unsqueeze(2).expand(batch, heads, group, s, d)
    scores = backend.matmul(dq, dk.mT).to_numpy()
    assert scores.shape == (batch, heads, group, s, s)
    for bi, h, g in ((0, 0, 0), (1, 7, 3), (1, 2, 1)):
        rows = rng.integers(0, s, 32)
        check(scores[bi, h, g, rows], q[bi, rows, h * group + g], k[bi, :, h].T)
