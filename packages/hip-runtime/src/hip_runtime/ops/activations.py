"""Activations: silu, gelu (erf or tanh), and swiglu, the gated silu of the Llama MLP.

Float tensors (f32, f64, f16, bf16) of any layout, computed in f32 (f64 for f64) and stored in
the input type; `out=x` works in place. swiglu broadcasts its operands as numpy. The kernels
are math.hip's and binary.hip's (ops/pointwise.py has the other unary functions). Queued on
the backend's stream.
"""

from __future__ import annotations

from hip_runtime.ops.pointwise_codes import BINARY_CODE, MATH_CODE
from hip_runtime.ops.pointwise_core import FLOATS, PointwiseCore
from hip_runtime.tensors.tensor import DeviceTensor

_GELU = {kind: MATH_CODE[f"gelu_{kind}"] for kind in ("erf", "tanh")}
_GELU["none"] = _GELU["erf"]
_BIAS_GELU = {kind: BINARY_CODE[f"bias_gelu_{kind}"] for kind in ("erf", "tanh")}
_BIAS_GELU["none"] = _BIAS_GELU["erf"]


class ActivationOps(PointwiseCore):
    def silu(self, x: DeviceTensor, *, out: DeviceTensor | None = None) -> DeviceTensor:
        """x · sigmoid(x)."""
        return self._pw_unary("math.hip", MATH_CODE["silu"], x, out, FLOATS)

    def gelu(
        self,
        x: DeviceTensor,
        *,
        approximate: str = "none",
        bias: DeviceTensor | None = None,
        out: DeviceTensor | None = None,
    ) -> DeviceTensor:
        """GELU: exact with erf (`approximate="none"`), or the tanh approximation ("tanh").

        `bias`: gelu(x + bias) in one pass (the sum in f32 for 16-bit floats), bias a
        [x.shape[-1]] row of x's dtype: a linear layer's bias, added where its activation
        reads the output instead of in a pass of its own. Queued on the backend's stream."""
        if approximate not in _GELU:
            raise ValueError(f"approximate must be 'none' or 'tanh', not {approximate!r}")
        if bias is None:
            return self._pw_unary("math.hip", _GELU[approximate], x, out, FLOATS)
        if not isinstance(x, DeviceTensor) or not isinstance(bias, DeviceTensor):
            raise TypeError("gelu with a bias takes two DeviceTensors")
        if x.ndim == 0 or bias.shape != x.shape[-1:]:
            raise ValueError(
                f"bias must have shape {x.shape[-1:]} for x {x.shape}, not {bias.shape}"
            )
        code = _BIAS_GELU[approximate]
        return self._pw_binary("binary.hip", "binary", code, x, bias, out, FLOATS)

    def swiglu(
        self, gate: DeviceTensor, up: DeviceTensor, *, out: DeviceTensor | None = None
    ) -> DeviceTensor:
        """silu(gate) · up, the Llama MLP's gating (the silu is on the gate, not on up)."""
        return self._pw_binary("binary.hip", "binary", BINARY_CODE["swiglu"], gate, up, out, FLOATS)


__all__ = ["ActivationOps"]
