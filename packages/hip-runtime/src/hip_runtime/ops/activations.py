"""Activations: silu, gelu (erf or tanh), and swiglu, the gated silu of the Llama MLP.

Float tensors (f32, f64, f16, bf16) of any layout, computed in f32 (f64 for f64) and stored in
the input type; `out=x` works in place. swiglu broadcasts its operands as numpy. The kernels
are math.hip's and binary.hip's (ops/pointwise.py has the other unary functions), and
bias_gelu.hip's for gelu(x + bias) over aligned rows of whole 16-byte vectors, swiglu_rms.hip's
for swiglu of products of rows not yet RMS-normalized (`rms_of`). Queued on the backend's
stream.
"""

from __future__ import annotations

from math import prod
from typing import Any

from hip_runtime.ops.base import INT_MAX
from hip_runtime.ops.norms import real_number, rms_of_rows
from hip_runtime.ops.pointwise_codes import BINARY_CODE, MATH_CODE
from hip_runtime.ops.pointwise_core import FLOATS, PointwiseCore
from hip_runtime.ops.reduce_layout import row_strides
from hip_runtime.tensors.dtypes import SUFFIXES, float_type
from hip_runtime.tensors.tensor import DeviceTensor

_GELU = {kind: MATH_CODE[f"gelu_{kind}"] for kind in ("erf", "tanh")}
_GELU["none"] = _GELU["erf"]
_BIAS_GELU = {kind: BINARY_CODE[f"bias_gelu_{kind}"] for kind in ("erf", "tanh")}
_BIAS_GELU["none"] = _BIAS_GELU["erf"]
# The types of kernels/bias_gelu.hip, by dtype, and its blocks (8 warps, 4 wavefronts).
_BIAS_GELU_TYPES = {dtype: s for dtype, s in SUFFIXES.items() if s in ("f32", "f16", "bf16")}
_BIAS_GELU_THREADS = 256
# swiglu_rms.hip's blocks and a thread's columns (its SWIGLU_RMS_COLUMNS): a 16 x 8192 decode
# step's MLP takes 16 x 8 blocks, each reading its row of x (the factor) once.
_SWIGLU_RMS_THREADS = 256
_SWIGLU_RMS_COLUMNS = 4
_SWIGLU_RMS_TYPES = ("f32", "f16", "bf16")


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
        self,
        gate: DeviceTensor,
        up: DeviceTensor,
        *,
        out: DeviceTensor | None = None,
        rms_of: DeviceTensor | None = None,
        eps: float = 1e-6,
    ) -> DeviceTensor:
        """silu(gate) · up, the Llama MLP's gating (the silu is on the gate, not on up).

        rms_of: x [..., hidden] (C-contiguous, of gate's dtype), or None. Given, gate and up
        are taken as products of x's rows not yet RMS-normalized (the MLP norm's weight folded
        into the gate/up weight: rmsnorm(x, g) Wᵀ = x (W diag(g))ᵀ / rms(x)), and both are
        first multiplied by 1 / sqrt(mean(x[r]²) + eps) of their row r, as `rmsnorm` computes
        it (kernels/swiglu_rms.hip; a row whose f32 sum of squares overflows gets factor 0;
        `eps` is read only with rms_of).
        Then gate and up are [..., inter] of one float dtype with x's rows, no broadcasting,
        each row's elements contiguous and the rows evenly strided (column views of one
        stacked product need no copy); the result is [..., inter], C-contiguous, and `out`
        must not overlap the operands."""
        if rms_of is None:
            return self._pw_binary(
                "binary.hip", "binary", BINARY_CODE["swiglu"], gate, up, out, FLOATS
            )
        return self._swiglu_rms(gate, up, out, rms_of, eps)

    def _swiglu_rms(
        self, gate: Any, up: Any, out: DeviceTensor | None, x: Any, eps: Any
    ) -> DeviceTensor:
        """swiglu with `rms_of` (its docstring), checked then queued."""
        eps = real_number(eps, "eps", "swiglu")
        gate, up = self._operand(gate, "gate"), self._operand(up, "up")  # (strided views too)
        t, x = float_type(gate.dtype, "gate"), self._tensor(x, "rms_of")
        if t.suffix not in _SWIGLU_RMS_TYPES:
            raise ValueError(f"swiglu: rms_of takes f32, f16 or bf16 operands, not {gate.dtype}")
        if up.shape != gate.shape or up.dtype != gate.dtype or gate.ndim == 0:
            raise ValueError(f"swiglu: gate {gate.shape} {gate.dtype} and up {up.shape} "
                             f"{up.dtype} must be one shape [..., inter] and dtype")  # fmt: skip
        inter, rows = gate.shape[-1], prod(gate.shape[:-1])
        hidden = rms_of_rows(x, gate.dtype, rows, "swiglu")
        if max(rows, inter) > INT_MAX:
            raise ValueError("swiglu: rows and inter must be < 2^31")
        strides = [_row_stride(operand, name) for operand, name in ((gate, "gate"), (up, "up"))]
        y = self._output(out, gate.shape, gate.dtype, distinct_from=(gate, up, x))
        if rows and inter:
            threads = _SWIGLU_RMS_THREADS
            grid = (-(-inter // (threads * _SWIGLU_RMS_COLUMNS)), min(rows, 65535))
            kernel = self._kernel("swiglu_rms.hip", f"swiglu_rms_{t.suffix}")
            kernel.launch(grid, threads, gate, up, y, x, rows, inter, *strides, hidden, hidden,
                          eps, stream=self.stream)  # fmt: skip
        return y


def _row_stride(t: DeviceTensor, name: str) -> int:
    """The elements between consecutive rows of t [..., cols] (last axis contiguous, the
    leading axes one evenly strided run of rows); ValueError otherwise."""
    if t.ndim == 1:  # one row: its elements must be contiguous
        found = (1, t.shape[0], 0) if t.shape[0] <= 1 or t.strides[0] == 1 else None
    else:
        found = row_strides(t.shape, t.strides)
    if found is None or found[0] != 1 or found[1] < 0:
        raise ValueError(f"swiglu: {name}'s rows must be evenly strided with contiguous "
                         f"elements (strides {t.strides})")  # fmt: skip
    return found[1]


__all__ = ["ActivationOps"]
