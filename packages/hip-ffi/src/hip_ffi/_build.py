"""Build the CFFI out-of-line ABI module from the declarations in `cdef/`.

Used by the wheel build hook (`packages/hip-ffi/hatch_build.py`) and runnable by hand for a
source checkout: `python packages/hip-ffi/src/hip_ffi/_build.py` writes `_hip_cffi.py` beside
this file. Needs `cffi` (and its parser, pycparser) at build time only.
"""

from __future__ import annotations

import sys
from pathlib import Path

from cffi import FFI

CDEF_DIR = Path(__file__).resolve().parent / "cdef"
MODULE_NAME = "hip_ffi._hip_cffi"

# Order matters: later files use the types of earlier ones.
CDEF_FILES = (
    "hip_types.h",  # handles, enums and structs of the HIP runtime
    "hip_runtime.h",  # hip* runtime functions
    "hiprtc.h",  # hiprtc* run-time compilation
    "hipblas.h",  # hipblas* (a subset: handles, streams, gemm)
    "cuda.h",  # CUDA driver/runtime/nvrtc/cuBLAS entry points for the nvidia platform
    "miopen.h",  # miopen* (a subset: handles, descriptors, convolution, pooling)
    "cudnn.h",  # cuDNN legacy entry points the nvidia platform translates miopen* to
    "nccl.h",  # RCCL / NCCL collectives (nccl* names on every platform)
)


def cdef_source() -> str:
    return "\n".join((CDEF_DIR / name).read_text() for name in CDEF_FILES)


def make_ffi() -> FFI:
    ffi = FFI()
    ffi.cdef(cdef_source())
    ffi.set_source(MODULE_NAME, None)
    return ffi


def emit(path: Path) -> None:
    """Write the generated pure-Python module to `path`."""
    path.parent.mkdir(parents=True, exist_ok=True)
    make_ffi().emit_python_code(str(path))


if __name__ == "__main__":
    target = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).with_name("_hip_cffi.py")
    emit(target)
    print(f"wrote {target}")
