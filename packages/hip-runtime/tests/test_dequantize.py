"""dequantize_into (kernels/dequant.hip) against gguf.quants.dequantize, on the selected platform
(cpu in CI; nvidia marked gpu).

Exactness: gguf's reference computes each value as float32(d) * float32(q), one f32 product of
two exact numbers (an f16 scale widens to f32 exactly; q is a small integer), and so does the
kernel; a single multiply leaves nothing to contract into an FMA, so f32 results are identical
bit for bit (NaN payloads aside) — the tests allow no ulp of slack. f16/bf16 outputs are that
f32 product rounded once to nearest even, so they equal the reference rounded the same way;
they are checked that way, and against the float64 values within the dtype's tolerance.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import gguf
import numpy as np
import pytest
from gguf import GGMLQuantizationType as Q

from hip_core import Device, DeviceBuffer, Stream
from hip_runtime.libraries.kernel_cache import KernelCache
from hip_runtime.loading.formats.gguf import read_gguf
from hip_runtime.ops.quantized import BLOCK_ENCODINGS, dequantize_into
from hip_runtime.tensors.tensor import DeviceTensor
from hip_runtime.testing import DTYPES, assert_bits_equal, assert_close

if TYPE_CHECKING:
    from conftest import KernelHarness

TYPES = ("f32", "f16", "bf16")
QTYPES = {"q8_0": Q.Q8_0, "q4_0": Q.Q4_0}
SHAPES = [(32,), (3, 96), (5, 3, 160), (7, 4128)]


@pytest.fixture(scope="module")
def kernels(device: Device, program_cache: Path) -> KernelCache:
    return KernelCache(device)


@pytest.fixture(scope="module")
def stream(device: Device) -> Iterator[Stream]:
    with device.create_stream() as stream:
        yield stream


def reference(blocks: np.ndarray, encoding: str, dtype: np.dtype[Any]) -> np.ndarray:
    """gguf's f32 dequantization of raw blocks, rounded once to `dtype`."""
    with np.errstate(all="ignore"):  # random blocks hold inf/NaN scales
        values = np.asarray(gguf.quants.dequantize(blocks, QTYPES[encoding]), np.float32)
        return values.reshape(-1).astype(dtype)


def dequantize(
    harness: KernelHarness, kernels: KernelCache, stream: Stream, encoding: str,
    blocks: np.ndarray, dtype: str, *, source_offset: int = 0,
) -> np.ndarray:  # fmt: skip
    """Blocks uploaded at `source_offset` of a buffer, dequantized into a poisoned, guarded
    output; the flat result."""
    raw = np.ascontiguousarray(blocks).reshape(-1).view(np.uint8)
    source = harness.device.allocate(raw.size + source_offset)
    source.view(source_offset, raw.size).copy_from(raw)
    count = raw.size // BLOCK_ENCODINGS[encoding][1] * 32
    out = harness.output((count,), dtype)
    tensor = DeviceTensor(out.buffer, (count,), out.dtype, stream=stream)
    dequantize_into(kernels, encoding, source.ptr + source_offset, tensor, stream=stream)
    return out.read()


@pytest.mark.parametrize("shape", SHAPES, ids=str)
@pytest.mark.parametrize("dtype", TYPES)
@pytest.mark.parametrize("encoding", sorted(QTYPES))
def test_quantized_values(
    harness: KernelHarness, kernels: KernelCache, stream: Stream, encoding: str, dtype: str,
    shape: tuple[int, ...],
) -> None:  # fmt: skip
    values = harness.random(shape, "f32", 3.0)
    blocks = np.asarray(gguf.quants.quantize(values, QTYPES[encoding]))
    got = dequantize(harness, kernels, stream, encoding, blocks, dtype)
    expected = reference(blocks, encoding, DTYPES[dtype])
    assert_bits_equal(got, expected)
    exact = np.asarray(gguf.quants.dequantize(blocks, QTYPES[encoding]), np.float64).reshape(-1)
    assert_close(got, exact, dtype)
    if encoding == "q8_0":  # and the quantization itself is close to the input
        np.testing.assert_allclose(exact, values.reshape(-1), atol=3.0 * 4 / 127)


@pytest.mark.parametrize("dtype", TYPES)
@pytest.mark.parametrize("encoding", sorted(QTYPES))
def test_every_bit_pattern(
    harness: KernelHarness, kernels: KernelCache, stream: Stream, encoding: str, dtype: str
) -> None:
    """Random bytes as blocks: subnormal, huge, infinite and NaN scales; every quant value."""
    block_bytes = BLOCK_ENCODINGS[encoding][1]
    blocks = harness.rng.integers(0, 256, (4096, block_bytes), dtype=np.uint8)
    blocks[:8, :2] = np.array([0x0001, 0x03FF, 0x7BFF, 0x7C00, 0xFC00, 0x7E00, 0x8000, 0], "<u2")[
        :, None
    ].view(np.uint8)  # subnormal, max, ±inf, NaN, -0, 0
    got = dequantize(harness, kernels, stream, encoding, blocks, dtype)
    assert_bits_equal(got, reference(blocks, encoding, DTYPES[dtype]))


@pytest.mark.parametrize("dtype", TYPES)
@pytest.mark.parametrize("encoding", sorted(QTYPES))
def test_unaligned_source_and_output(
    harness: KernelHarness, kernels: KernelCache, stream: Stream, encoding: str, dtype: str
) -> None:
    """A 2-byte aligned source and an output that is not 16-byte aligned (element stores);
    nothing outside the output is written."""
    block_bytes = BLOCK_ENCODINGS[encoding][1]
    blocks = harness.rng.integers(0, 256, (37, block_bytes), dtype=np.uint8)
    blocks[:, :2] = np.full((37, 1), 0x3555, "<u2").view(np.uint8)  # finite scales
    element = DTYPES[dtype]
    count, skip = 37 * 32, element.itemsize  # the output starts one element in
    buffer = harness.device.allocate((count + 2) * element.itemsize)
    buffer.fill(0xFF)
    out = DeviceTensor(buffer, (37, 32), element, offset=skip, stream=stream)
    raw = blocks.reshape(-1)
    source = harness.device.allocate(raw.size + 2)
    source.view(2, raw.size).copy_from(raw)
    dequantize_into(kernels, encoding, source.ptr + 2, out, stream=stream)
    host = np.empty(buffer.size, np.uint8)
    buffer.copy_to(host, stream=stream)
    stream.sync()
    assert (host[:skip] == 0xFF).all() and (host[skip + count * element.itemsize :] == 0xFF).all()
    got = host[skip : skip + count * element.itemsize].view(element)
    assert_bits_equal(got, reference(blocks, encoding, element))


@pytest.mark.parametrize("encoding", sorted(QTYPES))
def test_any_grid_is_correct(harness: KernelHarness, encoding: str) -> None:
    """One block of 32 threads strides over all the blocks."""
    block_bytes = BLOCK_ENCODINGS[encoding][1]
    blocks = harness.rng.integers(0, 256, (300, block_bytes), dtype=np.uint8)
    blocks[:, :2] = np.full((300, 1), 0x2E66, "<u2").view(np.uint8)
    source, out = harness.upload(blocks), harness.output((300 * 32,), "bf16")
    harness.kernel("dequant.hip", f"dequant_{encoding}_bf16").launch(1, 32, source, out.buffer, 300)
    assert_bits_equal(out.read(), reference(blocks, encoding, DTYPES["bf16"]))


def test_gguf_file_round_trip(
    harness: KernelHarness, kernels: KernelCache, stream: Stream, tmp_path: Path
) -> None:
    """read_gguf's records, their bytes uploaded and dequantized, equal gguf's own reading."""
    path = tmp_path / "quantized.gguf"
    writer = gguf.GGUFWriter(str(path), "llama")
    shapes = {"a": ((3, 64), Q.Q8_0), "b": ((2, 3, 96), Q.Q4_0), "c": ((32,), Q.Q4_0)}
    for name, (shape, qtype) in shapes.items():
        values = harness.random(shape, "f32")
        writer.add_tensor(name, np.asarray(gguf.quants.quantize(values, qtype)), raw_dtype=qtype)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    theirs = {t.name: t for t in gguf.GGUFReader(path).tensors}
    data = path.read_bytes()
    for record in read_gguf(path).tensors:
        source = harness.upload(np.frombuffer(data, np.uint8, record.nbytes, record.offset))
        out = DeviceTensor.empty(record.shape, record.dtype, device=harness.device, stream=stream)
        dequantize_into(kernels, record.encoding, source.ptr, out, stream=stream)
        expected = gguf.quants.dequantize(theirs[record.name].data, theirs[record.name].tensor_type)
        assert_bits_equal(out.to_numpy(), np.asarray(expected, np.float32))


def test_bad_arguments_raise_before_launching(
    harness: KernelHarness, kernels: KernelCache, stream: Stream
) -> None:
    device = harness.device
    out = DeviceTensor.empty((2, 32), "float32", device=device)
    source: DeviceBuffer = device.allocate(2 * 34)
    with pytest.raises(ValueError, match="unknown block encoding 'q4_1'; expected one of q8_0"):
        dequantize_into(kernels, "q4_1", source.ptr, out, stream=stream)
    with pytest.raises(ValueError, match="out has dtype int32"):
        ints = DeviceTensor.empty((64,), np.int32, device=device)
        dequantize_into(kernels, "q8_0", source.ptr, ints, stream=stream)
    with pytest.raises(ValueError, match="out has 33 elements, not a whole number of 32-element"):
        dequantize_into(kernels, "q8_0", source.ptr, DeviceTensor.empty((33,), device=device),
                        stream=stream)  # fmt: skip
    for address in (0, source.ptr + 1, -2):
        with pytest.raises(ValueError, match="source must be a nonzero, 2-byte aligned"):
            dequantize_into(kernels, "q8_0", address, out, stream=stream)
    with pytest.raises(ValueError, match="the source blocks overlap out"):
        dequantize_into(kernels, "q8_0", out.ptr + 64, out, stream=stream)
    with pytest.raises(TypeError, match="out must be a DeviceTensor"):
        dequantize_into(kernels, "q8_0", source.ptr, np.zeros(64, np.float32), stream=stream)  # type: ignore[arg-type]
    closed = DeviceTensor.empty((32,), device=device)
    closed.buffer.close()
    with pytest.raises(ValueError, match="out's memory is closed"):
        dequantize_into(kernels, "q8_0", source.ptr, closed, stream=stream)
    empty = DeviceTensor.empty((0, 32), device=device)
    dequantize_into(kernels, "q8_0", source.ptr, empty, stream=stream)  # nothing to do
    stream.sync()
