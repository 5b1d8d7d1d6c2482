"""Activations: silu, gelu (erf or tanh), and swiglu, the gated silu of the Llama MLP.

Float tensors (f32, f64, f16, bf16) of any layout, computed in f32 (f64 for f64) and stored in
the input type; `out=x` works in place. swiglu broadcasts its operands as numpy. The kernels
are math.hip's and binary.hip's (ops/pointwise.py has the other unary functions), and
bias_gelu.hip's for gelu(x + bias) over aligned rows of whole 16-byte vectors. Queued on the
backend's stream.
"""

from __future__ import annotations

from hip_runtime.ops.base import INT_MAX
from hip_runtime.ops.pointwise_codes import BINARY_CODE, MATH_CODE
from hip_runtime.ops.pointwise_core import FLOATS, PointwiseCore
from hip_runtime.tensors.dtypes import SUFFIXES
from hip_runtime.tensors.tensor import DeviceTensor

_GELU = {kind: MATH_CODE[f"gelu_{kind}"] for kind in ("erf", "tanh")}
_GELU["none"] = _GELU["erf"]
_BIAS_GELU = {kind: BINARY_CODE[f"bias_gelu_{kind}"] for kind in ("erf", "tanh")}
_BIAS_GELU["none"] = _BIAS_GELU["erf"]
# The types of kernels/bias_gelu.hip, by dtype, and its blocks (8 warps, 4 wavefronts).
_BIAS_GELU_TYPES = {dtype: s for dtype, s in SUFFIXES.items() if s in ("f32", "f16", "bf16")}
_BIAS_GELU_THREADS = 256


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
        y = self._bias_gelu_vectors(x, bias, approximate == "tanh", out)
        if y is not None:
            return y
        code = _BIAS_GELU[approximate]
        return self._pw_binary("binary.hip", "binary", code, x, bias, out, FLOATS)

    def _bias_gelu_vectors(
        self, x: DeviceTensor, bias: DeviceTensor, tanh: bool, out: DeviceTensor | None
    ) -> DeviceTensor | None:
        """gelu(x + bias) by kernels/bias_gelu.hip, two 16-byte vectors a thread, where its
        layout holds: f32/f16/bf16, bias of x's dtype, x, bias and out C-contiguous and 16-byte
        aligned, rows of whole vectors. None otherwise (binary.hip's paths take the call, out=
        strided views too, and their checks say what is wrong)."""
        suffix = _BIAS_GELU_TYPES.get(x.dtype)
        lanes = 16 // x.dtype.itemsize
        if (
            suffix is None
            or bias.dtype != x.dtype
            or x.shape[-1] % lanes
            or not 0 < x.size // lanes <= INT_MAX
            or (x.ptr | bias.ptr) % 16
            or not (x.is_contiguous and bias.is_contiguous)
            or (
                out is not None
                and (type(out) is not DeviceTensor or out.ptr % 16 or not out.is_contiguous)
            )
        ):
            return None
        x = self._tensor(x, "x")
        self._tensor(bias, "bias")
        y = self._output(out, x.shape, x.dtype, inputs=(x,), distinct_from=(bias,))
        vectors, threads = x.size // lanes, _BIAS_GELU_THREADS
        kernel = self._kernel("bias_gelu.hip", f"bias_gelu_{suffix}")
        kernel.launch(
            -(-vectors // (2 * threads)), threads, x, bias, y, vectors, x.shape[-1] // lanes,
            int(tanh), stream=self.stream,
        )  # fmt: skip
        return y

    def swiglu(
        self, gate: DeviceTensor, up: DeviceTensor, *, out: DeviceTensor | None = None
    ) -> DeviceTensor:
        """silu(gate) · up, the Llama MLP's gating (the silu is on the gate, not on up)."""
        return self._pw_binary("binary.hip", "binary", BINARY_CODE["swiglu"], gate, up, out, FLOATS)


__all__ = ["ActivationOps"]
