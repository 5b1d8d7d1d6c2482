"""AsyncLoader: every dtype round-trips bit for bit through the arena or per-tensor buffers;
chunking (splits and shared reads), progress, checksums, cancellation, and errors that leave no
device memory behind. Runs on the cpu platform and, marked gpu, on nvidia."""

from __future__ import annotations

import contextlib
import dataclasses
import itertools
import os
import signal
import threading
import time
import zlib
from collections.abc import Callable, Iterator
from pathlib import Path

import gguf
import ml_dtypes
import numpy as np
import pytest

from hip_core import ClosedError, Device, DeviceBuffer, MemoryPool
from hip_runtime import (
    AsyncLoader,
    ChecksumError,
    DeviceTensor,
    FormatError,
    LoadCancelledError,
    StagedCopier,
    open_checkpoint,
)
from hip_runtime.loading.placement import ALIGNMENT, Placement


def assert_loaded(tensors: dict[str, DeviceTensor], expected: dict[str, np.ndarray]) -> None:
    assert set(tensors) == set(expected)
    for name, array in expected.items():
        got = tensors[name].to_numpy()
        assert got.shape == array.shape and got.dtype == array.dtype, name
        assert got.tobytes() == array.tobytes(), name


@pytest.fixture
def small_copier(device: Device) -> Iterator[StagedCopier]:
    """4 KiB chunks, 3 threads, 2 streams, 4 chunks in flight: forces split tensors, shared
    reads and chunk reuse even on small files."""
    copier = StagedCopier(device, threads=3, streams=2, chunk_bytes=4096, max_chunks=4)
    yield copier
    copier.close()


@pytest.mark.parametrize("arena", [True, False], ids=["arena", "per-tensor"])
def test_round_trip_every_dtype(
    device: Device,
    tmp_path: Path,
    arena: bool,
    save_safetensors: Callable[..., Path],
    checkpoint_tensors: dict[str, np.ndarray],
) -> None:
    path = save_safetensors(tmp_path / "m.safetensors", checkpoint_tensors)
    stream = device.create_stream()
    result = AsyncLoader(device).load(path, arena=arena, stream=stream)
    assert_loaded(result.tensors, checkpoint_tensors)
    assert all(t.stream is stream for t in result.tensors.values())
    report = result.report
    assert (report.files, report.tensors) == (1, len(checkpoint_tensors))
    assert report.file_bytes == sum(a.nbytes for a in checkpoint_tensors.values())
    assert report.seconds > 0 and report.gb_per_s > 0
    if arena:
        assert result.arena is not None
        for tensor in result.tensors.values():
            assert tensor.buffer.ptr == result.arena.ptr and tensor.offset % ALIGNMENT == 0
    else:
        assert result.arena is None
        assert len({t.buffer.ptr for t in result.tensors.values()}) == len(checkpoint_tensors)


def test_chunks_split_and_share_reads(
    device: Device,
    tmp_path: Path,
    small_copier: StagedCopier,
    save_safetensors: Callable[..., Path],
) -> None:
    rng = np.random.default_rng()
    tensors = {
        f"t{i}": rng.standard_normal(n).astype(np.float32)
        for i, n in enumerate([1, 3000, 5, 7, 1, 2048, 9000, 2, 1024, 3])
    }
    path = save_safetensors(tmp_path / "m.safetensors", tensors)
    seen: list[tuple[int, int, int, int]] = []
    result = AsyncLoader(device, copier=small_copier).load(
        path, progress=lambda *p: seen.append(p), checksum=True
    )
    assert_loaded(result.tensors, tensors)
    total = sum(a.nbytes for a in tensors.values())
    assert seen[-1] == (total, total, len(tensors), len(tensors))
    assert len(seen) > total // 4096  # more than one chunk per 4 KiB: splits happened
    assert all(a[0] <= b[0] and a[2] <= b[2] for a, b in itertools.pairwise(seen))
    assert result.checksums == {n: zlib.crc32(a.tobytes()) for n, a in tensors.items()}


def test_sharded_round_trip(
    device: Device,
    tmp_path: Path,
    small_copier: StagedCopier,
    sharded_checkpoint: Callable[..., dict[str, np.ndarray]],
) -> None:
    tensors = sharded_checkpoint(tmp_path)
    result = AsyncLoader(device, copier=small_copier).load(tmp_path)
    assert result.report.files == 2
    assert_loaded(result.tensors, tensors)


def test_progress_bar_writes_to_stderr(
    device: Device,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    save_safetensors: Callable[..., Path],
) -> None:
    path = save_safetensors(tmp_path / "bar.safetensors", {"x": np.ones(5000, np.float32)})
    AsyncLoader(device).load(path, progress_bar=True)
    assert "loading bar.safetensors" in capsys.readouterr().err


def test_checksum_mismatch_frees_everything(
    device: Device,
    tmp_path: Path,
    allocations: list[DeviceBuffer],
    save_safetensors: Callable[..., Path],
) -> None:
    tensors = {"x": np.arange(100, dtype=np.float32), "y": np.ones(3, np.int8)}
    path = save_safetensors(tmp_path / "m.safetensors", tensors)
    good = zlib.crc32(tensors["x"].tobytes())
    AsyncLoader(device).load(path, expected_checksums={"x": good})
    allocations.clear()
    with pytest.raises(ChecksumError, match="'x'"):
        AsyncLoader(device).load(path, expected_checksums={"x": good ^ 1})
    with pytest.raises(ChecksumError, match="no tensor 'z'"):
        AsyncLoader(device).load(path, expected_checksums={"z": 0})
    assert allocations and all(b.closed for b in allocations)


def test_cancel_frees_everything(
    device: Device,
    tmp_path: Path,
    small_copier: StagedCopier,
    allocations: list[DeviceBuffer],
    save_safetensors: Callable[..., Path],
) -> None:
    tensors = {f"t{i}": np.full(4096, i, np.float32) for i in range(16)}  # 16 KiB each
    path = save_safetensors(tmp_path / "m.safetensors", tensors)
    job_ready = threading.Event()
    jobs = []

    def progress(done: int, total: int, *_: int) -> None:
        job_ready.wait()
        jobs[0].cancel()  # from inside the load, after its first chunk

    open_files = len(os.listdir("/proc/self/fd"))
    jobs.append(AsyncLoader(device, copier=small_copier).start(path, progress=progress))
    job_ready.set()
    with pytest.raises(LoadCancelledError):
        jobs[0].result()
    done, total, _, _ = jobs[0].progress
    assert 0 < done < total
    assert len(os.listdir("/proc/self/fd")) == open_files  # the checkpoint's file is closed
    assert allocations and all(b.closed for b in allocations)
    assert not [
        t for t in threading.enumerate() if t.name.startswith(("hip-staging", "hip-loader"))
    ]
    with pytest.raises(LoadCancelledError):
        jobs[0].result()  # the same answer again
    # the copier is whole after a cancelled run
    assert_loaded(AsyncLoader(device, copier=small_copier).load(path).tensors, tensors)


def test_a_failure_is_final(
    device: Device,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    allocations: list[DeviceBuffer],
    save_safetensors: Callable[..., Path],
) -> None:
    path = save_safetensors(tmp_path / "m.safetensors", {"x": np.ones(100, np.float32)})

    def fail(*_: object) -> None:
        raise RuntimeError("dequantization failed")

    monkeypatch.setattr(Placement, "finish", fail)
    job = AsyncLoader(device).start(path)
    for _ in range(2):  # later calls raise the same error, never hand out freed memory
        with pytest.raises(RuntimeError, match="dequantization failed"):
            job.result()
    assert allocations and all(b.closed for b in allocations)


def test_hand_made_checkpoints_are_checked(
    device: Device,
    tmp_path: Path,
    allocations: list[DeviceBuffer],
    save_safetensors: Callable[..., Path],
) -> None:
    path = save_safetensors(
        tmp_path / "m.safetensors", {"a": np.ones(4, np.float32), "b": np.full(4, 7, np.float32)}
    )
    good = open_checkpoint(path)
    a, b = good.tensors
    bad = {
        "holds 512 bytes": (dataclasses.replace(a, nbytes=512), b),
        "appears twice": (a, dataclasses.replace(b, name="a")),
        "not one of the checkpoint's files": (dataclasses.replace(a, path="/elsewhere"), b),
        "unknown encoding": (dataclasses.replace(a, encoding="q2_k"), b),
        "65 dimensions": (dataclasses.replace(a, shape=(1,) * 65), b),
        "overflows": (dataclasses.replace(a, shape=(2**62, 2**62, 0), nbytes=0), b),
        "overlap": (dataclasses.replace(b, offset=a.offset + 4), a),
    }
    for message, records in bad.items():
        with pytest.raises(FormatError, match=message):
            AsyncLoader(device).load(dataclasses.replace(good, tensors=records))
    assert allocations == []


def test_a_progress_callback_may_upload(
    device: Device, tmp_path: Path, save_safetensors: Callable[..., Path]
) -> None:
    # A large upload from inside a load's callback shares the copier instead of deadlocking.
    path = save_safetensors(tmp_path / "m.safetensors", {"x": np.ones(1000, np.float32)})
    big = np.random.default_rng().standard_normal(9 * 2**20).astype(np.float32)
    uploaded: list[DeviceTensor] = []

    def progress(*_: int) -> None:
        if not uploaded:
            uploaded.append(DeviceTensor.from_numpy(big, device=device))

    loading = threading.Thread(target=lambda: AsyncLoader(device).load(path, progress=progress))
    loading.start()
    loading.join(timeout=120)
    assert not loading.is_alive(), "the load deadlocked"
    np.testing.assert_array_equal(uploaded[0].to_numpy(), big)


def test_format_error_allocates_nothing(
    device: Device, tmp_path: Path, allocations: list[DeviceBuffer]
) -> None:
    path = tmp_path / "bad.safetensors"
    path.write_bytes((100).to_bytes(8, "little") + b"{}")
    with pytest.raises(FormatError, match=r"bad\.safetensors"):
        AsyncLoader(device).load(path)
    assert allocations == []


def test_file_shrinking_during_the_load_frees_everything(
    device: Device,
    tmp_path: Path,
    small_copier: StagedCopier,
    allocations: list[DeviceBuffer],
    save_safetensors: Callable[..., Path],
) -> None:
    path = save_safetensors(tmp_path / "m.safetensors", {"x": np.ones(10000, np.float32)})
    checkpoint = open_checkpoint(path)
    os.truncate(path, path.stat().st_size - 1000)
    with pytest.raises(FormatError, match="outside the data section"):  # caught before reading
        AsyncLoader(device).load(checkpoint)
    # 100 chunks of 4 KiB: far more than the reader threads can take before the first callback
    path = save_safetensors(tmp_path / "m.safetensors", {"x": np.ones(100 * 1024, np.float32)})

    def shrink(*_: int) -> None:  # after the first chunk, the file loses its tail
        os.truncate(path, 5000)

    with pytest.raises(FormatError, match="ended") as caught:  # naming the file
        AsyncLoader(device, copier=small_copier).load(path, progress=shrink)
    assert caught.value.path == str(path) and str(path) in str(caught.value)
    assert allocations and all(b.closed for b in allocations)


def test_staged_from_numpy_is_ordered_on_its_stream(device: Device) -> None:
    # 36 MiB: over the staging threshold, so threads and copy streams carry it.
    host = np.random.default_rng().standard_normal(9 * 2**20).astype(np.float32)
    stream = device.create_stream()
    pool = MemoryPool(device)  # stream-ordered allocation: the copies must wait for it
    tensor = DeviceTensor.from_numpy(host, device=device, stream=stream, pool=pool)
    host_copy = host.copy()
    host[:] = 0  # the call returned after reading the host side
    np.testing.assert_array_equal(tensor.to_numpy(), host_copy)
    tensor.region().fill(0xFF, stream=stream)  # queued before the copy: must land first
    tensor.copy_from_host(host)
    assert not tensor.to_numpy().any()


def test_copier_arguments_and_close(device: Device) -> None:
    with pytest.raises(ValueError, match="threads and streams"):
        StagedCopier(device, threads=0)
    copier = StagedCopier(device, threads=1, streams=1, chunk_bytes=4096)
    copier.close()
    copier.close()
    with pytest.raises(ValueError, match="closed"):
        copier.run([])


def test_a_closed_copier_is_never_used(
    device: Device,
    tmp_path: Path,
    allocations: list[DeviceBuffer],
    save_safetensors: Callable[..., Path],
) -> None:
    tensors = {"x": np.arange(3000, dtype=np.float32)}
    path = save_safetensors(tmp_path / "m.safetensors", tensors)
    # The device's shared copier, closed by the user: the loader takes the new one.
    loader = AsyncLoader(device)
    loader.copier.close()
    assert not loader.copier.closed
    assert_loaded(loader.load(path).tensors, tensors)
    # A copier of one's own, closed: ClosedError naming it, before anything is allocated.
    copier = StagedCopier(device, threads=2, streams=1, chunk_bytes=4096)
    mine = AsyncLoader(device, copier=copier)
    copier.close()
    allocations.clear()
    with pytest.raises(ClosedError, match=r"StagedCopier .*closed"):
        mine.load(path)
    assert allocations == []
    with pytest.raises(ClosedError, match=r"StagedCopier .*closed"):
        copier.synchronize()
    # Closed once the reading is over but before result(): close() waited for the copies.
    copier = StagedCopier(device, threads=2, streams=1, chunk_bytes=4096)
    job = AsyncLoader(device, copier=copier).start(path)
    job._thread.join()
    copier.close()
    assert_loaded(job.result().tensors, tensors)


@pytest.fixture(params=[False, True], ids=["", "SA_RESTART"])
def sigint_restarts(request: pytest.FixtureRequest) -> Iterator[bool]:
    """Python's SIGINT handler as Python installs it, or re-installed with SA_RESTART as a
    compile with NVRTC leaves it (blocking waits then restart instead of returning to run the
    handler)."""
    signal.siginterrupt(signal.SIGINT, not request.param)
    yield request.param
    signal.siginterrupt(signal.SIGINT, True)


def test_an_interrupt_while_waiting_cancels_frees_and_reraises(
    device: Device,
    tmp_path: Path,
    small_copier: StagedCopier,
    allocations: list[DeviceBuffer],
    save_safetensors: Callable[..., Path],
    sigint_restarts: bool,
) -> None:
    # Ctrl-C in result(): the readers stop, the memory is freed and the file closed before
    # KeyboardInterrupt reaches the caller. (The whole stack, in a subprocess with a real
    # SIGINT and a large checkpoint: tests/reliability/test_interrupt.py.)
    path = save_safetensors(tmp_path / "m.safetensors", {"x": np.ones(256 * 1024, np.float32)})
    chunks: list[float] = []
    sent: list[float] = []
    main = threading.main_thread().ident
    assert main is not None and threading.get_ident() == main

    def slowly(*_: int) -> None:  # 256 chunks of 4 KiB at 10 ms each: 2.5 s unless stopped
        chunks.append(time.monotonic())
        if len(chunks) == 3:
            sent.append(time.monotonic())
            signal.pthread_kill(main, signal.SIGINT)
        time.sleep(0.01)

    job = AsyncLoader(device, copier=small_copier).start(path, progress=slowly)
    with pytest.raises(KeyboardInterrupt):
        job.result()
    assert time.monotonic() - sent[0] < 1.0
    assert allocations and all(b.closed for b in allocations)
    assert str(path) not in _open_paths()
    assert not [
        t for t in threading.enumerate() if t.name.startswith(("hip-staging", "hip-loader"))
    ]
    assert len(chunks) < 100  # the readers stopped
    with pytest.raises(LoadCancelledError, match="KeyboardInterrupt"):
        job.result()  # later calls: cancelled, not a second KeyboardInterrupt


def _open_paths() -> set[str]:
    """The files this process has open."""
    found = set()
    for fd in os.listdir("/proc/self/fd"):
        with contextlib.suppress(OSError):
            found.add(os.readlink(f"/proc/self/fd/{fd}"))
    return found


@pytest.mark.parametrize("arena", [True, False], ids=["arena", "per-tensor"])
@pytest.mark.parametrize("target", ["float32", "bfloat16"])
def test_gguf_round_trip_with_quantized_tensors(
    device: Device,
    tmp_path: Path,
    target: str,
    arena: bool,
    small_copier: StagedCopier,
    allocations: list[DeviceBuffer],
) -> None:
    Q = gguf.GGMLQuantizationType
    rng = np.random.default_rng()
    plain = {
        "f32": rng.standard_normal((3, 5)).astype(np.float32),
        "f16": rng.standard_normal(7).astype(np.float16),
    }
    quantized = {
        "q8": (rng.standard_normal((3, 64)).astype(np.float32), Q.Q8_0),
        "q4": (rng.standard_normal((2, 4, 96)).astype(np.float32), Q.Q4_0),
    }
    path = tmp_path / "model.gguf"
    writer = gguf.GGUFWriter(str(path), "llama")
    for name, array in plain.items():
        writer.add_tensor(name, array)
    blocks = {}
    for name, (values, qtype) in quantized.items():
        blocks[name] = np.asarray(gguf.quants.quantize(values, qtype))
        writer.add_tensor(name, blocks[name], raw_dtype=qtype)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()

    result = AsyncLoader(device, copier=small_copier).load(path, dequantize_to=target, arena=arena)
    for name, array in plain.items():
        assert result.tensors[name].to_numpy().tobytes() == array.tobytes()
    dtype = np.dtype(ml_dtypes.bfloat16) if target == "bfloat16" else np.dtype(np.float32)
    for name, (values, qtype) in quantized.items():
        expected = np.asarray(gguf.quants.dequantize(blocks[name], qtype), np.float32)
        got = result.tensors[name].to_numpy()
        assert got.shape == values.shape and got.dtype == dtype
        # one f32 product per element, rounded once to the target: equal to the reference
        assert got.tobytes() == expected.reshape(values.shape).astype(dtype).tobytes()
    kept = {t.buffer.ptr for t in result.tensors.values()}
    scratch = [b for b in allocations if b.closed or b.ptr not in kept]
    assert scratch and all(b.closed for b in scratch)  # the raw blocks' scratch is freed
