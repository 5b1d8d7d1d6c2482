"""Device queries with HIP's numbering and structs: hipDeviceGetAttribute, hipGetDeviceProperties
and hipPointerGetAttributes over cudaDeviceGetAttribute, cuDeviceGetName, cuDeviceTotalMem and
cudaPointerGetAttributes.

cudaDeviceProp is not used: its layout changed in CUDA 13 (fields removed), whereas each
attribute query is stable across releases. None of these is on a hot path.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from hip_ffi import constants
from hip_ffi._ffi import ffi
from hip_ffi.platforms.nvidia.error_codes import CUDART_TO_HIP, HIP_UNKNOWN
from hip_ffi.platforms.nvidia.tables import (
    ATTRIBUTE_CONSTANTS,
    ATTRIBUTE_TO_CUDA,
    ATTRIBUTE_TO_DRIVER,
    PROPERTY_ATTRIBUTES,
)
from hip_ffi.platforms.nvidia.wrappers import INVALID_VALUE, DriverState, Native

#: The struct hipGetDeviceProperties fills, newest first: the first one declared in cdef/ wins
#: (hipDeviceProp_tR0600 once cdef/hip_types.h declares it; R0000 until then).
DEVICE_PROP_TYPES = ("hipDeviceProp_tR0600", "hipDeviceProp_tR0000")
_INT_MAX = 2**31 - 1
_GPU_PCI_DEVICE_ID = 139  # cudaDevAttrGpuPciDeviceId (CUDA >= 12.8)
_CC_MAJOR, _CC_MINOR = (
    ATTRIBUTE_TO_CUDA["ComputeCapabilityMajor"],
    ATTRIBUTE_TO_CUDA["ComputeCapabilityMinor"],
)
_HOST = constants.MEMORY_TYPES["Host"]
_MANAGED = constants.MEMORY_TYPES["Managed"]


def device_prop_type() -> str:
    """The first of DEVICE_PROP_TYPES that the cffi declarations know."""
    for name in DEVICE_PROP_TYPES:
        try:
            ffi.typeof(name)
        except ffi.error:
            continue
        return name
    raise LookupError(f"none of {DEVICE_PROP_TYPES} is declared in cdef/")


def device_attribute(
    get_attribute: Native, driver_get_attribute: Native, total_mem: Native, state: DriverState
) -> Native:
    """hipDeviceGetAttribute(int* value, hipDeviceAttribute_t attr, int device).

    `get_attribute` is cudaDeviceGetAttribute, `driver_get_attribute` the wrapped
    cuDeviceGetAttribute and `total_mem` the wrapped hipDeviceTotalMem. Attributes with no
    single-int CUDA answer return hipErrorInvalidValue (tables.ATTRIBUTE_UNSUPPORTED).
    """
    to_cuda = {constants.DEVICE_ATTRIBUTES[n]: v for n, v in ATTRIBUTE_TO_CUDA.items()}
    to_driver = {constants.DEVICE_ATTRIBUTES[n]: v for n, v in ATTRIBUTE_TO_DRIVER.items()}
    fixed = {constants.DEVICE_ATTRIBUTES[n]: v for n, v in ATTRIBUTE_CONSTANTS.items()}
    total_global_mem = constants.DEVICE_ATTRIBUTES["TotalGlobalMem"]
    pci_chip_id = constants.DEVICE_ATTRIBUTES["PciChipId"]
    table = CUDART_TO_HIP.get

    def computed(value: Any, attr: int, device: int) -> int:
        if attr in fixed:
            value[0] = fixed[attr]
            return 0
        if attr in to_driver:
            return driver_get_attribute(value, to_driver[attr], device)
        if attr == total_global_mem:
            size = ffi.new("size_t*")
            status = total_mem(size, device)
            if status == 0:
                value[0] = min(size[0], _INT_MAX)  # as ROCm: hipDeviceTotalMem has the size
            return status
        if attr == pci_chip_id:
            status = get_attribute(value, _GPU_PCI_DEVICE_ID, device)
            if status:
                return table(status, HIP_UNKNOWN)
            value[0] = (value[0] >> 16) & 0xFFFF  # device id << 16 | vendor id (0x10de)
            return 0
        return state.record(INVALID_VALUE)

    def hipDeviceGetAttribute(value: Any, attr: int, device: int) -> int:
        cuda_attr = to_cuda.get(attr)
        if cuda_attr is None:
            return computed(value, attr, device)
        status = get_attribute(value, cuda_attr, device)
        return table(status, HIP_UNKNOWN) if status else 0

    return hipDeviceGetAttribute


def device_properties(
    get_attribute: Native,
    read_attribute: Native,
    get_name: Native,
    total_mem: Native,
    get_uuid: Native | None,
    prop_type: str,
) -> Native:
    """hipGetDeviceProperties(void* prop, int device), filling a `prop_type` struct.

    `get_attribute` is the wrapped cuDeviceGetAttribute (HIP codes; initializes the driver on
    first need), used once to validate the ordinal; `read_attribute` the raw one, which reads
    every other field: a failed read leaves no last error behind (the driver API keeps none), and
    an attribute this CUDA release does not know leaves its field at zero. CUdevice_attribute
    numbers are cudaDeviceAttr's. `get_name`, `total_mem` and `get_uuid` are the wrapped
    hipDeviceGetName / hipDeviceTotalMem and cuDeviceGetUuid_v2 (None: uuid stays zero).
    `gcnArchName` reads like "sm_90" (what --offload-arch takes on this platform).
    """
    fields = dict(ffi.typeof(prop_type).fields)
    size = ffi.sizeof(prop_type)
    plan = [(name, source) for name, source in PROPERTY_ATTRIBUTES.items() if name in fields]
    arch_bits = [name for name, _ in ffi.typeof("hipDeviceArch_t").fields]

    def hipGetDeviceProperties(prop: Any, device: int) -> int:
        value = ffi.new("int*")
        status = get_attribute(value, _CC_MAJOR, device)  # also validates the ordinal
        if status:
            return status
        props = ffi.cast(prop_type + "*", prop)
        ffi.memmove(props, bytes(size), size)

        def read(attr: int) -> int:
            return int(value[0]) if read_attribute(value, attr, device) == 0 else 0

        for name, source in plan:
            if isinstance(source, tuple):
                setattr(props, name, [read(attr) for attr in source])
            else:
                setattr(props, name, read(source))
        status = get_name(props.name, len(props.name), device)
        if status:
            return status
        total = ffi.new("size_t*")
        status = total_mem(total, device)
        if status:
            return status
        props.totalGlobalMem = total[0]
        if get_uuid is not None and "uuid" in fields:
            get_uuid(ffi.cast("CUuuid*", ffi.addressof(props, "uuid")), device)
        major, minor = props.major, props.minor
        props.gcnArchName = f"sm_{major}{minor}".encode()
        if "gcnArch" in fields:
            props.gcnArch = major * 10 + minor
        for bit in arch_bits:  # every feature flag holds on the GPUs CUDA >= 12 supports
            setattr(props.arch, bit, 1)
        return 0

    return hipGetDeviceProperties


def pointer_attributes(get_attributes: Native, host_get_flags: Callable[..., int]) -> Native:
    """hipPointerGetAttributes over cudaPointerGetAttributes.

    cudaMemoryType is numbered as hipMemoryType from ROCm 6 (Unregistered 0, Host 1, Device 2,
    Managed 3), so the type copies over; like CUDA (and ROCm 6), an unregistered host pointer
    succeeds with type Unregistered. allocationFlags holds the hipHostMalloc flags of pinned
    host memory (cudaHostGetFlags), else 0.
    """
    table = CUDART_TO_HIP.get

    def hipPointerGetAttributes(attributes: Any, pointer: Any) -> int:
        native = ffi.new("cudaPointerAttributes*")
        status = get_attributes(native, pointer)
        if status:
            return table(status, HIP_UNKNOWN)
        attributes.type = native.type
        attributes.device = native.device
        attributes.devicePointer = native.devicePointer
        attributes.hostPointer = native.hostPointer
        attributes.isManaged = int(native.type == _MANAGED)
        flags = ffi.new("unsigned int*")
        host = native.hostPointer
        attributes.allocationFlags = (
            flags[0] if native.type == _HOST and host and host_get_flags(flags, host) == 0 else 0
        )
        return 0

    return hipPointerGetAttributes
