"""HipBackend's contract beyond numerics: ValueError before anything is launched, `out=`,
in-place ops, everything on the backend's stream (and the BLAS handle bound to it), no
device-wide synchronize, and a close that leaves tensors usable.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from hip_core import Device, Kernel, hip_api
from hip_runtime import Blas, DeviceTensor, HipBackend


@pytest.fixture(scope="module")
def backend(device: Device, program_cache: Path) -> Iterator[HipBackend]:
    with HipBackend(device, preload=True) as backend:
        yield backend


@pytest.fixture
def launches(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, Any]]:
    """Every kernel launch and gemm from now on, as (name, stream); both still run."""
    seen: list[tuple[str, Any]] = []
    launch, gemm = Kernel.launch, Blas.gemm

    def record_launch(self: Kernel, *args: Any, **kwargs: Any) -> None:
        seen.append((self.name, kwargs.get("stream")))
        launch(self, *args, **kwargs)

    def record_gemm(self: Blas, *args: Any, **kwargs: Any) -> None:
        seen.append(("gemm", self.stream))
        gemm(self, *args, **kwargs)

    monkeypatch.setattr(Kernel, "launch", record_launch)
    monkeypatch.setattr(Blas, "gemm", record_gemm)
    return seen


def f32(backend: HipBackend, *shape: int) -> DeviceTensor:
    return backend.from_numpy(np.ones(shape, np.float32))


BAD_CALLS: dict[str, Callable[[HipBackend], Any]] = {
    "add shapes": lambda b: b.add(f32(b, 2, 3), f32(b, 3, 2)),
    "add dtypes": lambda b: b.add(f32(b, 4), b.from_numpy(np.ones(4, np.float16))),
    "add host array": lambda b: b.add(f32(b, 4), np.ones(4, np.float32)),
    "int tensor": lambda b: b.silu(b.from_numpy(np.ones(4, np.int32))),
    "out shape": lambda b: b.scale(f32(b, 4), 2.0, out=f32(b, 5)),
    "out dtype": lambda b: b.silu(f32(b, 4), out=b.empty(4, np.float16)),
    "bias shape": lambda b: b.add_row_bias(f32(b, 2, 3), f32(b, 2)),
    "layernorm weight": lambda b: b.layernorm(f32(b, 2, 3), f32(b, 4)),
    "layernorm bias dtype": lambda b: b.layernorm(
        f32(b, 2, 3), f32(b, 3), b.from_numpy(np.ones(3, np.float16))
    ),
    "rmsnorm 0-d": lambda b: b.rmsnorm(b.empty(())),
    "softmax causal": lambda b: b.softmax(f32(b, 2, 3), causal_rows=-1),
    "gelu kind": lambda b: b.gelu(f32(b, 3), approximate="sigmoid"),
    "matmul inner": lambda b: b.matmul(f32(b, 2, 3), f32(b, 4, 2)),
    "matmul transposed inner": lambda b: b.matmul(f32(b, 2, 3), f32(b, 3, 2), transpose_b=True),
    "matmul batch": lambda b: b.matmul(f32(b, 2, 2, 3), f32(b, 3, 3, 2)),
    "matmul 1-d inner": lambda b: b.matmul(f32(b, 3), f32(b, 4, 2)),  # a vector is [1, k]
    "matmul out aliases": lambda b: _aliased_matmul(b),
    "linear weight": lambda b: b.linear(f32(b, 2, 3), f32(b, 4, 2)),
    "linear bias": lambda b: b.linear(f32(b, 2, 3), f32(b, 4, 3), f32(b, 3)),
    "mlp down": lambda b: b.mlp_swiglu(f32(b, 2, 3), f32(b, 5, 3), f32(b, 5, 3), f32(b, 3, 4)),
    "mlp up": lambda b: b.mlp_swiglu(f32(b, 2, 3), f32(b, 5, 3), f32(b, 4, 3), f32(b, 3, 5)),
    "rope tables": lambda b: b.rope(f32(b, 2, 1, 4), f32(b, 8, 3), f32(b, 8, 3)),
    "rope rot_dim": lambda b: b.rope(f32(b, 2, 1, 4), f32(b, 8, 2), f32(b, 8, 2), rot_dim=3),
    "rope positions": lambda b: b.rope(
        f32(b, 2, 1, 4), f32(b, 8, 2), f32(b, 8, 2), b.from_numpy(np.zeros(2, np.int64))
    ),
    "rope too few positions": lambda b: b.rope(f32(b, 9, 1, 4), f32(b, 8, 2), f32(b, 8, 2)),
    "embedding ids": lambda b: b.embedding(f32(b, 3), f32(b, 10, 4)),
    "cast target": lambda b: b.cast(f32(b, 3), np.uint16),
    "cast out aliases": lambda b: _aliased_cast(b),
    "out overlaps partly": lambda b: _shifted_out(b),
    "out is the bias": lambda b: _out_is_bias(b),
}


def _shifted_out(b: HipBackend) -> DeviceTensor:
    x = f32(b, 4, 3)
    return b.add(x[0:3], x[0:3], out=x[1:4])  # rows 1-3 written while rows 0-2 are read


def _out_is_bias(b: HipBackend) -> DeviceTensor:
    x = f32(b, 2, 3)
    return b.layernorm(x, x[0], x[1], out=x)


def _aliased_matmul(b: HipBackend) -> DeviceTensor:
    a = f32(b, 3, 3)
    return b.matmul(a, f32(b, 3, 3), out=a)


def _aliased_cast(b: HipBackend) -> DeviceTensor:
    x = f32(b, 4)
    return b.cast(x, np.float32, out=x)


@pytest.mark.parametrize("call", sorted(BAD_CALLS))
def test_mismatches_raise_value_error_before_any_launch(
    backend: HipBackend, launches: list[tuple[str, Any]], call: str
) -> None:
    with pytest.raises(ValueError):
        BAD_CALLS[call](backend)
    assert launches == []


def test_every_op_runs_on_the_backends_stream(
    backend: HipBackend, launches: list[tuple[str, Any]]
) -> None:
    x, w = f32(backend, 4, 8), f32(backend, 8)
    backend.layernorm(x, w, w)
    backend.rmsnorm(x, w)
    backend.softmax(x)
    backend.swiglu(x, x)
    backend.add(x, x)
    backend.cast(x, np.float16)
    backend.linear(x, f32(backend, 6, 8), f32(backend, 6))
    backend.mlp_swiglu(x, f32(backend, 5, 8), f32(backend, 5, 8), f32(backend, 8, 5))
    assert len(launches) >= 12
    assert all(stream is backend.stream for _, stream in launches), launches
    api = hip_api()
    bound = api.ffi.new("hipStream_t*")
    assert api.hipblasGetStream(backend.blas.handle, bound) == 0
    assert bound[0] == backend.stream.handle and backend.stream.handle != api.ffi.NULL


def test_no_device_wide_synchronize(
    backend: HipBackend, harness: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    def forbidden(*args: Any) -> None:
        raise AssertionError("device-wide synchronize")

    monkeypatch.setattr(Device, "synchronize", forbidden)
    x = harness.random((5, 300), "bf16")
    y = backend.rmsnorm(backend.from_numpy(x))
    z = backend.matmul(y, y, transpose_b=True)
    del y  # returned to the pool in stream order, without waiting
    assert z.to_numpy().shape == (5, 5)
    assert z.stream is backend.stream


@pytest.mark.parametrize("op", ["layernorm", "rmsnorm", "softmax", "silu", "scale", "add"])
def test_out_may_be_the_input(backend: HipBackend, harness: Any, op: str) -> None:
    x = harness.random((3, 700), "f32")
    expected = _call(backend, op, backend.from_numpy(x)).to_numpy()
    inplace = backend.from_numpy(x)
    result = _call(backend, op, inplace, out=inplace)
    assert result is inplace
    np.testing.assert_array_equal(inplace.to_numpy(), expected)


def _call(backend: HipBackend, op: str, x: DeviceTensor, **kwargs: Any) -> DeviceTensor:
    if op == "scale":
        return backend.scale(x, 1.5, **kwargs)
    if op == "add":
        return backend.add(x, x, **kwargs)
    return getattr(backend, op)(x, **kwargs)  # type: ignore[no-any-return]


def test_out_on_views_and_zero_sized_tensors(backend: HipBackend, harness: Any) -> None:
    x = harness.random((6, 10), "f16")
    parent = backend.zeros((6, 10), np.float16)
    backend.scale(backend.from_numpy(x[2:4]), 2.0, out=parent[2:4])  # rows 2-3 only
    got = parent.to_numpy().astype(np.float64)
    np.testing.assert_array_equal(got[2:4], 2.0 * x[2:4].astype(np.float64))
    assert (got[:2] == 0).all() and (got[4:] == 0).all()
    empty = backend.empty((0, 10), np.float16)
    assert backend.layernorm(empty).shape == (0, 10)
    assert backend.matmul(backend.empty((0, 3)), backend.empty((3, 4))).to_numpy().shape == (0, 4)


def test_matmul_with_empty_inner_dimension_is_zero(backend: HipBackend) -> None:
    got = backend.matmul(backend.empty((3, 0)), backend.empty((0, 2))).to_numpy()
    np.testing.assert_array_equal(got, np.zeros((3, 2), np.float32))


def test_close_keeps_tensors_and_refuses_new_work(device: Device, program_cache: Path) -> None:
    backend = HipBackend(device)
    y = backend.scale(backend.from_numpy(np.arange(4, dtype=np.float32)), 2.0)
    backend.close()
    backend.close()  # twice is harmless
    assert backend.closed
    np.testing.assert_array_equal(y.to_numpy(), [0, 2, 4, 6])
    with pytest.raises(ValueError, match="closed"):
        backend.empty(3)
    with pytest.raises(ValueError, match="closed"):
        backend.matmul(y.reshape(2, 2), y.reshape(2, 2))


def test_device_argument(device: Device, program_cache: Path) -> None:
    with HipBackend(device.ordinal) as backend:
        assert backend.device == device
        assert "HipBackend open" in repr(backend)
    with pytest.raises(ValueError):
        HipBackend("gpu0")  # type: ignore[arg-type]
