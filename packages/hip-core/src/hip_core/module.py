"""Modules: loaded code objects, and the kernels in them."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from hip_core._hip import hip
from hip_core._resource import Resource
from hip_core.errors import check, error_for
from hip_core.kernel import Kernel
from hip_core.kernel_scan import KernelDecl, canonical, scan_kernels, template_arguments
from hip_core.signature import Param, kernel_params, parse_signature

if TYPE_CHECKING:
    from hip_core.device import Device


class Module(Resource):
    """A code object loaded on a device (hipModuleLoadData).

    A module made from source (`Program.load`) knows the parameter types of its kernels,
    read when a kernel is first asked for (a type it cannot read makes only that kernel need
    `signature=`); for a prebuilt code object, give them to `get_kernel(name,
    signature=[...])`. `names` maps name expressions (`k<64>`, `ns::k`) to their lowered
    names in the code object (`Program(name_expressions=...)` fills it); `types` gives the
    layouts of user structs passed by value ({"Params": numpy dtype or ctypes Structure}).
    """

    __slots__ = ("_code", "_decls", "_kernels", "_names", "_types", "device", "handle")

    def __init__(
        self,
        handle: Any,
        device: Device,
        code: bytes | None,
        source: str | None,
        names: Mapping[str, str] | None = None,
        types: Mapping[str, Any] | None = None,
    ) -> None:
        self.handle = handle
        self.device = device
        self._code = code  # the image stays referenced while the module is loaded
        self._decls: Mapping[str, KernelDecl] = scan_kernels(source) if source else {}
        self._names = {canonical(name): lowered for name, lowered in (names or {}).items()}
        self._types = dict(types or {})
        self._kernels: dict[str, Kernel] = {}
        self._own(_unload, hip(), handle)

    @classmethod
    def from_bytes(
        cls,
        code: bytes,
        device: Device,
        *,
        source: str | None = None,
        names: Mapping[str, str] | None = None,
        types: Mapping[str, Any] | None = None,
    ) -> Module:
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
        return cls(out[0], device, code, source, names, types)

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
        """The kernel `name`: an `extern "C"` name, a C++ kernel's qualified name (`saxpy`,
        `ns::saxpy`) or a name expression the program was compiled with (`k<64>`). Its
        parameter types come from the source (a template's with its arguments put in), or from
        `signature` (C type spellings such as `["const float*", "int", "float4"]`), which wins
        when both exist."""
        self._check_open()
        if signature is None and name in self._kernels:
            return self._kernels[name]
        params = (
            parse_signature(signature, self._types) if signature is not None else self._params(name)
        )
        lowered = self._names.get(canonical(name), name)
        api = hip()
        out = api.ffi.new("hipFunction_t*")
        check(
            api.hipModuleGetFunction(out, self.handle, lowered.encode()),
            f"hipModuleGetFunction({name})",
        )
        kernel = Kernel(self, name, out[0], params)
        if signature is None:
            self._kernels[name] = kernel
        return kernel

    def _params(self, name: str) -> tuple[Param, ...]:
        """The parameters the source declares for kernel `name` (TypeError saying what is
        missing: an unknown kernel, a name expression not compiled, an unreadable type)."""
        base, arguments = template_arguments(name)
        decl = self._decls.get(base)
        if decl is None:
            known = ", ".join(sorted(self._decls)) or "none found"
            raise TypeError(
                f"no parameter types for kernel {name!r} (kernels in the source: {known}); "
                "pass signature=[...] for prebuilt code"
            )
        if decl.template and canonical(name) not in self._names:
            raise TypeError(
                f"{name!r} is not a name expression of this program: compile it with "
                f"Program(..., name_expressions=[{name!r}])"
            )
        try:
            return kernel_params(decl, arguments, self._types)
        except TypeError as error:
            raise TypeError(f"kernel {name!r}: {error}") from None

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
