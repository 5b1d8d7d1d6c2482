"""The spatial ops at model sizes on the GPU (nvidia platform, marked gpu): ResNet-50 and
Whisper convolutions in bf16, NCHW and NHWC, through the DNN library (cuDNN) and through the
portable kernels, against float64 references computed on a sample of output channels; and,
where torch imports with CUDA, every op against torch's own result (cuDNN for the
convolutions) on the same inputs.
"""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import ml_dtypes
import numpy as np
import pytest

from hip_core import Device
from hip_runtime import HipBackend, testing
from hip_runtime.testing import conv as testing_conv

pytestmark = pytest.mark.parametrize(
    "platform", [pytest.param("nvidia", marks=pytest.mark.gpu)], indirect=True
)
BF16 = np.dtype(ml_dtypes.bfloat16)
# (N, C, H, W, K, R, S, stride, padding, groups); H = R = 1: a 1-D convolution.
CONVS = [
    (8, 3, 224, 224, 64, 7, 7, 2, 3, 1),  # ResNet's stem
    (8, 64, 56, 56, 64, 3, 3, 1, 1, 1),
    (8, 256, 56, 56, 128, 1, 1, 1, 0, 1),
    (8, 128, 56, 56, 128, 3, 3, 2, 1, 1),  # strided
    (8, 256, 56, 56, 512, 1, 1, 2, 0, 1),  # strided 1x1 (downsampling)
    (8, 512, 7, 7, 512, 3, 3, 1, 1, 32),  # ResNeXt-style groups
    (8, 96, 28, 28, 96, 3, 3, 1, 1, 96),  # depthwise
    (2, 80, 1, 3000, 512, 1, 3, 1, 1, 1),  # Whisper conv1
    (2, 512, 1, 3000, 512, 1, 3, 2, 1, 1),  # Whisper conv2
]


@pytest.fixture(scope="module")
def backend(device: Device, program_cache: Path) -> Iterator[HipBackend]:
    with HipBackend(device) as backend:
        yield backend


@pytest.fixture(scope="module")
def torch() -> Any:
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("torch has no CUDA device here")
    return torch


def layout(x: np.ndarray, channels_last: bool) -> np.ndarray:
    return np.ascontiguousarray(np.moveaxis(x, 1, -1)) if channels_last else x


@pytest.mark.parametrize("channels_last", [False, True], ids=["nchw", "nhwc"])
@pytest.mark.parametrize("use_library", [True, False], ids=["library", "portable"])
@pytest.mark.parametrize("case", CONVS, ids=lambda c: "x".join(map(str, c)))
def test_model_convolutions(
    backend: HipBackend, case: tuple[int, ...], use_library: bool, channels_last: bool
) -> None:
    n, c, h, w, k, r, s, stride, padding, groups = case
    rng = np.random.default_rng(secrets.randbits(32))
    x = rng.standard_normal((n, c, h, w)).astype(BF16)
    wt = (rng.standard_normal((k, c // groups, r, s)) / np.sqrt(c // groups * r * s)).astype(BF16)
    bias = rng.standard_normal(k).astype(BF16)
    backend._conv_use_library = use_library
    try:
        got = backend.conv2d(backend.from_numpy(layout(x, channels_last)),
                             backend.from_numpy(layout(wt, channels_last)),
                             backend.from_numpy(bias), stride, padding, 1, groups,
                             channels_last=channels_last).to_numpy()  # fmt: skip
    finally:
        backend._conv_use_library = True
    got = np.moveaxis(got, -1, 1) if channels_last else got
    # The reference on two images and a sample of whole groups of output channels.
    kg = k // groups
    picked = sorted(set(rng.integers(0, groups, 4).tolist()))
    channels = np.concatenate([np.arange(g * kg, (g + 1) * kg) for g in picked])
    inputs = np.concatenate([np.arange(g * (c // groups), (g + 1) * (c // groups)) for g in picked])
    expected = testing_conv.conv2d(x[:2][:, inputs], wt[channels], bias[channels], stride,
                                   padding, 1, len(picked))  # fmt: skip
    testing.assert_close(np.ascontiguousarray(got[:2][:, channels]), expected, "bf16")


def test_against_torch(backend: HipBackend, torch: Any) -> None:
    """Every op against torch on the same bf16 inputs (torch's result rounded as ours is):
    conv and conv_transpose via cuDNN, pooling, upsampling and the norms via torch's kernels."""
    f = torch.nn.functional
    rng = np.random.default_rng(secrets.randbits(32))

    def pair(shape: tuple[int, ...], scale: float = 1.0) -> tuple[Any, Any]:
        host = (rng.standard_normal(shape) * scale).astype(BF16)
        theirs = torch.from_numpy(host.astype(np.float32)).cuda().to(torch.bfloat16)
        return backend.from_numpy(host), theirs

    x, tx = pair((4, 64, 28, 28))
    w, tw = pair((32, 16, 3, 3), 0.1)
    b, tb = pair((32,))
    wt, twt = pair((64, 8, 4, 4), 0.1)
    m, tm = pair((64,))
    v = backend.from_numpy(np.abs(rng.standard_normal(64)).astype(BF16) + BF16.type(0.5))
    tv = torch.from_numpy(v.to_numpy().astype(np.float32)).cuda().to(torch.bfloat16)
    cases = [
        (backend.conv2d(x, w, b, 2, 1, 1, 4), f.conv2d(tx, tw, tb, 2, 1, 1, 4)),
        (backend.conv_transpose2d(x, wt, None, 2, 1, 1, 2),
         f.conv_transpose2d(tx, twt, None, 2, 1, 1, 2)),
        (backend.max_pool2d(x, 3, 2, 1, ceil_mode=True), f.max_pool2d(tx, 3, 2, 1, ceil_mode=True)),
        (backend.avg_pool2d(x, 3, 2, 1, True, False), f.avg_pool2d(tx, 3, 2, 1, True, False)),
        (backend.adaptive_avg_pool2d(x, (5, 7)), f.adaptive_avg_pool2d(tx, (5, 7))),
        (backend.upsample_nearest2d(x, scale_factor=2), f.interpolate(tx, scale_factor=2)),
        (backend.upsample_bilinear2d(x, (45, 61), align_corners=True),
         f.interpolate(tx, (45, 61), mode="bilinear", align_corners=True)),
        (backend.upsample_bilinear2d(x, scale_factor=1.5),
         f.interpolate(tx, scale_factor=1.5, mode="bilinear")),
        (backend.group_norm(x, 8, m, m), f.group_norm(tx, 8, tm, tm)),
        (backend.batch_norm(x, m, v, m, m), f.batch_norm(tx, tm, tv, tm, tm)),
    ]  # fmt: skip
    for index, (ours, theirs) in enumerate(cases):
        expected = theirs.float().cpu().numpy().astype(np.float64)
        got = ours.to_numpy().astype(np.float64)
        assert got.shape == expected.shape, index
        scale = np.abs(expected).max()
        # Two bf16 roundings apart at most (each side's own), plus f32 accumulation order.
        assert np.abs(got - expected).max() <= 2**-7 * scale + 1e-2, index
