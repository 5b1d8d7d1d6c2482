"""ModelRuntime: a model's weights, scratch memory and KV cache on one HipBackend.

    with ModelRuntime.load("model/", progress_bar=True) as runtime:
        w = runtime.weights["model.layers.0.mlp.gate_proj.weight"]
        y = runtime.backend.linear(x, w)
        cache = runtime.allocate_kv_cache(layers=32, max_tokens=4096, kv_heads=8, head_dim=128)
        runtime.memory()   # {"weights": ..., "kv_cache": ..., "scratch": ..., "activations": ...}

Stream semantics: the weights, the scratch arena and the KV cache all carry the backend's
stream, so ops on them are ordered with each other. `load` returns with the weights resident
(see AsyncLoader). `close()` waits for the backend's stream and frees everything; every method
of a closed runtime raises hip_core.ClosedError.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from hip_core import Device, Resource
from hip_runtime.backend import HipBackend
from hip_runtime.dtypes import DTypeLike, float16
from hip_runtime.kv_cache import KVCache
from hip_runtime.loading.formats import Checkpoint
from hip_runtime.loading.loader import AsyncLoader, LoadReport, LoadResult, ProgressCallback
from hip_runtime.scratch import ScratchArena
from hip_runtime.tensor import DeviceTensor


class ModelRuntime(Resource):
    """Owns a HipBackend, the weights (name -> DeviceTensor), an optional scratch arena and KV
    cache, and accounts for the device memory of each.

    `close()` (or `with`) frees them in order. A runtime collected unclosed frees nothing
    itself: each part it holds is a Resource (or memory) that frees itself when collected.
    """

    def __init__(
        self, backend: HipBackend | None = None, *, device: Device | int | None = None
    ) -> None:
        self.backend = backend if backend is not None else HipBackend(device)
        self._owns_backend = backend is None
        self.weights: dict[str, DeviceTensor] = {}
        self.load_report: LoadReport | None = None
        self.scratch: ScratchArena | None = None
        self.kv_cache: KVCache | None = None
        self._loads: list[LoadResult] = []
        self._own(_parts_free_themselves)

    @classmethod
    def load(
        cls,
        path: str | os.PathLike[str] | Checkpoint,
        device: Device | int | None = None,
        *,
        progress: ProgressCallback | None = None,
        progress_bar: bool = False,
        checksum: bool = False,
        expected_checksums: Mapping[str, int] | None = None,
        dequantize_to: DTypeLike = "float32",
        arena: bool = True,
    ) -> ModelRuntime:
        """A runtime on `device` holding the checkpoint at `path` (see AsyncLoader.start for
        the options). On failure nothing stays allocated and the error propagates; Ctrl-C
        (KeyboardInterrupt) cancels the load, frees its memory and closes its files before it
        propagates."""
        runtime = cls(device=device)
        try:
            runtime.load_weights(
                path,
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
        """Load a checkpoint's tensors into `weights` (names must be new); returns the report."""
        self._check_open()
        if "stream" in options:
            raise ValueError("weights carry the backend's stream; stream= is not an option")
        loader = AsyncLoader(self.backend.device)
        result = loader.load(path, stream=self.backend.stream, **options)
        try:  # an interrupt from here on frees the result too
            clash = sorted(self.weights.keys() & result.tensors.keys())
            if clash:
                raise ValueError(f"weights already loaded under these names: {clash[:5]}")
            self._loads.append(result)  # close() frees it from here on
        except BaseException:
            _free(result)
            raise
        self.weights.update(result.tensors)
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
        """Device bytes held, by category: weights (arenas and per-tensor buffers, with
        alignment padding), kv_cache, scratch, and activations (the backend's pool in use)."""
        self._check_open()
        weights = 0
        for result in self._loads:
            if result.arena is not None:
                weights += result.arena.size
            else:
                weights += sum(t.buffer.size for t in result.tensors.values())
        return {
            "weights": weights,
            "kv_cache": self.kv_cache.nbytes if self.kv_cache is not None else 0,
            "scratch": self.scratch.nbytes if self.scratch is not None else 0,
            "activations": 0 if self.backend.closed else self.backend.pool.stats().in_use,
        }

    def close(self) -> None:
        """Wait for the backend's stream, then free the weights, scratch and KV cache (and the
        backend when this runtime made it). Closing twice is harmless."""
        if self.closed:
            return
        super().close()  # closed from here on, even if freeing a part fails
        if not self.backend.closed:
            self.backend.synchronize()
        for result in self._loads:
            _free(result)
        self._loads.clear()
        self.weights.clear()
        for part in (self.scratch, self.kv_cache):
            if part is not None:
                part.close()
        self.scratch = self.kv_cache = None
        if self._owns_backend:
            self.backend.close()

    def __repr__(self) -> str:
        state = "closed" if self.closed else f"{len(self.weights)} weights"
        return f"<ModelRuntime {state} on {self.backend.device!r}>"


def _parts_free_themselves() -> None:
    """The runtime's own release: nothing, as close() has freed the parts (see ModelRuntime)."""


def _free(result: LoadResult) -> None:
    if result.arena is not None:
        result.arena.close()
    else:
        for tensor in result.tensors.values():
            tensor.buffer.close()


__all__ = ["ModelRuntime"]
