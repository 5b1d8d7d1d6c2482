"""Collectives between processes: two spawned ranks (multiprocessing, spawn) whose unique id
goes through a file (`rendezvous_file`), checked against numpy. On the cpu platform
(one device per process) and, marked `gpu`, on nvidia over NCCL with one GPU per process.
Also what the cpu platform does where NCCL would hang: a rank that never comes (the timeout)
and a peer process that dies (a clear error at once).
"""

from __future__ import annotations

import multiprocessing
import os
import pickle
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

os.environ["NCCL_NVLS_ENABLE"] = "0"  # NVLink multicast stays off (the H200s)

from hip_core import (
    Communicator,
    Device,
    HipLaunchError,
    NcclError,
    UniqueId,
    use_platform,
)

SPAWN = multiprocessing.get_context("spawn")
HERE = str(Path(__file__).resolve().parent)
sys.path.insert(0, HERE)  # the ranks' module: importable here and in the spawned ranks
import hip_core_collective_children as children  # noqa: E402

EXAMPLE = Path(__file__).resolve().parents[3] / "docs" / "examples" / "all_reduce.py"
#: Every collective; all five operations for the reducing ones; four types.
CASES = [
    (kind, dtype, op, 1000 + 3, 1)
    for dtype in ("float32", "float16", "bfloat16", "int32")
    for kind, ops in (
        ("all_reduce", ("sum", "prod", "max", "min", "avg")),
        ("reduce", ("sum", "prod", "max", "min", "avg")),
        ("reduce_scatter", ("sum", "prod", "max", "min", "avg")),
        ("broadcast", ("sum",)),
        ("all_gather", ("sum",)),
    )
    for op in ops
]


@pytest.fixture
def short_timeout(monkeypatch: pytest.MonkeyPatch) -> None:
    """The cpu platform's collective timeout for this test and the processes it spawns."""
    monkeypatch.setenv("HIP_FFI_CPU_COLLECTIVE_TIMEOUT", "30")


def run_ranks(target: Any, *args: Any) -> tuple[list[Any], list[int | None]]:
    """`target(*args, rank, results)` in two spawned processes (ranks 0 and 1): their answers
    in the order they came, and their exit codes. Both ranks are children: one that hangs
    (NCCL has no timeout) is killed here, and one that dies without answering ends the wait
    at once."""
    results = SPAWN.Queue()
    ranks = [SPAWN.Process(target=target, args=(*args, r, results)) for r in range(2)]
    for rank in ranks:
        rank.start()
    try:
        answers = children.gather(results, ranks, timeout=children.RANK_SECONDS + 30)
    finally:
        for rank in ranks:
            rank.join(30)
            if rank.is_alive():
                rank.kill()
                rank.join()
    return answers, [rank.exitcode for rank in ranks]


def test_two_processes_run_every_collective(
    platform: str, tmp_path: Path, short_timeout: None
) -> None:
    if platform != "cpu" and Device.count() < 2:
        pytest.skip(f"one GPU per rank: the {platform} platform has {Device.count()}")
    answers, codes = run_ranks(children.rank_main, platform, str(tmp_path / "id"), 2, 11, CASES)
    assert answers == [("ok", []), ("ok", [])], answers
    assert codes == [0, 0]


def test_a_wait_gives_up_on_a_silent_peer(
    platform: str, tmp_path: Path, short_timeout: None
) -> None:
    """NCCL waits on a peer forever; `Communicator.wait(timeout=)` does not."""
    if platform != "cpu" and Device.count() < 2:
        pytest.skip(f"one GPU per rank: the {platform} platform has {Device.count()}")
    done = SPAWN.Event()
    answers, _ = run_ranks(children.wait_for_a_silent_peer, platform, str(tmp_path / "id"), done)
    assert sorted(answers, key=str) == [("ok", "silent"), ("ok", ("timed out", True, True))]


def test_unique_ids_pickle_and_are_checked(platform: str) -> None:
    unique_id = UniqueId.new()
    assert pickle.loads(pickle.dumps(unique_id)) == unique_id
    assert UniqueId.fromhex(unique_id.hex()) == unique_id
    assert unique_id.platform == platform
    device = Device(0)
    with pytest.raises(ValueError, match="rank 2"):
        Communicator(device, unique_id, 2, 2)
    with pytest.raises(ValueError, match="platform"):
        Communicator(device, UniqueId(unique_id.raw, "elsewhere"), 0, 1)
    with pytest.raises(ValueError, match="128 bytes"):
        UniqueId(b"short", platform)
    with pytest.raises(TypeError, match="UniqueId"):
        Communicator(device, unique_id.raw, 0, 1)  # type: ignore[arg-type]
    with Communicator(device, unique_id, 0, 1) as alone:  # one rank: a communicator too
        buffer = device.allocate(16)
        buffer.fill(3)
        alone.all_reduce(buffer, buffer, 4, "int32", op="max")
        alone.all_reduce(buffer, buffer, 4, "int32", op="avg")
        out = bytearray(16)
        buffer.copy_to(out)
        assert out == b"\x03" * 16


@pytest.fixture
def cpu(monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """The cpu platform, with a collective timeout of 1 s (here and in spawned processes)."""
    monkeypatch.setenv("HIP_FFI_CPU_COLLECTIVE_TIMEOUT", "1")
    with use_platform("cpu") as api:
        yield api


def test_a_rank_that_never_comes_is_a_timeout(cpu: Any) -> None:
    start = time.monotonic()
    with pytest.raises(NcclError, match="timed out after 1 s") as raised:
        Communicator(Device(0), UniqueId.new(), 0, 2)
    assert raised.value.name == "ncclSystemError" and not raised.value.recoverable
    assert "ncclCommInitRank" in str(raised.value)
    assert time.monotonic() - start < 5


def test_a_peer_process_that_dies_is_an_error(cpu: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HIP_FFI_CPU_COLLECTIVE_TIMEOUT", "60")  # (the child may start slowly)
    unique_id = UniqueId.new()
    results = SPAWN.Queue()
    child = SPAWN.Process(target=children.join_then_die, args=("cpu", unique_id, 1, 2, results))
    child.start()
    try:
        comm = Communicator(Device(0), unique_id, 0, 2)
        assert results.get(timeout=240) == ("ok", "joined", 1)
        child.join(60)
        assert child.exitcode == 3
        buffer = Device(0).allocate(64)
        start = time.monotonic()
        comm.all_reduce(buffer, buffer, 16, "float32")
        with pytest.raises(HipLaunchError, match=r"rank 1 \(process \d+\) exited"):
            Device(0).synchronize()
        assert time.monotonic() - start < 5  # found dead at once, not timed out
        error = comm.async_error()
        assert error is not None and error.name == "ncclRemoteError"
        comm.abort()
    finally:
        child.join(60)


def test_the_documented_example_runs(platform: str) -> None:
    if platform != "cpu" and Device.count() < 2:
        pytest.skip(f"the example runs one GPU per rank; {platform} has {Device.count()}")
    env = {**os.environ, "HIP_PLATFORM": platform, "HIP_FFI_CPU_DEVICES": "2"}
    done = subprocess.run(
        [sys.executable, str(EXAMPLE)], env=env, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-4000:]
    assert "average on each rank: {0: 1.5, 1: 1.5}" in done.stdout
    assert "sum over 2 devices: 2" in done.stdout
