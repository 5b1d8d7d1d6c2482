"""What test_collectives_processes.py runs in spawned processes: one rank each.

A spawned child imports its target by module name; the test puts this folder on sys.path.
Each function reports (as hip_core_ipc_children's do) ("ok", result) or
("error", class name, message) on `results`, so a failing rank fails the test with its reason.
"""

from __future__ import annotations

import faulthandler
import os
import queue
import sys
import time
from typing import Any

os.environ["NCCL_NVLS_ENABLE"] = "0"  # NVLink multicast stays off (the H200s)

import hip_core_collective_cases as shared
from hip_core_ipc_children import _report

from hip_core import Communicator, Device, UniqueId, rendezvous_file, use_platform

Case = tuple[str, str, str, int, int]  # kind, dtype, op, count, root


def device_for(platform: str, rank: int) -> Device:
    """One GPU per rank; on the cpu platform every process's device 0 (ranks are processes)."""
    return Device(0 if platform == "cpu" else rank)


def run_cases(comm: Communicator, device: Device, seed: int, cases: list[Case]) -> list[str]:
    """Run `cases` on `comm`, one at a time; the cases whose output was not as expected."""
    wrong = []
    for index, (kind, dtype, op, count, root) in enumerate(cases):
        ranks = comm.size
        every = [shared.inputs(seed + index, r, shared.input_count(kind, count, ranks), dtype, op)
                 for r in range(ranks)]  # fmt: skip
        out_count = shared.output_count(kind, count, ranks)
        source, target = shared.buffers(device, every[comm.rank], out_count)
        shared.issue(comm, kind, source, target, count, dtype, op, root)
        want = shared.expected(kind, every, comm.rank, op, dtype, root)
        if want is not None:
            got = shared.read(device, target, want.size, dtype)
            if got.tobytes() != want.tobytes():
                wrong.append(f"{kind} {dtype} {op} on rank {comm.rank}")
        source.close()
        target.close()
    return wrong


def rank_main(
    platform: str, id_file: str, size: int, seed: int, cases: list[Case], rank: int,
    results: Any,
) -> None:  # fmt: skip
    """Rank `rank`: its unique id from `id_file` (rank 0 writes it), then `cases`."""

    def work() -> list[str]:
        device = device_for(platform, rank)
        # This rank's device is current for all its work: the synchronous copies and fills
        # of its buffers then run on that device's null stream, before its collectives on it
        # (from another device's null stream nothing would order them, and a process that
        # touches GPU 0 from rank 1 also makes a context there).
        with device:
            unique_id = rendezvous_file(id_file, rank, timeout=60)
            with Communicator(device, unique_id, rank, size) as comm:
                return run_cases(comm, device, seed, cases)

    watchdog(RANK_SECONDS)
    _report(results, platform, work)


def wait_for_a_silent_peer(
    platform: str, id_file: str, done: Any, rank: int, results: Any
) -> None:  # fmt: skip
    """Both ranks run one all-reduce together (NCCL connects the ranks at a collective's first
    call: until then that call blocks on the host for its peers); then rank 0 queues a second
    one that rank 1 never calls and waits for it with a timeout of 2 s, while rank 1 stays
    alive and silent until rank 0 is done (`done`)."""

    def work() -> object:
        device = device_for(platform, rank)
        with device:
            comm = Communicator(device, rendezvous_file(id_file, rank, timeout=60), rank, 2)
            buffer = device.allocate(64)
            stream = device.create_stream()
            comm.all_reduce(buffer, buffer, 16, "float32", stream=stream)
            comm.wait(stream, timeout=60)
            if rank == 1:
                done.wait(RANK_SECONDS)
                comm.abort()
                return "silent"
            comm.all_reduce(buffer, buffer, 16, "float32", stream=stream)  # rank 1: never
            start = time.monotonic()
            try:
                comm.wait(stream, timeout=2)
            except TimeoutError:  # (the abort after it takes its time: 2.5-3.5 s on H100s)
                return ("timed out", 2 <= time.monotonic() - start < 10, comm.closed)
            finally:
                done.set()
            return "no timeout"

    watchdog(RANK_SECONDS)
    _report(results, platform, work)


#: How long a rank may take before it prints every thread's stack and exits (NCCL has no
#: timeout of its own: a rank waiting on a peer that never comes would wait forever).
RANK_SECONDS = float(os.environ.get("HIP_CORE_TEST_RANK_SECONDS", "200"))


def watchdog(seconds: float) -> None:
    """Dump this process's stacks to stderr and exit (code 1) after `seconds`."""
    faulthandler.dump_traceback_later(seconds, exit=True, file=sys.stderr)


def gather(results: Any, ranks: list[Any], timeout: float) -> list[Any]:
    """One answer per rank from `results`, waiting at most `timeout` seconds in all:
    TimeoutError naming the ranks that exited without answering or are still running."""
    answers: list[Any] = []
    deadline = time.monotonic() + timeout
    while len(answers) < len(ranks):
        try:
            answers.append(results.get(timeout=1.0))
            continue
        except queue.Empty:
            pass
        dead = [f"rank {i} exited with {r.exitcode}" for i, r in enumerate(ranks)
                if not r.is_alive() and r.exitcode != 0]  # fmt: skip
        if dead or time.monotonic() > deadline:
            alive = [f"rank {i} still running" for i, r in enumerate(ranks) if r.is_alive()]
            raise TimeoutError(
                f"{len(answers)} of {len(ranks)} ranks answered in {timeout:g} s: "
                + "; ".join(dead + alive)
            )
    return answers


def join_then_die(platform: str, unique_id: UniqueId, rank: int, size: int, results: Any) -> None:
    """Join the communicator, say so, and exit at once without destroying it (a crash)."""
    with use_platform(platform):
        comm = Communicator(device_for(platform, rank), unique_id, rank, size)
        results.put(("ok", "joined", comm.rank))
        results.close()
        results.join_thread()
        os._exit(3)
