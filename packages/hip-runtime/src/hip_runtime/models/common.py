"""What the model classes share: their dtype argument, loading a checkpoint into the model's
own prepared weights, and the release of the ModelRuntime a model owns.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from typing import Any, Protocol, TypeVar

import numpy as np

from hip_core import Device
from hip_runtime.backend import HipBackend
from hip_runtime.dtypes import DTypeLike, as_dtype
from hip_runtime.loading.formats import Checkpoint
from hip_runtime.model_runtime import ModelRuntime
from hip_runtime.tensor import DeviceTensor

#: The dtypes a model computes in.
DTYPES = ("float32", "float16", "bfloat16")


class Prepared(Protocol):
    """A model's weights once prepared: each tensor under a name, for ModelRuntime.weights."""

    def named(self) -> dict[str, DeviceTensor]: ...


W = TypeVar("W", bound=Prepared)
M = TypeVar("M")


def model_dtype(dtype: DTypeLike, model: str) -> np.dtype[Any]:
    """`dtype` as a numpy dtype; ValueError naming `model` unless it is one of DTYPES."""
    target = as_dtype(dtype)
    if target.name not in DTYPES:
        raise ValueError(f"{model}: dtype must be float32, float16 or bfloat16, not {target}")
    return target


def load_model(
    source: str | os.PathLike[str] | Checkpoint,
    device: Device | int | None,
    prepare: Callable[[HipBackend, Mapping[str, DeviceTensor]], W],
    make: Callable[[ModelRuntime, W], M],
    **options: Any,
) -> M:
    """`make(runtime, weights)`: a new ModelRuntime on `device` holding the weights `prepare`
    makes from the checkpoint `source` (loaded with ModelRuntime.load_weights' `options`).

    The checkpoint is loaded as stored into a second runtime that shares the backend;
    `prepare` queues the model's own tensors (casts, fusions) on the backend's stream; the
    stored copy is freed once they have run, so the device ends with one copy of the model.
    On failure nothing stays allocated and the error propagates."""
    runtime = ModelRuntime(device=device)
    try:
        loaded = ModelRuntime(runtime.backend)  # shares the backend; freed below
        try:
            loaded.load_weights(source, **options)
            weights = prepare(runtime.backend, loaded.weights)
        finally:
            loaded.close()  # waits for the backend's stream, then frees the stored copy
        runtime.weights.update(weights.named())
        return make(runtime, weights)
    except BaseException:
        runtime.close()
        raise


def close_runtime(runtime: ModelRuntime) -> None:
    """A model's release (Resource._own): its runtime's close, which frees everything."""
    runtime.close()


__all__ = ["DTYPES", "Prepared", "close_runtime", "load_model", "model_dtype"]
