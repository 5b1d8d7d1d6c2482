"""ModelRuntime: a model's weights, scratch memory and KV cache on one HipBackend.

    with ModelRuntime.load("model/", progress_bar=True) as runtime:
        w = runtime.weights["model.layers.0.mlp.gate_proj.weight"]
        y = runtime.backend.linear(x, w)
        cache = runtime.allocate_kv_cache(layers=32, max_tokens=4096, kv_heads=8, head_dim=128)
        runtime.memory()   # {"weights": ..., "kv_cache": ..., "scratch": ..., "activations": ...}

Several devices (tensor parallelism): `ModelRuntime.load(path, devices=[0, 1], shard={...})`
makes a HipBackend per device (`backends`) and loads each tensor whole onto some of them or
split along an axis (`shard=`: hip_runtime.loading.sharding says the rules), reading the file
once. `shards[k]` holds what device k holds (a split tensor's part under the tensor's name),
`layouts[name]` where each tensor went, and `weights` is `shards[0]`. The scratch arena and the
KV cache are device 0's (on `backend`, which is backends[0]).

Stream semantics: the weights, the scratch arena and the KV cache all carry the backend's
stream, so ops on them are ordered with each other (device k's: backends[k]'s stream). `load`
returns with the weights resident (see AsyncLoader). `close()` waits for the backends' streams
and frees everything; every method of a closed runtime raises hip_core.ClosedError, and so does
reading any tensor it held.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any

from hip_core import Device, Resource
from hip_runtime.backend import HipBackend
from hip_runtime.loading.formats import Checkpoint, open_checkpoint
from hip_runtime.loading.loader import AsyncLoader, LoadReport, LoadResult, ProgressCallback
from hip_runtime.loading.sharding import (
    ShardRule,
    TensorLayout,
    resolve_devices,
    resolve_layouts,
)
from hip_runtime.runtime.kv_cache import KVCache
from hip_runtime.runtime.scratch import ScratchArena
from hip_runtime.tensors.dtypes import DTypeLike, float16
from hip_runtime.tensors.tensor import DeviceTensor


class ModelRuntime(Resource):
    """Owns a HipBackend, the weights (name -> DeviceTensor), an optional scratch arena and KV
    cache, and accounts for the device memory of each.

    `close()` (or `with`) frees them in order: every tensor listed in `weights` / `shards` (the
    loaded ones, and any put there, such as a model's prepared weights) has its memory freed
    then, whoever still refers to it. A backend given to the constructor is shared: close
    leaves it open. A runtime collected unclosed frees nothing
    itself: each part it holds is a Resource (or memory) that frees itself when collected.
    """

    def __init__(
        self,
        backend: HipBackend | None = None,
        *,
        device: Device | int | None = None,
        devices: Sequence[Device | int] | None = None,
    ) -> None:
        if devices is not None and (backend is not None or device is not None):
            raise ValueError("give devices= alone, or a backend / device=")
        self.backends: list[HipBackend] = []
        self._owns_backend = backend is None
        self._own(_parts_free_themselves)
        if backend is not None:
            self.backends.append(backend)
        elif devices is None:
            self.backends.append(HipBackend(device))
        else:
            try:
                for each in resolve_devices(devices):
                    self.backends.append(HipBackend(each))
            except BaseException:
                self._close_backends()
                raise
        self.backend = self.backends[0]
        self.devices = [b.device for b in self.backends]
        self.shards: list[dict[str, DeviceTensor]] = [{} for _ in self.backends]
        self.weights: dict[str, DeviceTensor] = self.shards[0]
        self.layouts: dict[str, TensorLayout] = {}
        self.load_report: LoadReport | None = None
        self.scratch: ScratchArena | None = None
        self.kv_cache: KVCache | None = None
        self._loads: list[LoadResult] = []

    @classmethod
    def load(
        cls,
        path: str | os.PathLike[str] | Checkpoint,
        device: Device | int | None = None,
        *,
        devices: Sequence[Device | int] | None = None,
        shard: Mapping[str, ShardRule] | None = None,
        progress: ProgressCallback | None = None,
        progress_bar: bool = False,
        checksum: bool = False,
        expected_checksums: Mapping[str, int] | None = None,
        dequantize_to: DTypeLike = "float32",
        arena: bool = True,
    ) -> ModelRuntime:
        """A runtime on `device` holding the checkpoint at `path` (see AsyncLoader.start for
        the options); or on `devices` (ordinals or Devices), each tensor placed by `shard`
        (hip_runtime.loading.sharding; None: replicated on every device). On failure nothing
        stays allocated on any device and the error propagates; a bad `devices` or `shard` is
        a ValueError (TypeError for a wrong type) before any backend or memory exists. Ctrl-C
        (KeyboardInterrupt) cancels the load, frees its memory and closes its files before it
        propagates."""
        if devices is None and shard is not None:
            raise ValueError("shard= places tensors on several devices: give devices= too")
        if devices is not None:
            if device is not None:
                raise ValueError("give device= or devices=, not both")
            if not isinstance(path, Checkpoint):  # its rules are checked before any allocation
                path = open_checkpoint(path, dequantize_to=dequantize_to)
            resolve_layouts(path, resolve_devices(devices), shard)
        runtime = cls(device=device, devices=devices)
        try:
            runtime.load_weights(
                path,
                shard=shard,
                progress=progress,
                progress_bar=progress_bar,
                checksum=checksum,
                expected_checksums=expected_checksums,
                dequantize_to=dequantize_to,
                arena=arena,
            )
        except BaseException:
            runtime.close()
            raise
        return runtime

    def load_weights(self, path: str | os.PathLike[str] | Checkpoint, **options: Any) -> LoadReport:
        """Load a checkpoint's tensors into `weights` (and `shards`, with `shard=` placing them
        on the runtime's devices); names must be new. Returns the report."""
        self._check_open()
        if "stream" in options:
            raise ValueError("weights carry the backend's stream; stream= is not an option")
        loader = AsyncLoader(devices=self.devices)
        result = loader.load(path, stream=[b.stream for b in self.backends], **options)
        try:  # an interrupt from here on frees the result too
            clash = sorted(set().union(*self.shards) & result.layouts.keys())
            if clash:
                raise ValueError(f"weights already loaded under these names: {clash[:5]}")
            self._loads.append(result)  # close() frees it from here on
        except BaseException:
            result.free()
            raise
        for held, loaded in zip(self.shards, result.shards, strict=True):
            held.update(loaded)
        self.layouts.update(result.layouts)
        self.load_report = result.report
        return result.report

    def reserve_scratch(self, nbytes: int) -> ScratchArena:
        """Allocate (or replace) the scratch arena: `nbytes` for temporary tensors."""
        self._check_open()
        if self.scratch is not None:
            self.backend.synchronize()
            self.scratch.close()
        self.scratch = ScratchArena(self.backend.device, self.backend.stream, nbytes)
        return self.scratch

    def allocate_kv_cache(
        self,
        *,
        layers: int,
        max_tokens: int,
        kv_heads: int,
        head_dim: int,
        dtype: DTypeLike = float16,
    ) -> KVCache:
        """Allocate (or replace) the KV cache, preallocated for `max_tokens` per layer."""
        self._check_open()
        if self.kv_cache is not None:
            self.backend.synchronize()
            self.kv_cache.close()
        self.kv_cache = KVCache(
            self.backend.device,
            self.backend.stream,
            layers=layers,
            max_tokens=max_tokens,
            kv_heads=kv_heads,
            head_dim=head_dim,
            dtype=dtype,
        )
        return self.kv_cache

    def memory(self) -> dict[str, int]:
        """Device bytes held, by category (on all the runtime's devices together): weights
        (arenas and per-tensor buffers, with alignment padding), kv_cache, scratch, and
        activations (the backends' pools in use)."""
        self._check_open()
        weights = 0
        for result in self._loads:
            for arena, tensors in zip(result.arenas, result.shards, strict=True):
                if arena is not None:
                    weights += arena.size
                else:
                    weights += sum(t.buffer.size for t in tensors.values())
        return {
            "weights": weights,
            "kv_cache": self.kv_cache.nbytes if self.kv_cache is not None else 0,
            "scratch": self.scratch.nbytes if self.scratch is not None else 0,
            "activations": sum(b.pool.stats().in_use for b in self.backends if not b.closed),
        }

    def close(self) -> None:
        """Wait for the backend's stream, then free the weights (every tensor listed, not only
        the loaded ones: those put into `weights` too), scratch and KV cache (and the backend
        when this runtime made it). Closing twice is harmless."""
        if self.closed:
            return
        super().close()  # closed from here on, even if freeing a part fails
        for backend in self.backends:
            if not backend.closed:
                backend.synchronize()
        for result in self._loads:
            result.free()
        self._loads.clear()
        for held in self.shards:
            # Tensors put here rather than loaded (a model's prepared weights, from the
            # backend's pool) would otherwise live as long as anything refers to them: their
            # memory goes back now, and a tensor kept elsewhere raises ClosedError when used.
            # (A loaded tensor's memory is already free; closing a view frees nothing twice.)
            for tensor in held.values():
                tensor.buffer.close()
            held.clear()
        self.layouts.clear()
        for part in (self.scratch, self.kv_cache):
            if part is not None:
                part.close()
        self.scratch = self.kv_cache = None
        self._close_backends()

    def _close_backends(self) -> None:
        if self._owns_backend:
            for backend in self.backends:
                backend.close()

    def __repr__(self) -> str:
        state = "closed" if self.closed else f"{len(set().union(*self.shards))} weights"
        where = ", ".join(repr(d) for d in self.devices)
        return f"<ModelRuntime {state} on {where}>"


def _parts_free_themselves() -> None:
    """The runtime's own release: nothing, as close() has freed the parts (see ModelRuntime)."""


__all__ = ["ModelRuntime"]
