"""DLPack and the CUDA Array Interface: zero-copy both ways, lifetimes, stream order.

numpy is the consumer and producer on the cpu platform (device memory is host memory there:
kDLCPU). torch and CuPy hold CUDA memory, so their tests run on the nvidia platform only
(parametrized to it and marked gpu: the H200 has both; they are not skipped, never run in CI).
"""

from __future__ import annotations

import gc
import weakref
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import ml_dtypes
import numpy as np
import pytest

from hip_core import Device
from hip_runtime import DeviceTensor, HipBackend
from hip_runtime.tensors import dlpack

CPU_ONLY = pytest.mark.parametrize("platform", ["cpu"], indirect=True)
NVIDIA_ONLY = pytest.mark.parametrize(
    "platform", [pytest.param("nvidia", marks=pytest.mark.gpu)], indirect=True
)


@pytest.fixture
def backend(device: Device, program_cache: Path) -> Iterator[HipBackend]:
    with HipBackend(device) as backend:
        yield backend


def no_exports_left() -> bool:
    gc.collect()
    dlpack.sweep()
    return not dlpack._exports


def test_dlpack_device_names_the_platform(platform: str, device: Device) -> None:
    tensor = DeviceTensor.empty(3, device=device)
    expected = {"cpu": dlpack.KDL_CPU, "nvidia": dlpack.KDL_CUDA}[platform]
    assert tensor.__dlpack_device__() == (expected, device.ordinal)
    assert hasattr(tensor, "__cuda_array_interface__") == (platform == "nvidia")


@pytest.mark.parametrize("dtype", [np.float32, np.float16, ml_dtypes.bfloat16, np.int32])
def test_tensor_to_tensor_shares_memory(device: Device, dtype: Any) -> None:
    host = np.arange(12).astype(dtype).reshape(3, 4)
    tensor = DeviceTensor.from_numpy(host)
    other = DeviceTensor.from_dlpack(tensor[1:])
    assert other.ptr == tensor.ptr + 4 * host.itemsize and other.dtype == host.dtype
    del tensor
    gc.collect()  # the consumer keeps the producer's memory alive
    np.testing.assert_array_equal(other.to_numpy(), host[1:])
    del other
    assert no_exports_left()


def test_unconsumed_capsule_releases_its_tensor(device: Device) -> None:
    tensor = DeviceTensor.empty((2, 2), device=device)
    capsule = tensor.__dlpack__(stream=-1)
    assert dlpack._exports
    del capsule
    assert no_exports_left()


def test_a_refused_capsule_keeps_the_consumers_exception(device: Device) -> None:
    def refusing_consumer(producer: Any) -> None:
        capsule = producer.__dlpack__(stream=-1)
        assert capsule is not None
        raise KeyError("refused")  # the capsule dies while this propagates

    with pytest.raises(KeyError, match="refused"):
        refusing_consumer(DeviceTensor.empty(4, device=device))
    assert no_exports_left()


@CPU_ONLY
@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.int32, np.uint8, np.float64])
def test_numpy_reads_and_writes_a_tensor_without_copying(device: Device, dtype: Any) -> None:
    stream = device.create_stream()
    host = np.arange(7 * 13).astype(dtype).reshape(7, 13)
    tensor = DeviceTensor.from_numpy(host, stream=stream)  # queued: from_dlpack must wait
    array = np.from_dlpack(tensor)
    np.testing.assert_array_equal(array, host)
    assert array.ctypes.data == tensor.ptr
    array[2, 3] = 99  # the same memory
    assert tensor.to_numpy()[2, 3] == 99
    del tensor
    gc.collect()
    np.testing.assert_array_equal(array[0], host[0])  # numpy keeps the memory alive
    del array
    assert no_exports_left()


@CPU_ONLY
def test_numpy_arrays_become_tensors_without_copying(backend: HipBackend) -> None:
    host = np.arange(3 * 1000, dtype=np.float32).reshape(3, 1000)
    alive = weakref.ref(host)
    tensor = backend.from_dlpack(host)
    assert tensor.ptr == host.ctypes.data and tensor.stream is backend.stream
    host[0, 0] = -5.0
    got = tensor.to_numpy()
    assert got[0, 0] == -5.0 and got[2, 999] == 2999.0
    # (No kernel here: hip-core's Kernel keeps its last launch's arguments referenced.)
    del host
    gc.collect()
    assert alive() is not None  # the tensor holds the producer's memory
    del tensor
    gc.collect()
    assert alive() is None  # and gives it back through the DLPack deleter


@CPU_ONLY
def test_ops_on_imported_numpy_memory(backend: HipBackend) -> None:
    host = np.arange(3 * 1000, dtype=np.float16).reshape(3, 1000)
    out = np.zeros_like(host)
    backend.scale(backend.from_dlpack(host), 0.5, out=backend.from_dlpack(out))
    backend.synchronize()
    np.testing.assert_array_equal(out, host * np.float16(0.5))  # written in place


VIEWS = {
    "transposed": lambda x: x.mT,
    "reversed axes": lambda x: x.T,
    "stepped": lambda x: x[1:, ::2, 1::3],
    "reversed": lambda x: x[::-1, :, ::-2],
    "one element": lambda x: x[1, 2, 3, ...],
    "empty": lambda x: x[:, 2:2],
    "new axes": lambda x: x[:, None, 1, ..., None],
}


def same_layout(array: np.ndarray, tensor: DeviceTensor) -> bool:
    item = tensor.dtype.itemsize
    return array.ctypes.data == tensor.ptr and array.strides == tuple(
        s * item for s in tensor.strides
    )


@CPU_ONLY
@pytest.mark.parametrize("view", VIEWS.values(), ids=VIEWS.keys())
@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.int8, np.bool_, np.uint32])
def test_strided_views_cross_dlpack_with_their_strides(
    device: Device, view: Any, dtype: Any
) -> None:
    """Both ways, no copy: numpy reads a strided tensor at its address with its strides, a
    strided numpy view becomes a tensor of the same layout, and the round trip lands on the
    same memory."""
    host = (np.arange(3 * 5 * 7) % 7 > 2).astype(dtype).reshape(3, 5, 7)
    tensor = view(DeviceTensor.from_numpy(host, device=device))
    exported = np.from_dlpack(tensor)
    np.testing.assert_array_equal(exported, view(host))
    assert exported.size == 0 or same_layout(exported, tensor)
    back = DeviceTensor.from_dlpack(exported)
    assert back.shape == tensor.shape and back.strides == tensor.strides
    assert back.size == 0 or back.ptr == tensor.ptr
    source = host.copy()
    imported = DeviceTensor.from_dlpack(view(source))
    assert imported.shape == view(source).shape
    assert imported.size == 0 or same_layout(view(source), imported)
    np.testing.assert_array_equal(imported.to_numpy(), view(host))
    if imported.size:
        view(source)[...] = 0  # the same memory
        assert not imported.to_numpy().any()
    del exported, back, imported
    assert no_exports_left()


@CPU_ONLY
def test_broadcast_views_export_zero_strides(device: Device) -> None:
    row = DeviceTensor.from_numpy(np.arange(4, dtype=np.float32), device=device)
    exported = np.from_dlpack(row.expand(3, 4))
    assert exported.strides == (0, 4) and exported.ctypes.data == row.ptr
    np.testing.assert_array_equal(exported, np.tile(np.arange(4, dtype=np.float32), (3, 1)))


@CPU_ONLY
def test_foreign_producers_are_checked(device: Device) -> None:
    with pytest.raises(TypeError):
        DeviceTensor.from_dlpack([1, 2, 3])
    with pytest.raises(BufferError):
        DeviceTensor.empty(2, device=device).__dlpack__(stream=5)  # kDLCPU takes no stream


@NVIDIA_ONLY
def test_numpy_cannot_take_device_memory(device: Device) -> None:
    with pytest.raises((BufferError, RuntimeError, ValueError)):
        np.from_dlpack(DeviceTensor.empty(3, device=device))
    with pytest.raises(BufferError):
        DeviceTensor.from_dlpack(np.zeros(3, np.float32))


@NVIDIA_ONLY
def test_torch_zero_copy_both_ways(backend: HipBackend) -> None:
    import torch

    source = torch.arange(4096 * 7, dtype=torch.bfloat16, device="cuda").reshape(7, 4096)
    tensor = backend.from_dlpack(source)
    assert tensor.ptr == source.data_ptr() and tensor.dtype == ml_dtypes.bfloat16
    result = backend.scale(tensor, 0.5)
    back = torch.from_dlpack(result)  # waits on the device for the backend's stream
    assert back.data_ptr() == result.ptr
    torch.testing.assert_close(back, source * 0.5)
    del result
    gc.collect()
    torch.testing.assert_close(back.float().sum(), (source.float() * 0.5).sum())


@NVIDIA_ONLY
def test_cupy_zero_copy_both_ways(backend: HipBackend) -> None:
    import cupy

    source = cupy.arange(3 * 1000, dtype=cupy.float32).reshape(3, 1000)
    tensor = backend.from_dlpack(source)
    assert tensor.ptr == source.data.ptr
    result = backend.add(tensor, tensor)
    via_dlpack = cupy.from_dlpack(result)
    via_cai = cupy.asarray(result)  # __cuda_array_interface__, stream-ordered by CuPy
    assert via_dlpack.data.ptr == via_cai.data.ptr == result.ptr
    cupy.testing.assert_array_equal(via_cai, source * 2)
    interface = result.__cuda_array_interface__
    assert interface["shape"] == (3, 1000) and interface["typestr"] == "<f4"
    assert interface["stream"] == backend.stream.address > 0 and interface["strides"] is None
    view = result[:, ::-3].T
    assert view.__cuda_array_interface__["strides"] == (-12, 4000)
    cupy.testing.assert_array_equal(cupy.asarray(view), (source * 2)[:, ::-3].T)


@NVIDIA_ONLY
def test_torch_takes_and_gives_strided_views(backend: HipBackend) -> None:
    import torch

    source = torch.randn(6, 40, 24, device="cuda").to(torch.bfloat16)
    tensor = backend.from_dlpack(source)
    transposed = tensor.transpose(0, 2)[:, 1::2]
    back = torch.from_dlpack(transposed)
    assert back.data_ptr() == transposed.ptr and back.stride() == transposed.strides
    torch.testing.assert_close(back, source.transpose(0, 2)[:, 1::2], rtol=0, atol=0)
    view = source.permute(2, 0, 1)[3:, :, ::5]
    imported = backend.from_dlpack(view)
    assert imported.ptr == view.data_ptr() and imported.strides == view.stride()
    dense = imported.contiguous()
    assert dense.is_contiguous and dense.shape == tuple(view.shape)
    torch.testing.assert_close(torch.from_dlpack(dense), view.contiguous(), rtol=0, atol=0)
