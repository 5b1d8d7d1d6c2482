"""hip-runtime: HipBackend, DeviceTensor, ModelRuntime and AsyncLoader on top of hip-core.

    from hip_runtime import HipBackend, testing

    with HipBackend() as backend:
        x = backend.from_numpy(array)
        y = backend.layernorm(x, weight, bias).to_numpy()   # waits for backend.stream only
        testing.assert_close(y, testing.layernorm(array, weight, bias), "f32")

Folders, by layer: `tensors` (DeviceTensor, its views, strides, copies, dtypes and DLPack),
`libraries` (the BLAS and DNN handles, small GEMMs, kernel sources and the kernel cache),
`transfers` (pinned host→device staging), `ops` (HipBackend's op families; `backend` holds
HipBackend), `runtime` (ModelRuntime, KVCache, ScratchArena and `ForwardGraph`: a whole forward
captured once, replayed with new inputs), `loading` (AsyncLoader, placement, checksums and the
checkpoint `formats`), `models` (Llama and BERT on the runtime) and `testing` (float64 numpy
references of every op and per-dtype tolerances, as numpy.testing; imported on demand:
`from hip_runtime import testing`).
Every resource class (HipBackend, Blas, KVCache, ScratchArena, ModelRuntime, ForwardGraph) is
a hip_core.Resource: `close()`, `with`, `closed`, and hip_core.ClosedError from a closed one.

Importing the package imports none of them: each public name is loaded from its module on
first use (PEP 562), so `import hip_runtime` costs what numpy and ml_dtypes cost plus a few
milliseconds, and a program that only loads checkpoints never imports the ops (issue 15).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from hip_core._lazy import lazy_exports
from hip_runtime._version import __version__

if TYPE_CHECKING:  # what type checkers and editors read; at run time, __getattr__ below
    from hip_runtime.backend import HipBackend
    from hip_runtime.libraries.blas import Blas, Gemm
    from hip_runtime.libraries.kernel_cache import KernelCache
    from hip_runtime.loading.formats import (
        Checkpoint,
        FormatError,
        TensorRecord,
        open_checkpoint,
        save_safetensors,
    )
    from hip_runtime.loading.loader import (
        AsyncLoader,
        ChecksumError,
        LoadCancelledError,
        LoadJob,
        LoadReport,
        LoadResult,
    )
    from hip_runtime.loading.sharding import Split, TensorLayout
    from hip_runtime.runtime.forward_graph import ForwardGraph
    from hip_runtime.runtime.kv_cache import KVCache
    from hip_runtime.runtime.model_runtime import ModelRuntime
    from hip_runtime.runtime.scratch import ScratchArena
    from hip_runtime.tensors.dtypes import bfloat16, float16, float32
    from hip_runtime.tensors.tensor import DeviceTensor
    from hip_runtime.transfers.staging import StagedCopier

#: Each public name and the module that defines it.
_HOMES = {
    "AsyncLoader": "hip_runtime.loading.loader",
    "Blas": "hip_runtime.libraries.blas",
    "Checkpoint": "hip_runtime.loading.formats",
    "ChecksumError": "hip_runtime.loading.loader",
    "DeviceTensor": "hip_runtime.tensors.tensor",
    "FormatError": "hip_runtime.loading.formats",
    "ForwardGraph": "hip_runtime.runtime.forward_graph",
    "Gemm": "hip_runtime.libraries.blas",
    "HipBackend": "hip_runtime.backend",
    "KVCache": "hip_runtime.runtime.kv_cache",
    "KernelCache": "hip_runtime.libraries.kernel_cache",
    "LoadCancelledError": "hip_runtime.loading.loader",
    "LoadJob": "hip_runtime.loading.loader",
    "LoadReport": "hip_runtime.loading.loader",
    "LoadResult": "hip_runtime.loading.loader",
    "ModelRuntime": "hip_runtime.runtime.model_runtime",
    "ScratchArena": "hip_runtime.runtime.scratch",
    "Split": "hip_runtime.loading.sharding",
    "StagedCopier": "hip_runtime.transfers.staging",
    "TensorLayout": "hip_runtime.loading.sharding",
    "TensorRecord": "hip_runtime.loading.formats",
    "bfloat16": "hip_runtime.tensors.dtypes",
    "float16": "hip_runtime.tensors.dtypes",
    "float32": "hip_runtime.tensors.dtypes",
    "open_checkpoint": "hip_runtime.loading.formats",
    "save_safetensors": "hip_runtime.loading.formats",
}


__getattr__, __dir__ = lazy_exports(__name__, _HOMES)

__all__ = [
    "AsyncLoader",
    "Blas",
    "Checkpoint",
    "ChecksumError",
    "DeviceTensor",
    "FormatError",
    "ForwardGraph",
    "Gemm",
    "HipBackend",
    "KVCache",
    "KernelCache",
    "LoadCancelledError",
    "LoadJob",
    "LoadReport",
    "LoadResult",
    "ModelRuntime",
    "ScratchArena",
    "Split",
    "StagedCopier",
    "TensorLayout",
    "TensorRecord",
    "__version__",
    "bfloat16",
    "float16",
    "float32",
    "open_checkpoint",
    "save_safetensors",
]
