"""Modules: loaded code objects, and the kernels in them."""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from hip_core._hip import hip
from hip_core._resource import Resource
from hip_core.errors import check, error_for
from hip_core.kernel import Kernel
from hip_core.signature import Param, kernels_in_source, parse_signature

if TYPE_CHECKING:
    from hip_core.device import Device


class Module(Resource):
    """A code object loaded on a device (hipModuleLoadData).

    A module made from source (`Program.load`) knows the parameter types of its kernels; for a
    prebuilt code object, give them to `get_kernel(name, signature=[...])`.
    """

    __slots__ = ("_code", "_kernels", "_signatures", "device", "handle")

    def __init__(self, handle: Any, device: Device, code: bytes | None, source: str | None) -> None:
        self.handle = handle
        self.device = device
        self._code = code  # the image stays referenced while the module is loaded
        self._signatures: dict[str, tuple[Param, ...]] = kernels_in_source(source) if source else {}
        self._kernels: dict[str, Kernel] = {}
        self._own(_unload, hip(), handle)

    @classmethod
    def from_bytes(cls, code: bytes, device: Device, *, source: str | None = None) -> Module:
        """Load a code object (ELF for AMD, CUBIN/PTX for NVIDIA, a shared object on cpu).

        hipModuleLoadData takes no size, so the platform first checks that `code` holds a whole
        code object (`HipApi.check_code_object`): a truncated or corrupt one raises HipError
        (hipErrorInvalidImage; hipErrorNoBinaryForGpu for one built for another device) saying
        why, before the loader reads anything.
        """
        api = hip()
        code = bytes(code)  # PTX is read up to a NUL: CPython keeps one after a bytes' data
        error, reason = api.check_code_object(code)
        if error:
            raise error_for(error, "hipModuleLoadData", reason)
        out = api.ffi.new("hipModule_t*")
        image = api.ffi.from_buffer(code)
        with device:
            check(api.hipModuleLoadData(out, image), "hipModuleLoadData")
        return cls(out[0], device, code, source)

    @classmethod
    def from_file(
        cls, path: str | os.PathLike[str], device: Device, *, source: str | None = None
    ) -> Module:
        """Load a code object file."""
        api = hip()
        out = api.ffi.new("hipModule_t*")
        if not os.path.exists(path):
            raise FileNotFoundError(path)
        with device:
            check(api.hipModuleLoad(out, os.fsencode(path)), "hipModuleLoad")
        return cls(out[0], device, None, source)

    def get_kernel(self, name: str, signature: Sequence[str] | None = None) -> Kernel:
        """The kernel `name`; its parameter types come from the source, or from `signature`
        (C type spellings such as `["const float*", "int"]`), which wins when both exist."""
        self._check_open()
        if signature is None and name in self._kernels:
            return self._kernels[name]
        if signature is not None:
            params = parse_signature(signature)
        elif name in self._signatures:
            params = self._signatures[name]
        else:
            known = ", ".join(sorted(self._signatures)) or "none parsed"
            raise TypeError(
                f"no parameter types for kernel {name!r} (kernels in the source: {known}); "
                "pass signature=[...] for prebuilt code"
            )
        api = hip()
        out = api.ffi.new("hipFunction_t*")
        check(
            api.hipModuleGetFunction(out, self.handle, name.encode()),
            f"hipModuleGetFunction({name})",
        )
        kernel = Kernel(self, name, out[0], params)
        if signature is None:
            self._kernels[name] = kernel
        return kernel

    def get_global(self, name: str) -> tuple[int, int]:
        """(device address, size in bytes) of a `__device__` global variable."""
        self._check_open()
        api = hip()
        pointer, size = api.ffi.new("hipDeviceptr_t*"), api.ffi.new("size_t*")
        check(
            api.hipModuleGetGlobal(pointer, size, self.handle, name.encode()),
            f"hipModuleGetGlobal({name})",
        )
        return int(api.ffi.cast("uintptr_t", pointer[0])), int(size[0])


def _unload(api: Any, handle: Any) -> None:
    check(api.hipModuleUnload(handle), "hipModuleUnload")
