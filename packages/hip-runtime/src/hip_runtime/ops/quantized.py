"""Quantized checkpoint blocks (GGUF's Q8_0 and Q4_0) dequantized and rearranged on the device.

The loader copies a quantized tensor's stored bytes (TensorRecord.nbytes, encoding "q8_0" or
"q4_0") to the device as they are, then `dequantize_into` expands them into the record's
float tensor with the kernels of `kernels/dequant.hip`. `split_rows_into` rearranges them into
the split row layout that the decode GEMV reads coalesced (kernels/gemv_quant_split.hip), and
`dequantize_into(..., layout="split")` expands that layout.
"""

from __future__ import annotations

import numpy as np

from hip_core import DevicePointer, Stream
from hip_runtime.libraries.kernel_cache import KernelCache
from hip_runtime.ops.base import grid_cap, not_contiguous
from hip_runtime.tensors.dtypes import float_type
from hip_runtime.tensors.tensor import DeviceTensor

#: Quantized encodings: (elements per block, bytes per block). A block is one f16 scale `d`
#: followed by the quants, exactly as ggml stores them (ggml-common.h).
BLOCK_ENCODINGS: dict[str, tuple[int, int]] = {
    "q8_0": (32, 2 + 32),  # value = d * int8
    "q4_0": (32, 2 + 16),  # value = d * (nibble - 8); low nibbles are elements 0..15
}

#: Layouts of a weight's quantized bytes: "gguf", ggml's blocks as a GGUF file stores them;
#: "split", each row's K / 32 f16 scales, then its quants (the same bytes per row; rows of K a
#: multiple of SPLIT_MULTIPLE, 16-byte aligned: kernels/gemv_quant_split.hip's header).
LAYOUTS = ("gguf", "split")
SPLIT_MULTIPLE = 256  # a split row's K: its scales and quants then start 16-byte aligned

_SOURCE = "dequant.hip"
_BLOCK = 256  # threads per block; each thread writes one 16-byte run of output per pass


def block_geometry(encoding: str) -> tuple[int, int]:
    """(elements, bytes) of one block of `encoding`; ValueError naming the known ones."""
    geometry = BLOCK_ENCODINGS.get(encoding)
    if geometry is None:
        raise ValueError(
            f"unknown block encoding {encoding!r}; expected one of {', '.join(BLOCK_ENCODINGS)}"
        )
    return geometry


def dequantize_into(
    kernels: KernelCache, encoding: str, source: int, out: DeviceTensor, *, stream: Stream,
    layout: str = "gguf",
) -> None:  # fmt: skip
    """Expand the quantized blocks at device address `source` into `out`.

    Args:
        kernels: the KernelCache of `out`'s device (compiles dequant.hip on first use).
        encoding: "q8_0" or "q4_0" (a key of BLOCK_ENCODINGS).
        source: device address of `out.size / 32` packed blocks (34 or 18 bytes each, ggml's
            layout), at least 2-byte aligned; it must not overlap `out`.
        out: float32, float16 or bfloat16, any shape whose element count is a multiple of 32
            (block i becomes elements [32 i, 32 i + 32) in row-major order). Each value is
            the f32 product of the block's f16 scale and its quant, rounded once to out's dtype.
        stream: the stream the kernel is queued on.
        layout: "gguf" (the default) or "split" (LAYOUTS): then `source` holds split rows of
            out.shape[-1] elements (a multiple of SPLIT_MULTIPLE) and is 16-byte aligned.

    Stream semantics: asynchronous. The kernel runs in `stream`'s order, so the bytes at
    `source` must be ready in that order (copied on `stream`, or `stream` made to wait for the
    copy's event) and must stay allocated until `stream` has passed the kernel (e.g. return a
    staging buffer after an event recorded on `stream`). `out` is written in `stream`'s order
    whatever `out.stream` is. Nothing synchronizes. Bad arguments raise ValueError (TypeError
    for a non-tensor) before anything is queued.
    """
    per_block, block_bytes = block_geometry(encoding)
    if layout not in LAYOUTS:
        raise ValueError(f"unknown layout {layout!r}; expected one of {', '.join(LAYOUTS)}")
    if not isinstance(out, DeviceTensor):
        raise TypeError(f"out must be a DeviceTensor, not {type(out).__name__}")
    suffix = float_type(out.dtype, "out").suffix
    if out.closed:
        raise ValueError("out's memory is closed")
    if not out.is_contiguous:
        raise not_contiguous(out, "out", "dequantize_into")
    if out.device != kernels.device or stream.device != kernels.device:
        raise ValueError("out, the stream and the kernel cache must be on the same device")
    if out.size % per_block:
        raise ValueError(
            f"out has {out.size} elements, not a whole number of {per_block}-element blocks"
        )
    if isinstance(source, bool) or not isinstance(source, int) or source <= 0 or source % 2:
        raise ValueError(f"source must be a nonzero, 2-byte aligned device address: {source!r}")
    nblocks = out.size // per_block
    k = out.shape[-1] if out.ndim else 1
    if layout == "split" and (k % SPLIT_MULTIPLE or source % 16):
        raise ValueError(f"split rows need a row length that is a multiple of {SPLIT_MULTIPLE} "
                         f"(out is {out.shape}) and a 16-byte aligned source")  # fmt: skip
    if nblocks == 0:
        return
    if source < out.ptr + out.nbytes and out.ptr < source + nblocks * block_bytes:
        raise ValueError("the source blocks overlap out")
    runs = out.size // (16 // out.dtype.itemsize)  # 16-byte runs of output, one per thread
    grid = min(-(-runs // _BLOCK), grid_cap(kernels.device))
    if layout == "split":
        kernel = kernels.get(_SOURCE, f"dequant_split_{encoding}_{suffix}")
        kernel.launch(grid, _BLOCK, DevicePointer(source), out, k, nblocks, stream=stream)
    else:
        kernel = kernels.get(_SOURCE, f"dequant_{encoding}_{suffix}")
        kernel.launch(grid, _BLOCK, DevicePointer(source), out, nblocks, stream=stream)


def split_rows_into(
    kernels: KernelCache, encoding: str, blocks: DeviceTensor, out: DeviceTensor, *,
    stream: Stream,
) -> None:  # fmt: skip
    """Rearrange a [N, K] weight's GGUF blocks into the split row layout (LAYOUTS).

    Args:
        kernels: the KernelCache of the tensors' device (compiles dequant.hip on first use).
        encoding: "q8_0" or "q4_0".
        blocks: uint8 [N, K / 32 * block bytes], C-contiguous, 2-byte aligned: ggml's blocks.
        out: uint8 of the same shape, C-contiguous, 16-byte aligned, not overlapping `blocks`;
            K (from the shape) a multiple of SPLIT_MULTIPLE.
        stream: the stream the kernel is queued on.

    Stream semantics: asynchronous, as dequantize_into: `blocks` must be ready in `stream`'s
    order and stay allocated until `stream` has passed the kernel. Nothing synchronizes.
    """
    per_block, block_bytes = block_geometry(encoding)
    for tensor, name in ((blocks, "blocks"), (out, "out")):
        if not isinstance(tensor, DeviceTensor):
            raise TypeError(f"{name} must be a DeviceTensor, not {type(tensor).__name__}")
        if tensor.closed:
            raise ValueError(f"{name}'s memory is closed")
        if tensor.dtype != np.uint8 or tensor.ndim != 2 or not tensor.is_contiguous:
            raise ValueError(f"split rows: {name} must be a C-contiguous uint8 [N, row bytes], "
                             f"not {tensor.shape} {tensor.dtype}")  # fmt: skip
    if blocks.ptr % 2 or blocks.shape[1] % block_bytes:
        raise ValueError(f"split rows: blocks must be 2-byte aligned rows of whole "
                         f"{block_bytes}-byte blocks")  # fmt: skip
    rows, row_bytes = blocks.shape
    k = row_bytes // block_bytes * per_block
    if out.shape != blocks.shape or not out.is_contiguous or out.ptr % 16 or k % SPLIT_MULTIPLE:
        raise ValueError(f"split rows: out must be C-contiguous, 16-byte aligned and "
                         f"{blocks.shape} with K = {k} a multiple of {SPLIT_MULTIPLE}")  # fmt: skip
    if blocks.ptr < out.ptr + out.nbytes and out.ptr < blocks.ptr + blocks.nbytes:
        raise ValueError("split rows: out overlaps the blocks")
    nblocks = rows * k // per_block
    if nblocks == 0:
        return
    grid = min(-(-nblocks // _BLOCK), grid_cap(kernels.device))
    kernel = kernels.get(_SOURCE, f"split_rows_{encoding}")
    kernel.launch(grid, _BLOCK, blocks, out, k, nblocks, stream=stream)


__all__ = ["BLOCK_ENCODINGS", "LAYOUTS", "SPLIT_MULTIPLE", "dequantize_into", "split_rows_into"]
