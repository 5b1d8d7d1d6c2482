"""2-D upsampling: upsample_nearest2d and upsample_bilinear2d (torch's interpolate rules).

x [N, C, H, W] (or [N, H, W, C] with `channels_last=True`, the result then NHWC too),
C-contiguous, f32/f16/bf16 (f32 arithmetic). The size comes from `size` (an int or (h, w)) or
from `scale_factor` (a float or a pair: floor(H · factor)), exactly one of them; source
positions use torch's scales (in / out, or 1 / scale_factor when one was given; (in - 1) /
(out - 1) with `align_corners`). kernels/resample.hip, one thread per output; queued on the
backend's stream; a repeated call is served by a plan (`OpsBase._planned`).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from hip_runtime.ops.base import OpsBase
from hip_runtime.ops.conv_geometry import ints
from hip_runtime.ops.convolution import image_operand, key_part, launch_outputs
from hip_runtime.ops.plans import plan_head, plan_key
from hip_runtime.tensors.tensor import DeviceTensor


class ResamplingOps(OpsBase):
    def upsample_nearest2d(
        self,
        x: DeviceTensor,
        size: Any = None,
        scale_factor: Any = None,
        *,
        channels_last: bool = False,
        out: DeviceTensor | None = None,
    ) -> DeviceTensor:
        """interpolate(mode="nearest"): output row oh reads min(floor(oh · scale), H - 1).
        Queued on the backend's stream."""
        return self._resample("upsample_nearest2d", x, size, scale_factor, 0, channels_last, out)

    def upsample_bilinear2d(
        self,
        x: DeviceTensor,
        size: Any = None,
        scale_factor: Any = None,
        align_corners: bool = False,
        *,
        channels_last: bool = False,
        out: DeviceTensor | None = None,
    ) -> DeviceTensor:
        """interpolate(mode="bilinear", align_corners=...): each output the weighted mean of
        its 2 x 2 nearest inputs (half-pixel centres, or corners aligned). Queued on the
        backend's stream."""
        mode = 2 if align_corners else 1
        return self._resample("upsample_bilinear2d", x, size, scale_factor, mode,
                              channels_last, out)  # fmt: skip

    def _resample(
        self, op: str, x: Any, size: Any, scale_factor: Any, mode: int, channels_last: bool,
        out: Any,
    ) -> DeviceTensor:  # fmt: skip
        key = plan_key(x, out)
        if key is not None:
            key = (op, *key, key_part((size, scale_factor)), mode, bool(channels_last))
            plan = self._planned(key)
            if plan is not None:
                y = self._planned_output(plan, (x,), out)
                if y is not None:
                    launch_outputs(self, plan[4], y.size, x, y, *plan[5])
                    return y
        x, t, (n, c, h, w) = image_operand(self, op, x, bool(channels_last))
        ho, wo, scales = _sizes(op, h, w, size, scale_factor)
        if mode == 2:  # align_corners
            scales = (
                _ratio(h - 1, ho - 1) if ho > 1 else 0.0,
                _ratio(w - 1, wo - 1) if wo > 1 else 0.0,
            )
        shape = (n, ho, wo, c) if channels_last else (n, c, ho, wo)
        y = self._output(out, shape, x.dtype, distinct_from=(x,))
        kernel = self._kernel("resample.hip", f"upsample2d_{t.suffix}")
        args = (n, c, h, w, ho, wo, *scales, mode, int(bool(channels_last)))
        launch_outputs(self, kernel, y.size, x, y, *args)
        if y.size:
            self._keep_plan(key, (*plan_head((x,), y), kernel, args))
        return y


def _sizes(
    op: str, h: int, w: int, size: Any, scale_factor: Any
) -> tuple[int, int, tuple[float, float]]:
    """(ho, wo, (scale_h, scale_w)): the output size and torch's source scales (f32)."""
    if (size is None) == (scale_factor is None):
        raise ValueError(f"{op}: give exactly one of size and scale_factor")
    if size is not None:
        ho, wo = ints(size, "size", op, 2, minimum=1)
        return ho, wo, (_ratio(h, ho), _ratio(w, wo))
    factors = scale_factor if isinstance(scale_factor, (tuple, list)) else (scale_factor,) * 2
    if len(factors) != 2 or not all(
        isinstance(f, (int, float)) and not isinstance(f, bool) for f in factors
    ):
        raise TypeError(f"{op}: scale_factor must be a number or two, not {scale_factor!r}")
    if not all(math.isfinite(f) and f > 0 for f in factors):
        raise ValueError(f"{op}: scale_factor must be positive and finite, not {scale_factor!r}")
    ho, wo = math.floor(h * factors[0]), math.floor(w * factors[1])
    if ho < 1 or wo < 1:
        raise ValueError(f"{op}: scale_factor {scale_factor!r} leaves no output of {(h, w)}")
    return ho, wo, (float(np.float32(1.0 / factors[0])), float(np.float32(1.0 / factors[1])))


def _ratio(size: int, out: int) -> float:
    """in / out as torch computes it: an f32 division."""
    return float(np.float32(size) / np.float32(out))


__all__ = ["ResamplingOps"]
