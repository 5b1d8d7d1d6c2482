"""2-D pooling: max_pool2d, avg_pool2d, adaptive_avg_pool2d (torch's semantics).

x [N, C, H, W] (or [N, H, W, C] with `channels_last=True`, the result then NHWC too),
C-contiguous, f32/f16/bf16 (f32 accumulation). max_pool2d and avg_pool2d go to the backend's
DNN library when it has one and the case is one it expresses (symmetric padding: no
`ceil_mode` window past the padding, no dilation), except max over 2x2 / 3x3 windows in
16-byte runs of NHWC channels, or NCHW at column stride 2 with 16-byte aligned rows (pool.hip's
variants for them: every tap loaded at once; in NCHW several outputs a thread from one
16-byte vector of each window row; at stride 2 pool_nhwc.hip and pool_columns.hip, which take
the column two windows share from the neighbouring thread); otherwise kernels/pool.hip, one
thread per output.
Queued on the backend's stream; a repeated call of the same layouts and arguments is served by
a plan (`OpsBase._planned`).
"""

from __future__ import annotations

from typing import Any

from hip_runtime.ops.base import OpsBase
from hip_runtime.ops.conv_geometry import ints, pool_out_size
from hip_runtime.ops.convolution import image_operand, key_part, launch_outputs
from hip_runtime.ops.plans import plan_head, plan_key
from hip_runtime.tensors.tensor import DeviceTensor

_MODES = {"max": 0, "avg_include_pad": 1, "avg_exclude_pad": 2, "adaptive": 3}
_NCHW_ROWS = True  # NCHW 2x2 / 3x3 max at column stride 2: pool.hip's max_pool2d_rows
_KERNELS_FIRST = True  # pool.hip's small-window max variants before the DNN library
_NHWC_PAIRS = False  # ... in NHWC at row stride 2: two output rows a thread (to measure)
_NCHW_PAIRS = False  # ... max_pool2d_rows at row stride 2: two output rows a thread (to measure)
# ... NHWC at stride 2 without dilation, through shared memory (each input row loaded by one
# block, not by every window that holds it: pool_tiled_nhwc.hip)
_NHWC_TILED = False
# ... NCHW at stride 2 without dilation: a thread's 16-byte column vector through a pair of
# output rows (pool_columns.hip). H200, bf16 and f32, 2x2 and 3x3, 16 to 224 columns: faster
# than max_pool2d_rows at every measured shape but one, level there ([64, 1024, 16, 16] bf16
# 2x2: 14.3 against 13.8 µs); 0.81 against 0.59 of the copy rate at [32, 64, 112, 112] bf16
# 3x3, 0.85 against 0.63 at [128, 256, 32, 32].
_NCHW_COLUMNS = True
# ... NHWC at stride 2 without dilation: a thread's 16-byte run of channels of one output, the
# window's first column from the thread one pixel before by a shuffle (pool_nhwc.hip). H200:
# faster than pool.hip's one-output kernel at every measured shape, bf16 [32, 112, 112, 64]
# 3x3 / 2 0.79 of the copy rate against 0.73.
_NHWC_SHUFFLE = True
_NHWC_TILE_RUNS = 8  # at most this many 16-byte channel runs a block (8, 4, 2 or 1)
_TILE_THREADS = 256  # the tiled kernels' block: their HIPK_POOL_TILE_THREADS (any grid)


class PoolingOps(OpsBase):
    _conv_use_library: bool

    def max_pool2d(
        self,
        x: DeviceTensor,
        kernel_size: Any,
        stride: Any = None,
        padding: Any = 0,
        dilation: Any = 1,
        ceil_mode: bool = False,
        *,
        channels_last: bool = False,
        out: DeviceTensor | None = None,
    ) -> DeviceTensor:
        """torch.nn.functional.max_pool2d: the largest value of each window (NaN if any is).
        kernel_size, stride (None: kernel_size), padding (at most half the window) and
        dilation: an int or (h, w). Queued on the backend's stream."""
        args = ("max", kernel_size, stride, padding, dilation, bool(ceil_mode))
        return self._pool_call("max_pool2d", x, args, channels_last, out)

    def avg_pool2d(
        self,
        x: DeviceTensor,
        kernel_size: Any,
        stride: Any = None,
        padding: Any = 0,
        ceil_mode: bool = False,
        count_include_pad: bool = True,
        *,
        channels_last: bool = False,
        out: DeviceTensor | None = None,
    ) -> DeviceTensor:
        """torch.nn.functional.avg_pool2d: each window's mean; `count_include_pad` divides by
        the window's size within the padded image, else by its taps inside the image.
        Queued on the backend's stream."""
        mode = "avg_include_pad" if count_include_pad else "avg_exclude_pad"
        args = (mode, kernel_size, stride, padding, 1, bool(ceil_mode))
        return self._pool_call("avg_pool2d", x, args, channels_last, out)

    def adaptive_avg_pool2d(
        self,
        x: DeviceTensor,
        output_size: Any,
        *,
        channels_last: bool = False,
        out: DeviceTensor | None = None,
    ) -> DeviceTensor:
        """torch.nn.functional.adaptive_avg_pool2d: output_size (an int, or (h, w) where None
        keeps the input's size) windows from floor(i·H/Ho) to ceil((i+1)·H/Ho). Queued on the
        backend's stream."""
        return self._pool_call("adaptive_avg_pool2d", x, ("adaptive", output_size),
                               channels_last, out)  # fmt: skip

    def _pool_call(
        self, op: str, x: Any, args: tuple[Any, ...], channels_last: bool, out: Any
    ) -> DeviceTensor:
        key = plan_key(x, out)
        if key is not None:
            key = (op, *key, key_part(args), bool(channels_last))
            plan = self._planned(key)
            if plan is not None:
                y = self._planned_output(plan, (x,), out)
                if y is not None:
                    self._pool_run(x, y, *plan[4:])
                    return y
        x, t, (n, c, h, w) = image_operand(self, op, x, bool(channels_last))
        if args[0] == "adaptive":
            ho, wo = _output_size(op, args[1], h, w)
            window: tuple[int, ...] = (0,) * 8
        else:
            *found, ho, wo = _window(op, h, w, *args[1:])
            window = tuple(found)
        shape = (n, ho, wo, c) if channels_last else (n, c, ho, wo)
        y = self._output(out, shape, x.dtype, distinct_from=(x,))
        dims = (n, c, h, w, ho, wo)
        plan = (_MODES[args[0]], dims, window, bool(channels_last), t.suffix)
        self._pool_run(x, y, *plan)
        if y.size:
            self._keep_plan(key, (*plan_head((x,), y), *plan))
        return y

    def _pool_run(
        self, x: DeviceTensor, y: DeviceTensor, mode: int, dims: tuple[int, ...],
        window: tuple[int, ...], channels_last: bool, suffix: str,
    ) -> None:  # fmt: skip
        """Queue a validated pooling: the library's where it takes it, else pool.hip's."""
        if y.size == 0:
            return
        n, c, h, w, ho, wo = dims
        kh, kw, sh, sw, ph, pw, dh, dw = window
        lanes = 16 // x.dtype.itemsize  # channels per thread: one 16-byte run in NHWC
        vec = lanes if channels_last and c % lanes == 0 and not (x.ptr | y.ptr) % 16 else 1
        small_max = mode == 0 and kh == kw and kh in (2, 3)
        # NCHW at column stride 2: V / 2 outputs a thread from one 16-byte vector of each
        # window row (pool.hip's max_pool2d_rows), where rows start 16-byte aligned.
        rows = (_NCHW_ROWS and small_max and not channels_last and (sw, dw) == (2, 1)
                and w % lanes == 0 and not x.ptr % 16)  # fmt: skip
        accessor = getattr(self, "_dnn", None)
        # The library's output size is the floor one: only then is its padding torch's. Max
        # over a 2x2 / 3x3 window in 16-byte runs of channels stays with pool.hip, whose
        # variant for them loads every tap at once (H100, ResNet's 3x3/2 pool, bf16 NHWC:
        # 0.72 of the copy rate; cuDNN's NHWC kernel 0.51); so does max_pool2d_rows' case
        # (cuDNN's NCHW kernel: 0.25).
        kernel_is_faster = _KERNELS_FIRST and small_max and (vec > 1 or rows)
        if (
            self._conv_use_library and accessor is not None and mode != 3
            and not kernel_is_faster
            and (dh, dw) == (1, 1)
            and (ho, wo) == ((h + 2 * ph - kh) // sh + 1, (w + 2 * pw - kw) // sw + 1)
        ):  # fmt: skip
            dnn = accessor()
            name = next(k for k, v in _MODES.items() if v == mode)
            if dnn is not None and dnn.pool_forward(
                x, y, mode=name, window=(kh, kw), stride=(sh, sw), padding=(ph, pw),
                channels_last=channels_last,
            ):  # fmt: skip
                return
        stride_2 = small_max and (sh, sw, dh, dw) == (2, 2, 1, 1)
        runs = -(-wo // (lanes // 2))  # NCHW threads a row (the row and column kernels')
        if rows and _NCHW_COLUMNS and stride_2:
            threads = _whole_warps(n * c * -(-ho // 2) * runs)  # planes x row pairs x runs
            kernel = self._kernel("pool_columns.hip", f"max_pool2d_columns_{suffix}")
            launch_outputs(self, kernel, threads, x, y, n * c, h, w, ho, wo, kh, ph, pw)
            return
        if rows:
            pairs = 2 if _NCHW_PAIRS and (sh, dh) == (2, 1) else 1  # output rows a thread
            name = "max_pool2d_row_pairs" if pairs == 2 else "max_pool2d_rows"
            kernel = self._kernel("pool.hip", f"{name}_{suffix}")
            threads = n * c * -(-ho // pairs) * runs
            launch_outputs(self, kernel, threads, x, y, n * c, h, w, ho, wo, kh, sh, ph, pw, dh)
            return
        if _NHWC_SHUFFLE and stride_2 and vec > 1:
            threads = _whole_warps(n * ho * wo * (c // vec))  # output pixels x channel runs
            kernel = self._kernel("pool_nhwc.hip", f"max_pool2d_nhwc_{suffix}")
            launch_outputs(self, kernel, threads, x, y, n, c, h, w, ho, wo, kh, ph, pw)
            return
        if _NHWC_TILED and stride_2 and vec > 1:
            # A block: `runs` 16-byte runs of channels of 8 output columns x 32 / runs rows.
            runs = next(r for r in (8, 4, 2, 1) if r <= _NHWC_TILE_RUNS and (c // vec) % r == 0)
            tiles = n * (c // vec // runs) * -(-ho // (32 // runs)) * -(-wo // 8)
            kernel = self._kernel("pool_tiled_nhwc.hip", f"max_pool2d_tiled_nhwc_{suffix}")
            kernel.launch(min(tiles, self._grid_cap), _TILE_THREADS, x, y, n, c, h, w, ho, wo,
                          kh, ph, pw, runs, stream=self.stream)  # fmt: skip
            return
        # Two output rows a thread share the middle input row (loaded once, not twice).
        pairs = _NHWC_PAIRS and small_max and vec > 1 and (sh, dh) == (2, 1)
        threads = n * (c // vec) * -(-ho // (2 if pairs else 1)) * wo
        kernel = self._kernel(
            "pool.hip", "max_pool2d_pairs_" + suffix if pairs else "pool2d_" + suffix
        )
        launch_outputs(self, kernel, threads, x, y, n, c, h, w, ho, wo, *window, mode,
                       int(channels_last), vec)  # fmt: skip


def _whole_warps(threads: int) -> int:
    """`threads` rounded up to 64, a multiple of every warp size: the launch of a kernel whose
    lanes exchange values by shuffles (common.h's whole_warps, which the kernel also takes)."""
    return -(-threads // 64) * 64


def _window(
    op: str, h: int, w: int, kernel_size: Any, stride: Any, padding: Any, dilation: Any,
    ceil_mode: bool,
) -> tuple[int, ...]:  # fmt: skip
    """(kh, kw, sh, sw, ph, pw, dh, dw, ho, wo) of a pooling; ValueError as torch's."""
    kh, kw = ints(kernel_size, "kernel_size", op, 2, minimum=1)
    sh, sw = (kh, kw) if stride is None else ints(stride, "stride", op, 2, minimum=1)
    ph, pw = ints(padding, "padding", op, 2, minimum=0)
    dh, dw = ints(dilation, "dilation", op, 2, minimum=1)
    if 2 * ph > kh or 2 * pw > kw:
        raise ValueError(f"{op}: padding {(ph, pw)} must be at most half the window {(kh, kw)}")
    ho = pool_out_size(op, h, kh, sh, ph, dh, ceil_mode)
    wo = pool_out_size(op, w, kw, sw, pw, dw, ceil_mode)
    return (kh, kw, sh, sw, ph, pw, dh, dw, ho, wo)


def _output_size(op: str, size: Any, h: int, w: int) -> tuple[int, int]:
    """adaptive_avg_pool2d's (ho, wo): an int, or a pair of ints or None (the input's)."""
    if isinstance(size, (tuple, list)) and len(size) == 2:
        pair = tuple(full if s is None else s for s, full in zip(size, (h, w), strict=True))
        return ints(pair, "output_size", op, 2, minimum=1)  # type: ignore[return-value]
    return ints(size, "output_size", op, 2, minimum=1)  # type: ignore[return-value]


__all__ = ["PoolingOps"]
