"""Convolutions: conv1d, conv2d, conv_transpose1d, conv_transpose2d (torch's semantics).

Layouts: NCHW (the default; x [N, C, H, W], weight [K, C / groups, R, S]) or, with
`channels_last=True`, NHWC (x [N, H, W, C], weight [K, R, S, C / groups], the result
[N, Ho, Wo, K]); 1-D convolutions are [N, C, L] / [N, L, C] with weights [K, C / groups, R] /
[K, R, C / groups]. Every tensor is C-contiguous in its layout (strided views are refused,
pointing at `.contiguous()`), of one dtype: f32, f16 or bf16, accumulated in f32.

Where the work goes: the backend's DNN library (`backend._dnn()`: MIOpen on amd, cuDNN on
nvidia) when there is one and it takes the case; otherwise the portable kernels
(kernels/conv.hip): a direct kernel for depthwise convolutions (one input channel per
group), and im2col (col2im for the transposed ones) around hipBLAS GEMMs
(`hip_runtime.libraries.blas`) for the rest, a 1x1 stride-1 convolution reading x itself as the
GEMM's operand. The im2col workspace comes from the backend's pool, at most `COL_BYTES` at a time
(the batch is cut into chunks). Bias is one pointwise add (fused into the depthwise and col2im
kernels). Everything is queued on the backend's stream; a repeated call of the same layouts and
arguments is served by a plan (`OpsBase._planned`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from hip_core import DevicePointer, Kernel
from hip_runtime.ops.base import OpsBase
from hip_runtime.ops.conv_gemm import forward_chunks, transpose_chunks
from hip_runtime.ops.conv_geometry import (
    ConvGeometry,
    conv_geometry,
    conv_transpose_geometry,
    ints,
    nchw,
)
from hip_runtime.ops.plans import plan_head, plan_key
from hip_runtime.tensors.dtypes import FLOAT_TYPES, FloatType
from hip_runtime.tensors.tensor import DeviceTensor

COL_BYTES = 256 << 20  # the largest im2col / col2im workspace one chunk of the batch takes
_BLOCK = 256  # per-output kernels: block size
_SUFFIXES = ("f32", "f16", "bf16")


class ConvOps(OpsBase):
    #: False: never the DNN library, always the portable kernels (bench_conv compares both).
    _conv_use_library: bool = True

    if TYPE_CHECKING:  # the pointwise family's add, mixed into HipBackend beside this one

        def add(self, a: Any, b: Any, *, out: DeviceTensor | None = None) -> DeviceTensor: ...

    def conv2d(
        self,
        x: DeviceTensor,
        weight: DeviceTensor,
        bias: DeviceTensor | None = None,
        stride: Any = 1,
        padding: Any = 0,
        dilation: Any = 1,
        groups: int = 1,
        *,
        channels_last: bool = False,
        out: DeviceTensor | None = None,
    ) -> DeviceTensor:
        """torch.nn.functional.conv2d: x [N, C, H, W] * weight [K, C / groups, R, S] + bias
        [K] → [N, K, Ho, Wo] (NHWC with `channels_last`, see the module doc).

        stride, dilation: an int or (h, w); padding: an int, (h, w), "valid" (0) or "same"
        (stride 1; an even window pads one more below and right, as torch); groups divides C
        and K (groups == C: depthwise). Queued on the backend's stream.
        """
        args = (stride, padding, dilation, groups)
        return self._conv_call("conv2d", 2, False, x, weight, bias, args, channels_last, out)

    def conv1d(
        self,
        x: DeviceTensor,
        weight: DeviceTensor,
        bias: DeviceTensor | None = None,
        stride: Any = 1,
        padding: Any = 0,
        dilation: Any = 1,
        groups: int = 1,
        *,
        channels_last: bool = False,
        out: DeviceTensor | None = None,
    ) -> DeviceTensor:
        """torch.nn.functional.conv1d: x [N, C, L] * weight [K, C / groups, R] + bias [K] →
        [N, K, Lo] ([N, L, C] and [K, R, C / groups] → [N, Lo, K] with `channels_last`);
        arguments as conv2d's, one axis. Queued on the backend's stream."""
        args = (stride, padding, dilation, groups)
        return self._conv_call("conv1d", 1, False, x, weight, bias, args, channels_last, out)

    def conv_transpose2d(
        self,
        x: DeviceTensor,
        weight: DeviceTensor,
        bias: DeviceTensor | None = None,
        stride: Any = 1,
        padding: Any = 0,
        output_padding: Any = 0,
        groups: int = 1,
        dilation: Any = 1,
        *,
        channels_last: bool = False,
        out: DeviceTensor | None = None,
    ) -> DeviceTensor:
        """torch.nn.functional.conv_transpose2d: x [N, Cin, H, W], weight [Cin, Cout / groups,
        R, S] (NHWC: x [N, H, W, Cin], weight [Cin, R, S, Cout / groups]), bias [Cout] →
        [N, Cout, Ho, Wo] with Ho = (H - 1)·stride - 2·padding + dilation·(R - 1) +
        output_padding + 1 (output_padding < stride or dilation). Queued on the backend's
        stream."""
        args = (stride, padding, output_padding, groups, dilation)
        return self._conv_call("conv_transpose2d", 2, True, x, weight, bias, args,
                               channels_last, out)  # fmt: skip

    def conv_transpose1d(
        self,
        x: DeviceTensor,
        weight: DeviceTensor,
        bias: DeviceTensor | None = None,
        stride: Any = 1,
        padding: Any = 0,
        output_padding: Any = 0,
        groups: int = 1,
        dilation: Any = 1,
        *,
        channels_last: bool = False,
        out: DeviceTensor | None = None,
    ) -> DeviceTensor:
        """torch.nn.functional.conv_transpose1d: x [N, Cin, L], weight [Cin, Cout / groups,
        R] ([N, L, Cin] and [Cin, R, Cout / groups] with `channels_last`) → [N, Cout, Lo];
        arguments as conv_transpose2d's, one axis. Queued on the backend's stream."""
        args = (stride, padding, output_padding, groups, dilation)
        return self._conv_call("conv_transpose1d", 1, True, x, weight, bias, args,
                               channels_last, out)  # fmt: skip

    # --- validation and plans ----------------------------------------------------------------

    def _conv_call(
        self, op: str, dims: int, transposed: bool, x: Any, weight: Any, bias: Any,
        args: tuple[Any, ...], channels_last: bool, out: Any,
    ) -> DeviceTensor:  # fmt: skip
        key = plan_key(x, weight, bias, out)
        if key is not None:
            key = (op, *key, key_part(args), bool(channels_last))
            plan = self._planned(key)
            if plan is not None:
                y = self._planned_output(plan, (x, weight, bias), out)
                if y is not None:
                    geometry, t, shapes, launch = plan[4:]
                    if launch is not None and bias is None and self._conv_use_library:
                        launch(x.ptr, weight.ptr, y.ptr)  # the library's call, planned
                        return y
                    if dims == 2:  # (1-D ones are 2-D views with a unit H axis)
                        self._conv_run(geometry, transposed, x, weight, bias, y, t)
                        return y
                    x4, w4, y4 = (v.reshape(s) for v, s in zip((x, weight, y), shapes, strict=True))
                    self._conv_run(geometry, transposed, x4, w4, bias, y4, t)
                    return y
        x = self._tensor(x, "x")
        t = spatial_type(op, x)
        weight = self._tensor(weight, "weight")
        if weight.dtype != x.dtype:
            raise ValueError(f"{op}: weight has dtype {weight.dtype}; expected {x.dtype}")
        for tensor, name in ((x, "x"), (weight, "weight")):
            if tensor.ndim != dims + 2:
                raise ValueError(f"{op}: {name} must be {dims + 2}-D, not {tensor.shape}")
        x4, w4 = _as_2d(x.shape, channels_last), _as_2d(weight.shape, channels_last)
        geometry = self._conv_geometry(op, dims, transposed, x4, w4, args, bool(channels_last))
        channels = geometry.c if transposed else geometry.k
        if bias is not None:
            self._same(x, bias, "bias", (channels,))
        y4 = (
            (geometry.n, geometry.h, geometry.w, channels)
            if transposed
            else (geometry.n, geometry.ho, geometry.wo, channels)
        )
        if not channels_last:
            y4 = (y4[0], y4[3], y4[1], y4[2])
        shape = y4 if dims == 2 else _as_1d(y4, channels_last)
        y = self._output(out, shape, x.dtype, distinct_from=(x, weight, bias))
        shapes = (x4, w4, y4)
        launch = self._conv_run(geometry, transposed, x.reshape(x4), weight.reshape(w4), bias,
                                y.reshape(y4), t)  # fmt: skip
        if y.size:
            head = plan_head((x, weight, bias), y)
            self._keep_plan(key, (*head, geometry, t, shapes, launch))
        return y

    @staticmethod
    def _conv_geometry(
        op: str, dims: int, transposed: bool, x4: tuple[int, ...], w4: tuple[int, ...],
        args: tuple[Any, ...], channels_last: bool,
    ) -> ConvGeometry:  # fmt: skip
        """The 4-D geometry of a call; 1-D arguments get a unit axis in front (padding 0)."""
        if dims == 1:
            names = ("stride", "padding", "output_padding", "groups", "dilation") if transposed \
                else ("stride", "padding", "dilation", "groups")  # fmt: skip
            fills = {"stride": 1, "dilation": 1, "padding": 0, "output_padding": 0}
            widened = []
            for name, value in zip(names, args, strict=True):
                if name == "groups" or isinstance(value, str):
                    widened.append(value)
                else:
                    low = 1 if fills[name] else 0
                    widened.append((fills[name], *ints(value, name, op, 1, minimum=low)))
            args = tuple(widened)
        if transposed:
            return conv_transpose_geometry(op, x4, w4, args, channels_last)
        return conv_geometry(op, x4, w4, args, channels_last)

    # --- the work ------------------------------------------------------------------------------

    def _conv_run(
        self, g: ConvGeometry, transposed: bool, x: DeviceTensor, w: DeviceTensor,
        bias: DeviceTensor | None, y: DeviceTensor, t: FloatType,
    ) -> Callable[[int, int, int], None] | None:  # fmt: skip
        """Queue a validated convolution: the library's, else the portable kernels'. The
        library's call as a function of the addresses of x, w and y (hip_runtime.libraries.dnn
        `conv_launcher`: the plan keeps it), or None (the portable kernels)."""
        if y.size == 0:
            return None  # (no image, or no output channel: nothing to compute)
        dnn = self._conv_dnn()
        if dnn is not None and g.symmetric:
            launch: Callable[[int, int, int], None] | None = dnn.conv_launcher(
                transposed, x, w, y, stride=g.stride, padding=g.padding, dilation=g.dilation,
                groups=g.groups, channels_last=g.channels_last,
            )  # fmt: skip
            if launch is not None:
                launch(x.ptr, w.ptr, y.ptr)
                if bias is not None:
                    self._conv_add_bias(y, bias, g.channels_last)
                return launch
        if transposed:
            self._conv_transposed(g, x, w, bias, y, t)
        elif g.c == g.groups:  # one input channel per group: the direct kernel
            kernel = self._kernel("conv.hip", f"conv_depthwise_{t.suffix}")
            launch_outputs(self, kernel, y.size, x, w, bias, y, g.n, g.c, g.h, g.w, g.k, g.r,
                           g.s, g.ho, g.wo, *g.launch_args(), int(g.channels_last))  # fmt: skip
        else:
            self._conv_forward(g, x, w, y, t)
            if bias is not None:
                self._conv_add_bias(y, bias, g.channels_last)
        return None

    def _conv_dnn(self) -> Any:
        """The backend's DNN library (hip_runtime.libraries.dnn, the `_dnn` accessor), or None."""
        accessor = getattr(self, "_dnn", None)
        if not self._conv_use_library or accessor is None:
            return None
        return accessor()

    def _conv_add_bias(self, y: DeviceTensor, bias: DeviceTensor, channels_last: bool) -> None:
        """y += bias along y's channel axis (the last for NHWC, the second for NCHW)."""
        self.add(y, bias if channels_last else bias.reshape(bias.shape[0], 1, 1), out=y)

    def _conv_forward(
        self, g: ConvGeometry, x: DeviceTensor, w: DeviceTensor, y: DeviceTensor, t: FloatType
    ) -> None:
        """im2col + GEMM per chunk of the batch (conv_gemm.forward_chunks: planned once)."""
        size = x.dtype.itemsize
        suffix = "nhwc" if g.channels_last else "nchw"
        im2col = self._kernel("conv.hip", f"im2col_{suffix}_{t.suffix}")
        for chunk in forward_chunks(g, size, COL_BYTES):
            x_at = x.ptr + chunk.n0 * g.c * g.h * g.w * size
            y_at = y.ptr + chunk.n0 * g.k * g.ho * g.wo * size
            col_at, col = x_at, None
            if chunk.col:
                col = self._output(None, (chunk.col,), x.dtype)
                col_at = col.ptr
                # 16-byte runs: of channels (NHWC: x's too), of output pixels (NCHW: col's).
                if g.channels_last:
                    vec = _vector(g.c // g.groups, size, x_at, col_at)
                else:
                    vec = _vector(g.ho * g.wo, size, col_at)
                launch_outputs(self, im2col, chunk.col // vec, DevicePointer(x_at), col,
                               chunk.nb, g.c, g.h, g.w, g.groups, g.r, g.s, g.ho, g.wo,
                               *g.launch_args(), vec)  # fmt: skip
            # NHWC: Y = col @ Wᵀ (col first); NCHW: Y = W @ col (W first).
            first, second = (col_at, w.ptr) if g.channels_last else (w.ptr, col_at)
            self.blas.gemm(chunk.spec, first, second, y_at, t.hip_data_type,
                           offsets=chunk.offsets)  # fmt: skip
            del col  # (returned to the pool in stream order)

    def _conv_transposed(
        self, g: ConvGeometry, x: DeviceTensor, w: DeviceTensor, bias: DeviceTensor | None,
        y: DeviceTensor, t: FloatType,
    ) -> None:  # fmt: skip
        """GEMM into columns, then col2im's gather (bias fused), per chunk of the batch
        (conv_gemm.transpose_chunks). g is the forward convolution of y to x."""
        size = x.dtype.itemsize
        col2im = self._kernel("conv.hip", f"col2im_{t.suffix}")
        for chunk in transpose_chunks(g, size, COL_BYTES):
            x_at = x.ptr + chunk.n0 * g.k * g.ho * g.wo * size
            col = self._output(None, (chunk.col,), x.dtype)
            # NHWC: col = x @ W (x first); NCHW: col = Wᵀ @ x (W first).
            first, second = (x_at, w.ptr) if g.channels_last else (w.ptr, x_at)
            self.blas.gemm(chunk.spec, first, second, col.ptr, t.hip_data_type,
                           offsets=chunk.offsets)  # fmt: skip
            y_at = DevicePointer(y.ptr + chunk.n0 * g.c * g.h * g.w * size)
            launch_outputs(self, col2im, chunk.nb * g.c * g.h * g.w, col, bias, y_at, chunk.nb,
                           g.c, g.h, g.w, g.groups, g.r, g.s, g.ho, g.wo, *g.launch_args(),
                           int(g.channels_last))  # fmt: skip


def image_operand(
    ops: OpsBase, op: str, x: Any, channels_last: bool
) -> tuple[DeviceTensor, FloatType, tuple[int, int, int, int]]:
    """x as a pooling or upsampling input: a C-contiguous 4-D f32/f16/bf16 tensor; its
    float type and (N, C, H, W) (read from [N, H, W, C] when channels_last)."""
    x = ops._tensor(x, "x")
    t = spatial_type(op, x)
    if x.ndim != 4:
        raise ValueError(f"{op}: x must be 4-D ([N, C, H, W] or NHWC), not {x.shape}")
    return x, t, nchw(x.shape, channels_last)


def spatial_type(op: str, x: DeviceTensor) -> FloatType:
    """x's float type, one the spatial kernels take (f32, f16, bf16); ValueError naming op."""
    found = FLOAT_TYPES.get(x.dtype)
    if found is None or found.suffix not in _SUFFIXES:
        raise ValueError(f"{op} takes float32, float16 and bfloat16 tensors; x has {x.dtype}")
    return found


def launch_outputs(ops: OpsBase, kernel: Kernel, n: int, *args: Any) -> None:
    """A grid-stride kernel of one thread per output (n outputs), on the backend's stream."""
    if n > 0:
        grid = min(-(-n // _BLOCK), ops._grid_cap)
        kernel.launch(grid, _BLOCK, *args, stream=ops.stream)


def _vector(run: int, size: int, *addresses: int) -> int:
    """Elements an im2col thread moves: a 16-byte vector where the run (of channels, or of
    output pixels) and every address allow it, else 1."""
    lanes = 16 // size
    if run % lanes == 0 and all(a % 16 == 0 for a in addresses):
        return lanes
    return 1


def _as_2d(shape: tuple[int, ...], channels_last: bool) -> tuple[int, ...]:
    """A 3-D (1-D convolution) shape with a unit H axis: [N, C, L] → [N, C, 1, L], [N, L, C]
    → [N, 1, L, C]; 4-D shapes as they are."""
    if len(shape) == 4:
        return shape
    return (shape[0], 1, *shape[1:]) if channels_last else (*shape[:2], 1, shape[2])


def _as_1d(shape: tuple[int, ...], channels_last: bool) -> tuple[int, ...]:
    """`_as_2d` undone."""
    return (shape[0], *shape[2:]) if channels_last else (*shape[:2], shape[3])


def key_part(args: tuple[Any, ...]) -> Any:
    """An op's arguments as a hashable part of its plan key (lists as tuples), or a fresh
    object no plan matches (anything unhashable: the checked path says what is wrong)."""
    part = tuple(tuple(a) if isinstance(a, list) else a for a in args)
    try:
        hash(part)
    except TypeError:
        return object()
    return part


__all__ = [
    "COL_BYTES", "ConvOps", "image_operand", "key_part", "launch_outputs", "spatial_type",
]  # fmt: skip
