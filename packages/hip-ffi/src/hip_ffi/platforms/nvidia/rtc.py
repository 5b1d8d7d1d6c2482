"""hiprtc over NVRTC: HIP's run-time compilation calls, options and codes on the nvidia platform.

- Options: `--offload-arch=sm_90` (the surface's convention: the arch as gcnArchName reports
  it) becomes nvrtc's `-arch=sm_90`; a few HIP-only options are rewritten or dropped
  (tables.RTC_OPTIONS). With no target named, the current device's is added, as hiprtc
  does, so that the result is machine code for this GPU.
- Code: hiprtcGetCode returns the CUBIN when the program was compiled for a real architecture
  (sm_XX), else the PTX (compute_XX), which the driver compiles at module load.
- Headers: sources may `#include <hip/hip_runtime.h>`, `<hip/hip_fp16.h>` and
  `<hip/hip_bf16.h>`; nvrtc gets stand-ins for them and the toolkit's include folder. As
  hiprtc pre-includes its runtime header, every compile pre-includes the hip/hip_runtime.h
  stand-in (`--pre-include`), so a source that includes nothing still finds `__shfl_down`,
  `__HIP_PLATFORM_NVIDIA__` and HIP's deprecated spellings.
- Name expressions (`k<64>`, `ns::k`): nvrtcAddNameExpression / nvrtcGetLoweredName, whose
  results and rules (add before the compile, read after) are hiprtc's.
- Compile errors come back as HIPRTC_ERROR_COMPILATION with the log in hiprtcGetProgramLog.
"""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Callable, Sequence
from typing import Any

from hip_ffi import constants
from hip_ffi._ffi import ffi
from hip_ffi.platforms.nvidia.error_codes import HIPRTC_TO_NVRTC, HIPRTC_UNKNOWN, NVRTC_TO_HIPRTC
from hip_ffi.platforms.nvidia.tables import (
    PRE_INCLUDE,
    RTC_ARCH_PREFIXES,
    RTC_HEADERS,
    RTC_OPTION_PREFIXES,
    RTC_OPTIONS,
)
from hip_ffi.platforms.nvidia.wrappers import Native, translated


def translate_options(options: Sequence[str], default_arch: str | None) -> list[str]:
    """hiprtc options as nvrtc takes them (see the module docstring)."""
    out: list[str] = []
    for option in options:
        if option in RTC_OPTIONS:
            replacement = RTC_OPTIONS[option]
            if replacement is not None:
                out.append(replacement)
            continue
        for hip_prefix, nvrtc_prefix in RTC_OPTION_PREFIXES:
            if option.startswith(hip_prefix):
                option = nvrtc_prefix + option[len(hip_prefix) :]
                break
        out.append(option)
    if default_arch and not any(o.startswith(RTC_ARCH_PREFIXES) for o in options):
        out.append(f"-arch={default_arch}")
    return out


def _strings(array: Any, count: int) -> list[str]:
    """`count` C strings of a `const char**` (or a list of cdata / bytes) as Python str."""
    items = (array[i] for i in range(count))
    return [(i if isinstance(i, bytes) else ffi.string(i)).decode() for i in items]


def _c_strings(values: Sequence[str]) -> tuple[Any, list[Any]]:
    """A `const char*[]` of `values` and the buffers it points into (keep both alive)."""
    buffers = [ffi.new("char[]", value.encode()) for value in values]
    return ffi.new("const char*[]", buffers), buffers


def bind(
    nvrtc: Any, default_arch: Callable[[], str | None], include_dir: str | None = None
) -> dict[str, Native]:
    """The HIPRTC surface over an opened libnvrtc. `default_arch` gives e.g. "sm_90" or None;
    `include_dir` (the toolkit's headers, for cuda_fp16.h and cuda_bf16.h) goes to every compile
    as `-I`, after the caller's own options."""
    table = NVRTC_TO_HIPRTC.get
    extra_options = [f"-I{include_dir}"] if include_dir else []
    # CUDA 13 keeps libcu++ (cuda/std/..., which cooperative_groups.h includes) in include/cccl.
    cccl = f"{include_dir}/cccl" if include_dir else ""
    extra_options += [f"-I{cccl}"] if cccl and os.path.isdir(cccl) else []
    extra_options.append(f"--pre-include={PRE_INCLUDE}")

    def mapped(native: Native, name: str) -> Native:
        return translated(native, name, NVRTC_TO_HIPRTC, HIPRTC_UNKNOWN)

    names = {
        code: ffi.new("char[]", name.encode()) for name, code in constants.HIPRTC_RESULTS.items()
    }

    def hiprtcGetErrorString(result: int) -> Any:
        twin = HIPRTC_TO_NVRTC.get(result)
        if twin is not None:
            return nvrtc.nvrtcGetErrorString(twin)
        return ffi.cast("const char*", names.get(result, names[HIPRTC_UNKNOWN]))

    def hiprtcCreateProgram(
        prog: Any, source: Any, name: Any, count: int, headers: Any, include_names: Any
    ) -> int:
        given = _strings(include_names, count) if count else []
        contents = _strings(headers, count) if count else []
        for include, text in RTC_HEADERS.items():
            if include not in given:
                given.append(include)
                contents.append(text)
        # The buffers must outlive the call (the arrays point into them); nvrtc copies them.
        header_array, _header_buffers = _c_strings(contents)
        name_array, _name_buffers = _c_strings(given)
        status = nvrtc.nvrtcCreateProgram(prog, source, name, len(given), header_array, name_array)
        return table(status, HIPRTC_UNKNOWN) if status else 0

    def hiprtcCompileProgram(prog: Any, count: int, options: Any) -> int:
        given = _strings(options, count) if count else []
        translated = translate_options(given, default_arch()) + extra_options
        option_array, _buffers = _c_strings(translated)  # alive through the call
        try:
            status = nvrtc.nvrtcCompileProgram(prog, len(translated), option_array)
        finally:
            reinstall_python_sigint()
        return table(status, HIPRTC_UNKNOWN) if status else 0

    def cubin_size(prog: Any) -> int:
        """CUBIN bytes, or 0 when compiled for a virtual architecture (PTX only)."""
        size = ffi.new("size_t*")
        return int(size[0]) if nvrtc.nvrtcGetCUBINSize(prog, size) == 0 else 0

    def hiprtcGetCodeSize(prog: Any, size_out: Any) -> int:
        size = cubin_size(prog)
        if size:
            size_out[0] = size
            return 0
        status = nvrtc.nvrtcGetPTXSize(prog, size_out)
        return table(status, HIPRTC_UNKNOWN) if status else 0

    def hiprtcGetCode(prog: Any, code: Any) -> int:
        getter = nvrtc.nvrtcGetCUBIN if cubin_size(prog) else nvrtc.nvrtcGetPTX
        status = getter(prog, code)
        return table(status, HIPRTC_UNKNOWN) if status else 0

    return {
        "hiprtcVersion": mapped(nvrtc.nvrtcVersion, "hiprtcVersion"),
        "hiprtcGetErrorString": hiprtcGetErrorString,
        "hiprtcCreateProgram": hiprtcCreateProgram,
        "hiprtcDestroyProgram": mapped(nvrtc.nvrtcDestroyProgram, "hiprtcDestroyProgram"),
        "hiprtcCompileProgram": hiprtcCompileProgram,
        "hiprtcGetProgramLogSize": mapped(nvrtc.nvrtcGetProgramLogSize, "hiprtcGetProgramLogSize"),
        "hiprtcGetProgramLog": mapped(nvrtc.nvrtcGetProgramLog, "hiprtcGetProgramLog"),
        "hiprtcGetCodeSize": hiprtcGetCodeSize,
        "hiprtcGetCode": hiprtcGetCode,
        "hiprtcAddNameExpression": mapped(nvrtc.nvrtcAddNameExpression, "hiprtcAddNameExpression"),
        "hiprtcGetLoweredName": mapped(nvrtc.nvrtcGetLoweredName, "hiprtcGetLoweredName"),
    }


def reinstall_python_sigint() -> None:
    """Give SIGINT back the disposition Python itself installs.

    A compile with NVRTC re-installs Python's SIGINT handler with SA_RESTART (seen with CUDA 13
    on the H100): from then on a blocking wait (`thread.join()`, `lock.acquire()`) restarts
    after Ctrl-C instead of returning to run the handler, so KeyboardInterrupt arrives only when
    the wait ends. `signal.signal` installs the handler again with Python's own flags. Only the
    main thread may set handlers; a compile on another thread leaves them as NVRTC did.
    """
    handler = signal.getsignal(signal.SIGINT)  # None: not installed from Python, leave it
    if handler is not None and threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGINT, handler)
