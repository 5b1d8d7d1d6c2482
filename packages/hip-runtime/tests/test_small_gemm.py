"""Which products go to the small-product kernel (hip_runtime.libraries.small_gemm), and what it
writes.

test_ops_matmul.py and test_forward_graph.py run their tests through both engines; these
check the choice between them and the kernel's BLAS semantics at its edges. On the cpu
platform in CI; marked gpu, on nvidia through the device fixture.
"""

from __future__ import annotations

from typing import Any

import ml_dtypes
import numpy as np
import pytest

from hip_core import Device, hip_api
from hip_runtime import HipBackend
from hip_runtime.libraries.small_gemm import SMALL_GEMM_WORK, small_gemm_work


def spied(monkeypatch: pytest.MonkeyPatch, backend: HipBackend) -> list[str]:
    """The engine of each product `backend` queues from now on, by name."""
    engines: list[str] = []
    for name, engine in (("kernel", backend.small_gemm), ("blas", backend.blas)):
        gemm, prepare = engine.gemm, engine.prepare

        def counted(*args: Any, _name: str = name, _gemm: Any = gemm, **kw: Any) -> None:
            engines.append(_name)
            _gemm(*args, **kw)

        def prepared(*args: Any, _name: str = name, _prepare: Any = prepare, **kw: Any) -> Any:
            call = _prepare(*args, **kw)

            def counted_call(*addresses: int) -> None:
                engines.append(_name)
                call(*addresses)

            return None if call is None else counted_call

        monkeypatch.setattr(engine, "gemm", counted)
        monkeypatch.setattr(engine, "prepare", prepared)
    return engines


def test_the_default_follows_the_platforms_blas(device: Device) -> None:
    """64³ where the BLAS library chooses its kernel on the host (cuBLAS, rocBLAS), none on
    the cpu platform, whose GEMM is the runtime library's own loop."""
    expected = {"amd": 64**3, "nvidia": 64**3, "cpu": 0}[hip_api().platform]
    assert small_gemm_work(None) == expected
    with HipBackend(device) as backend:
        assert backend.small_gemm.work == expected


@pytest.mark.parametrize("bad", [-1, 1.5, True, "64"])
def test_a_bad_setting_is_refused(device: Device, bad: Any) -> None:
    with pytest.raises(ValueError, match="small_gemm must be a count of multiply-adds"):
        HipBackend(device, small_gemm=bad)


def test_products_up_to_the_limit_take_the_kernel(
    device: Device, monkeypatch: pytest.MonkeyPatch
) -> None:
    """64³ multiply-adds and fewer: the kernel, on the first (checked) call and on planned
    ones; one more row of the result, or a depth k beyond 128: BLAS. Both agree with numpy."""
    rng = np.random.default_rng(3)
    with HipBackend(device, small_gemm=SMALL_GEMM_WORK) as backend:
        engines = spied(monkeypatch, backend)
        for m, expected in ((64, "kernel"), (65, "blas")):
            a = rng.standard_normal((m, 64), np.float32)
            b = rng.standard_normal((64, 64), np.float32)
            x, w = backend.from_numpy(a), backend.from_numpy(b)
            for _ in range(3):
                y = backend.matmul(x, w)
            np.testing.assert_allclose(y.to_numpy(), a @ b, rtol=1e-5, atol=1e-4)
            assert engines == [expected] * 3
            engines.clear()
        batched = backend.from_numpy(rng.standard_normal((2, 8, 4), np.float32))
        backend.matmul(batched, backend.from_numpy(rng.standard_normal((4, 8), np.float32)))
        assert engines == ["kernel"]  # 2 · 8 · 4 · 8: the batch counts in the work
        a, b = rng.standard_normal((1, 129), np.float32), rng.standard_normal((129, 8), np.float32)
        y = backend.matmul(backend.from_numpy(a), backend.from_numpy(b))
        np.testing.assert_allclose(y.to_numpy(), a @ b, rtol=1e-5, atol=1e-4)
        assert engines == ["kernel", "blas"]  # small, but deeper than SMALL_GEMM_DEPTH


@pytest.mark.parametrize(
    "shape", [(17, 33, 47), (17, 100, 47), (9, 128, 33), (64, 1, 64), (1, 64, 64), (40, 64, 3)]
)
@pytest.mark.parametrize("transposes", [(False, False), (True, False), (False, True), (True, True)])
@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_tiles_edges_and_leading_dimensions(
    device: Device,
    monkeypatch: pytest.MonkeyPatch,
    shape: tuple[int, int, int],
    transposes: tuple[bool, bool],
    dtype: str,
) -> None:
    """m, k, n across several 16 x 16 tiles and 64-deep k steps, whole or not; each operand
    stored either way and read through a leading dimension wider than its rows (a slice of a
    wider tensor), the result into a slice too."""
    m, k, n = shape
    ta, tb = transposes
    rng = np.random.default_rng(5)
    stored_a = (k, m) if ta else (m, k)
    stored_b = (n, k) if tb else (k, n)
    wide_a = rng.standard_normal((stored_a[0], stored_a[1] + 3)).astype(ml_dtypes.bfloat16)
    wide_b = rng.standard_normal((stored_b[0], stored_b[1] + 5)).astype(ml_dtypes.bfloat16)
    a_host = wide_a[:, : stored_a[1]].astype(dtype)  # (bf16 values: exact in either dtype)
    b_host = wide_b[:, : stored_b[1]].astype(dtype)
    with HipBackend(device, small_gemm=2**62) as backend:
        engines = spied(monkeypatch, backend)
        a = backend.from_numpy(wide_a.astype(dtype))[:, : stored_a[1]]
        b = backend.from_numpy(wide_b.astype(dtype))[:, : stored_b[1]]
        out = backend.zeros((m, n + 2), dtype)[:, :n]
        backend.matmul(a, b, transpose_a=ta, transpose_b=tb, alpha=2.0, out=out)
        expected = 2.0 * (
            (a_host.T if ta else a_host).astype(np.float64)
            @ (b_host.T if tb else b_host).astype(np.float64)
        )
        tolerance = 2e-2 if dtype == "bfloat16" else 1e-5
        np.testing.assert_allclose(
            out.contiguous().to_numpy().astype(np.float64), expected, rtol=tolerance,
            atol=tolerance * max(1.0, np.abs(expected).max()),
        )  # fmt: skip
        assert engines == ["kernel"]


def test_a_result_taller_than_the_grid_goes_to_blas(
    device: Device, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A tile row a grid row: more than 65535 · 16 rows of C are BLAS's, whatever the limit."""
    rows = 65535 * 16 + 1
    with HipBackend(device, small_gemm=2**62) as backend:
        engines = spied(monkeypatch, backend)
        x = backend.full((rows, 1), 3.0, np.float32)
        y = backend.matmul(x, backend.full((1, 1), 0.5, np.float32))
        assert engines == ["blas"]
        assert (y.to_numpy() == 1.5).all()


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16"])
def test_beta_zero_never_reads_the_output(device: Device, dtype: str) -> None:
    """out= full of NaN is overwritten, as BLAS does with beta 0; a linear with a residual
    (beta 1; linear takes no f64) adds the product to what the output holds."""
    rng = np.random.default_rng(4)  # (k = 6: the kernel takes every product of this backend)
    a = rng.standard_normal((5, 6)).astype(dtype)
    b = rng.standard_normal((6, 7)).astype(dtype)
    with HipBackend(device, small_gemm=2**62) as backend:
        out = backend.from_numpy(np.full((5, 7), np.nan, dtype))
        backend.matmul(backend.from_numpy(a), backend.from_numpy(b), out=out)
        tolerance = 1e-2 if dtype == "float16" else 1e-5
        np.testing.assert_allclose(out.to_numpy(), a @ b, rtol=tolerance, atol=tolerance)
        if dtype == "float64":
            return
        residual = rng.standard_normal((5, 7)).astype(dtype)
        y = backend.linear(
            backend.from_numpy(a), backend.from_numpy(np.ascontiguousarray(b.T)),
            residual=backend.from_numpy(residual),
        )  # fmt: skip
        np.testing.assert_allclose(y.to_numpy(), a @ b + residual, rtol=tolerance, atol=tolerance)
