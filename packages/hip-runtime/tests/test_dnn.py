"""hip_runtime.libraries.dnn: convolutions, transposed convolutions and pooling through the
platform's DNN library, against float64 numpy references written out loop by loop here (independent
of the cpu platform's own arithmetic). On the cpu platform in CI; marked gpu, on nvidia (cuDNN).
"""

from __future__ import annotations

import itertools
from typing import Any

import ml_dtypes
import numpy as np
import pytest

from hip_core import Device
from hip_runtime import HipBackend
from hip_runtime.libraries.dnn import Dnn, DnnError, backend_dnn

F32, F16, BF16 = np.dtype(np.float32), np.dtype(np.float16), np.dtype(ml_dtypes.bfloat16)
#: Relative tolerance per type, against the largest reference magnitude: the output's own
#: rounding plus f32 accumulation (cuDNN with FMA math for f32: no TF32).
TOLERANCE = {F32: 1e-4, F16: 4e-3, BF16: 2e-2}  # (f32: room for Winograd/FFT algorithms)


@pytest.fixture(scope="module")
def backend(device: Device) -> Any:
    with HipBackend(device) as made:
        yield made


def _dnn(backend: HipBackend) -> Dnn:
    dnn = backend._dnn()
    if dnn is None:  # every platform of these tests has a DNN library: say why it is missing
        from hip_core import hip_api

        missing = hip_api().unavailable().get("miopenCreate")
        assert missing is None, missing
        Dnn(backend.stream, backend.pool)  # raises the library's own error
    assert dnn is not None
    return dnn


def _rounded(rng: np.random.Generator, shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
    return rng.standard_normal(shape).astype(dtype)


def _nhwc(a: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(a.transpose(0, 2, 3, 1))


def _nchw(a: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(a.transpose(0, 3, 1, 2))


def conv_reference(x: np.ndarray, w: np.ndarray, stride, pad, dil, groups) -> np.ndarray:  # type: ignore[no-untyped-def]
    """y[n, k, p, q] = Σ x[n, g·Cg + c, p·sh - ph + r·dh, q·sw - pw + s·dw] · w[k, c, r, s]."""
    x, w = x.astype(np.float64), w.astype(np.float64)
    n, _, h, wd = x.shape
    k, cg, r, s = w.shape
    p = (h + 2 * pad[0] - dil[0] * (r - 1) - 1) // stride[0] + 1
    q = (wd + 2 * pad[1] - dil[1] * (s - 1) - 1) // stride[1] + 1
    y = np.zeros((n, k, p, q))
    kg = k // groups
    for ko, i, j, pi, qi in itertools.product(range(k), range(r), range(s), range(p), range(q)):
        hi, wi = pi * stride[0] - pad[0] + i * dil[0], qi * stride[1] - pad[1] + j * dil[1]
        if 0 <= hi < h and 0 <= wi < wd:
            g = ko // kg
            y[:, ko, pi, qi] += x[:, g * cg : (g + 1) * cg, hi, wi] @ w[ko, :, i, j]
    return y


def transpose_reference(
    dy: np.ndarray, w: np.ndarray, stride, pad, dil, groups, size
) -> np.ndarray:  # type: ignore[no-untyped-def]
    """dx: each dy[n, k, p, q] · w[k, c, r, s] added at the input position it was read from."""
    dy, w = dy.astype(np.float64), w.astype(np.float64)
    n, k, p, q = dy.shape
    _, cg, r, s = w.shape
    h, wd = size
    dx = np.zeros((n, cg * groups, h, wd))
    kg = k // groups
    for ko, i, j, pi, qi in itertools.product(range(k), range(r), range(s), range(p), range(q)):
        hi, wi = pi * stride[0] - pad[0] + i * dil[0], qi * stride[1] - pad[1] + j * dil[1]
        if 0 <= hi < h and 0 <= wi < wd:
            g = ko // kg
            dx[:, g * cg : (g + 1) * cg, hi, wi] += np.outer(dy[:, ko, pi, qi], w[ko, :, i, j])
    return dx


def pool_reference(x: np.ndarray, mode: str, window, stride, pad) -> np.ndarray:  # type: ignore[no-untyped-def]
    x = x.astype(np.float64)
    n, c, h, w = x.shape
    p = (h + 2 * pad[0] - window[0]) // stride[0] + 1
    q = (w + 2 * pad[1] - window[1]) // stride[1] + 1
    y = np.zeros((n, c, p, q))
    for pi, qi in itertools.product(range(p), range(q)):
        h0, w0 = pi * stride[0] - pad[0], qi * stride[1] - pad[1]
        inside = x[:, :, max(h0, 0) : h0 + window[0], max(w0, 0) : w0 + window[1]]
        if mode == "max":
            y[:, :, pi, qi] = inside.max(axis=(2, 3))
        else:
            count = window[0] * window[1] if mode == "avg_include_pad" else inside[0, 0].size
            y[:, :, pi, qi] = inside.sum(axis=(2, 3)) / count
    return y


def _close(got: np.ndarray, want: np.ndarray, dtype: np.dtype) -> None:
    scale = max(float(np.abs(want).max()), 1.0)
    err = float(np.abs(got.astype(np.float64) - want).max())
    assert err <= TOLERANCE[dtype] * scale, f"max error {err:.3g} (scale {scale:.3g}) for {dtype}"


CONV_CASES = [
    # (N, C, H, W, K, R, S, stride, pad, dilation, groups)
    pytest.param((2, 4, 9, 8, 6, 3, 3, (2, 1), (1, 2), (1, 2), 2), id="groups2-dilated"),
    pytest.param((1, 3, 7, 7, 5, 3, 3, (1, 1), (1, 1), (1, 1), 1), id="plain3x3"),
    pytest.param((2, 6, 6, 5, 6, 3, 3, (1, 1), (1, 1), (1, 1), 6), id="depthwise"),
    pytest.param((2, 8, 1, 12, 4, 1, 3, (1, 2), (0, 1), (1, 1), 1), id="conv1d-as-2d"),
]


@pytest.mark.parametrize("dtype", [F32, F16, BF16], ids=["f32", "f16", "bf16"])
@pytest.mark.parametrize("channels_last", [False, True], ids=["nchw", "nhwc"])
@pytest.mark.parametrize("case", CONV_CASES)
def test_conv_forward_matches_the_reference(backend, case, channels_last, dtype) -> None:  # type: ignore[no-untyped-def]
    n, c, h, w, k, r, s, stride, pad, dil, groups = case
    rng = np.random.default_rng(1)
    x, wt = _rounded(rng, (n, c, h, w), dtype), _rounded(rng, (k, c // groups, r, s), dtype)
    want = conv_reference(x, wt, stride, pad, dil, groups)
    lay = _nhwc if channels_last else (lambda a: a)
    out = backend.empty(lay(np.zeros(want.shape, dtype)).shape, dtype)
    done = _dnn(backend).conv_forward(
        backend.from_numpy(lay(x)), backend.from_numpy(lay(wt)), out, stride=stride,
        padding=pad, dilation=dil, groups=groups, channels_last=channels_last,
    )  # fmt: skip
    assert done
    got = out.to_numpy()
    _close(_nchw(got) if channels_last else got, want, dtype)


@pytest.mark.parametrize("dtype", [F32, BF16], ids=["f32", "bf16"])
@pytest.mark.parametrize("channels_last", [False, True], ids=["nchw", "nhwc"])
def test_conv_backward_data_is_the_transposed_convolution(backend, channels_last, dtype) -> None:  # type: ignore[no-untyped-def]
    # dy [2, 6, 4, 4] -> dx [2, 4, 10, 9]: stride 2, padding 1, output padding (1, 0), groups 2.
    stride, pad, dil, groups = (2, 2), (1, 1), (1, 1), 2
    rng = np.random.default_rng(2)
    dy, wt = _rounded(rng, (2, 6, 5, 5), dtype), _rounded(rng, (6, 2, 3, 3), dtype)
    size = (10, 9)
    want = transpose_reference(dy, wt, stride, pad, dil, groups, size)
    lay = _nhwc if channels_last else (lambda a: a)
    out = backend.empty(lay(np.zeros(want.shape, dtype)).shape, dtype)
    done = _dnn(backend).conv_backward_data(
        backend.from_numpy(lay(dy)), backend.from_numpy(lay(wt)), out, stride=stride,
        padding=pad, dilation=dil, groups=groups, channels_last=channels_last,
    )  # fmt: skip
    assert done
    got = out.to_numpy()
    _close(_nchw(got) if channels_last else got, want, dtype)


@pytest.mark.parametrize("mode", ["max", "avg_include_pad", "avg_exclude_pad"])
@pytest.mark.parametrize("channels_last", [False, True], ids=["nchw", "nhwc"])
@pytest.mark.parametrize("dtype", [F32, BF16], ids=["f32", "bf16"])
def test_pool_forward_matches_the_reference(backend, mode, channels_last, dtype) -> None:  # type: ignore[no-untyped-def]
    window, stride, pad = (3, 2), (2, 2), (1, 1)
    rng = np.random.default_rng(3)
    x = _rounded(rng, (2, 3, 9, 8), dtype)
    want = pool_reference(x, mode, window, stride, pad)
    lay = _nhwc if channels_last else (lambda a: a)
    out = backend.empty(lay(np.zeros(want.shape, dtype)).shape, dtype)
    done = _dnn(backend).pool_forward(
        backend.from_numpy(lay(x)), out, mode=mode, window=window, stride=stride, padding=pad,
        channels_last=channels_last,
    )  # fmt: skip
    assert done
    got = out.to_numpy()
    _close(_nchw(got) if channels_last else got, want, dtype)


def test_cases_the_library_cannot_take_are_declined_with_nothing_queued(backend) -> None:  # type: ignore[no-untyped-def]
    dnn = _dnn(backend)
    x = backend.from_numpy(np.ones((1, 2, 6, 6), np.float32))
    w = backend.from_numpy(np.ones((2, 2, 2, 2), np.float32))
    args = {"stride": (1, 1), "dilation": (1, 1), "groups": 1, "channels_last": False}
    # "same" with an even window: one more row below than above.
    same = backend.empty((1, 2, 6, 6), np.float32)
    assert not dnn.conv_forward(x, w, same, padding=((0, 1), (0, 1)), **args)
    assert not dnn.conv_forward(x, w, same, padding=(0, 0), **args)  # the size is not the formula's
    wide = backend.from_numpy(np.ones((1, 2, 6, 6), np.float64))
    wide_w = backend.from_numpy(np.ones((2, 2, 2, 2), np.float64))
    assert not dnn.conv_forward(wide, wide_w, backend.empty((1, 2, 5, 5), np.float64),
                                padding=(0, 0), **args)  # fmt: skip
    strided = backend.from_numpy(np.ones((1, 6, 6, 2), np.float32)).permute(0, 3, 1, 2)
    assert not dnn.conv_forward(strided, w, backend.empty((1, 2, 5, 5), np.float32),
                                padding=(0, 0), **args)  # fmt: skip
    ceil = backend.empty((1, 2, 4, 4), np.float32)  # ceil_mode's extra window
    assert not dnn.pool_forward(x, ceil, mode="max", window=(2, 2), stride=(2, 2),
                                padding=(0, 0), channels_last=False)  # fmt: skip
    with pytest.raises(ValueError, match="pool_forward: mode"):
        dnn.pool_forward(x, ceil, mode="min", window=(2, 2), stride=(2, 2), padding=(0, 0),
                         channels_last=False)  # fmt: skip


def test_plans_are_kept_per_case_and_the_handle_per_backend(backend) -> None:  # type: ignore[no-untyped-def]
    dnn = _dnn(backend)
    assert backend._dnn() is dnn
    x = backend.from_numpy(np.ones((1, 1, 5, 5), np.float32))
    w = backend.from_numpy(np.ones((1, 1, 3, 3), np.float32))
    out = backend.empty((1, 1, 3, 3), np.float32)
    args = {"stride": (1, 1), "padding": (0, 0), "dilation": (1, 1), "groups": 1,
            "channels_last": False}  # fmt: skip
    assert dnn.conv_forward(x, w, out, **args)
    before = len(dnn._plans)
    assert dnn.conv_forward(x, w, out, **args)
    assert len(dnn._plans) == before
    np.testing.assert_allclose(out.to_numpy(), np.full((1, 1, 3, 3), 9.0), rtol=1e-5)


def test_hip_runtime_dnn_0_turns_the_library_off(device, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setenv("HIP_RUNTIME_DNN", "0")
    with HipBackend(device) as other:
        assert backend_dnn(other) is None
        assert other._dnn() is None


def test_a_failing_status_raises_dnn_error() -> None:
    from hip_runtime.libraries.dnn import check_miopen

    check_miopen(0, "miopenConvolutionForward")
    with pytest.raises(
        DnnError, match=r"miopenConvolutionForward failed: miopenStatusBadParm \(3\)"
    ):
        check_miopen(3, "miopenConvolutionForward")


def test_no_algorithm_for_a_case_declines_it_and_a_failing_launch_raises(device) -> None:  # type: ignore[no-untyped-def]
    class Failing:
        """The platform's API with one call answering `status`."""

        def __init__(self, api: Any, name: str, status: int) -> None:
            self._api, self._name, self._status = api, name, status

        def __getattr__(self, name: str) -> Any:
            if name == self._name:
                return lambda *args: self._status
            return getattr(self._api, name)

    with HipBackend(device) as other:
        dnn = _dnn(other)
        x = other.from_numpy(np.ones((1, 1, 4, 4), np.float32))
        w = other.from_numpy(np.ones((1, 1, 3, 3), np.float32))
        out = other.empty((1, 1, 2, 2), np.float32)
        args = {"stride": (1, 1), "padding": (0, 0), "dilation": (1, 1), "groups": 1,
                "channels_last": False}  # fmt: skip
        api = dnn._api
        # MIOpen's "No suitable algorithm was found": miopenStatusUnknownError from Find.
        dnn._api = Failing(api, "miopenFindConvolutionForwardAlgorithm", 7)
        assert not dnn.conv_forward(x, w, out, **args)
        dnn._plans.clear()
        dnn._api = Failing(api, "miopenConvolutionForward", 5)  # miopenStatusInternalError
        with pytest.raises(DnnError, match="miopenConvolutionForward failed: miopenStatusInternal"):
            dnn.conv_forward(x, w, out, **args)
        dnn._api = api


def _windows_reference(x: np.ndarray, w: np.ndarray, pad: int, groups: int) -> np.ndarray:
    """Stride-1 convolution through numpy's sliding windows (for shapes too large to loop)."""
    xp = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    k, cg, r, s = w.shape
    win = np.lib.stride_tricks.sliding_window_view(xp, (r, s), axis=(2, 3))  # n c p q r s
    n, _, p, q = win.shape[:4]
    win = win.reshape(n, groups, cg, p, q, r, s)
    wg = w.astype(np.float64).reshape(groups, k // groups, cg, r, s)
    return np.einsum("ngcpqrs,gkcrs->ngkpq", win, wg, optimize=True).reshape(n, k, p, q)


@pytest.mark.gpu
@pytest.mark.parametrize("exhaustive", [False, True], ids=["heuristic", "timed"])
@pytest.mark.parametrize("channels_last", [False, True], ids=["nchw", "nhwc"])
def test_resnet_sized_convolutions_on_the_gpu(device, platform, channels_last, exhaustive) -> None:  # type: ignore[no-untyped-def]
    """ResNet-like 3x3 layers (bf16, 64 -> 128 channels, and grouped) through the library's
    first choice and its timed search."""
    if platform == "cpu":
        pytest.skip("large shapes: the GPU platforms only")
    rng = np.random.default_rng(7)
    with HipBackend(device) as backend:
        dnn = Dnn(backend.stream, backend.pool, exhaustive=exhaustive)
        for groups in (1, 4):
            x = _rounded(rng, (4, 64, 28, 28), BF16)
            w = _rounded(rng, (128, 64 // groups, 3, 3), BF16)
            want = _windows_reference(x, w, 1, groups)
            lay = _nhwc if channels_last else (lambda a: a)
            out = backend.empty(lay(np.zeros(want.shape, BF16)).shape, BF16)
            assert dnn.conv_forward(
                backend.from_numpy(lay(x)), backend.from_numpy(lay(w)), out, stride=(1, 1),
                padding=(1, 1), dilation=(1, 1), groups=groups, channels_last=channels_last,
            )  # fmt: skip
            got = out.to_numpy()
            _close(_nchw(got) if channels_last else got, want, BF16)
        dnn.close()


def test_one_workspace_buffer_serves_every_launch_and_grows(backend) -> None:  # type: ignore[no-untyped-def]
    dnn = _dnn(backend)
    assert dnn._space(0) == dnn._api.ffi.NULL
    first = dnn._space(1000)
    assert dnn._space(1000) == first and dnn._space(10) == first
    grown = dnn._space(1 << 20)
    assert dnn._workspace[0].size >= 1 << 20 and dnn._space(4096) == grown
