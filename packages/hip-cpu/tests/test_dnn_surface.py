"""The DNN surface (MIOpen's names): present on the cpu platform, its descriptors round-trip,
its operations run on the host in stream order and equal numpy; on amd, a missing libMIOpen
leaves exactly this surface unavailable, saying what was tried."""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np
import pytest

import hip_ffi
from hip_ffi import dnn_constants as dc
from hip_ffi import surface
from hip_ffi.platforms.amd import loader as amd_loader


@pytest.fixture(scope="module")
def cpu() -> Any:
    return hip_ffi.load("cpu")


@pytest.fixture(scope="module")
def handle(cpu: Any) -> Any:
    out = cpu.ffi.new("miopenHandle_t*")
    assert cpu.miopenCreate(out) == 0
    yield out[0]
    assert cpu.miopenDestroy(out[0]) == 0


def _ints(cpu: Any, *values: int) -> Any:
    return cpu.ffi.new("int[]", list(values))


def _tensor(cpu: Any, dims: tuple[int, ...], strides: tuple[int, ...] | None, dtype: int) -> Any:
    out = cpu.ffi.new("miopenTensorDescriptor_t*")
    assert cpu.miopenCreateTensorDescriptor(out) == 0
    steps = cpu.ffi.NULL if strides is None else _ints(cpu, *strides)
    assert cpu.miopenSetTensorDescriptor(out[0], dtype, len(dims), _ints(cpu, *dims), steps) == 0
    return out[0]


def _conv(cpu: Any, pad: tuple[int, int], stride: tuple[int, int], dil: tuple[int, int],
          groups: int) -> Any:  # fmt: skip
    out = cpu.ffi.new("miopenConvolutionDescriptor_t*")
    assert cpu.miopenCreateConvolutionDescriptor(out) == 0
    status = cpu.miopenInitConvolutionNdDescriptor(
        out[0], 2, _ints(cpu, *pad), _ints(cpu, *stride), _ints(cpu, *dil), dc.MIOPEN_CONVOLUTION
    )
    assert status == 0 and cpu.miopenSetConvolutionGroupCount(out[0], groups) == 0
    return out[0]


def test_the_cpu_platform_has_the_whole_surface(cpu: Any) -> None:
    assert all(cpu.has(name) for name in surface.MIOPEN)
    assert cpu.ffi.string(cpu.miopenGetErrorString(6)) == b"miopenStatusNotImplemented"
    assert cpu.ffi.string(cpu.miopenGetErrorString(99)) == b"Unknown error status"


def test_descriptors_round_trip(cpu: Any) -> None:
    ffi = cpu.ffi
    t = _tensor(cpu, (2, 3, 4, 5), None, dc.MIOPEN_BFLOAT16)
    size, dtype = ffi.new("int*"), ffi.new("int*")
    dims, strides = ffi.new("int[4]"), ffi.new("int[4]")
    assert cpu.miopenGetTensorDescriptorSize(t, size) == 0 and size[0] == 4
    assert cpu.miopenGetTensorDescriptor(t, dtype, dims, strides) == 0
    assert (dtype[0], list(dims), list(strides)) == (dc.MIOPEN_BFLOAT16, [2, 3, 4, 5],
                                                     [60, 20, 5, 1])  # fmt: skip
    c = _conv(cpu, (1, 2), (3, 4), (1, 2), 3)
    n, mode, groups = ffi.new("int*"), ffi.new("int*"), ffi.new("int*")
    pads, steps, dils = ffi.new("int[2]"), ffi.new("int[2]"), ffi.new("int[2]")
    assert cpu.miopenGetConvolutionNdDescriptor(c, 2, n, pads, steps, dils, mode) == 0
    assert (n[0], list(pads), list(steps), list(dils), mode[0]) == (2, [1, 2], [3, 4], [1, 2], 0)
    assert cpu.miopenGetConvolutionGroupCount(c, groups) == 0 and groups[0] == 3
    p = ffi.new("miopenPoolingDescriptor_t*")
    assert cpu.miopenCreatePoolingDescriptor(p) == 0
    window = _ints(cpu, 3, 2)
    assert cpu.miopenSetNdPoolingDescriptor(p[0], 2, 2, window, _ints(cpu, 1, 0), window) == 0
    assert cpu.miopenSetPoolingIndexType(p[0], dc.MIOPEN_INDEX_UINT32) == 0
    assert cpu.miopenSetPoolingWorkSpaceIndexMode(p[0], 1) == 0
    wins = ffi.new("int[2]")
    assert cpu.miopenGetNdPoolingDescriptor(p[0], 2, mode, n, wins, pads, steps) == 0
    assert (mode[0], n[0], list(wins), list(pads)) == (2, 2, [3, 2], [1, 0])
    for destroy, desc in (("Tensor", t), ("Convolution", c), ("Pooling", p[0])):
        assert getattr(cpu, f"miopenDestroy{destroy}Descriptor")(desc) == 0
        assert getattr(cpu, f"miopenDestroy{destroy}Descriptor")(desc) == dc.BAD_PARM


def test_bad_arguments_are_bad_parm(cpu: Any, handle: Any) -> None:
    ffi = cpu.ffi
    assert cpu.miopenCreateTensorDescriptor(ffi.NULL) == dc.BAD_PARM
    t = _tensor(cpu, (1, 1, 2, 2), None, dc.MIOPEN_FLOAT)
    dims = _ints(cpu, 1, 1, 2, 2)
    assert cpu.miopenSetTensorDescriptor(t, 4, 4, dims, ffi.NULL) == dc.BAD_PARM  # no such type
    assert cpu.miopenSetTensorDescriptor(t, dc.MIOPEN_FLOAT, 0, dims, ffi.NULL) == dc.BAD_PARM
    bogus = ffi.cast("miopenTensorDescriptor_t", 0x12340)
    assert cpu.miopenGetTensorDescriptorSize(bogus, ffi.new("int*")) == dc.BAD_PARM
    assert cpu.miopenSetStream(ffi.cast("miopenHandle_t", 0x12340), ffi.NULL) == dc.BAD_PARM
    c = _conv(cpu, (0, 0), (1, 1), (1, 1), 1)
    size = ffi.new("size_t*")
    # A 2x2 input cannot give a 2x2 output through a 2x2 window without padding.
    w = _tensor(cpu, (1, 1, 2, 2), None, dc.MIOPEN_FLOAT)
    assert cpu.miopenConvolutionForwardGetWorkSpaceSize(handle, w, t, c, t, size) == dc.BAD_PARM


def _run_conv(cpu: Any, handle: Any, x: np.ndarray, w: np.ndarray, y: np.ndarray,
              nhwc: bool, c: Any, backward: bool) -> None:  # fmt: skip
    """y = conv(x, w) (or x = the data gradient of y) through the surface; arrays NCHW-shaped,
    stored NHWC when nhwc (given to the library by strides)."""
    ffi = cpu.ffi

    def desc(a: np.ndarray) -> tuple[Any, Any]:
        stored = np.ascontiguousarray(a.transpose(0, 2, 3, 1)) if nhwc else a
        _, ch, h, wd = a.shape
        strides = (h * wd * ch, 1, wd * ch, ch) if nhwc else None
        return _tensor(cpu, a.shape, strides, dc.MIOPEN_FLOAT), stored

    (xd, xs), (wd, ws), (yd, ys) = desc(x), desc(w), desc(y)
    perf, count = ffi.new("miopenConvAlgoPerf_t[1]"), ffi.new("int*")
    alpha, beta = ffi.new("float*", 1.0), ffi.new("float*", 0.0)
    px, pw, py = ffi.from_buffer(xs), ffi.from_buffer(ws), ffi.from_buffer(ys)
    if backward:
        assert cpu.miopenFindConvolutionBackwardDataAlgorithm(
            handle, yd, py, wd, pw, c, xd, px, 1, count, perf, ffi.NULL, 0, False
        ) == 0 and count[0] == 1  # fmt: skip
        assert cpu.miopenConvolutionBackwardData(
            handle, alpha, yd, py, wd, pw, c, perf[0].bwd_data_algo, beta, xd, px, ffi.NULL, 0
        ) == 0  # fmt: skip
    else:
        assert cpu.miopenFindConvolutionForwardAlgorithm(
            handle, xd, px, wd, pw, c, yd, py, 1, count, perf, ffi.NULL, 0, False
        ) == 0 and count[0] == 1  # fmt: skip
        assert cpu.miopenConvolutionForward(
            handle, alpha, xd, px, wd, pw, c, perf[0].fwd_algo, beta, yd, py, ffi.NULL, 0
        ) == 0  # fmt: skip
    assert cpu.hipDeviceSynchronize() == 0  # queued on the null stream
    out = xs if backward else ys
    (x if backward else y)[...] = out.transpose(0, 3, 1, 2) if nhwc else out


@pytest.mark.parametrize("nhwc", [False, True], ids=["nchw", "nhwc"])
def test_a_small_convolution_equals_numpy(cpu: Any, handle: Any, nhwc: bool) -> None:
    rng = np.random.default_rng(5)
    x = rng.standard_normal((2, 4, 6, 5)).astype(np.float32)
    w = rng.standard_normal((6, 2, 3, 2)).astype(np.float32)
    y = np.zeros((2, 6, 3, 3), np.float32)  # stride (2, 1), padding (1, 0), dilation (1, 2)
    _run_conv(cpu, handle, x, w, y, nhwc, _conv(cpu, (1, 0), (2, 1), (1, 2), 2), backward=False)
    padded = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (1, 1), (0, 0)))
    want = np.zeros(y.shape)
    for k, p, q in itertools.product(range(6), range(3), range(3)):
        g = k // 3
        patch = padded[:, 2 * g : 2 * g + 2, 2 * p : 2 * p + 3, q : q + 3 : 2]
        want[:, k, p, q] = (patch * w[k]).sum(axis=(1, 2, 3))
    np.testing.assert_allclose(y, want, rtol=1e-5, atol=1e-5)
    # Backward data: <conv(x), dy> == <x, dx(dy)> for any dy (the transpose's definition).
    dy = rng.standard_normal(y.shape).astype(np.float32)
    dx = np.zeros_like(x)
    _run_conv(cpu, handle, dx, w, dy, nhwc, _conv(cpu, (1, 0), (2, 1), (1, 2), 2), backward=True)
    assert np.isclose((want * dy).sum(), (x.astype(np.float64) * dx).sum(), rtol=1e-4)


def test_pooling_equals_numpy(cpu: Any, handle: Any) -> None:
    ffi = cpu.ffi
    x = np.arange(2 * 3 * 5 * 4, dtype=np.float32).reshape(2, 3, 5, 4) % 7
    pool = ffi.new("miopenPoolingDescriptor_t*")
    assert cpu.miopenCreatePoolingDescriptor(pool) == 0
    xd = _tensor(cpu, x.shape, None, dc.MIOPEN_FLOAT)
    alpha, beta = ffi.new("float*", 1.0), ffi.new("float*", 0.0)
    padded = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (1, 1), (1, 1)), constant_values=np.nan)
    for mode in (dc.MIOPEN_POOLING_MAX, dc.MIOPEN_POOLING_AVERAGE,
                 dc.MIOPEN_POOLING_AVERAGE_INCLUSIVE):  # fmt: skip
        window = _ints(cpu, 2, 2)
        assert cpu.miopenSetNdPoolingDescriptor(pool[0], mode, 2, window, _ints(cpu, 1, 1),
                                                window) == 0  # fmt: skip
        y = np.zeros((2, 3, 3, 3), np.float32)
        yd = _tensor(cpu, y.shape, None, dc.MIOPEN_FLOAT)
        size = ffi.new("size_t*", 1)
        assert cpu.miopenPoolingGetWorkSpaceSizeV2(pool[0], yd, size) == 0 and size[0] == 0
        assert cpu.miopenPoolingForward(handle, pool[0], alpha, xd, ffi.from_buffer(x), beta, yd,
                                        ffi.from_buffer(y), False, ffi.NULL, 0) == 0  # fmt: skip
        assert cpu.hipDeviceSynchronize() == 0
        windows = np.stack([padded[:, :, i::2, j::2][:, :, :3, :3] for i in (0, 1) for j in (0, 1)])
        if mode == dc.MIOPEN_POOLING_MAX:
            want = np.nanmax(windows, axis=0)
        elif mode == dc.MIOPEN_POOLING_AVERAGE:
            want = np.nanmean(windows, axis=0)
        else:
            want = np.nansum(windows, axis=0) / 4
        np.testing.assert_allclose(y, want, rtol=1e-6)


def test_amd_without_miopen_reports_what_was_tried(
    amd: Any, monkeypatch: pytest.MonkeyPatch, tmp_path: Any
) -> None:
    missing = tmp_path / "libMIOpen.so.1"
    monkeypatch.setenv("HIP_FFI_MIOPEN_PATH", str(missing))
    api = amd_loader.load()
    reasons = api.unavailable()
    assert set(surface.MIOPEN) <= set(reasons)
    reason = reasons["miopenConvolutionForward"]
    assert "no MIOpen library" in reason and str(missing) in reason
    assert "HIP_FFI_MIOPEN_PATH" in reason and "miopen" not in api.libraries
    assert api.has("hipMalloc")


def test_miopen_is_searched_by_soname_rule() -> None:
    names = amd_loader.MIOPEN.names
    assert names[0] == "libMIOpen.so.16" and "libMIOpen.so.1" in names
    assert names[-1] == "libMIOpen.so" and amd_loader.MIOPEN.env == "HIP_FFI_MIOPEN_PATH"
