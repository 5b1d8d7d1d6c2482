"""What the model classes share: their dtype argument, loading a checkpoint into the model's
own prepared weights (on a backend of their own or a shared one), the check that a checkpoint
holds no layers beyond the config's, and the release of the ModelRuntime a model owns.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Protocol, TypeVar

import numpy as np

from hip_core import Device
from hip_runtime.backend import HipBackend
from hip_runtime.loading.formats import Checkpoint
from hip_runtime.runtime.model_runtime import ModelRuntime
from hip_runtime.tensors.dtypes import DTypeLike, as_dtype
from hip_runtime.tensors.tensor import DeviceTensor

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
    device: Device | int | HipBackend | None,
    prepare: Callable[[HipBackend, Mapping[str, DeviceTensor]], W],
    make: Callable[[ModelRuntime, W], M],
    **options: Any,
) -> M:
    """`make(runtime, weights)`: a new ModelRuntime on `device` holding the weights `prepare`
    makes from the checkpoint `source` (loaded with ModelRuntime.load_weights' `options`).
    `device` may be a HipBackend: the runtime then shares it (the model's work is ordered on
    its stream, its pool holds the weights) and closing the model leaves it open; else the
    runtime makes a backend of its own, which the model's close closes.

    The checkpoint is loaded as stored into a second runtime that shares the backend;
    `prepare` queues the model's own tensors (casts, fusions) on the backend's stream; the
    stored copy is freed once they have run, so the device ends with one copy of the model.
    On failure nothing stays allocated and the error propagates."""
    if isinstance(device, HipBackend):
        device._check_open()
        runtime = ModelRuntime(device)
    else:
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
    """A model's release (Resource._own): its runtime's close, which waits for the stream and
    frees the weights it lists (a closed model's weights raise ClosedError), the KV cache and
    the backend if the runtime made it."""
    runtime.close()


def layers_beyond(names: Iterable[str], prefix: str, layers: int) -> list[int]:
    """The layer numbers >= `layers` among tensors named `{prefix}{number}.…` (sorted): a
    config that counts fewer layers than its checkpoint holds would run a truncated model."""
    found = set()
    for name in names:
        if name.startswith(prefix):
            number = name[len(prefix) :].partition(".")[0]
            if number.isdecimal() and int(number) >= layers:
                found.add(int(number))
    return sorted(found)


__all__ = ["DTYPES", "Prepared", "close_runtime", "layers_beyond", "load_model", "model_dtype"]
