"""The spatial op families in one mixin, so HipBackend names them once: convolutions
(ops/convolution.py), pooling (ops/pooling.py), upsampling (ops/resampling.py) and the
per-channel normalizations (ops/channel_norms.py)."""

from __future__ import annotations

from hip_runtime.ops.channel_norms import ChannelNormOps
from hip_runtime.ops.convolution import ConvOps
from hip_runtime.ops.pooling import PoolingOps
from hip_runtime.ops.resampling import ResamplingOps


class SpatialOps(ConvOps, PoolingOps, ResamplingOps, ChannelNormOps):
    """conv1d, conv2d, conv_transpose1d/2d, max/avg/adaptive_avg pooling, nearest and bilinear
    upsampling, group_norm and batch_norm (see each family's module)."""


__all__ = ["SpatialOps"]
