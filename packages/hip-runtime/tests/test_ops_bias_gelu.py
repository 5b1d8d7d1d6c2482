"""gelu(x, bias=b) by kernels/bias_gelu.hip (two 16-byte vectors a thread) where the layout
allows it, binary.hip's rows path otherwise: which kernel takes a call, and both against
hip_runtime.testing's float64 GELU — a last block partly empty, rows of one vector, in place,
the tanh form, views the vector kernel cannot read."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from hip_core import Device
from hip_runtime import HipBackend, testing


@pytest.fixture(scope="module")
def backend(device: Device, program_cache: Path) -> Iterator[HipBackend]:
    with HipBackend(device) as backend:
        yield backend


def reference(x: np.ndarray, bias: np.ndarray, approximate: str) -> np.ndarray:
    summed = x.astype(np.float64) + bias.astype(np.float64)
    return testing.gelu(summed, approximate=approximate)


@pytest.mark.parametrize("approximate", ["none", "tanh"])
@pytest.mark.parametrize("dtype", ["f32", "f16", "bf16"])
@pytest.mark.parametrize("rows", [1, 5, 700])  # 700 x 48 bf16: 4200 vectors, 9 blocks
def test_aligned_rows_take_the_vector_kernel(
    backend: HipBackend, kernel_launches: list[str], approximate: str, dtype: str, rows: int
) -> None:
    lanes = 16 // testing.DTYPES[dtype].itemsize
    cols = lanes if rows == 1 else 6 * lanes  # one vector; rows of six
    rng = np.random.default_rng(rows)
    x = testing.random(rng, (rows, cols), dtype, scale=3.0)
    bias = testing.random(rng, cols, dtype)
    dx, db = backend.from_numpy(x), backend.from_numpy(bias)
    got = backend.gelu(dx, bias=db, approximate=approximate).to_numpy()
    testing.assert_close(got, reference(x, bias, approximate), dtype)
    backend.gelu(dx, bias=db, approximate=approximate, out=dx)  # in place
    np.testing.assert_array_equal(dx.to_numpy().view(np.uint8), got.view(np.uint8))
    assert kernel_launches == [f"bias_gelu_{dtype}"] * 2


@pytest.mark.parametrize("dtype", ["f32", "bf16"])
def test_other_layouts_take_the_rows_path(
    backend: HipBackend, kernel_launches: list[str], dtype: str
) -> None:
    """Rows not of whole vectors, a view starting off 16 bytes, a strided x or out=, f64:
    binary.hip."""
    rng = np.random.default_rng(3)
    wide = testing.random(rng, (9, 40), dtype, scale=3.0)
    bias = testing.random(rng, 36, dtype)
    dwide, db = backend.from_numpy(wide), backend.from_numpy(bias)
    odd, odd_bias = testing.random(rng, (9, 37), dtype), testing.random(rng, 37, dtype)
    unaligned = dwide.reshape(-1)[1:325].reshape(9, 36)  # 4 or 2 bytes past 16
    cases = (
        (backend.from_numpy(odd), odd, backend.from_numpy(odd_bias), odd_bias),  # 37 columns
        (dwide[:, 4:40], wide[:, 4:40], db, bias),  # rows 40 apart: not contiguous
        (unaligned, wide.reshape(-1)[1:325].reshape(9, 36), db, bias),
    )
    for dx, x, d_bias, host_bias in cases:
        got = backend.gelu(dx, bias=d_bias).to_numpy()
        testing.assert_close(got, reference(x, host_bias, "none"), dtype)
    aligned = backend.from_numpy(wide[:, :8].copy())  # x aligned, out rows 40 apart
    into = dwide[:, 8:16] if dtype == "bf16" else dwide[:, 4:12]  # (16 bytes in)
    backend.gelu(aligned, bias=backend.from_numpy(bias[:8]), out=into)
    got_into = dwide.to_numpy()[:, 8:16] if dtype == "bf16" else dwide.to_numpy()[:, 4:12]
    testing.assert_close(got_into, reference(wide[:, :8], bias[:8], "none"), dtype)
    assert set(kernel_launches) <= {f"binary_{dtype}", f"binary_any_{dtype}"}
    assert len(kernel_launches) == len(cases) + 1
    x64, b64 = rng.standard_normal((4, 8)), rng.standard_normal(8)  # f64: no vector kernel
    got64 = backend.gelu(backend.from_numpy(x64), bias=backend.from_numpy(b64)).to_numpy()
    expected = reference(x64, b64, "none")
    np.testing.assert_allclose(got64, expected, rtol=1e-12, atol=1e-12)
    assert not any(name.startswith("bias_gelu") for name in kernel_launches)


def test_bad_operands_are_refused_by_the_checked_path(backend: HipBackend) -> None:
    x = backend.from_numpy(np.ones((4, 8), np.float32))
    with pytest.raises(ValueError, match="dtype"):
        backend.gelu(x, bias=backend.from_numpy(np.ones(8, np.float16)))
    closed = backend.from_numpy(np.ones((4, 8), np.float32))
    closed.buffer.close()
    with pytest.raises(ValueError, match="closed"):
        backend.gelu(closed, bias=backend.from_numpy(np.ones(8, np.float32)))
    with pytest.raises(ValueError, match="out"):
        backend.gelu(
            x,
            bias=backend.from_numpy(np.ones(8, np.float32)),
            out=backend.empty((4, 9), np.float32),
        )
