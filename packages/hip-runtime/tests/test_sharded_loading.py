"""Sharded loading (ModelRuntime.load / AsyncLoader with devices= and shard=): every rule
against numpy's slices of the saved tensors, chunk boundaries inside rows and rows longer than
a chunk, per-tensor buffers, bad input refused before anything is allocated, and a failure on
either device freeing everything on both; and docs/examples/tensor_parallel_mlp.py, a
tensor-parallel MLP over such a load summed by hip_core's Communicator, equal to the one-device
MLP and a float64 numpy one. On the cpu platform with two devices and, marked `gpu`, on two
GPUs.

The cpu platform reads its device count once per process, so
`test_in_a_process_with_two_cpu_devices` runs this file again in a subprocess started with
HIP_FFI_CPU_DEVICES=2; in a process with fewer than two devices the tests are skipped, saying so.
"""

from __future__ import annotations

import importlib.util
import threading
from pathlib import Path
from typing import Any

import ml_dtypes
import numpy as np
import pytest

from hip_core import Communicator, Device, HipOutOfMemoryError
from hip_core.errors import error_for
from hip_cpu import ordinals
from hip_cpu import testing as cpu_testing
from hip_ffi.constants import ERROR_CODES
from hip_runtime import AsyncLoader, LoadCancelledError, ModelRuntime, save_safetensors, testing
from hip_runtime.loading.sharding import Split
from hip_runtime.transfers.staging import StagedCopier

EXAMPLE = Path(__file__).resolve().parents[3] / "docs" / "examples" / "tensor_parallel_mlp.py"


def load_example() -> Any:
    spec = importlib.util.spec_from_file_location("tensor_parallel_mlp", EXAMPLE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


SHARD = {
    "up.weight": "column",  # [64, 48] f32: axis 0, a contiguous half each
    "up.bias": "column",  # [64]: split too
    "down.weight": "row",  # [48, 64] f32: axis 1, rows interleaved, many rows a chunk
    "wide.weight": Split(-1),  # [2, 4096] f32: rows longer than a 4 KiB chunk
    "cube": Split(1),  # [3, 8, 10] bf16: a middle axis
    "head.weight": 1,  # whole on device 1 only
    "norm.*": "replicate",
}


@pytest.fixture
def two(platform: str) -> list[Device]:
    count = Device.count()
    if count < 2:
        if platform == "cpu":
            pytest.skip("one cpu device here: test_in_a_process_with_two_cpu_devices runs these")
        pytest.skip(f"sharded loading tests need two devices; the {platform} platform has {count}")
    return [Device(0), Device(1)]


def test_in_a_process_with_two_cpu_devices() -> None:
    if ordinals.count() >= 2:
        pytest.skip("this process has several cpu devices: the tests of this file ran in it")
    passed, _ = cpu_testing.rerun_with_devices(2, __file__)
    assert passed >= 15


@pytest.fixture
def checkpoint(tmp_path: Path) -> tuple[Path, dict[str, np.ndarray]]:
    rng = np.random.default_rng(5)
    tensors = {
        "up.weight": rng.standard_normal((64, 48)).astype(np.float32),
        "up.bias": rng.standard_normal(64).astype(np.float32),
        "down.weight": rng.standard_normal((48, 64)).astype(np.float32),
        "wide.weight": rng.standard_normal((2, 4096)).astype(np.float32),
        "cube": rng.standard_normal((3, 8, 10)).astype(ml_dtypes.bfloat16),
        "head.weight": rng.standard_normal((5, 48)).astype(np.float16),
        "norm.weight": rng.standard_normal(48).astype(np.float32),
        "extra": np.arange(7, dtype=np.int32),  # matched by no pattern: replicated
    }
    path = tmp_path / "model.safetensors"
    save_safetensors(path, tensors)
    return path, tensors


def expected_parts(tensors: dict[str, np.ndarray]) -> list[dict[str, np.ndarray]]:
    """What device 0 and device 1 should hold under SHARD, by numpy slicing."""
    halves: list[dict[str, np.ndarray]] = [{}, {}]
    for name, value in tensors.items():
        axis = {"up.weight": 0, "up.bias": 0, "down.weight": 1, "wide.weight": 1, "cube": 1}.get(
            name
        )
        for k in range(2):
            if axis is not None:
                halves[k][name] = np.split(value, 2, axis=axis)[k]
            elif name != "head.weight" or k == 1:
                halves[k][name] = value
    return halves


def check_shards(shards: list[dict[str, Any]], tensors: dict[str, np.ndarray]) -> None:
    for k, expected in enumerate(expected_parts(tensors)):
        assert sorted(shards[k]) == sorted(expected), k
        for name, value in expected.items():
            got = shards[k][name]
            assert got.device == Device(k), name
            assert got.shape == value.shape and got.dtype == value.dtype, name
            np.testing.assert_array_equal(got.to_numpy(), value, err_msg=f"{name} on device {k}")


@pytest.mark.parametrize("arena", [True, False], ids=["arena", "buffers"])
def test_every_rule_places_what_numpy_slices(
    two: list[Device], checkpoint: Any, arena: bool
) -> None:
    path, tensors = checkpoint
    # 4 KiB chunks: the interleaved rows of down.weight span several chunks, wide.weight's
    # rows are longer than one, and neighbouring small tensors share a read.
    with StagedCopier(two[0], more_devices=[two[1]], chunk_bytes=4096, threads=3) as copier:
        loader = AsyncLoader(devices=two, copier=copier)
        result = loader.load(path, shard=SHARD, arena=arena)
        try:
            check_shards(result.shards, tensors)
            assert result.tensors is result.shards[0]
            assert result.layouts["down.weight"].axis == 1
            assert result.layouts["head.weight"].targets == (1,)
            assert result.report.file_bytes == sum(v.nbytes for v in tensors.values())
        finally:
            result.free()


def test_model_runtime_holds_a_backend_and_a_shard_per_device(
    two: list[Device], checkpoint: Any
) -> None:
    path, tensors = checkpoint
    seen: list[tuple[int, int]] = []

    def progress(done: int, total: int, *_: int) -> None:
        seen.append((done, total))

    with ModelRuntime.load(path, devices=[0, 1], shard=SHARD, progress=progress) as rt:
        assert [b.device for b in rt.backends] == two and rt.backend is rt.backends[0]
        assert rt.weights is rt.shards[0]
        check_shards(rt.shards, tensors)
        assert rt.shards[1]["up.weight"].stream is rt.backends[1].stream
        held = sum(v.nbytes for v in tensors.values()) + sum(
            tensors[n].nbytes for n in ("norm.weight", "extra")
        )
        assert rt.load_report is not None and rt.load_report.device_bytes == held
        assert rt.memory()["weights"] >= held
    file_bytes = sum(v.nbytes for v in tensors.values())
    assert seen[-1] == (file_bytes, file_bytes)  # a replicated tensor's bytes counted once


def test_without_shard_every_tensor_is_replicated(two: list[Device], checkpoint: Any) -> None:
    path, tensors = checkpoint
    with ModelRuntime.load(path, devices=two) as runtime:
        for k in range(2):
            for name, value in tensors.items():
                np.testing.assert_array_equal(runtime.shards[k][name].to_numpy(), value)


@pytest.mark.parametrize(
    ("shard", "message"),
    [
        ({"cube": "column"}, "3 is not divisible by 2 devices"),
        ({"up.bias": "row"}, "axis 1, which it does not have .*replicate it"),
        ({"up.weight": Split(2)}, "axis 2, which it does not have"),
        ({"up.weight": 2}, r"device 2 is not one of devices \[0, 1\]"),
        ({"up.weight": "diagonal"}, "unknown rule 'diagonal'"),
        ({"up.weight": "column", "*.wieght": "row"}, r"\['\*.wieght'\] match no tensor"),
    ],
)
def test_bad_rules_are_refused_before_anything_is_allocated(
    two: list[Device], checkpoint: Any, monkeypatch: pytest.MonkeyPatch, shard: Any, message: str
) -> None:
    path, _ = checkpoint
    monkeypatch.setattr("hip_runtime.runtime.model_runtime.HipBackend", _never)
    monkeypatch.setattr(Device, "allocate", _never)
    with pytest.raises(ValueError, match=message):
        ModelRuntime.load(path, devices=two, shard=shard)
    with pytest.raises(ValueError, match=message):
        AsyncLoader(devices=two).start(path, shard=shard)


def test_bad_devices_and_arguments_are_refused(two: list[Device], checkpoint: Any) -> None:
    path, _ = checkpoint
    with pytest.raises(ValueError, match="no device 7"):
        ModelRuntime.load(path, devices=[0, 7])
    with pytest.raises(ValueError, match="name one device twice"):
        ModelRuntime.load(path, devices=[1, 1])
    with pytest.raises(ValueError, match="give devices= too"):
        ModelRuntime.load(path, shard={"up.weight": "column"})
    with pytest.raises(TypeError, match="not a rule"):
        ModelRuntime.load(path, devices=two, shard={"up.weight": 1.5})
    with pytest.raises(ValueError, match="checksums are not offered"):
        AsyncLoader(devices=two).start(path, shard=SHARD, checksum=True)
    with pytest.raises(ValueError, match="one Stream of each"):
        AsyncLoader(devices=two).start(path, stream=two[0].default_stream)


def _never(*args: Any, **kwargs: Any) -> Any:
    raise AssertionError("allocated before the arguments were checked")


def test_reads_of_many_short_rows_take_several_preadv_calls(
    two: list[Device], tmp_path: Path
) -> None:
    # [3000, 8] f32 split along axis 1: 16-byte parts, 2048 rows (4096 buffers) per 64 KiB
    # chunk: more than the 1024 buffers one preadv takes.
    value = np.arange(3000 * 8, dtype=np.float32).reshape(3000, 8)
    path = tmp_path / "rows.safetensors"
    save_safetensors(path, {"rows": value})
    with StagedCopier(two[0], more_devices=[two[1]], chunk_bytes=1 << 16, threads=2) as copier:
        loaded = AsyncLoader(devices=two, copier=copier).load(path, shard={"rows": "row"})
        for k in range(2):
            np.testing.assert_array_equal(
                loaded.shards[k]["rows"].to_numpy(), value[:, 4 * k :][:, :4]
            )
        loaded.free()


def test_quantized_tensors_are_placed_whole_and_dequantized_there(
    two: list[Device], tmp_path: Path
) -> None:
    import gguf  # (here, so that the other tests run where the gguf package is missing)

    Q8_0 = gguf.GGMLQuantizationType.Q8_0
    rng = np.random.default_rng(9)
    values = {name: rng.standard_normal((4, 64)).astype(np.float32) for name in ("q", "r", "f")}
    quantized = {n: np.asarray(gguf.quants.quantize(values[n], Q8_0)) for n in ("q", "r")}
    path = tmp_path / "model.gguf"
    writer = gguf.GGUFWriter(str(path), "llama")
    for name, blocks in quantized.items():
        writer.add_tensor(name, blocks, raw_dtype=Q8_0)
    writer.add_tensor("f", values["f"])
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    with pytest.raises(ValueError, match="q8_0 tensors are placed whole, never split"):
        ModelRuntime.load(path, devices=two, shard={"q": "column"})
    shard = {"q": 1, "f": "column"}  # r: replicated, dequantized on both devices
    with ModelRuntime.load(path, devices=two, shard=shard) as runtime:
        assert sorted(runtime.shards[0]) == ["f", "r"] and sorted(runtime.shards[1]) == [
            "f",
            "q",
            "r",
        ]
        for k, name in ((1, "q"), (0, "r"), (1, "r")):
            expected = gguf.quants.dequantize(quantized[name], Q8_0)
            np.testing.assert_array_equal(runtime.shards[k][name].to_numpy(), expected)
        for k in range(2):
            np.testing.assert_array_equal(
                runtime.shards[k]["f"].to_numpy(), values["f"][2 * k : 2 * k + 2]
            )


def test_out_of_memory_on_the_second_device_frees_the_first(
    two: list[Device], checkpoint: Any, allocations: list[Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    path, _ = checkpoint
    tracked = Device.allocate

    def second_is_full(self: Device, size: int) -> Any:
        if self.ordinal == 1:
            raise error_for(ERROR_CODES["hipErrorOutOfMemory"], "hipMalloc", "full (a test)")
        return tracked(self, size)

    monkeypatch.setattr(Device, "allocate", second_is_full)
    with pytest.raises(HipOutOfMemoryError):
        AsyncLoader(devices=two).start(path, shard=SHARD, arena=False)
    assert allocations and all(buffer.closed for buffer in allocations)


def test_a_read_failing_midway_frees_both_devices(
    two: list[Device], checkpoint: Any, allocations: list[Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    path, _ = checkpoint
    staged = StagedCopier._stage
    calls = [0]

    def fails_third(self: StagedCopier, *args: Any) -> None:
        calls[0] += 1
        if calls[0] == 3:
            raise OSError("the disk went away (a test)")
        staged(self, *args)

    monkeypatch.setattr(StagedCopier, "_stage", fails_third)
    with StagedCopier(two[0], more_devices=[two[1]], chunk_bytes=4096, threads=1) as copier:
        job = AsyncLoader(devices=two, copier=copier).start(path, shard=SHARD)
        with pytest.raises(OSError, match="the disk went away"):
            job.result()
    assert {b.device.ordinal for b in allocations} == {0, 1}
    assert all(buffer.closed for buffer in allocations)


def test_a_cancelled_load_frees_both_devices(
    two: list[Device], checkpoint: Any, allocations: list[Any]
) -> None:
    path, tensors = checkpoint
    jobs: list[Any] = []
    seen: list[int] = []

    started = threading.Event()  # the reader may call back before start() has returned

    def cancel_at_first_chunk(done: int, *_: int) -> None:
        seen.append(done)
        assert started.wait(60)
        jobs[0].cancel()

    with StagedCopier(two[0], more_devices=[two[1]], chunk_bytes=4096, threads=1) as copier:
        loader = AsyncLoader(devices=two, copier=copier)
        jobs.append(loader.start(path, shard=SHARD, progress=cancel_at_first_chunk, arena=False))
        started.set()
        with pytest.raises(LoadCancelledError):
            jobs[0].result()
    assert len(seen) == 1 and seen[0] < sum(v.nbytes for v in tensors.values())
    assert {b.device.ordinal for b in allocations} == {0, 1}
    assert all(buffer.closed for buffer in allocations)


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
