"""conv1d, conv2d, conv_transpose1d and conv_transpose2d against hip_runtime.testing.conv's
float64 references under hypothesis: random batch, channels, groups (depthwise included),
spatial sizes, windows, strides, paddings ("same" and "valid" too), dilations, output
paddings, bias or none, NCHW and NHWC, f32 / f16 / bf16, through the DNN library where the
backend has one and through the portable kernels (`_conv_use_library = False`); plans
(a repeated call) and out=; the errors, before anything is queued.

On the cpu platform in CI; the same tests run on nvidia (marked gpu) through the device fixture.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from hip_core import Device
from hip_runtime import HipBackend, testing
from hip_runtime.testing import conv as testing_conv

TYPES = ["f32", "f16", "bf16"]
SETTINGS = settings(
    max_examples=30, deadline=None, database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)  # fmt: skip


@pytest.fixture(scope="module")
def backend(device: Device, program_cache: Path) -> Iterator[HipBackend]:
    with HipBackend(device) as backend:
        yield backend


@pytest.fixture(params=["library", "portable"])
def path(request: pytest.FixtureRequest, backend: HipBackend) -> Iterator[str]:
    """Each test twice: the DNN library first where there is one, and the portable kernels."""
    backend._conv_use_library = request.param == "library"
    yield request.param
    backend._conv_use_library = True


def channels_last_array(x: np.ndarray, channels_last: bool) -> np.ndarray:
    """An NCHW (or NCL) array in the layout the op is given: channels moved last."""
    return np.ascontiguousarray(np.moveaxis(x, 1, -1)) if channels_last else x


@st.composite
def conv_case(draw: st.DrawFn, dims: int, transposed: bool) -> dict[str, Any]:
    groups = draw(st.sampled_from([1, 1, 2, 3]))
    depthwise = not transposed and draw(st.booleans())
    cg = 1 if depthwise else draw(st.integers(1, 3))
    kg = draw(st.integers(1, 3))
    window = tuple(draw(st.integers(1, 3)) for _ in range(dims))
    size = tuple(draw(st.integers(1, 7)) for _ in range(dims))
    stride = tuple(draw(st.integers(1, 3)) for _ in range(dims))
    dilation = tuple(draw(st.integers(1, 2)) for _ in range(dims))
    padding: Any = tuple(draw(st.integers(0, 2)) for _ in range(dims))
    case: dict[str, Any] = {
        "n": draw(st.integers(1, 2)), "groups": groups, "cg": cg, "kg": kg, "window": window,
        "size": size, "stride": stride, "dilation": dilation, "padding": padding,
        "channels_last": draw(st.booleans()), "bias": draw(st.booleans()),
        "dtype": draw(st.sampled_from(TYPES)), "seed": draw(st.integers(0, 2**32 - 1)),
    }  # fmt: skip
    if transposed:
        case["output_padding"] = tuple(
            draw(st.integers(0, max(s, d) - 1)) for s, d in zip(stride, dilation, strict=True)
        )
        outputs = zip(size, stride, window, dilation, padding, case["output_padding"], strict=True)
        for n, st_, k, d, p, op in outputs:
            assume((n - 1) * st_ - 2 * p + d * (k - 1) + op + 1 > 0)
    else:
        form = draw(st.sampled_from(["ints", "ints", "same", "valid", "int"]))
        if form == "same":
            case["stride"] = (1,) * dims
            case["padding"] = "same"
        elif form == "valid":
            case["padding"] = "valid"
        elif form == "int":
            case["padding"] = padding[0]
        pads = (0,) * dims if isinstance(case["padding"], str) else padding
        if form == "int":
            pads = (padding[0],) * dims
        for s, k, d, p in zip(size, window, dilation, pads, strict=True):
            assume(case["padding"] == "same" or s + 2 * p - d * (k - 1) - 1 >= 0)
    return case


def run_case(backend: HipBackend, case: dict[str, Any], dims: int, transposed: bool) -> None:
    rng = np.random.default_rng(case["seed"])
    dtype, groups, cl = case["dtype"], case["groups"], case["channels_last"]
    cin = case["cg"] * groups
    cout = case["kg"] * groups
    x = channels_last_array(testing.random(rng, (case["n"], cin, *case["size"]), dtype), cl)
    if transposed:
        w_shape = (cin, case["kg"], *case["window"])
    else:
        w_shape = (cout, case["cg"], *case["window"])
    w = channels_last_array(testing.random(rng, w_shape, dtype, scale=0.5), cl)
    bias = testing.random(rng, (cout,), dtype) if case["bias"] else None
    device_bias = None if bias is None else backend.from_numpy(bias)
    args: tuple[Any, ...]
    if transposed:
        args = (case["stride"], case["padding"], case["output_padding"], groups, case["dilation"])
    else:
        args = (case["stride"], case["padding"], case["dilation"], groups)
    if dims == 1:
        args = tuple(a[0] if isinstance(a, tuple) else a for a in args)
    name = ("conv_transpose" if transposed else "conv") + f"{dims}d"
    op = getattr(backend, name)
    expected = getattr(testing_conv, name)(x, w, bias, *args, channels_last=cl)
    tx, tw = backend.from_numpy(x), backend.from_numpy(w)
    got = op(tx, tw, device_bias, *args, channels_last=cl)
    testing.assert_close(got.to_numpy(), expected, dtype)
    again = op(tx, tw, device_bias, *args, channels_last=cl, out=backend.empty(got.shape, x.dtype))
    testing.assert_close(again.to_numpy(), expected, dtype)  # a plan's call, into out=


@SETTINGS
@given(case=conv_case(2, False))
def test_conv2d_matches_numpy(backend: HipBackend, path: str, case: dict[str, Any]) -> None:
    run_case(backend, case, 2, False)


@SETTINGS
@given(case=conv_case(1, False))
def test_conv1d_matches_numpy(backend: HipBackend, path: str, case: dict[str, Any]) -> None:
    run_case(backend, case, 1, False)


@SETTINGS
@given(case=conv_case(2, True))
def test_conv_transpose2d_matches_numpy(
    backend: HipBackend, path: str, case: dict[str, Any]
) -> None:
    run_case(backend, case, 2, True)


@SETTINGS
@given(case=conv_case(1, True))
def test_conv_transpose1d_matches_numpy(
    backend: HipBackend, path: str, case: dict[str, Any]
) -> None:
    run_case(backend, case, 1, True)


def test_batch_in_chunks_and_1x1(backend: HipBackend, monkeypatch: pytest.MonkeyPatch) -> None:
    """A workspace limit below one image's columns: one image per chunk, still right; a 1x1
    stride-1 convolution reads x as the GEMM's operand (no im2col) in both layouts."""
    from hip_runtime.ops import convolution

    monkeypatch.setattr(convolution, "COL_BYTES", 64)
    backend._conv_use_library = False
    try:
        rng = np.random.default_rng(7)
        for cl in (False, True):
            for window, groups, size, dtype in (
                ((3, 3), 2, (5, 6), "f32"), ((1, 1), 1, (5, 6), "f32"), ((1, 1), 2, (5, 6), "f32"),
                ((3, 3), 2, (4, 8), "bf16"), ((3, 3), 1, (4, 2), "f32"),  # 16-byte column runs
            ):  # fmt: skip
                x = channels_last_array(testing.random(rng, (3, 4, *size), dtype), cl)
                w = channels_last_array(testing.random(rng, (6, 4 // groups, *window), dtype), cl)
                got = backend.conv2d(backend.from_numpy(x), backend.from_numpy(w), None, 1,
                                     window[0] // 2, 1, groups, channels_last=cl)  # fmt: skip
                expected = testing_conv.conv2d(x, w, None, 1, window[0] // 2, 1, groups,
                                               channels_last=cl)  # fmt: skip
                testing.assert_close(got.to_numpy(), expected, dtype)
                wt = channels_last_array(testing.random(rng, (4, 3, *window), dtype), cl)
                got = backend.conv_transpose2d(
                    backend.from_numpy(x), backend.from_numpy(wt), stride=2, groups=groups,
                    channels_last=cl,
                )  # fmt: skip
                expected = testing_conv.conv_transpose2d(x, wt, stride=2, groups=groups,
                                                         channels_last=cl)  # fmt: skip
                testing.assert_close(got.to_numpy(), expected, dtype)
    finally:
        backend._conv_use_library = True


def test_errors_name_the_op_and_argument(backend: HipBackend) -> None:
    x = backend.zeros((1, 4, 5, 5))
    w = backend.zeros((6, 2, 3, 3))
    cases: list[tuple[type[Exception], str, Any]] = [
        (ValueError, r"conv2d: x's 4 channels are not divisible by groups=3",
         lambda: backend.conv2d(x, w, groups=3)),
        (ValueError, r"conv2d: weight has 2 input channels per group",
         lambda: backend.conv2d(x, w)),
        (ValueError, r"conv2d: weight's 6 output channels are not divisible by groups=4",
         lambda: backend.conv2d(x, backend.zeros((6, 1, 3, 3)), groups=4)),
        (ValueError, r"conv2d: padding='same' needs stride 1",
         lambda: backend.conv2d(x, w, None, 2, "same", 1, 2)),
        (ValueError, r"conv2d: padding must be 'same', 'valid' or ints",
         lambda: backend.conv2d(x, w, None, 1, "full", 1, 2)),
        (ValueError, r"conv2d: stride must be in \[1,",
         lambda: backend.conv2d(x, w, None, 0, 0, 1, 2)),
        (TypeError, r"conv2d: dilation must be an int or 2 ints",
         lambda: backend.conv2d(x, w, None, 1, 0, 1.5, 2)),
        (ValueError, r"conv2d: the input's spatial size",
         lambda: backend.conv2d(x, backend.zeros((6, 2, 7, 7)), groups=2)),
        (ValueError, r"conv2d: x must be 4-D", lambda: backend.conv2d(backend.zeros((4, 5)), w)),
        (ValueError, r"conv2d: weight has dtype float16",
         lambda: backend.conv2d(x, backend.zeros((6, 2, 3, 3), "float16"), groups=2)),
        (ValueError, r"conv2d takes float32, float16 and bfloat16",
         lambda: backend.conv2d(backend.zeros((1, 4, 5, 5), "float64"),
                                backend.zeros((6, 2, 3, 3), "float64"), groups=2)),
        (ValueError, r"bias has shape",
         lambda: backend.conv2d(x, w, backend.zeros((5,)), groups=2)),
        (ValueError, r"conv1d: x must be 3-D", lambda: backend.conv1d(x, w)),
        (ValueError, r"conv_transpose2d: output_padding \(2, 2\) must be smaller than stride",
         lambda: backend.conv_transpose2d(x, backend.zeros((4, 3, 3, 3)), None, 2, 0, 2)),
        (ValueError, r"conv_transpose2d: weight has 6 input channels",
         lambda: backend.conv_transpose2d(x, w)),
        (ValueError, r"conv2d takes C-contiguous tensors; x is a strided view",
         lambda: backend.conv2d(x.permute(0, 1, 3, 2), w, groups=2)),
        (ValueError, r"out is \(1, 6, 3, 3\) float32; this op writes \(1, 6, 5, 5\)",
         lambda: backend.conv2d(x, w, None, 1, 1, 1, 2, out=backend.zeros((1, 6, 3, 3)))),
    ]  # fmt: skip
    for error, message, call in cases:
        with pytest.raises(error, match=message):
            call()


def test_empty_batch_and_no_output_channels(backend: HipBackend, path: str) -> None:
    """Nothing to compute: the right (empty) shapes, nothing queued that could fail."""
    x = backend.zeros((0, 4, 5, 5))
    assert backend.conv2d(x, backend.zeros((6, 2, 3, 3)), groups=2).shape == (0, 6, 3, 3)
    assert backend.conv_transpose2d(x, backend.zeros((4, 3, 3, 3))).shape == (0, 3, 7, 7)
    assert backend.conv2d(backend.zeros((2, 4, 5, 5)), backend.zeros((0, 4, 3, 3))).shape == (
        2, 0, 3, 3,
    )  # fmt: skip
