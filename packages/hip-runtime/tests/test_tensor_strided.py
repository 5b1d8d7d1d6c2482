"""Strided DeviceTensors beyond the numpy comparisons of test_tensor_views: what the layout
attributes say, which way `to_numpy()` moves the bytes, where `contiguous()` allocates and
queues, `copy_` between overlapping views and its errors, ops refusing strided inputs by name,
and (gpu) copies past 32-bit indices."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from hip_core import Device, DeviceBuffer, MemoryPool
from hip_runtime import DeviceTensor, HipBackend, KernelCache
from hip_runtime.ops.quantized import dequantize_into
from hip_runtime.tensors import strided_copy

NVIDIA_ONLY = pytest.mark.parametrize(
    "platform", [pytest.param("nvidia", marks=pytest.mark.gpu)], indirect=True
)


@pytest.fixture(scope="module")
def backend(device: Device, program_cache: Path) -> Iterator[HipBackend]:
    with HipBackend(device) as backend:
        yield backend


def test_layout_attributes(device: Device) -> None:
    host = np.arange(3 * 4 * 5, dtype=np.float32).reshape(3, 4, 5)
    tensor = DeviceTensor.from_numpy(host, device=device)
    assert tensor.strides == (20, 5, 1) and tensor.is_contiguous and tensor.storage_offset == 0
    assert tensor.span() == (tensor.ptr, tensor.ptr + tensor.nbytes)
    view = tensor[1:, ::-2, 1]
    assert view.shape == (2, 2) and view.strides == (20, -10)
    assert view.storage_offset == 20 + 15 + 1 and view.offset == 4 * view.storage_offset
    assert not view.is_contiguous and "strides (20, -10)" in repr(view)
    assert view.span() == (tensor.ptr + 4 * 26, tensor.ptr + 4 * 57)  # elements 26 .. 56
    assert view.nbytes == 16 and view.buffer is tensor.buffer
    assert tensor[1:2].is_contiguous and not tensor[:, :1].is_contiguous  # numpy's rule
    assert tensor[None, 2].is_contiguous and tensor[None, 2].strides == (20, 5, 1)
    broadcast = tensor[0, 0].expand(6, 5)
    assert broadcast.strides == (0, 1) and broadcast.span() == (tensor.ptr, tensor.ptr + 20)
    with pytest.raises(ValueError, match="reaches"):
        DeviceTensor(tensor.buffer, (3, 4), np.float32, strides=(-1, 1))  # before the buffer
    with pytest.raises(ValueError, match="strides"):
        DeviceTensor(tensor.buffer, (3, 4), np.float32, strides=(1,))
    explicit = DeviceTensor(tensor.buffer, (5, 4), np.float32, offset=4, strides=(1, 5))
    np.testing.assert_array_equal(explicit.to_numpy(), host.reshape(-1)[1:21].reshape(4, 5).T)


def test_views_are_views_of_the_parent_storage(device: Device) -> None:
    host = np.arange(24, dtype=np.int32).reshape(2, 3, 4)
    tensor = DeviceTensor.from_numpy(host, device=device)
    view = tensor.permute(2, 0, 1)[::-1, :, 1:]
    del tensor
    gc.collect()
    assert not view.closed  # the view keeps the storage alive
    np.testing.assert_array_equal(view.to_numpy(), host.transpose(2, 0, 1)[::-1, :, 1:])
    view.copy_from_host(np.full(view.shape, -1, np.int32))  # writes land in the parent's memory
    assert (view.to_numpy() == -1).all()


def test_to_numpy_moves_the_fewer_bytes(device: Device, monkeypatch: pytest.MonkeyPatch) -> None:
    """A broadcast view copies the memory it spans (smaller than its elements) and numpy
    repeats it; a stepped or permuted one is gathered on the device, then copied as nbytes."""
    host = np.arange(4 * 8, dtype=np.float32).reshape(4, 8)
    tensor = DeviceTensor.from_numpy(host, device=device)
    copied: list[int] = []
    original = DeviceBuffer.copy_to

    def counting(self: DeviceBuffer, destination: Any, **kwargs: Any) -> None:
        copied.append(len(memoryview(destination).cast("B")))
        original(self, destination, **kwargs)

    monkeypatch.setattr(DeviceBuffer, "copy_to", counting)
    gathered: list[DeviceTensor] = []
    contiguous = DeviceTensor.contiguous
    monkeypatch.setattr(DeviceTensor, "contiguous", lambda t: gathered.append(t) or contiguous(t))
    np.testing.assert_array_equal(tensor[1].expand(1000, 8).to_numpy(), np.tile(host[1], (1000, 1)))
    assert copied == [32] and gathered == []
    stepped = tensor[::3, ::-2]
    np.testing.assert_array_equal(stepped.to_numpy(), host[::3, ::-2])
    assert copied[1:] == [stepped.nbytes] and gathered == [stepped]
    np.testing.assert_array_equal(tensor.T.to_numpy(), host.T)  # a permutation spans nbytes
    assert copied[2:] == [tensor.nbytes] and len(gathered) == 2


def test_contiguous_allocates_from_the_pool_on_the_stream(device: Device) -> None:
    stream, pool = device.create_stream(), MemoryPool(device)
    tensor = DeviceTensor.zeros((64, 32), np.float16, stream=stream, pool=pool)
    assert tensor.contiguous() is tensor and tensor.pool is pool
    view = tensor.T
    assert view.pool is pool and view.stream is stream
    in_use = pool.stats().in_use
    dense = view.contiguous()
    assert dense.stream is stream and dense.pool is pool and pool.stats().in_use > in_use
    assert dense.buffer is not tensor.buffer and dense.is_contiguous
    stream.sync()  # releases what the stream holds for its queued work before the test ends


def test_copies_between_overlapping_views_are_numpys(device: Device) -> None:
    """Where source and destination share memory, the source is read before anything is
    written (through a temporary), as numpy's assignment does."""
    host = np.arange(36, dtype=np.float64).reshape(6, 6)
    cases = [
        (lambda x: x[1:], lambda x: x[:-1]),  # shifted by a row
        (lambda x: x, lambda x: x.T),  # transposed in place
        (lambda x: x[:, ::2], lambda x: x[:, 1::2]),  # interleaved: share no element
        (lambda x: x[::-1], lambda x: x),  # reversed
        (lambda x: x, lambda x: x[2]),  # a row broadcast over its own matrix
    ]
    for dst, src in cases:
        tensor = DeviceTensor.from_numpy(host, device=device)
        dst(tensor).copy_(src(tensor))
        expected = host.copy()
        dst(expected)[...] = src(expected)
        np.testing.assert_array_equal(tensor.to_numpy(), expected)
    tensor = DeviceTensor.from_numpy(host, device=device)
    tensor.copy_(tensor)  # the same elements: nothing to do
    np.testing.assert_array_equal(tensor.to_numpy(), host)


@pytest.mark.parametrize("dtype", [np.uint8, np.float16, np.float32, np.complex64, np.complex128])
def test_transposes_through_tiles(device: Device, dtype: Any) -> None:
    """Transposes large enough for the kernel's 32 x 32 tiles, with partial tiles and a batch
    axis, read (a permuted source) and written (a permuted destination); every unit size,
    16-byte elements as two units."""
    host = (np.arange(3 * 37 * 45) % 251).astype(dtype).reshape(3, 37, 45)
    tensor = DeviceTensor.from_numpy(host, device=device)
    assert strided_copy._tile_axes((3, 45, 37), (1665, 37, 1), (1665, 1, 45)) == (1, 2)
    np.testing.assert_array_equal(tensor.mT.to_numpy(), host.transpose(0, 2, 1))
    np.testing.assert_array_equal(tensor.permute(2, 0, 1).to_numpy(), host.transpose(2, 0, 1))
    target = DeviceTensor.zeros((45, 3, 37), dtype, device=device)
    target.permute(1, 2, 0).copy_(tensor)
    np.testing.assert_array_equal(target.to_numpy(), host.transpose(2, 0, 1))
    np.testing.assert_array_equal(tensor[1, 3:, ::-1].T.to_numpy(), host[1, 3:, ::-1].T)


@pytest.mark.parametrize("mode", [0, 1, 2, 3, 4])
@pytest.mark.parametrize("dtype", [np.uint8, np.float16, np.float32, np.float64])
def test_transposes_through_16_byte_tiles(
    device: Device, dtype: Any, mode: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Sizes and strides that are multiples of 16 bytes take the tile path TILE_MODES names
    (`mode`: 0 element tiles; 1 64 x 64 16-byte tiles, 32 x 32 for 8-byte units; 2 64 x 128
    tiles of element pairs for 2-byte units (others take 1); 3, 4 V x V blocks transposed in
    registers, for 2- and 4-byte units), partial tiles and a batch axis included; a source
    whose address is not 16-byte aligned falls back to the element path."""
    monkeypatch.setattr(strided_copy, "TILE_MODES", {2: mode, 4: mode})
    host = (np.arange(2 * 80 * 144) % 251).astype(dtype).reshape(2, 80, 144)
    tensor = DeviceTensor.from_numpy(host, device=device)
    np.testing.assert_array_equal(tensor.mT.to_numpy(), host.transpose(0, 2, 1))
    np.testing.assert_array_equal(tensor.permute(2, 0, 1).to_numpy(), host.transpose(2, 0, 1))
    target = DeviceTensor.zeros((144, 2, 80), dtype, device=device)
    target.permute(1, 2, 0).copy_(tensor)
    np.testing.assert_array_equal(target.to_numpy(), host.transpose(2, 0, 1))
    shifted = tensor[:, :, 1:129]  # 1 element past a 16-byte boundary
    np.testing.assert_array_equal(shifted.mT.to_numpy(), host[:, :, 1:129].transpose(0, 2, 1))


def test_copy_errors(device: Device) -> None:
    tensor = DeviceTensor.zeros((4, 6), np.float32, device=device)
    with pytest.raises(ValueError, match="overlap"):
        tensor[0].expand(3, 6).copy_(tensor[1:])  # a broadcast destination
    with pytest.raises(ValueError, match="overlap"):
        tensor[0].expand(3, 6).copy_from_host(np.zeros((3, 6), np.float32))
    with pytest.raises(ValueError, match="broadcast"):
        tensor.copy_(tensor.T)
    with pytest.raises(ValueError, match="cast"):
        tensor.copy_(DeviceTensor.zeros((4, 6), np.float16, device=device))
    with pytest.raises(TypeError):
        tensor.copy_(np.zeros((4, 6), np.float32))  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="contiguous"):
        tensor.T.copy_from_device_region(tensor)


def op_calls(backend: HipBackend, x: DeviceTensor) -> dict[str, Any]:
    """Every op whose kernel cannot read a column-stepped view, each given the strided 8 x 8
    view x where a contiguous one would do (the others read any layout: matmul copies a matrix
    BLAS cannot read, as its docstring says)."""
    ok = backend.zeros((8, 8))
    return {
        "layernorm": lambda: backend.layernorm(x),
        "rmsnorm": lambda: backend.rmsnorm(ok, x[0]),
        "linear": lambda: backend.linear(x, ok),
        "mlp_swiglu": lambda: backend.mlp_swiglu(ok, ok, ok, x),
        "rope": lambda: backend.rope(x.reshape(8, 1, 8), x[:, :4], x[:, :4]),
        "transpose": lambda: backend.transpose(ok, out=x),
    }


def test_ops_refuse_strided_inputs_naming_the_op(backend: HipBackend) -> None:
    strided = backend.zeros((8, 16))[:, ::2]  # every row's element 0, 2, …: not contiguous
    for op, call in op_calls(backend, strided).items():
        with pytest.raises(ValueError, match=rf"^{op}\b.*\.contiguous\(\)"):
            call()
    kernels = KernelCache(backend.device)
    with pytest.raises(ValueError, match="dequantize_into takes C-contiguous"):
        dequantize_into(kernels, "q8_0", 64, backend.zeros((64, 64)).T, stream=backend.stream)


@NVIDIA_ONLY
def test_copies_past_32_bit_indices(device: Device) -> None:
    """More than 2^32 elements: the kernel's 64-bit index path (broadcast and transposed
    uint8 sources, 4.3 GB each)."""
    n = 65537  # n * n > 2^32
    row = DeviceTensor.from_numpy(np.arange(n, dtype=np.int64).astype(np.uint8), device=device)
    square = row.expand(n, n).contiguous()  # 64-bit rank-2 broadcast copy
    flipped = square.T.contiguous()  # the transpose: element [i, j] = j % 256 read as i % 256
    for i, j in [(0, 0), (n - 1, n - 1), (12345, 54321), (n - 1, 0), (0, n - 1)]:
        assert square[i, j].to_numpy() == j % 256
        assert flipped[i, j].to_numpy() == i % 256
    np.testing.assert_array_equal(flipped[-1, -300:].to_numpy(), np.full(300, (n - 1) % 256))
