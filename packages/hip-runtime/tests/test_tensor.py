"""DeviceTensor: factories, host and device copies, memory-mapped files, views that share
storage and keep it alive, stream semantics and argument errors."""

from __future__ import annotations

import gc
from pathlib import Path
from typing import Any

import ml_dtypes
import numpy as np
import pytest

from hip_core import Device, MemoryPool
from hip_runtime import DeviceTensor

DTYPES = [np.float32, np.float16, ml_dtypes.bfloat16, np.int32, np.uint8, np.int64, np.float64]


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("shape", [(), (1,), (3, 1000), (7, 4097), (2, 0, 3)], ids=str)
def test_numpy_round_trip(device: Device, dtype: Any, shape: tuple[int, ...]) -> None:
    stream = device.create_stream()
    host = (np.arange(int(np.prod(shape))) % 251 - 100).astype(dtype).reshape(shape)
    tensor = DeviceTensor.from_numpy(host, stream=stream)
    assert tensor.dtype == np.dtype(dtype) and tensor.stream is stream
    got = tensor.to_numpy()
    assert got.shape == host.shape and got.dtype == host.dtype
    np.testing.assert_array_equal(got.reshape(-1).view(np.uint8), host.reshape(-1).view(np.uint8))


def test_from_numpy_takes_non_contiguous_arrays(device: Device) -> None:
    host = np.arange(24, dtype=np.float32).reshape(4, 6)[:, ::2]
    np.testing.assert_array_equal(DeviceTensor.from_numpy(host).to_numpy(), host)


def test_empty_zeros_and_pool(device: Device) -> None:
    stream = device.create_stream()
    pool = MemoryPool(device)
    zeros = DeviceTensor.zeros((5, 7), "bfloat16", stream=stream, pool=pool)
    assert zeros.dtype == np.dtype(ml_dtypes.bfloat16) and zeros.nbytes == 70
    assert (zeros.to_numpy().astype(np.float32) == 0).all()
    assert pool.stats().in_use >= 70
    empty = DeviceTensor.empty(3, np.int32, device=device)
    assert empty.shape == (3,) and len(empty) == 3 and empty.ndim == 1 and empty.size == 3
    del zeros
    gc.collect()
    stream.sync()
    assert pool.stats().in_use == 0  # given back in stream order once the tensor is gone


def test_views_share_storage(device: Device) -> None:
    host = np.arange(60, dtype=np.float32).reshape(6, 10)
    tensor = DeviceTensor.from_numpy(host)
    rows = tensor[2:5]
    assert rows.shape == (3, 10) and rows.buffer is tensor.buffer and rows.offset == 80
    np.testing.assert_array_equal(rows.to_numpy(), host[2:5])
    np.testing.assert_array_equal(tensor[-1].to_numpy(), host[-1])
    flat = tensor.reshape(-1)
    np.testing.assert_array_equal(flat.to_numpy(), host.reshape(-1))
    np.testing.assert_array_equal(rows.reshape(5, 6).to_numpy(), host[2:5].reshape(5, 6))
    np.testing.assert_array_equal(tensor.reshape(3, 2, 10)[1].to_numpy(), host[2:4])
    rows[1].copy_from_host(np.full(10, -1, np.float32))  # writes through into the parent
    expected = host.copy()
    expected[3] = -1
    np.testing.assert_array_equal(tensor.to_numpy(), expected)
    assert tensor[4:2].shape == (0, 10)


def test_views_keep_the_storage_alive(device: Device) -> None:
    host = np.arange(1000, dtype=np.float16)
    tensor = DeviceTensor.from_numpy(host)
    view = tensor[500:]
    del tensor
    gc.collect()
    assert not view.closed
    np.testing.assert_array_equal(view.to_numpy(), host[500:])


def test_closing_a_region_leaves_the_tensor_usable(device: Device) -> None:
    host = np.arange(256, dtype=np.float32)
    tensor = DeviceTensor.from_numpy(host)  # its region spans the whole buffer
    with tensor.region() as region:
        assert region.is_view and region.size == tensor.buffer.size
    assert region.closed and not tensor.closed
    np.testing.assert_array_equal(tensor.to_numpy(), host)
    tensor.copy_from_host(host[::-1].copy())
    np.testing.assert_array_equal(tensor.to_numpy(), host[::-1])


def test_view_errors(device: Device) -> None:
    tensor = DeviceTensor.empty((4, 6), device=device)
    with pytest.raises(ValueError):
        tensor.reshape(5, 5)
    with pytest.raises(ValueError):
        tensor.reshape(-1, -1)
    with pytest.raises(ValueError, match="zero"):
        tensor[::0]
    with pytest.raises(IndexError):
        tensor[4]
    with pytest.raises(IndexError):
        tensor[1, 2, 3]  # more indices than axes
    with pytest.raises(TypeError):
        tensor[[1, 2]]  # advanced indexing is for gather ops
    with pytest.raises(ValueError, match=r"contiguous\(\)"):
        tensor[:, :3].reshape(-1)  # would need a copy
    with pytest.raises(ValueError, match="contiguous"):
        tensor.T.region()  # a strided tensor is not one region
    with pytest.raises(ValueError):
        DeviceTensor(tensor.buffer, (5, 6))  # more than the buffer holds
    with pytest.raises(ValueError):
        DeviceTensor.empty((2, -1), device=device)
    with pytest.raises(ValueError):
        DeviceTensor.empty(3, object, device=device)


def test_from_mmap(device: Device, tmp_path: Path) -> None:
    data = np.arange(100, dtype=np.float32)
    path = tmp_path / "blob.bin"
    path.write_bytes(b"header.." + data.tobytes())
    tensor = DeviceTensor.from_mmap(path, 8 + 40, (9, 10), np.float32, device=device)
    np.testing.assert_array_equal(tensor.to_numpy(), data[10:].reshape(9, 10))
    with pytest.raises(ValueError, match="past"):
        DeviceTensor.from_mmap(path, 12, (100,), np.float32, device=device)
    with pytest.raises(FileNotFoundError):
        DeviceTensor.from_mmap(tmp_path / "missing", 0, (1,), np.float32, device=device)


def test_copy_from_device_region(device: Device) -> None:
    blob = np.arange(64, dtype=np.uint8)
    region = device.allocate(64)
    region.copy_from(blob)
    tensor = DeviceTensor.empty((2, 2), np.int32, device=device)
    tensor.copy_from_device_region(region, 16)
    np.testing.assert_array_equal(tensor.to_numpy(), blob[16:32].view(np.int32).reshape(2, 2))
    other = DeviceTensor.from_numpy(blob)
    tensor.copy_from_device_region(other, 48)
    np.testing.assert_array_equal(tensor.to_numpy(), blob[48:].view(np.int32).reshape(2, 2))
    with pytest.raises(ValueError):
        tensor.copy_from_device_region(region, 60)
    with pytest.raises(TypeError):
        tensor.copy_from_device_region(blob)  # type: ignore[arg-type]


def test_copies_check_shape_and_dtype(device: Device) -> None:
    a = DeviceTensor.from_numpy(np.arange(6, dtype=np.float32).reshape(2, 3))
    b = DeviceTensor.empty((2, 3), device=device)
    b.copy_from(a)
    np.testing.assert_array_equal(b.to_numpy(), a.to_numpy())
    with pytest.raises(ValueError):
        b.copy_from(DeviceTensor.empty((3, 2), device=device))
    with pytest.raises(ValueError):
        b.copy_from_host(np.zeros((2, 3), np.float64))
    with pytest.raises(TypeError):
        b.copy_from(np.zeros((2, 3), np.float32))  # type: ignore[arg-type]


def test_to_numpy_waits_for_the_tensors_stream_only(
    device: Device, monkeypatch: pytest.MonkeyPatch
) -> None:
    def forbidden(*args: Any) -> None:
        raise AssertionError("device-wide synchronize")

    monkeypatch.setattr(Device, "synchronize", forbidden)
    stream = device.create_stream()
    synced: list[Any] = []
    original = type(stream).sync
    monkeypatch.setattr(type(stream), "sync", lambda self: (synced.append(self), original(self)))
    tensor = DeviceTensor.from_numpy(np.ones(5, np.float32), stream=stream)
    assert synced == []  # queuing a copy does not wait
    tensor.to_numpy()
    assert synced == [stream]


def test_tensor_is_a_kernel_pointer_argument(device: Device) -> None:
    tensor = DeviceTensor.empty((4, 4), device=device)
    assert tensor[1].ptr == tensor.ptr + 16 and tensor.ptr == tensor.buffer.ptr
    assert "DeviceTensor (4, 4) float32" in repr(tensor)
    tensor.buffer.close()
    assert tensor.closed and "closed" in repr(tensor)
