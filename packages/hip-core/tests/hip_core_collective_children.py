"""What test_collectives_processes.py runs in spawned processes: one rank each.

A spawned child imports its target by module name; the test puts this folder on sys.path
(as test_ipc.py does for hip_core_ipc_children). Each function reports ("ok", result) or
("error", class name, message) on `results`, so a failing rank fails the test with its reason.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

os.environ.setdefault("NCCL_NVLS_ENABLE", "0")  # NVLink multicast stays off (the H200s)

from hip_core_collective_cases import (
    buffers,
    expected,
    input_count,
    inputs,
    issue,
    output_count,
    read,
)

from hip_core import Communicator, Device, UniqueId, rendezvous_file, use_platform

Case = tuple[str, str, str, int, int]  # kind, dtype, op, count, root


def _report(results: Any, platform: str, work: Callable[[], object]) -> None:
    try:
        with use_platform(platform):
            results.put(("ok", work()))
    except BaseException as error:  # the parent reports it
        results.put(("error", type(error).__name__, str(error)))


def device_for(platform: str, rank: int) -> Device:
    """One GPU per rank; on the cpu platform every process's device 0 (ranks are processes)."""
    return Device(0 if platform == "cpu" else rank)


def run_cases(comm: Communicator, device: Device, seed: int, cases: list[Case]) -> list[str]:
    """Run `cases` on `comm`, one at a time; the cases whose output was not as expected."""
    wrong = []
    for index, (kind, dtype, op, count, root) in enumerate(cases):
        ranks = comm.size
        every = [inputs(seed + index, r, input_count(kind, count, ranks), dtype, op)
                 for r in range(ranks)]  # fmt: skip
        source, target = buffers(device, every[comm.rank], output_count(kind, count, ranks))
        issue(comm, kind, source, target, count, dtype, op, root)
        want = expected(kind, every, comm.rank, op, dtype, root)
        if want is not None:
            got = read(device, target, want.size, dtype)
            if got.tobytes() != want.tobytes():
                wrong.append(f"{kind} {dtype} {op} on rank {comm.rank}")
        source.close()
        target.close()
    return wrong


def rank_main(
    platform: str, id_file: str, rank: int, size: int, seed: int, cases: list[Case],
    results: Any,
) -> None:  # fmt: skip
    """Rank `rank`: its unique id from `id_file` (rank 0 writes it), then `cases`."""

    def work() -> list[str]:
        device = device_for(platform, rank)
        unique_id = rendezvous_file(id_file, rank, timeout=60)
        with Communicator(device, unique_id, rank, size) as comm:
            return run_cases(comm, device, seed, cases)

    _report(results, platform, work)


def join_then_die(platform: str, unique_id: UniqueId, rank: int, size: int, results: Any) -> None:
    """Join the communicator, say so, and exit at once without destroying it (a crash)."""
    with use_platform(platform):
        comm = Communicator(device_for(platform, rank), unique_id, rank, size)
        results.put(("ok", "joined", comm.rank))
        results.close()
        results.join_thread()
        os._exit(3)
