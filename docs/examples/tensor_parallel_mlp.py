"""Tensor parallelism: a Llama-style MLP, down(silu(gate(x)) * up(x)), over every device of
this machine. gate and up are column-parallel (each device holds a slice of the intermediate
features and computes them), down is row-parallel (each device multiplies its slice of the
intermediate features by its slice of down's input columns), and an all-reduce sums the
devices' partial outputs. The checkpoint is loaded once, sharded as it is read; the result
equals the one-device MLP's.

    python docs/examples/tensor_parallel_mlp.py                              # every GPU
    HIP_PLATFORM=cpu HIP_FFI_CPU_DEVICES=2 python docs/examples/tensor_parallel_mlp.py
"""

import os
import tempfile

import numpy as np

os.environ.setdefault("NCCL_NVLS_ENABLE", "0")  # NCCL's NVLink multicast off (before NCCL loads)

from hip_core import Communicator, Device
from hip_runtime import ModelRuntime, save_safetensors

HIDDEN, INTERMEDIATE = 64, 256  # INTERMEDIATE divisible by the device count (1, 2, 4, 8)

SHARD = {
    "mlp.gate_proj.weight": "column",  # [INTERMEDIATE, HIDDEN]: rows split
    "mlp.up_proj.weight": "column",
    "mlp.down_proj.weight": "row",  # [HIDDEN, INTERMEDIATE]: columns split
}


def write_checkpoint(path: str, seed: int = 0) -> dict[str, np.ndarray]:
    """A random MLP's weights as a safetensors file (torch's [out, in] layout)."""
    rng = np.random.default_rng(seed)
    weights = {
        "mlp.gate_proj.weight": rng.standard_normal((INTERMEDIATE, HIDDEN)) / np.sqrt(HIDDEN),
        "mlp.up_proj.weight": rng.standard_normal((INTERMEDIATE, HIDDEN)) / np.sqrt(HIDDEN),
        "mlp.down_proj.weight": rng.standard_normal((HIDDEN, INTERMEDIATE)) / np.sqrt(INTERMEDIATE),
    }
    weights = {name: w.astype(np.float32) for name, w in weights.items()}
    save_safetensors(path, weights)
    return weights


def mlp(backend, weights, x):
    """down(silu(gate(x)) * up(x)) on one backend: the whole layer, or one device's part."""
    gate = backend.linear(x, weights["mlp.gate_proj.weight"])
    up = backend.linear(x, weights["mlp.up_proj.weight"])
    return backend.linear(backend.swiglu(gate, up), weights["mlp.down_proj.weight"])


def tensor_parallel_mlp(runtime: ModelRuntime, comms: list, x: np.ndarray) -> np.ndarray:
    """The MLP of `x` ([tokens, HIDDEN] f32) with the weights sharded over runtime.devices:
    each device computes its partial output on its backend's stream, one all-reduce (queued
    on the same streams, issued together as a group) sums them in place on every device."""
    partials = []
    for backend, shard in zip(runtime.backends, runtime.shards, strict=True):
        with backend.device:  # launches and BLAS calls go to the current device, as in CUDA
            partials.append(mlp(backend, shard, backend.from_numpy(x)))  # x replicated
    with Communicator.group():  # one thread drives every rank: their calls go in together
        for comm, backend, partial in zip(comms, runtime.backends, partials, strict=True):
            region = partial.region()
            comm.all_reduce(region, region, partial.size, "float32", stream=backend.stream)
    results = [partial.to_numpy() for partial in partials]  # each waits for its stream
    for other in results[1:]:  # every device holds the same sum
        np.testing.assert_array_equal(other, results[0])
    return results[0]


def main() -> None:
    devices = [Device(i) for i in range(Device.count())]
    x = np.random.default_rng(1).standard_normal((8, HIDDEN)).astype(np.float32)
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "mlp.safetensors")
        write_checkpoint(path)
        with ModelRuntime.load(path, devices=devices, shard=SHARD) as runtime:
            comms = Communicator.all_for(devices)
            try:
                parallel = tensor_parallel_mlp(runtime, comms, x)
            finally:
                for comm in comms:
                    comm.close()
        with ModelRuntime.load(path, device=0) as single:
            whole = mlp(single.backend, single.weights, single.backend.from_numpy(x)).to_numpy()
    # Equal up to the order of the f32 sums (each device sums its slice, then the all-reduce).
    np.testing.assert_allclose(parallel, whole, rtol=1e-5, atol=1e-5)
    print(f"tensor-parallel MLP over {len(devices)} devices matches one device:",
          f"max |difference| {np.abs(parallel - whole).max():.2e}")  # fmt: skip


if __name__ == "__main__":
    main()
