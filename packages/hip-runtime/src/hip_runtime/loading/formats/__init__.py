"""Checkpoint formats: find, parse and validate a checkpoint's layout before loading it.

    checkpoint = open_checkpoint("model/")          # or a .safetensors, index .json or .gguf
    checkpoint.tensors[0].name, .shape, .dtype, .path, .offset, .nbytes

Nothing here reads tensor data or touches a device.
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np

from hip_runtime.loading.formats.records import (
    Checkpoint,
    FormatError,
    TensorRecord,
    open_regular,
)
from hip_runtime.loading.formats.safetensors import (
    INDEX_NAME,
    read_safetensors,
    read_safetensors_index,
    save_safetensors,
)
from hip_runtime.tensors.dtypes import as_dtype

GGUF_MAGIC = b"GGUF"


def open_checkpoint(path: str | os.PathLike[str], *, dequantize_to: Any = np.float32) -> Checkpoint:
    """The validated layout of the checkpoint at `path`.

    `path` may be a `.safetensors` file, a `model.safetensors.index.json`, a `.gguf` file, or a
    directory holding exactly one of: an index, one `.safetensors` file, one `.gguf` file.
    Quantized GGUF tensors become `dequantize_to` (float32, float16 or bfloat16) on the device.
    Raises FileNotFoundError for a missing path (or a directory holding no checkpoint) and
    FormatError, naming the file, for anything else that is not a checkpoint: a malformed file,
    or a path that is not a regular file (a FIFO, a device; checked before it is opened, so
    nothing blocks). This is the one rule of what a checkpoint is: the loader and the
    `hip-backend load` command accept exactly what it accepts.
    """
    path = os.fspath(path)
    if os.path.isdir(path):
        path = _pick_in_directory(path)
    elif not os.path.lexists(path):
        raise FileNotFoundError(f"no checkpoint at {path}")
    if path.endswith(".json"):
        return read_safetensors_index(path)
    with os.fdopen(open_regular(path), "rb") as f:
        magic = f.read(4)
    if magic == GGUF_MAGIC:
        from hip_runtime.loading.formats.gguf import read_gguf

        return read_gguf(path, dequantize_to=as_dtype(dequantize_to))
    return read_safetensors(path)


def _pick_in_directory(folder: str) -> str:
    # By name only: what the name picks is then opened as a regular file or refused (a
    # directory or a FIFO named model.safetensors is a FormatError naming it, not skipped).
    if os.path.lexists(os.path.join(folder, INDEX_NAME)):
        return os.path.join(folder, INDEX_NAME)
    names = sorted(os.listdir(folder))
    found = [n for n in names if n.endswith((".safetensors", ".gguf"))]
    if len(found) == 1:
        return os.path.join(folder, found[0])
    if found:
        raise FormatError(
            f"{len(found)} checkpoint files ({', '.join(found[:4])}) and no {INDEX_NAME}: "
            "name the file to load", path=folder,
        )  # fmt: skip
    raise FileNotFoundError(
        f"{folder}: the folder holds no {INDEX_NAME}, .safetensors or .gguf file"
    )


__all__ = [
    "Checkpoint",
    "FormatError",
    "TensorRecord",
    "open_checkpoint",
    "save_safetensors",
]
