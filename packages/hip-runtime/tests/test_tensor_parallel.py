"""docs/examples/tensor_parallel_mlp.py runs and is right: a Llama-style MLP loaded sharded over
two devices (gate / up column-parallel, down row-parallel), its partial outputs summed with
hip_core's Communicator, equals the one-device MLP and a float64 numpy one. On the cpu platform
with two devices (this file rerun in a subprocess with HIP_FFI_CPU_DEVICES=2) and, marked
`gpu`, on two GPUs.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from hip_core import Communicator, Device
from hip_ffi.platforms.cpu import ordinals
from hip_ffi.platforms.cpu import testing as cpu_testing
from hip_runtime import ModelRuntime, testing

EXAMPLE = Path(__file__).resolve().parents[3] / "docs" / "examples" / "tensor_parallel_mlp.py"


def load_example() -> Any:
    spec = importlib.util.spec_from_file_location("tensor_parallel_mlp", EXAMPLE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def two(platform: str) -> list[Device]:
    count = Device.count()
    if count < 2:
        if platform == "cpu":
            pytest.skip("one cpu device here: test_in_a_process_with_two_cpu_devices runs these")
        pytest.skip(f"tensor parallelism needs two devices; the {platform} platform has {count}")
    return [Device(0), Device(1)]


def test_in_a_process_with_two_cpu_devices() -> None:
    if ordinals.count() >= 2:
        pytest.skip("this process has several cpu devices: the tests of this file ran in it")
    passed, _ = cpu_testing.rerun_with_devices(2, __file__)
    assert passed >= 2


def test_the_tensor_parallel_mlp_equals_one_device_and_numpy(
    two: list[Device], tmp_path: Path
) -> None:
    example = load_example()
    path = str(tmp_path / "mlp.safetensors")
    weights = example.write_checkpoint(path, seed=3)
    x = np.random.default_rng(4).standard_normal((5, example.HIDDEN)).astype(np.float32)
    with ModelRuntime.load(path, devices=two, shard=example.SHARD) as runtime:
        half = example.INTERMEDIATE // 2
        assert runtime.shards[1]["mlp.up_proj.weight"].shape == (half, example.HIDDEN)
        assert runtime.shards[1]["mlp.down_proj.weight"].shape == (example.HIDDEN, half)
        comms = Communicator.all_for(two)
        try:
            parallel = example.tensor_parallel_mlp(runtime, comms, x)
        finally:
            for comm in comms:
                comm.close()
    with ModelRuntime.load(path, device=0) as single:
        backend = single.backend
        whole = example.mlp(backend, single.weights, backend.from_numpy(x)).to_numpy()
    f = {name: w.astype(np.float64) for name, w in weights.items()}
    x64 = x.astype(np.float64)
    hidden = testing.swiglu(x64 @ f["mlp.gate_proj.weight"].T, x64 @ f["mlp.up_proj.weight"].T)
    expected = hidden @ f["mlp.down_proj.weight"].T
    np.testing.assert_allclose(parallel, whole, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(parallel, expected, rtol=1e-4, atol=1e-5)


def test_the_example_runs_as_a_script(
    two: list[Device], capsys: pytest.CaptureFixture[str]
) -> None:
    load_example().main()
    assert "over 2 devices matches one device" in capsys.readouterr().out
