"""Collectives between the ranks of one process (Communicator.all_for: threads on the cpu
platform), every collective × operation × type against numpy, on the cpu platform and, marked
`gpu`, on nvidia over NCCL.

The cpu platform reads its device count once per process, so
`test_in_a_process_with_four_cpu_devices` runs this file again in a subprocess started with
HIP_FFI_CPU_DEVICES=4; with fewer devices than a test's ranks, it skips, saying so.
Processes (spawned ranks, a dead peer) are in test_collectives_processes.py.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

os.environ["NCCL_NVLS_ENABLE"] = "0"  # NVLink multicast stays off (the H200s)
sys.path.insert(0, str(Path(__file__).resolve().parent))  # the shared cases

from hip_core_collective_cases import (
    COPYING,
    DTYPES,
    OPS,
    REDUCING,
    buffers,
    expected,
    input_count,
    inputs,
    issue,
    output_count,
    read,
)

from hip_core import (
    ClosedError,
    Communicator,
    Device,
    HipLaunchError,
    NcclError,
    use_platform,
)
from hip_cpu import ordinals, testing

COUNT = 1000 + 3  # not a multiple of anything the implementations chunk by


def test_in_a_process_with_four_cpu_devices() -> None:
    if ordinals.count() >= 4:
        pytest.skip("this process has several cpu devices: the tests of this file ran in it")
    passed, _ = testing.rerun_with_devices(4, __file__, timeout=300)
    assert passed >= 30


@pytest.fixture(params=[2, 4], ids=["2ranks", "4ranks"])
def comms(request: pytest.FixtureRequest, platform: str) -> Iterator[list[Communicator]]:
    """A communicator of 2 or 4 ranks on devices 0.., all in this process."""
    ranks = request.param
    count = Device.count()
    if count < ranks:
        if platform == "cpu" and ordinals.count() < 4:
            pytest.skip("one cpu device here: test_in_a_process_with_four_cpu_devices runs it")
        pytest.skip(f"{ranks} ranks need {ranks} devices; the {platform} platform has {count}")
    made = Communicator.all_for([Device(i) for i in range(ranks)])
    yield made
    for comm in made:
        comm.close()


@pytest.fixture
def cpu_comms() -> Iterator[list[Communicator]]:
    """Two ranks of the cpu platform (the failure cases NCCL has no answer for but a hang)."""
    with use_platform("cpu"):
        if Device.count() < 2:
            pytest.skip("one cpu device here: test_in_a_process_with_four_cpu_devices runs it")
        made = Communicator.all_for([Device(0), Device(1)])
        yield made
        for comm in made:
            comm.close()


def run_everywhere(
    comms: list[Communicator], kind: str, dtype: str, op: str, count: int, seed: int
) -> None:
    """Queue `kind` on every rank in one group, then compare each rank's output with numpy."""
    ranks = len(comms)
    root = ranks - 1
    every = [inputs(seed, r, input_count(kind, count, ranks), dtype, op) for r in range(ranks)]
    made = [buffers(c.device, every[c.rank], output_count(kind, count, ranks)) for c in comms]
    with Communicator.group():
        for comm, (source, target) in zip(comms, made, strict=True):
            issue(comm, kind, source, target, count, dtype, op, root)
    for comm, (_, target) in zip(comms, made, strict=True):
        want = expected(kind, every, comm.rank, op, dtype, root)
        if want is None:
            continue
        got = read(comm.device, target, want.size, dtype)
        np.testing.assert_array_equal(got, want, err_msg=f"{kind} {dtype} {op} rank {comm.rank}")


@pytest.mark.parametrize("dtype", DTYPES)
def test_every_collective_and_operation(comms: list[Communicator], dtype: str) -> None:
    for seed, kind in enumerate(REDUCING):
        for op in OPS:
            run_everywhere(comms, kind, dtype, op, COUNT, seed)
    for seed, kind in enumerate(COPYING):
        run_everywhere(comms, kind, dtype, "sum", COUNT, seed)


def test_large_counts_in_several_chunks(comms: list[Communicator]) -> None:
    # 1.5 M float32 per rank: more than the cpu platform's 4 MiB staging area per rank
    for kind in ("all_reduce", "reduce_scatter", "all_gather"):
        run_everywhere(comms, kind, "float32", "sum", 3 << 19, seed=7)


def test_in_place_and_zero_counts(comms: list[Communicator]) -> None:
    ranks = len(comms)
    data = [np.full(64, r + 1, np.int32) for r in range(ranks)]
    made = [buffers(c.device, data[c.rank], 64)[0] for c in comms]
    with Communicator.group():
        for comm, buffer in zip(comms, made, strict=True):
            comm.all_reduce(buffer, buffer, 64, np.int32)  # in place
            comm.all_reduce(buffer, buffer, 0, np.int32)  # nothing to do, still collective
    total = sum(range(1, ranks + 1))
    for comm, buffer in zip(comms, made, strict=True):
        np.testing.assert_array_equal(read(comm.device, buffer, 64, "int32"), total)


def test_send_and_receive_around_a_ring(comms: list[Communicator]) -> None:
    ranks = len(comms)
    count = (1 << 19) + 5  # 2 MiB of float32: more than one mailbox chunk
    data = [inputs(3, r, count, "float32") for r in range(ranks)]
    made = [buffers(c.device, data[c.rank], count) for c in comms]
    with Communicator.group():
        for comm, (source, target) in zip(comms, made, strict=True):
            comm.send(source, count, "float32", (comm.rank + 1) % ranks)
            comm.recv(target, count, "float32", (comm.rank - 1) % ranks)
    for comm, (_, target) in zip(comms, made, strict=True):
        got = read(comm.device, target, count, "float32")
        np.testing.assert_array_equal(got, data[(comm.rank - 1) % ranks])


def test_collectives_are_ordered_on_their_stream(comms: list[Communicator]) -> None:
    ranks = len(comms)
    streams = [c.device.create_stream() for c in comms]
    made = [c.device.allocate(4 * 256) for c in comms]
    with Communicator.group():
        for comm, buffer, stream in zip(comms, made, streams, strict=True):
            buffer.fill(1, stream=stream)  # before the collective on the same stream
            comm.all_reduce(buffer, buffer, 256, "uint8", stream=stream)
    # A second group: NCCL may run the calls of one group concurrently (the H100s ran a
    # sum and a max of one buffer in one group that way), so a call that reads what another
    # writes goes in a later group, ordered by the stream.
    with Communicator.group():
        for comm, buffer, stream in zip(comms, made, streams, strict=True):
            comm.all_reduce(buffer, buffer, 256, "uint8", op="max", stream=stream)
    for comm, buffer, stream in zip(comms, made, streams, strict=True):
        stream.sync()
        np.testing.assert_array_equal(read(comm.device, buffer, 256, "uint8"), ranks)


def test_wait_returns_once_the_stream_is_past_the_collective(comms: list[Communicator]) -> None:
    ranks = len(comms)
    streams = [c.device.create_stream() for c in comms]
    data = [np.full(1 << 16, r + 1, np.float32) for r in range(ranks)]
    made = [buffers(c.device, data[c.rank], 1 << 16)[0] for c in comms]
    with Communicator.group():
        for comm, buffer, stream in zip(comms, made, streams, strict=True):
            comm.all_reduce(buffer, buffer, 1 << 16, "float32", stream=stream)
    for comm, buffer, stream in zip(comms, made, streams, strict=True):
        comm.wait(stream, timeout=60)
        assert stream.done and not comm.closed
        with comm.device:
            got = np.empty(1 << 16, np.float32)
            buffer.copy_to(got, stream=stream)  # ordered after the all-reduce on `stream`
            stream.sync()
        np.testing.assert_array_equal(got, sum(range(1, ranks + 1)))
    first = comms[0]
    with pytest.raises(ValueError, match="timeout must be"):
        first.wait(streams[0], timeout=-1)
    with pytest.raises(ValueError, match="a stream of device 1"):
        first.wait(streams[1], timeout=1)
    with pytest.raises(TypeError, match="stream must be"):
        first.wait(0, timeout=1)  # type: ignore[arg-type]


def test_wait_gives_up_on_a_peer_that_never_calls(cpu_comms: list[Communicator]) -> None:
    first = cpu_comms[0]
    buffer = first.device.allocate(64)
    stream = first.device.create_stream()
    first.all_reduce(buffer, buffer, 16, "float32", stream=stream)  # rank 1 never calls it
    start = time.monotonic()
    with pytest.raises(TimeoutError, match=r"rank 0 of 2 .* not done after 0.5 s"):
        first.wait(stream, timeout=0.5)
    assert 0.5 <= time.monotonic() - start < 5
    assert first.closed  # aborted: its work ended
    with pytest.raises(HipLaunchError, match="aborted"):  # (the cpu platform says why)
        stream.sync()


def test_arguments_are_checked_before_the_device(comms: list[Communicator]) -> None:
    first, second = comms[0], comms[1]
    small = first.device.allocate(16)
    other = second.device.allocate(4096)
    mine = first.device.allocate(4096)
    with pytest.raises(ValueError, match="needs 4000"):
        first.all_reduce(small, mine, 1000, "float32")
    with pytest.raises(ValueError, match="needs"):
        first.all_gather(mine, mine, 1000, "float32")  # out needs ranks * 4000 bytes
    with pytest.raises(ValueError, match="buffer of device 1"):
        first.all_reduce(other, mine, 4, "float32")
    with pytest.raises(ValueError, match="collectives take"):
        first.all_reduce(mine, mine, 4, "complex64")
    with pytest.raises(ValueError, match="op must be"):
        first.all_reduce(mine, mine, 4, "float32", op="mean")
    with pytest.raises(ValueError, match="root 9"):
        first.broadcast(mine, mine, 4, "float32", root=9)
    with pytest.raises(ValueError, match="peer -1"):
        first.send(mine, 4, "float32", -1)
    with pytest.raises(ValueError, match="count must be"):
        first.all_reduce(mine, mine, -1, "float32")
    with pytest.raises(TypeError, match="DeviceBuffer"):
        first.all_reduce(bytearray(16), mine, 4, "float32")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="a stream of device 1"):
        first.all_reduce(mine, mine, 4, "float32", stream=second.device.create_stream())
    with pytest.raises(ValueError, match="repeat"):
        Communicator.all_for([first.device, first.device])
    first.close()
    with pytest.raises(ClosedError):
        first.all_reduce(mine, mine, 4, "float32")
    first.close()  # twice: harmless
    assert "closed" in repr(first)


def test_a_peer_that_left_is_an_error_not_a_hang(cpu_comms: list[Communicator]) -> None:
    first, rest = cpu_comms[0], cpu_comms[1:]
    for comm in rest:
        comm.close()  # destroyed without taking part
    buffer = first.device.allocate(64)
    start = time.monotonic()
    first.all_reduce(buffer, buffer, 16, "float32")  # queued: the failure is the stream's
    with pytest.raises(HipLaunchError, match="destroyed its communicator"):
        first.device.synchronize()
    assert time.monotonic() - start < 5
    error = first.async_error()
    assert isinstance(error, NcclError) and error.name == "ncclRemoteError"
    assert not error.recoverable
    with pytest.raises(NcclError, match="ncclRemoteError"):  # every later call: at once
        first.all_reduce(buffer, buffer, 16, "float32")
    first.abort()


def test_mismatched_counts_fail_every_rank(cpu_comms: list[Communicator]) -> None:
    made = [c.device.allocate(4096) for c in cpu_comms]
    with Communicator.group():
        for comm, buffer in zip(cpu_comms, made, strict=True):
            comm.all_reduce(buffer, buffer, 10 + comm.rank, "float32")
    for comm in cpu_comms:
        with pytest.raises(HipLaunchError, match="different collectives"):
            comm.device.synchronize()
        error = comm.async_error()
        assert error is not None and error.name == "ncclInvalidUsage"


def test_abort_ends_a_collective_waiting_for_its_peers(cpu_comms: list[Communicator]) -> None:
    first = cpu_comms[0]
    buffer = first.device.allocate(64)
    first.all_reduce(buffer, buffer, 16, "float32")  # the other ranks never call it
    time.sleep(0.05)
    start = time.monotonic()
    first.abort()
    with pytest.raises(HipLaunchError, match="aborted"):
        first.device.synchronize()
    assert time.monotonic() - start < 5
    assert first.closed
