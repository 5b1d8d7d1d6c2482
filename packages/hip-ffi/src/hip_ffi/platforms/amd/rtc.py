"""hiprtc's front end on the amd platform: what every program gets in front of its source.

hiprtc pre-includes its runtime header, and from ROCm 6 that header defines
`__HIP_PLATFORM_AMD__` (as hipcc does); ROCm 5's does not, and no release defines HIP's
deprecated spellings (`hipThreadIdx_x`, `HIP_DYNAMIC_SHARED`, `HIP_KERNEL_NAME`...) that hipcc's
headers still carry. A short prologue adds them (and `ptrdiff_t`, which ROCm 5 lacks), guarded
so that a release which defines them keeps its own, and ends with `#line 1` so that
diagnostics keep the program's line numbers.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from hip_ffi._ffi import ffi
from hip_ffi.rtc import DEPRECATED_SPELLINGS

PROLOGUE = (
    "#ifndef __HIP_PLATFORM_AMD__\n#define __HIP_PLATFORM_AMD__ 1\n#endif\n"
    # ROCm 5's pre-included header has size_t but not ptrdiff_t (a typedef of the same
    # type again is no error where a release has it).
    "typedef __PTRDIFF_TYPE__ ptrdiff_t;\n" + DEPRECATED_SPELLINGS + "#line 1\n"
).encode()


def with_prologue(create: Callable[..., int]) -> Callable[..., int]:
    """hiprtcCreateProgram with PROLOGUE in front of the source (a NULL source stays NULL, for
    hiprtc's own answer)."""

    def hiprtcCreateProgram(
        prog: Any, source: Any, name: Any, count: int, headers: Any, include_names: Any
    ) -> int:
        if isinstance(source, bytes):
            text = source
        elif source is None or source == ffi.NULL:
            return create(prog, source, name, count, headers, include_names)
        else:
            text = ffi.string(ffi.cast("const char*", source))
        return create(prog, PROLOGUE + text, name, count, headers, include_names)

    return hiprtcCreateProgram
