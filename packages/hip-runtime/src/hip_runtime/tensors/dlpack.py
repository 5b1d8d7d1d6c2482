"""DLPack (v0.8 `DLManagedTensor` capsules) and the CUDA Array Interface, zero-copy both ways.

The structs are declared to cffi; capsules are made and read through CPython's PyCapsule API
(ctypes.pythonapi). The platform's facts come from its `HipApi.traits`: the DLPack device type
(kDLCUDA on nvidia, kDLROCM on amd; kDLCPU on the cpu platform, where device memory is host
memory, so `np.from_dlpack(tensor)` works there), the default stream's handle, and whether the
CUDA Array Interface applies (nvidia only).

Stream semantics (the DLPack Python specification):

- export (`tensor.__dlpack__(stream=s)`): the consumer's stream `s` is made to wait, on the
  device, for the work queued so far on `tensor.stream` (an event, no host wait). Where device
  memory is host memory (kDLCPU, the cpu platform) there is no consumer stream: the host reads
  the memory, so `tensor.stream` is synchronized before the capsule is returned. `stream=-1`
  skips synchronization.
- import (`DeviceTensor.from_dlpack(obj, stream=st)`): the producer is asked to order its
  pending work before `st`; the tensor carries `st`.

Layouts: strides travel as they are, both ways (DLPack counts them in elements, as
DeviceTensor does): transposed, stepped, reversed (negative) and broadcast (zero) views are
exported and imported without a copy. An export's `data` is the first element's address and
its `byte_offset` 0; an import adds the producer's `byte_offset` to `data`.

Lifetime: an exported tensor stays alive until the consumer calls the DLPack deleter; a capsule
dropped without being consumed releases it at the next export, import or `sweep()`.
"""

from __future__ import annotations

import ctypes
import sys
import threading
from typing import TYPE_CHECKING, Any

import cffi

from hip_core import Device, DeviceBuffer, Event, Stream, hip_api
from hip_runtime.tensors import dtypes
from hip_runtime.tensors.strides import c_strides, extent

if TYPE_CHECKING:
    from hip_runtime.tensors.tensor import DeviceTensor

DLPackCapsule = Any  # a PyCapsule named "dltensor"

# DLDeviceType values (dlpack.h); a platform's own is `hip_api().traits.dlpack_device_type`.
KDL_CPU, KDL_CUDA, KDL_ROCM = 1, 2, 10

_CDEF = """
typedef struct { int32_t device_type; int32_t device_id; } DLDevice;
typedef struct { uint8_t code; uint8_t bits; uint16_t lanes; } DLDataType;
typedef struct {
    void* data; DLDevice device; int32_t ndim; DLDataType dtype;
    int64_t* shape; int64_t* strides; uint64_t byte_offset;
} DLTensor;
typedef struct DLManagedTensor {
    DLTensor dl_tensor; void* manager_ctx; void (*deleter)(struct DLManagedTensor*);
} DLManagedTensor;
typedef struct { uint32_t major; uint32_t minor; } DLPackVersion;
typedef struct DLManagedTensorVersioned {
    DLPackVersion version; void* manager_ctx;
    void (*deleter)(struct DLManagedTensorVersioned*); uint64_t flags; DLTensor dl_tensor;
} DLManagedTensorVersioned;
"""
_NAME = b"dltensor"
_USED_NAME = b"used_dltensor"
_VERSIONED_NAME = b"dltensor_versioned"
_USED_VERSIONED_NAME = b"used_dltensor_versioned"

ffi = cffi.FFI()
ffi.cdef(_CDEF)

# CPython's capsule API. Capsules are made without a destructor: a destructor runs inside the
# capsule's deallocation, often while the consumer's exception is pending (numpy refusing a
# device it cannot read), and a Python-level one would clobber that exception. Instead,
# `sweep()` finds the capsules that were dropped unconsumed (see _capsules).
_Destructor = ctypes.CFUNCTYPE(None, ctypes.c_void_p)
_NO_DESTRUCTOR = _Destructor()  # a NULL function pointer
_api = ctypes.pythonapi
_capsule_new = ctypes.PYFUNCTYPE(ctypes.py_object, ctypes.c_void_p, ctypes.c_char_p, _Destructor)(
    ("PyCapsule_New", _api)
)
_capsule_pointer = ctypes.PYFUNCTYPE(ctypes.c_void_p, ctypes.py_object, ctypes.c_char_p)(
    ("PyCapsule_GetPointer", _api)
)
_capsule_set_name = ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.py_object, ctypes.c_char_p)(
    ("PyCapsule_SetName", _api)
)
_capsule_is_valid = ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.py_object, ctypes.c_char_p)(
    ("PyCapsule_IsValid", _api)
)
# Exported DLManagedTensors by address: the struct, its shape/strides arrays and the tensor
# whose memory it describes stay alive until the consumer calls the deleter (or the capsule is
# dropped unconsumed).
_exports: dict[int, tuple[Any, ...]] = {}
_exports_lock = threading.RLock()  # the deleter may run inside sweep() when a tensor dies
# The capsules made, until the next sweep() sees them consumed (renamed "used_…": the consumer
# calls the deleter) or dropped by everyone but this list (then their export is released).
_capsules: list[tuple[Any, int]] = []


def _forget(managed: Any) -> None:
    with _exports_lock:
        _exports.pop(int(ffi.cast("uintptr_t", managed)), None)


_deleter = ffi.callback("void(DLManagedTensor*)", _forget)
_versioned_deleter = ffi.callback("void(DLManagedTensorVersioned*)", _forget)


def _unconsumed(capsule: Any) -> bool:
    return bool(_capsule_is_valid(capsule, _NAME) or _capsule_is_valid(capsule, _VERSIONED_NAME))


def sweep() -> None:
    """Release the tensors of capsules that were dropped without being consumed, and forget
    the consumed ones. Runs at every export and import; call it to release them sooner."""
    with _exports_lock:
        kept = []
        for entry in _capsules:
            capsule, address = entry
            if not _unconsumed(capsule):
                continue  # the consumer owns it now and calls the deleter
            # References: the list's tuple, `entry`'s tuple unpacking (`capsule`) and the
            # getrefcount argument; more means someone still holds the capsule.
            if sys.getrefcount(capsule) > 3:
                kept.append(entry)
            else:
                _exports.pop(address, None)
        _capsules[:] = kept


def dlpack_device(device: Device) -> tuple[int, int]:
    """(DLDeviceType, ordinal) of a device on the current platform."""
    return hip_api().traits.dlpack_device_type, device.ordinal


def _order_consumer(tensor: DeviceTensor, consumer: int) -> None:
    """Make the consumer's stream (a raw handle; 1 and 2 are CUDA's legacy and per-thread
    default streams) wait for the work queued so far on the tensor's stream."""
    if consumer == tensor.stream.address:
        return
    with Event(tensor.device, timing=False) as event:  # HIP keeps it until the wait is met
        event.record(tensor.stream)
        Stream.from_handle(consumer, tensor.device).wait(event)


def export_dlpack(
    tensor: DeviceTensor,
    *,
    stream: Any = None,
    max_version: tuple[int, int] | None = None,
    dl_device: tuple[int, int] | None = None,
    copy: bool | None = None,
) -> DLPackCapsule:
    """A capsule over `tensor` (see the module docstring for stream semantics): a versioned
    DLPack 1.0 one ("dltensor_versioned", writable) when the consumer accepts `max_version`
    >= (1, 0), else a v0.8 "dltensor"."""
    if tensor.closed:
        raise BufferError("the tensor's memory is closed")
    traits = hip_api().traits
    device_type, ordinal = dlpack_device(tensor.device)
    if dl_device is not None and tuple(dl_device) != (device_type, ordinal):
        raise BufferError(f"cannot export to device {dl_device}: the tensor is on {device_type}")
    if copy:
        raise BufferError("DeviceTensor exports its memory without copying only")
    code, bits = dtypes.to_dlpack(tensor.dtype)
    if traits.host_memory_is_device_memory:
        if stream not in (None, -1):
            raise BufferError(f"kDLCPU takes no stream, not {stream!r}")
        if stream is None:
            tensor.stream.sync()  # the host reads it next
    elif stream != -1:
        _order_consumer(tensor, traits.default_stream_handle if stream is None else int(stream))

    versioned = max_version is not None and tuple(max_version) >= (1, 0)
    if versioned:
        managed = ffi.new("DLManagedTensorVersioned*")
        managed.version.major, managed.version.minor = 1, 0
        managed.flags = 0  # writable, not a copy
        managed.deleter, name = _versioned_deleter, _VERSIONED_NAME
    else:
        managed = ffi.new("DLManagedTensor*")
        managed.deleter, name = _deleter, _NAME
    shape = ffi.new("int64_t[]", list(tensor.shape) or [1])
    strides = ffi.new("int64_t[]", list(tensor.strides) or [1])  # elements, as DLPack counts
    dl = managed.dl_tensor
    dl.data = ffi.cast("void*", tensor.ptr)
    dl.device.device_type, dl.device.device_id = device_type, ordinal
    dl.ndim = tensor.ndim
    dl.dtype.code, dl.dtype.bits, dl.dtype.lanes = code, bits, 1
    dl.shape, dl.strides, dl.byte_offset = shape, strides, 0
    managed.manager_ctx = ffi.NULL
    address = int(ffi.cast("uintptr_t", managed))
    sweep()
    with _exports_lock:
        _exports[address] = (managed, shape, strides, tensor)
        try:
            capsule = _capsule_new(address, name, _NO_DESTRUCTOR)
        except BaseException:
            _exports.pop(address, None)
            raise
        _capsules.append((capsule, address))
    return capsule


def import_dlpack(obj: Any, *, stream: Stream | None = None) -> DeviceTensor:
    """A DeviceTensor over a DLPack producer's memory (no copy); see the module docstring."""
    from hip_runtime.tensors.tensor import DeviceTensor

    sweep()
    if not hasattr(obj, "__dlpack__"):
        raise TypeError(f"{type(obj).__name__} does not implement __dlpack__")
    device = stream.device if stream is not None else Device.current()
    traits = hip_api().traits
    device_type = traits.dlpack_device_type
    host = traits.host_memory_is_device_memory  # any host producer's memory will do
    producer_type, producer_id = (int(v) for v in obj.__dlpack_device__())
    if producer_type != device_type or (not host and producer_id != device.ordinal):
        raise BufferError(
            f"the producer is on DLPack device ({producer_type}, {producer_id}); this platform's "
            f"device is ({device_type}, {device.ordinal})"
        )
    if host:
        capsule = obj.__dlpack__()
    else:
        consumer = stream.address if stream is not None else 0
        capsule = obj.__dlpack__(stream=consumer or traits.default_stream_handle)
    if not _capsule_is_valid(capsule, _NAME):
        raise BufferError("expected an unconsumed 'dltensor' capsule")
    address = _capsule_pointer(capsule, _NAME)
    managed = ffi.cast("DLManagedTensor*", address)
    dl = managed.dl_tensor
    # Validate before taking ownership: on an error the capsule still owns (and frees) it.
    dtype = dtypes.from_dlpack(dl.dtype.code, dl.dtype.bits, dl.dtype.lanes)
    shape = tuple(int(dl.shape[i]) for i in range(dl.ndim))
    strides = None  # NULL strides mean C-contiguous
    if dl.strides != ffi.NULL:
        strides = tuple(int(dl.strides[i]) for i in range(dl.ndim))
    # The buffer covers exactly the bytes the layout reaches, reversed and broadcast axes
    # included; the tensor's first element sits `-low` elements into it.
    low, high = extent(shape, strides or c_strides(shape))
    item = dtype.itemsize
    first = int(ffi.cast("uintptr_t", dl.data)) + int(dl.byte_offset)
    start, nbytes = first + low * item, max(high - low + 1, 0) * item
    if _capsule_set_name(capsule, _USED_NAME) != 0:
        raise BufferError("could not mark the capsule consumed")
    buffer = DeviceBuffer.wrap(start if nbytes else first, nbytes, device, _call_deleter, address)
    return DeviceTensor(
        buffer, shape, dtype, offset=-low * item if nbytes else 0, strides=strides, stream=stream
    )


def _call_deleter(address: int) -> None:
    managed = ffi.cast("DLManagedTensor*", address)
    if managed.deleter != ffi.NULL:
        managed.deleter(managed)


def cuda_array_interface(tensor: DeviceTensor) -> dict[str, Any]:
    """CUDA Array Interface v3 of a tensor where the platform's traits say it applies (nvidia);
    AttributeError elsewhere (so `hasattr(t, "__cuda_array_interface__")` says whether CUDA
    consumers can take it). `strides` is None for a C-contiguous tensor (as the interface
    asks), else the strides in bytes.

    `stream` is the tensor's stream (the default stream's handle, 1, for the null stream):
    consumers order on it themselves.
    """
    api = hip_api()
    traits = api.traits
    if not traits.cuda_array_interface:
        raise AttributeError(f"__cuda_array_interface__ does not apply on {api.platform}")
    item = tensor.dtype.itemsize
    return {
        "shape": tensor.shape,
        "typestr": tensor.dtype.str,  # bfloat16 reads as '<V2': CAI has no bfloat16
        "data": (tensor.ptr, False),
        "strides": None if tensor.is_contiguous else tuple(s * item for s in tensor.strides),
        "version": 3,
        "stream": tensor.stream.address or traits.default_stream_handle,
    }


__all__ = [
    "KDL_CPU",
    "KDL_CUDA",
    "KDL_ROCM",
    "cuda_array_interface",
    "dlpack_device",
    "export_dlpack",
    "import_dlpack",
    "sweep",
]
