"""Quantized checkpoint blocks (GGUF's Q8_0 and Q4_0) dequantized on the device.

The loader copies a quantized tensor's stored bytes (TensorRecord.nbytes, encoding "q8_0" or
"q4_0") to the device as they are, then `dequantize_into` expands them into the record's
float tensor with the kernels of `kernels/dequant.hip`.
"""

from __future__ import annotations

from hip_core import DevicePointer, Stream
from hip_runtime.dtypes import float_type
from hip_runtime.kernel_cache import KernelCache
from hip_runtime.ops.base import grid_cap, not_contiguous
from hip_runtime.tensor import DeviceTensor

#: Quantized encodings: (elements per block, bytes per block). A block is one f16 scale `d`
#: followed by the quants, exactly as ggml stores them (ggml-common.h).
BLOCK_ENCODINGS: dict[str, tuple[int, int]] = {
    "q8_0": (32, 2 + 32),  # value = d * int8
    "q4_0": (32, 2 + 16),  # value = d * (nibble - 8); low nibbles are elements 0..15
}

_SOURCE = "dequant.hip"
_BLOCK = 256  # threads per block; each thread writes one 16-byte run of output per pass


def dequantize_into(
    kernels: KernelCache, encoding: str, source: int, out: DeviceTensor, *, stream: Stream
) -> None:
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

    Stream semantics: asynchronous. The kernel runs in `stream`'s order, so the bytes at
    `source` must be ready in that order (copied on `stream`, or `stream` made to wait for the
    copy's event) and must stay allocated until `stream` has passed the kernel (e.g. return a
    staging buffer after an event recorded on `stream`). `out` is written in `stream`'s order
    whatever `out.stream` is. Nothing synchronizes. Bad arguments raise ValueError (TypeError
    for a non-tensor) before anything is queued.
    """
    geometry = BLOCK_ENCODINGS.get(encoding)
    if geometry is None:
        raise ValueError(
            f"unknown block encoding {encoding!r}; expected one of {', '.join(BLOCK_ENCODINGS)}"
        )
    per_block, block_bytes = geometry
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
    if nblocks == 0:
        return
    if source < out.ptr + out.nbytes and out.ptr < source + nblocks * block_bytes:
        raise ValueError("the source blocks overlap out")
    runs = out.size // (16 // out.dtype.itemsize)  # 16-byte runs of output, one per thread
    grid = min(-(-runs // _BLOCK), grid_cap(kernels.device))
    kernel = kernels.get(_SOURCE, f"dequant_{encoding}_{suffix}")
    kernel.launch(grid, _BLOCK, DevicePointer(source), out, nblocks, stream=stream)


__all__ = ["BLOCK_ENCODINGS", "dequantize_into"]
