"""Matrix ops through hipBLAS gemm-ex (small products through hip_runtime.libraries.small_gemm's
kernel): matmul, linear, mlp_swiglu.

matmul follows numpy's `matmul` (any rank, 1-D operands, broadcast batch axes) in f32, f64,
f16 and bf16 (16-bit types accumulate in f32, f64 in f64); results are C-contiguous, of the
operands' dtype. Strided operands are read in place wherever BLAS can read them (transposed
views through the op flags, row slices through the leading dimension, any batch strides);
`ops/gemm_plan.py` says which layouts, and how batches become as few calls as possible. All
work is queued on the backend's stream, through its BLAS handle or, for a small product, as
one launch of hip_runtime.libraries.small_gemm's kernel (the same calls, the same layouts).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from hip_runtime.libraries.blas import DATA_TYPES, Blas, Gemm
from hip_runtime.libraries.small_gemm import SmallGemm
from hip_runtime.ops.base import _overlap
from hip_runtime.ops.gemm_plan import MatmulPlan, plan
from hip_runtime.ops.gemv import GemvOps
from hip_runtime.ops.plans import address_of, layout_id, plan_head, plan_key
from hip_runtime.tensors.dtypes import FloatType, float_type
from hip_runtime.tensors.strided_copy import check_writable
from hip_runtime.tensors.tensor import DeviceTensor

_DTYPE_NAMES = ", ".join(str(t) for t in DATA_TYPES)


class LinalgOps(GemvOps):
    if TYPE_CHECKING:  # the pointwise family's ops, mixed into HipBackend beside this one

        def add(self, a: Any, b: Any, *, out: DeviceTensor | None = None) -> DeviceTensor: ...

        def swiglu(
            self, gate: DeviceTensor, up: DeviceTensor, *, out: DeviceTensor | None = None
        ) -> DeviceTensor: ...

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
        """alpha · op(a) @ op(b), by numpy's `matmul` rules, queued on the backend's stream.

        a [..., m, k] (or [..., k, m] with `transpose_a`), b [..., k, n] (or [..., n, k] with
        `transpose_b`): the batch axes broadcast; a 1-D a is one row and a 1-D b one column,
        and that axis is left out of the result, [..., m, n]. Operands of any layout; only a
        matrix BLAS cannot read (steps on both of its axes, a reversed or broadcast axis
        inside it) is copied first (`.contiguous()`, on the stream). f32/f64/f16/bf16, both
        of one dtype. `out`: the result's shape and dtype, not overlapping a or b, any
        writable layout: BLAS writes row-major matrices with any row stride (a slice of a
        wider tensor, heads of [B, S, H, D]) and transposed ones in place; others get the
        result through a temporary and one strided copy.
        """
        call = None
        if type(a) is DeviceTensor is type(b) and (out is None or type(out) is DeviceTensor):
            # (plan_key's key, inline: a tuple of small ints; issue 15 counts each call)
            call = ("matmul", a._layout or layout_id(a), b._layout or layout_id(b),
                    None if out is None else (out._layout or layout_id(out), out is a, out is b),
                    not transpose_a, not transpose_b)  # fmt: skip
            plans = self._plans
            planned = None if plans is None or self._releaser is None else plans.get(call)
            if planned is not None:
                y = self._planned_output(planned, (a, b), out)
                if y is not None:
                    fast = planned[6]
                    if fast is None or alpha != fast[1] or type(alpha) is not float:
                        self._gemm(planned[4], a, b, y, planned[5], float(alpha))
                    else:
                        _prepared_gemm(fast, a, b, y)
                    return y
        a = self._operand(a, "a")
        b = self._operand(b, "b")
        data_type = _data_type(a, b)
        key = (a.shape, a._strides, b.shape, b._strides, bool(transpose_a), bool(transpose_b))
        found = plan(*key, a.dtype.itemsize)
        if out is None:
            y = self._output(None, found.shape, a.dtype)
        else:
            y = self._matmul_out(out, found.shape, a.dtype, (a, b))
            if y._strides is not None:
                found = plan(*key, a.dtype.itemsize, y._strides)
        self._gemm(found, a, b, y, data_type, float(alpha))
        fast = self._prepare_gemm(found, data_type, alpha)
        self._keep_plan(call, (*plan_head((a, b), y), found, data_type, fast))
        return y

    def _prepare_gemm(
        self, found: MatmulPlan, data_type: int, alpha: Any, beta: float = 0.0
    ) -> Any:
        """What `_prepared_gemm` runs for a plan of one product call (BLAS's or the small
        kernel's) on the operands as they are (no copies): (the prepared call, its alpha,
        swap, the offsets), else None."""
        if len(found.offsets) != 1 or found.copy_a or found.copy_b or found.copy_out:
            return None
        engine = self._gemm_engine(found.spec)
        prepared = engine.prepare(found.spec, data_type, alpha=float(alpha), beta=beta)
        return None if prepared is None else (prepared, alpha, found.swap, found.offsets[0])

    def _gemm_engine(self, spec: Gemm) -> Blas | SmallGemm:
        """What queues `spec`: hip-runtime's own kernel for a small product where a BLAS
        call's host cost would outweigh it (hip_runtime.libraries.small_gemm), else BLAS."""
        return self.small_gemm if self.small_gemm.takes(spec) else self.blas

    def _matmul_out(
        self,
        out: DeviceTensor,
        shape: tuple[int, ...],
        dtype: Any,
        inputs: tuple[DeviceTensor, ...],
    ) -> DeviceTensor:
        """`out=` of any layout, validated: the shape and dtype written, no two elements
        sharing memory, no byte shared with an input (spans: strided inputs reach beyond
        their first nbytes)."""
        out = self._operand(out, "out")
        if out.shape != shape or out.dtype != dtype:
            raise ValueError(f"out is {out.shape} {out.dtype}; this op writes {shape} {dtype}")
        check_writable(out)
        first, end = out.span()
        for tensor in inputs:
            low, high = tensor.span()
            # (empty spans overlap nothing: an empty tensor's address may lie anywhere)
            if _overlap(first, end - first, low, high - low):
                raise ValueError("out must not overlap the inputs of this op")
        return out

    def _gemm(
        self,
        found: MatmulPlan,
        a: DeviceTensor,
        b: DeviceTensor,
        y: DeviceTensor,
        data_type: int,
        alpha: float = 1.0,
        *,
        beta: float = 0.0,
    ) -> None:
        """Queue a validated plan: copies where it says so, then its product calls (BLAS's or
        the small kernel's: `_gemm_engine`; k == 0: the result is zeros, or y as it is with
        beta 1)."""
        if found.copy_a:
            a = a.contiguous()
        if found.copy_b:
            b = b.contiguous()
        result = y
        if found.copy_out:
            result = y.contiguous() if beta else self._output(None, y.shape, y.dtype)
        if not found.offsets:
            if result.size and not beta:
                result.region().fill(0, stream=self.stream)
        else:
            first, second = (b, a) if found.swap else (a, b)
            self._gemm_engine(found.spec).gemm(
                found.spec, first.ptr, second.ptr, result.ptr, data_type, alpha=alpha,
                beta=beta, offsets=found.offsets,
            )  # fmt: skip
        if result is not y:
            y.copy_(result)

    def linear(
        self,
        x: DeviceTensor,
        weight: DeviceTensor,
        bias: DeviceTensor | None = None,
        *,
        residual: DeviceTensor | None = None,
        out: DeviceTensor | None = None,
    ) -> DeviceTensor:
        """x @ weightᵀ + bias (+ residual), as torch.nn.Linear: x [..., in], weight [out, in],
        bias [out] (f32/f16/bf16). x and weight may be strided views BLAS can read (a slice of
        columns, a transposed weight, leading axes of any strides); others are refused with a
        ValueError pointing at `.contiguous()`. Queued on the backend's stream. A repeated
        call of the same layouts is served by a plan (`OpsBase._planned`).

        `residual`: a contiguous tensor of the result's shape and dtype added too (a
        transformer's skip connection), which `out` may be (in place). The addends go first,
        `residual + bias` in one pass, and BLAS adds the product to them (beta = 1): one pass
        over the result instead of three."""
        call = plan_key(x, weight, bias, residual, out)
        if call is not None:
            call = ("linear", *call)
            plans = self._plans  # (`_planned`, inline)
            planned = None if plans is None or self._releaser is None else plans.get(call)
            if planned is not None:
                y = self._planned_output(planned, (x, weight, bias), out)
                gemv = planned[7]
                if y is not None and gemv is not None:  # (the GEMV kernel: ops/gemv.py)
                    clear = residual is None or (
                        self._inputs_open((residual,)) and self._residual_clear(y, residual)
                    )
                    if clear and gemv(weight.ptr, x.ptr, y.ptr, address_of(residual), 0):
                        return y
                elif y is not None and (residual is None or self._addends(y, bias, residual)):
                    beta = 0.0 if residual is None else 1.0
                    if planned[6] is None:
                        self._gemm(planned[4], x, weight, y, planned[5], beta=beta)
                    else:
                        _prepared_gemm(planned[6], x, weight, y)
                    if bias is not None and residual is None:
                        self.add(y, bias, out=y)
                    return y
        found, t = self._linear_plan(x, weight, "weight")
        if bias is not None:
            self._same(x, bias, "bias", (weight.shape[0],))
        if residual is not None:  # (contiguous: _same refuses views)
            self._same(x, residual, "residual", found.shape)
        y = self._output(
            out, found.shape, x.dtype, inputs=(residual,), distinct_from=(x, weight, bias)
        )
        if (
            bias is None
            and self._gemv_takes(x, weight)
            and (residual is None or self._residual_clear(y, residual))
        ):
            gemv = self._linear_gemv(x, weight, y, residual)
            self._keep_plan(call, (*plan_head((x, weight, bias), y), found, None, None, gemv))
            return y
        beta = 0.0
        if residual is not None:
            self._addends(y, bias, residual)
            beta = 1.0
        self._gemm(found, x, weight, y, t.hip_data_type, beta=beta)
        if bias is not None and residual is None:
            self.add(y, bias, out=y)  # [..., out] + [out]: the broadcast row, in place
        fast = self._prepare_gemm(found, t.hip_data_type, 1.0, beta)
        self._keep_plan(
            call, (*plan_head((x, weight, bias), y), found, t.hip_data_type, fast, None)
        )
        return y

    def _addends(self, y: DeviceTensor, bias: Any, residual: DeviceTensor) -> bool:
        """y = residual + bias (bias may be None), what a linear with a residual adds its
        product to; False when residual and y overlap other than being the same tensor (the
        checked path then refuses them)."""
        if not self._residual_clear(y, residual):
            return False
        same = residual.ptr == y.ptr
        if bias is not None:
            self.add(residual, bias, out=y)
        elif not same:
            y.copy_(residual)
        return True

    @staticmethod
    def _residual_clear(y: DeviceTensor, residual: DeviceTensor) -> bool:
        """Whether residual (contiguous, y's shape) is y itself or shares no byte with it."""
        if residual.ptr == y.ptr and residual._strides == y._strides:
            return True
        low, high = residual.span()
        first, end = y.span()
        return not residual.size or not (first < high and low < end)

    def _linear_plan(
        self, x: Any, weight: Any, name: str, inner: tuple[int, ...] | None = None,
        op: str = "linear",
    ) -> tuple[MatmulPlan, FloatType]:  # fmt: skip
        """The plan of x @ weightᵀ (x [..., in], weight [out, in]); ValueError for bad shapes,
        dtypes and layouts BLAS cannot read. `inner`: plan for a C-contiguous tensor of this
        shape in x's place (mlp_swiglu's intermediate), after x's checks."""
        x = self._operand(x, "x")
        t = float_type(x.dtype, "x")
        weight = self._operand(weight, name)
        if x.ndim == 0:
            raise ValueError("x must have at least one dimension (x [..., in]), not 0")
        shape, strides = (x.shape, x._strides) if inner is None else (inner, None)
        if weight.ndim != 2 or weight.shape[1] != shape[-1]:
            raise ValueError(
                f"{name} is {weight.shape}; expected [out, {shape[-1]}] for an input {shape}"
            )
        if weight.dtype != x.dtype:
            raise ValueError(f"{name} has dtype {weight.dtype}; expected {x.dtype}")
        found = plan(shape, strides, weight.shape, weight._strides, False, True, x.dtype.itemsize)
        for copy, tensor, what in ((found.copy_a, x, "x"), (found.copy_b, weight, name)):
            if copy:
                raise ValueError(
                    f"{op}: {what} is a layout BLAS cannot read (shape {tensor.shape}, strides "
                    f"{tensor.strides}: no unit-stride axis among its last two, or a row "
                    f"stride below its row length): pass {what}.contiguous() (a copy)"
                )
        return found, t

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

        x [..., hidden], w_gate and w_up [inter, hidden], w_down [hidden, inter] (f32/f16/
        bf16); strided x and weights as `linear` takes them. Everything is validated before
        the first launch; the intermediates come from the backend's pool; queued on the
        backend's stream.
        """
        gate_plan, t = self._linear_plan(x, w_gate, "w_gate", op="mlp_swiglu")
        up_plan, _ = self._linear_plan(x, w_up, "w_up", op="mlp_swiglu")
        if w_up.shape != w_gate.shape:
            raise ValueError(f"w_up has shape {w_up.shape}; expected {w_gate.shape}")
        down_plan, _ = self._linear_plan(x, w_down, "w_down", gate_plan.shape, "mlp_swiglu")
        if down_plan.shape != x.shape:
            raise ValueError(
                f"w_down has shape {w_down.shape}; expected {(x.shape[-1], w_gate.shape[0])}"
            )
        y = self._output(out, x.shape, x.dtype, distinct_from=(x, w_gate, w_up, w_down))
        gate = self._output(None, gate_plan.shape, x.dtype)
        up = self._output(None, gate_plan.shape, x.dtype)
        self._gemm(gate_plan, x, w_gate, gate, t.hip_data_type)
        self._gemm(up_plan, x, w_up, up, t.hip_data_type)
        self.swiglu(gate, up, out=gate)
        self._gemm(down_plan, gate, w_down, y, t.hip_data_type)
        return y


def _data_type(a: DeviceTensor, b: DeviceTensor) -> int:
    """The hipDataType of matmul's operands; ValueError for differing or untaken dtypes."""
    if a.dtype != b.dtype:
        raise ValueError(f"matmul operands have dtypes {a.dtype} (a) and {b.dtype} (b); cast one")
    found = DATA_TYPES.get(a.dtype)
    if found is None:
        raise ValueError(f"matmul takes {_DTYPE_NAMES}, not {a.dtype}")
    return found


def _prepared_gemm(fast: Any, a: DeviceTensor, b: DeviceTensor, y: DeviceTensor) -> None:
    """A plan's one product call (`_prepare_gemm`) on a, b and y (b's place first when
    swapped)."""
    prepared, _, swap, (off_a, off_b, off_c) = fast
    first, second = (b, a) if swap else (a, b)
    prepared(first.ptr + off_a, second.ptr + off_b, y.ptr + off_c)


__all__ = ["LinalgOps"]
