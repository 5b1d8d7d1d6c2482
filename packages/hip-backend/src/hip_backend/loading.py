"""Loading a checkpoint through hip-runtime's ModelRuntime and summarizing what it cost.

Used by `hip-backend load` and the loading row of `hip-backend bench`. ModelRuntime is
imported on first use, so the rest of hip-backend works with a hip-runtime that lacks it.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

Progress = Callable[[int, int, int, int], None]  # bytes done, bytes total, tensors done, total

#: What `ModelRuntime.load` reads: a .safetensors file, a directory with a sharded index
#: (model.safetensors.index.json) or .safetensors files, or a .gguf file.
CHECKPOINT_SUFFIXES = (".safetensors", ".gguf")


class CheckpointPathError(ValueError):
    """The path cannot be a checkpoint: it does not exist, or is neither a checkpoint file nor a
    directory holding one."""


def check_path(path: str | os.PathLike[str]) -> Path:
    """`path` if `hip_runtime.open_checkpoint` opens it, else CheckpointPathError saying why
    not (its message starts with the path at fault). That function is the one rule of what a
    checkpoint is, so the command line accepts exactly what the library does; it reads only
    headers and touches no device."""
    from hip_runtime import FormatError, open_checkpoint

    found = Path(path)
    if not found.exists() and not found.is_symlink():
        raise CheckpointPathError(f"{found}: no such file or directory")
    try:
        open_checkpoint(found)
    except FormatError as error:
        raise CheckpointPathError(str(error)) from error
    except OSError as error:  # a folder holding no checkpoint, a permission...
        reason = f"{error.filename}: {error.strerror}" if error.strerror else str(error)
        raise CheckpointPathError(reason) from error
    return found


def model_runtime_class() -> Any:
    """hip_runtime.ModelRuntime; ImportError when this hip-runtime does not have it."""
    import hip_runtime

    found = getattr(hip_runtime, "ModelRuntime", None)
    if found is None:
        raise ImportError(f"hip-runtime {hip_runtime.__version__} has no ModelRuntime")
    return found


def load_checkpoint(
    path: str | os.PathLike[str],
    device: Any = None,
    *,
    progress_bar: bool = False,
    progress: Progress | None = None,
) -> dict[str, Any]:
    """Load `path` onto `device` with ModelRuntime, close it, and return what it cost.

    Keys: path, files, tensors, file_bytes (tensor data read from the files), device_bytes,
    seconds, gb_per_s (file_bytes per second of the load, GB = 1e9 bytes) and memory
    {category: bytes} as the runtime accounts it.
    """
    checked = check_path(path)
    runtime = model_runtime_class().load(
        str(checked), device, progress_bar=progress_bar, progress=progress
    )
    try:
        report = runtime.load_report
        memory: Mapping[str, int] = runtime.memory()
        return {
            "path": str(checked),
            "files": int(report.files),
            "tensors": int(report.tensors),
            "file_bytes": int(report.file_bytes),
            "device_bytes": int(report.device_bytes),
            "seconds": float(report.seconds),
            "gb_per_s": float(report.gb_per_s),
            "memory": {str(k): int(v) for k, v in memory.items()},
        }
    finally:
        runtime.close()


__all__ = [
    "CHECKPOINT_SUFFIXES",
    "CheckpointPathError",
    "Progress",
    "check_path",
    "load_checkpoint",
    "model_runtime_class",
]
