"""Products of a decode step's few rows with dense weights, as hip-runtime's GEMV kernel
(kernels/gemv.hip), with the layer's rmsnorm, SwiGLU and residual add fused in.

A decode step multiplies 1-16 rows of activations by each weight: its time is the weight's
bytes, read once. BLAS libraries reach well below the copy rate there (cuBLAS: ~800 µs of a
1B Llama token's GEMVs against ~560 µs for their bytes on the H200, issue 38), and the ops
around each product (rmsnorm before it, the residual add after it, SwiGLU between the MLP's
products) are launches of their own that read and write rows the product reads anyway. The
kernel streams each weight row through a team of 32 lanes with 16-byte loads and does those
ops in its prologue and epilogue:

- `rmsnorm_linear(x, norm_weight, weight)`: linear(rmsnorm(x, norm_weight, eps), weight);
- `rmsnorm_swiglu(x, norm_weight, gate_up)`: swiglu(gate, up) of that product with a stacked
  [2 · inter, hidden] gate/up weight;
- `linear(x, weight, residual=...)` (ops/linalg.py) takes the kernel too, residual fused.

Which calls the kernel takes: at most `HipBackend.gemv_rows` rows of x (`GEMV_DEFAULT_ROWS`,
2, on amd and nvidia; up to 16 when asked; 0 on cpu, where the host's BLAS is faster),
f32/f16/bf16 (f32 up to 8 rows), C-contiguous operands at 16-byte aligned addresses with rows
of whole 16-byte runs. Up to 2 rows of x (any float type) and 3-8 of f32 take the scalar
tiles of kernels/gemv.h; 3-16 rows of a 16-bit type take the 16-row tile of
kernels/gemv_mma.h (tensor-core tiles on NVIDIA from sm_80; its portable path elsewhere, not
measured on AMD yet), except the normed ops of f16 (x times the norm weight, rounded to f16
for the tensor cores, can overflow where the normalized row does not). Others run the unfused
ops, with the same results up to the rounding of the intermediates (unfused, the normalized
rows and gate/up are rounded to the storage type; the kernel keeps them in f32, but for x
times the norm weight in the 16-row tile). Everything is queued on the backend's stream;
repeated calls take a launch plan.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from hip_core import hip_api
from hip_runtime.ops.base import OpsBase
from hip_runtime.ops.plans import address_of, plan_head, plan_key
from hip_runtime.tensors.dtypes import FLOAT_TYPES, float16, float_type
from hip_runtime.tensors.tensor import DeviceTensor

GEMV_TILES = (1, 2, 4, 8)  # the scalar row tiles (kernels/gemv.h: gemv.hip's gemv_*r<R>)
GEMV_TENSOR_TILE = 16  # the 16-row tile (kernels/gemv_mma.h: gemv.hip's gemv_*r16)
GEMV_MAX_ROWS = GEMV_TENSOR_TILE
#: Rows of a 16-bit x from which the 16-row tile takes a product (fewer: the scalar tiles).
_TENSOR_TILE_FROM = 3
#: The default on amd and nvidia: up to two rows. A 1B Llama's decode step on the H200
#: (bench_roofline): 902 µs against BLAS's 1224 at batch 1, 1152 against 1234 at 2, 2305
#: against 1240 at 4 (from four rows cuBLAS's tiles win: the head at 4 rows 243 µs against 129).
#: The 16-row tile (2026-12-03) halved the kernel's 4-row step (1218 µs) but is still below
#: cuBLAS per product from 4 rows on (bench_gemv, bf16, 16 rows: the head 196 µs against 126,
#: down 20.9 against 13.8), so it is only taken when asked (`HipBackend(gemv_rows=16)`).
GEMV_DEFAULT_ROWS = 2
_THREADS, _TEAMS = 256, 8  # a block's threads, and its teams of 32 lanes
_COLUMNS = {1: 1, 2: 2, 4: 4, 8: 4}  # output columns a team takes, by row tile (`Columns`)
_BLOCKS_PER_MULTIPROCESSOR = 4  # what `gemv_slices` aims for (8 resident at 256 threads)
_CHUNKS_PER_LANE = 2  # the fewest 16-byte chunks of a row `gemv_slices` leaves a lane
#: Teams of 32 lanes sharing a 16-column tile of the 16-row tile (kernels/gemv_mma.h's
#: `slices`): 8, one tile a block. H200 (bench_gemv, bf16, 4 and 16 rows): 8 was the fastest of
#: 1, 2, 4, 8 for every product of a 1B Llama's decode step, the head (8016 tiles) included:
#: 164.0 µs at 4 rows against 218.3 with one team a tile (a tile's rows are read in 64-byte
#: pieces, 8 rows an instruction, and 8 teams read 8 pieces of each row at once).
TILE_SLICES = 8


class GemvOps(OpsBase):
    """The fused GEMV ops; HipBackend sets `gemv_rows`."""

    #: Most rows of x the GEMV kernel takes (0: never; `HipBackend(gemv_rows=)`).
    gemv_rows: int = 0

    if TYPE_CHECKING:  # the families mixed into HipBackend beside this one

        def rmsnorm(
            self, x: DeviceTensor, weight: DeviceTensor, *, eps: float = 1e-6,
            out: DeviceTensor | None = None,
        ) -> DeviceTensor: ...  # fmt: skip

        def linear(
            self, x: DeviceTensor, weight: DeviceTensor, bias: DeviceTensor | None = None, *,
            residual: DeviceTensor | None = None, out: DeviceTensor | None = None,
        ) -> DeviceTensor: ...  # fmt: skip

        def swiglu(
            self, gate: DeviceTensor, up: DeviceTensor, *, out: DeviceTensor | None = None
        ) -> DeviceTensor: ...

    def rmsnorm_linear(
        self,
        x: DeviceTensor,
        norm_weight: DeviceTensor,
        weight: DeviceTensor,
        *,
        eps: float = 1e-6,
        residual: DeviceTensor | None = None,
        out: DeviceTensor | None = None,
    ) -> DeviceTensor:
        """linear(rmsnorm(x, norm_weight, eps=eps), weight) (+ residual): x [..., in],
        norm_weight [in], weight [out, in], residual (optional; `out` may be it) [..., out],
        all of x's float dtype. One launch where the GEMV kernel takes the call (the module's
        doc), else rmsnorm then linear."""
        return self._fused("rmsnorm_linear", x, norm_weight, weight, eps, residual, out)

    def rmsnorm_swiglu(
        self,
        x: DeviceTensor,
        norm_weight: DeviceTensor,
        gate_up: DeviceTensor,
        *,
        eps: float = 1e-6,
        out: DeviceTensor | None = None,
    ) -> DeviceTensor:
        """swiglu(g, u) where [g | u] = linear(rmsnorm(x, norm_weight, eps=eps), gate_up):
        x [..., hidden], gate_up [2 · inter, hidden] (the gate's rows, then the up
        projection's), result [..., inter]: the first half of a Llama MLP. One launch where
        the GEMV kernel takes the call, else rmsnorm, linear and swiglu."""
        return self._fused("rmsnorm_swiglu", x, norm_weight, gate_up, eps, None, out)

    # --- the shared path ----------------------------------------------------------------------

    def _fused(
        self,
        op: str,
        x: DeviceTensor,
        norm_weight: DeviceTensor,
        weight: DeviceTensor,
        eps: float,
        residual: DeviceTensor | None,
        out: DeviceTensor | None,
    ) -> DeviceTensor:
        pairs = op == "rmsnorm_swiglu"
        key = plan_key(x, norm_weight, weight, residual, out)
        if key is not None:
            key = (op, *key)
            plan = self._planned(key)
            if plan is not None and eps == plan[5] and type(eps) is float:
                y = self._planned_output(plan, (x, norm_weight, weight, residual), out)
                if y is not None:
                    pointers = (weight.ptr, x.ptr, y.ptr, address_of(residual), norm_weight.ptr)
                    if not plan[4](*pointers):  # (declined: a capture, another thread in it)
                        self._gemv_launch(x, weight, y, residual, norm_weight, eps, pairs)
                    return y
        if not isinstance(eps, (int, float)) or isinstance(eps, bool):
            raise TypeError(f"{op}: eps must be a real number, not {type(eps).__name__}")
        x, weight, n = self._gemv_operands(op, x, norm_weight, weight, residual, pairs)
        if not self._gemv_takes(x, weight, norm_weight):  # the same from the separate ops
            h = self.rmsnorm(x, norm_weight, eps=float(eps))
            if not pairs:
                return self.linear(h, weight, residual=residual, out=out)
            both = self.linear(h, weight)
            return self.swiglu(both[..., :n], both[..., n:], out=out)
        y = self._output(
            out, (*x.shape[:-1], n), x.dtype, inputs=(residual,),
            distinct_from=(x, norm_weight, weight),
        )  # fmt: skip
        launch = self._gemv_launch(x, weight, y, residual, norm_weight, float(eps), pairs)
        prepared = launch[0].prepare(*launch[1:], stream=self.stream)
        self._keep_plan(key, (*plan_head((x, norm_weight, weight, residual), y), prepared, eps))
        return y

    def _gemv_operands(
        self,
        op: str,
        x: Any,
        norm: Any,
        weight: Any,
        residual: Any,
        pairs: bool,
    ) -> tuple[DeviceTensor, DeviceTensor, int]:
        """(x, weight, n) of a product y [..., n] = x @ weightᵀ, checked (ValueError naming
        `op`): x [..., in] of a float dtype, `norm` (or None) [in], weight [out, in] of x's
        dtype ([2 n, in] gate/up rows when `pairs`), `residual` (or None) of y's shape."""
        x = self._tensor(x, f"{op}: x")
        float_type(x.dtype, f"{op}: x")  # (a ValueError for other dtypes)
        if x.ndim == 0:
            raise ValueError(f"{op}: x needs at least one dimension")
        if norm is not None:
            self._same(x, norm, f"{op}: norm_weight", (x.shape[-1],))
        weight = self._tensor(weight, f"{op}: weight")
        if weight.ndim != 2 or weight.shape[1] != x.shape[-1] or weight.dtype != x.dtype:
            raise ValueError(
                f"{op}: weight is {weight.shape} {weight.dtype}; expected [out, {x.shape[-1]}] "
                f"{x.dtype}"
            )
        if pairs and weight.shape[0] % 2:
            raise ValueError(f"{op}: the gate/up weight has {weight.shape[0]} rows, not 2 · inter")
        n = weight.shape[0] // 2 if pairs else weight.shape[0]
        if residual is not None:
            self._same(x, residual, f"{op}: residual", (*x.shape[:-1], n))
        return x, weight, n

    def _gemv_takes(
        self, x: DeviceTensor, weight: DeviceTensor, norm: DeviceTensor | None = None
    ) -> bool:
        """Whether the GEMV kernel takes x @ weightᵀ (checked operands; the module's doc)."""
        if x.ndim == 0 or x.dtype not in FLOAT_TYPES or x._strides is not None:
            return False
        rows = x.size // x.shape[-1] if x.shape[-1] else 0
        within = gemv_takes_rows(rows, x.dtype.itemsize, self.gemv_rows)
        if not within or weight._strides is not None:
            return False
        tile = gemv_tile(rows, x.dtype.itemsize)
        if tile == GEMV_TENSOR_TILE and norm is not None and x.dtype == float16:
            return False  # (f16 x times the norm weight may overflow: the module's doc)
        run = weight.shape[1] * x.dtype.itemsize
        return not (
            run % 16 or x.ptr % 16 or weight.ptr % 16 or (norm is not None and norm.ptr % 16)
        )

    def _gemv_launch(
        self,
        x: DeviceTensor,
        weight: DeviceTensor,
        y: DeviceTensor,
        residual: DeviceTensor | None,
        norm: DeviceTensor | None,
        eps: float,
        pairs: bool,
    ) -> tuple[Any, ...]:
        """Queue y = x @ weightᵀ (with the fusions asked for) and return (kernel, grid, block,
        its arguments): what `Kernel.prepare` takes for the plan."""
        k = weight.shape[1]
        rows, n = x.size // k, y.shape[-1]
        tile = gemv_tile(rows, x.dtype.itemsize)
        assert tile is not None  # (_gemv_takes)
        fusion = "swiglu_" if pairs else ("norm_" if norm is not None else "")
        name = f"gemv_{fusion}r{tile}_{FLOAT_TYPES[x.dtype].suffix}"
        kernel = self._kernel("gemv.hip", name)
        processors = self.device.properties.multiprocessors
        if tile == GEMV_TENSOR_TILE:
            slices = TILE_SLICES
            grid = tile_blocks(n, slices)
        else:
            slices = gemv_slices(n, k, x.dtype.itemsize, _COLUMNS[tile], processors)
            grid = -(-n // (_TEAMS // slices * _COLUMNS[tile]))
        args = (weight, x, y, residual, norm, n, k, rows, slices, eps, k, n, n)
        kernel.launch(grid, _THREADS, *args, stream=self.stream)
        return (kernel, grid, _THREADS, *args)

    def _linear_gemv(
        self, x: DeviceTensor, weight: DeviceTensor, y: DeviceTensor, residual: DeviceTensor | None
    ) -> Any:
        """linear's call through the kernel (ops/linalg.py checked the operands and that the
        kernel takes them): y = x @ weightᵀ (+ residual, which is y or shares no byte with
        it). Returns the prepared launch for linear's plan."""
        launch = self._gemv_launch(x, weight, y, residual, None, 0.0, False)
        return launch[0].prepare(*launch[1:], stream=self.stream)


def gemv_slices(n: int, k: int, itemsize: int, columns: int, multiprocessors: int) -> int:
    """Teams of 32 lanes that share a group of output columns (kernels/gemv.hip's `slices`):
    the fewest of 1, 2, 4, 8 that give the launch _BLOCKS_PER_MULTIPROCESSOR blocks a
    multiprocessor, while each lane keeps at least _CHUNKS_PER_LANE 16-byte chunks of a row."""
    chunks = k * itemsize // 16
    for slices in (1, 2, 4):
        blocks = -(-n // (_TEAMS // slices * columns))
        enough = blocks >= _BLOCKS_PER_MULTIPROCESSOR * multiprocessors
        if enough or chunks < _CHUNKS_PER_LANE * 32 * slices * 2:
            return slices
    return 8


def gemv_takes_rows(rows: int, itemsize: int, limit: int) -> bool:
    """Whether `rows` rows of x (elements of `itemsize` bytes) are within what the GEMV kernel
    takes under a `gemv_rows` of `limit` (and a tile holds them): the fused ops' rows, where
    each norm stays inside its product. The operands' layouts decide the rest (`_gemv_takes`)."""
    return 0 < rows <= limit and gemv_tile(rows, itemsize) is not None


def gemv_tile(rows: int, itemsize: int) -> int | None:
    """The row tile of a product of `rows` rows of x (elements of `itemsize` bytes): the 16-row
    tile from _TENSOR_TILE_FROM rows of a 16-bit type, else the smallest scalar tile that holds
    them; None past the scalar tiles (f32 beyond 8 rows: the unfused ops)."""
    if itemsize == 2 and _TENSOR_TILE_FROM <= rows <= GEMV_TENSOR_TILE:
        return GEMV_TENSOR_TILE
    return next((tile for tile in GEMV_TILES if tile >= rows), None)


def tile_blocks(n: int, slices: int) -> int:
    """The 16-row tile's grid: blocks of 8 / slices tiles of 16 output columns."""
    tiles = -(-n // GEMV_TENSOR_TILE)
    return -(-tiles // (_TEAMS // slices))


def gemv_row_limit(setting: int | None) -> int:
    """HipBackend's `gemv_rows=` checked: None is the platform's default (GEMV_DEFAULT_ROWS
    where device memory is the GPU's, 0 on cpu); ValueError unless 0..GEMV_MAX_ROWS."""
    if setting is None:
        return 0 if hip_api().traits.host_memory_is_device_memory else GEMV_DEFAULT_ROWS
    if type(setting) is not int or not 0 <= setting <= GEMV_MAX_ROWS:
        raise ValueError(f"gemv_rows must be an int in 0..{GEMV_MAX_ROWS}, not {setting!r}")
    return setting


__all__ = [
    "GEMV_DEFAULT_ROWS", "GEMV_MAX_ROWS", "GEMV_TENSOR_TILE", "GEMV_TILES", "TILE_SLICES",
    "GemvOps", "gemv_row_limit", "gemv_slices", "gemv_takes_rows", "gemv_tile", "tile_blocks",
]  # fmt: skip
