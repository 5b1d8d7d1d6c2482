"""Matrix ops through hipBLAS gemm-ex: matmul, linear, mlp_swiglu.

Row-major tensors, f32/f16/bf16 inputs and output of the same type, f32 accumulation.
Transposed operands are read in place (op flags), never copied; batches run as one
strided-batched call. Queued on the backend's stream through its BLAS handle.
"""

from __future__ import annotations

import math

from hip_runtime.blas import Gemm
from hip_runtime.dtypes import FloatType
from hip_runtime.ops.base import OpsBase
from hip_runtime.tensor import DeviceTensor


class LinalgOps(OpsBase):
    def _plan(
        self, a: DeviceTensor, b: DeviceTensor, transpose_a: bool, transpose_b: bool
    ) -> tuple[Gemm, tuple[int, ...], FloatType]:
        a, t = self._float(a, "a")
        b = self._tensor(b, "b")
        if b.dtype != a.dtype:
            raise ValueError(f"matmul operands have dtypes {a.dtype} and {b.dtype}")
        if not (2 <= a.ndim <= 3 and 2 <= b.ndim <= 3):
            raise ValueError(
                f"matmul takes 2-D or 3-D (batched) operands, not {a.shape} @ {b.shape}"
            )
        k_a, m = a.shape[-2:] if transpose_a else a.shape[-1:-3:-1]
        n, k_b = b.shape[-2:] if transpose_b else b.shape[-1:-3:-1]
        if k_a != k_b:
            raise ValueError(
                f"matmul inner dimensions differ: a {a.shape}{'ᵀ' * transpose_a} @ "
                f"b {b.shape}{'ᵀ' * transpose_b}"
            )
        batch_a = a.shape[0] if a.ndim == 3 else 1
        batch_b = b.shape[0] if b.ndim == 3 else 1
        if batch_a != batch_b and 1 not in (batch_a, batch_b):
            raise ValueError(f"matmul batch sizes {batch_a} and {batch_b} do not broadcast")
        batch = max(batch_a, batch_b)
        spec = Gemm(
            m=m, n=n, k=k_a, batch=batch, transpose_a=transpose_a, transpose_b=transpose_b,
            stride_a=m * k_a if batch_a > 1 else 0, stride_b=k_a * n if batch_b > 1 else 0,
            stride_c=m * n,
        )  # fmt: skip
        shape = (batch, m, n) if max(a.ndim, b.ndim) == 3 else (m, n)
        return spec, shape, t

    def matmul(
        self,
        a: DeviceTensor,
        b: DeviceTensor,
        *,
        transpose_a: bool = False,
        transpose_b: bool = False,
        alpha: float = 1.0,
        out: DeviceTensor | None = None,
    ) -> DeviceTensor:
        """alpha · op(a) @ op(b), row-major.

        a [m, k] (or [k, m] with `transpose_a`), b [k, n] (or [n, k] with `transpose_b`); either
        may have a leading batch dimension, and a batch of 1 (or a 2-D operand) is broadcast.
        The result is [m, n] or [batch, m, n], of the operands' dtype; `out` must not overlap
        a or b.
        """
        spec, shape, t = self._plan(a, b, transpose_a, transpose_b)
        y = self._output(out, shape, a.dtype, distinct_from=(a, b))
        self.blas.gemm(spec, a.ptr, b.ptr, y.ptr, t.hip_data_type, alpha=float(alpha))
        return y

    def linear(
        self,
        x: DeviceTensor,
        weight: DeviceTensor,
        bias: DeviceTensor | None = None,
        *,
        out: DeviceTensor | None = None,
    ) -> DeviceTensor:
        """x @ weightᵀ + bias, as torch.nn.Linear: x [..., in], weight [out, in], bias [out]."""
        flat, spec, shape, t = self._plan_linear(x, weight, bias)
        y = self._output(out, shape, flat.dtype, distinct_from=(flat, weight, bias))
        self._run_linear(flat, weight, bias, y, spec, t)
        return y

    def _plan_linear(
        self, x: DeviceTensor, weight: DeviceTensor, bias: DeviceTensor | None
    ) -> tuple[DeviceTensor, Gemm, tuple[int, ...], FloatType]:
        x, t = self._float(x, "x")
        weight = self._tensor(weight, "weight")
        if x.ndim == 0 or weight.ndim != 2:
            raise ValueError(f"linear takes x [..., in] and weight [out, in], not {x.shape}, "
                             f"{weight.shape}")  # fmt: skip
        features = weight.shape[0]
        if bias is not None:
            self._same(x, bias, "bias", (features,))
        flat = x.reshape(math.prod(x.shape[:-1]), x.shape[-1])
        spec, _, _ = self._plan(flat, weight, False, True)
        return flat, spec, (*x.shape[:-1], features), t

    def _run_linear(
        self,
        flat: DeviceTensor,
        weight: DeviceTensor,
        bias: DeviceTensor | None,
        y: DeviceTensor,
        spec: Gemm,
        t: FloatType,
    ) -> None:
        self.blas.gemm(spec, flat.ptr, weight.ptr, y.ptr, t.hip_data_type)
        if bias is not None:
            kernel = self._kernel("elementwise.hip", f"add_row_bias_{t.suffix}")
            rows, cols = spec.m, spec.n
            self._launch_flat(kernel, y.size, y.dtype.itemsize, y, bias, y, rows, cols)

    def mlp_swiglu(
        self,
        x: DeviceTensor,
        w_gate: DeviceTensor,
        w_up: DeviceTensor,
        w_down: DeviceTensor,
        *,
        out: DeviceTensor | None = None,
    ) -> DeviceTensor:
        """The Llama MLP: (silu(x @ w_gateᵀ) · (x @ w_upᵀ)) @ w_downᵀ.

        x [..., hidden], w_gate and w_up [inter, hidden], w_down [hidden, inter]. Everything is
        validated before the first launch; the intermediates come from the backend's pool.
        """
        flat, gate_spec, _, t = self._plan_linear(x, w_gate, None)
        self._same(w_gate, w_up, "w_up")
        inter = w_gate.shape[0]
        down = self._tensor(w_down, "w_down")
        if down.dtype != flat.dtype or down.shape != (flat.shape[1], inter):
            raise ValueError(f"w_down is {down.shape} {down.dtype}; expected "
                             f"{(flat.shape[1], inter)} {flat.dtype}")  # fmt: skip
        down_spec = Gemm(m=flat.shape[0], n=flat.shape[1], k=inter, transpose_b=True)
        y = self._output(out, x.shape, x.dtype, distinct_from=(flat, w_gate, w_up, down))
        gate = self._output(None, (flat.shape[0], inter), flat.dtype)
        up = self._output(None, (flat.shape[0], inter), flat.dtype)
        self._run_linear(flat, w_gate, None, gate, gate_spec, t)
        self._run_linear(flat, w_up, None, up, gate_spec, t)
        kernel = self._kernel("activations.hip", f"swiglu_{t.suffix}")
        self._launch_flat(kernel, gate.size, gate.dtype.itemsize, gate, up, gate, gate.size)
        self._run_linear(gate, down, None, y, down_spec, t)
        return y


__all__ = ["LinalgOps"]
