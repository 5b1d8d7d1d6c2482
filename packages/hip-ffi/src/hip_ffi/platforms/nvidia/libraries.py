"""Where the nvidia platform looks for libcudart, libcuda, libnvrtc and libcublas.

Order, for the toolkit libraries (runtime, nvrtc, cuBLAS):
1. the `HIP_FFI_*_PATH` override (then nothing else);
2. a copy this process has already mapped (torch, CuPy... loaded it): one copy per process;
3. a system CUDA: `$CUDA_HOME`, `$CUDA_PATH`, /usr/local/cuda;
4. NVIDIA's PyPI wheels: `nvidia/*/lib` under each site-packages folder on sys.path
   (`nvidia/cu13/lib` for CUDA 13, `nvidia/cuda_runtime/lib`, `nvidia/cublas/lib`... for 12);
5. the dynamic linker (bare sonames: LD_LIBRARY_PATH, ld.so.cache).
The driver (libcuda) must be the one that matches the kernel module, so the dynamic linker
comes first for it and the usual driver folders only after.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from hip_ffi.libraries import LibrarySpec, env_dirs

#: Newest first: a CUDA 13 runtime is preferred to a 12 one when both are present.
CUDART_NAMES = ("libcudart.so.13", "libcudart.so.12", "libcudart.so")
NVRTC_NAMES = ("libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so")
CUBLAS_NAMES = ("libcublas.so.13", "libcublas.so.12", "libcublas.so")
CUDNN_NAMES = ("libcudnn.so.9", "libcudnn.so")
NCCL_NAMES = ("libnccl.so.2", "libnccl.so")
LIBCUDA_NAMES = ("libcuda.so.1", "libcuda.so")
SYSTEM_CUDA_ROOT = "/usr/local/cuda"
SYSTEM_CUDA = (f"{SYSTEM_CUDA_ROOT}/lib64", f"{SYSTEM_CUDA_ROOT}/lib")
#: Where driver packages and container runtimes put libcuda when the linker is not told.
DRIVER_DIRS = (
    "/usr/lib/x86_64-linux-gnu",
    "/usr/lib/aarch64-linux-gnu",
    "/usr/lib64",
    "/usr/local/nvidia/lib64",
    "/usr/lib/wsl/lib",
)


@dataclass(frozen=True)
class LinkerFirstSpec(LibrarySpec):
    """A LibrarySpec whose bare names (the dynamic linker) come before `fallback_dirs`."""

    fallback_dirs: Sequence[str] = field(default_factory=tuple)

    def candidates(self) -> list[str]:
        forced = os.environ.get(self.env)
        if forced:
            return [forced]
        found = [
            str(Path(d) / n) for d in self.fallback_dirs for n in self.names if Path(d, n).is_file()
        ]
        return [*self.names, *found]


def wheel_dirs(search_path: Iterable[str] | None = None) -> list[str]:
    """Every `nvidia/<package>/lib` folder under the entries of sys.path (or `search_path`)."""
    dirs: list[str] = []
    for entry in sys.path if search_path is None else search_path:
        root = Path(entry or ".") / "nvidia"
        if root.is_dir():
            dirs += [str(lib) for lib in sorted(root.glob("*/lib")) if lib.is_dir()]
    return dirs


def mapped_dirs(names: Sequence[str], maps: str = "/proc/self/maps") -> list[str]:
    """Folders of files named `names` that this process has already mapped (Linux)."""
    dirs: list[str] = []
    try:
        with open(maps) as lines:
            for line in lines:
                path = line.rsplit(" ", 1)[-1].strip()
                if path.startswith("/") and Path(path).name in names:
                    folder = str(Path(path).parent)
                    if folder not in dirs:
                        dirs.append(folder)
    except OSError:
        pass
    return dirs


def toolkit_dirs(names: Sequence[str], search_path: Iterable[str] | None = None) -> list[str]:
    """Steps 2-4 of the module docstring for a library called `names`, without duplicates."""
    ordered = [
        *mapped_dirs(names),
        *env_dirs("CUDA_HOME", "CUDA_PATH", suffixes=("lib64", "lib")),
        *SYSTEM_CUDA,
        *wheel_dirs(search_path),
    ]
    unique: dict[str, str] = {}  # real path -> first spelling (/usr/local/cuda/lib64 is often
    for folder in ordered:  # a link to lib, and CUDA_HOME to /usr/local/cuda)
        unique.setdefault(os.path.realpath(folder), folder)
    return list(unique.values())


def _toolkit_spec(role: str, env: str, names: Sequence[str]) -> LibrarySpec:
    """A CUDA toolkit library: searched in the toolkit folders before the dynamic linker."""
    return LibrarySpec(role=role, env=env, names=names, dirs=toolkit_dirs(names))


def cudart_spec() -> LibrarySpec:
    return _toolkit_spec("CUDA runtime (libcudart)", "HIP_FFI_CUDART_PATH", CUDART_NAMES)


def libcuda_spec() -> LibrarySpec:
    return LinkerFirstSpec(
        role="CUDA driver (libcuda)",
        env="HIP_FFI_LIBCUDA_PATH",
        names=LIBCUDA_NAMES,
        fallback_dirs=DRIVER_DIRS,
    )


def nvrtc_spec() -> LibrarySpec:
    return _toolkit_spec("NVRTC (libnvrtc)", "HIP_FFI_NVRTC_PATH", NVRTC_NAMES)


def cublas_spec() -> LibrarySpec:
    return _toolkit_spec("cuBLAS (libcublas)", "HIP_FFI_CUBLAS_PATH", CUBLAS_NAMES)


def cudnn_spec() -> LibrarySpec:
    """cuDNN 9 (libcudnn.so.9 exports the legacy API and loads libcudnn_ops / libcudnn_cnn
    from its own folder on first use): NVIDIA's `nvidia-cudnn-cu13` / `-cu12` wheels put it in
    `nvidia/cudnn/lib`, which step 4 finds (torch's own copy, when torch is loaded, step 2)."""
    return _toolkit_spec("cuDNN (libcudnn)", "HIP_FFI_CUDNN_PATH", CUDNN_NAMES)


def nccl_spec() -> LibrarySpec:
    """NCCL 2: NVIDIA's `nvidia-nccl-cu13` / `-cu12` wheels put it in `nvidia/nccl/lib`, which
    step 4 finds (torch's venv has one; torch's own mapped copy, once torch.distributed has
    loaded it, step 2), else a system NCCL through the dynamic linker."""
    return _toolkit_spec("NCCL (libnccl)", "HIP_FFI_NCCL_PATH", NCCL_NAMES)


def cuda_include_dir(library_path: str) -> str | None:
    """The CUDA headers that go with a toolkit library (for nvrtc's `-I`): `../include` beside
    it (/usr/local/cuda/lib64 -> /usr/local/cuda/include, nvidia/cu13/lib -> nvidia/cu13/include),
    else $CUDA_HOME/include, $CUDA_PATH/include, /usr/local/cuda/include; None without one."""
    beside = Path(os.path.realpath(library_path)).parent.parent / "include"
    roots = [os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"), SYSTEM_CUDA_ROOT]
    for folder in (beside, *(Path(r) / "include" for r in roots if r)):
        if (folder / "cuda_fp16.h").is_file():
            return str(folder)
    return None
