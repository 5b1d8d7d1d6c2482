"""Several GPUs, beside torch in the same run: peer copies and NCCL collectives (issue 20).

Measures on the current platform (two H100s/H200s through the nvidia platform):
- peer copy GB/s, device 0 -> device 1, 1 MiB ... 1 GiB: hip-core's `DeviceBuffer.copy_from`
  between buffers of the two devices queued on a stream of device 1 (hipMemcpyPeerAsync; the
  "sync" rows: without `stream=`, hipMemcpyPeer) beside torch's `x.to("cuda:1")`; host wall
  time of a batch until both devices are idle, per copy (hip_backend.bench.per_call);
- all_reduce (float32, sum) and all_gather bus bandwidth, 1 MiB ... 1 GiB per rank, two
  processes (spawned, one GPU each): hip-core's `Communicator` beside torch.distributed's NCCL
  backend, both in the same two processes, size by size; per call = host wall time of a batch
  of back-to-back calls on one stream plus its synchronize (the ranks meet before each batch).
  Bus bandwidth as nccl-tests counts it: all_reduce bytes / time x 2(n-1)/n; all_gather
  (n x bytes per rank) / time x (n-1)/n;
- the ratios hip / torch for each (the goal: >= 0.95).
NCCL's NVLink multicast is kept off (NCCL_NVLS_ENABLE=0, here and in the ranks' environment).
Each rank makes its GPU current first (its synchronous fills then run on its own device), and
never hangs the run: after BENCH_RANK_SECONDS (600) it prints its stacks and exits, and the
parent stops waiting as soon as a rank has died (a `skipped` row says so).
`--quick` runs small sizes anywhere, the cpu platform included (two cpu devices for the copy,
two processes for the collectives); torch rows are `skipped` where torch has no two GPUs.
Prints JSON lines and a table; writes bench_multi_gpu.jsonl and bench_multi_gpu.md under --out.

    PYTHONPATH=... python3 bench/bench_multi_gpu.py [--quick] [--out DIR] [--max-mib M]
"""

from __future__ import annotations

import faulthandler
import multiprocessing
import os
import queue
import socket
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

os.environ["NCCL_NVLS_ENABLE"] = "0"  # NVLink multicast off: set before any NCCL loads
os.environ.setdefault("HIP_FFI_CPU_DEVICES", "2")  # (the cpu platform: two devices to copy)

from _harness import ROWS, emit, parser, run, save

from hip_backend.bench import gb_per_s, per_call
from hip_core import Communicator, Device, rendezvous_file

MiB = 1 << 20
SPAWN = multiprocessing.get_context("spawn")
#: The longest a collective rank may run (both libraries, every size) before it exits.
RANK_SECONDS = float(os.environ.get("BENCH_RANK_SECONDS", "600"))


def sizes(quick: bool, max_mib: int) -> list[int]:
    """Bytes per rank: 1 MiB, 4 MiB, ... up to `max_mib` (quick: 64 KiB ... 1 MiB)."""
    if quick:
        return [64 << 10, 256 << 10, MiB]
    out, size = [], MiB
    while size <= max_mib * MiB:
        out.append(size)
        size *= 4
    return out


def calls_for(nbytes: int, quick: bool) -> int:
    """Calls per timed batch: about 1 GiB moved per batch, 3 to 200 calls."""
    return 3 if quick else max(3, min(200, (1 << 30) // nbytes))


def peer_copies(sizes_: list[int], quick: bool) -> None:
    a, b = Device(0), Device(1)

    def both_idle() -> None:
        a.synchronize()
        b.synchronize()

    # Queued on the target's stream and waited for once per batch, as torch's `x.to()` is
    # (a synchronous copy would add a host round trip to every call: see the sync rows).
    stream = b.create_stream()
    for nbytes in sizes_:
        source, target = a.allocate(nbytes), b.allocate(nbytes)
        source.fill(1)
        calls = calls_for(nbytes, quick)
        for impl, copy in (
            ("hip_core", lambda s=source, t=target: t.copy_from(s, stream=stream)),
            ("hip_core sync", lambda s=source, t=target: t.copy_from(s)),
        ):
            timed = per_call(copy, calls, both_idle, repeats=5)
            emit(bench="peer_copy", impl=impl, bytes=nbytes, us=timed.median_us,
                 gb_per_s=gb_per_s(nbytes, timed.median_us))  # fmt: skip
        source.close()
        target.close()
    stream.close()


def torch_peer_copies(sizes_: list[int], quick: bool) -> None:
    import torch

    if torch.cuda.device_count() < 2:
        raise RuntimeError(f"torch sees {torch.cuda.device_count()} GPU(s)")

    def both_idle() -> None:
        torch.cuda.synchronize(0)
        torch.cuda.synchronize(1)

    for nbytes in sizes_:
        x = torch.ones(nbytes, dtype=torch.uint8, device="cuda:0")
        calls = calls_for(nbytes, quick)
        timed = per_call(lambda x=x: x.to("cuda:1"), calls, both_idle, repeats=5)
        emit(bench="peer_copy", impl="torch", bytes=nbytes, us=timed.median_us,
             gb_per_s=gb_per_s(nbytes, timed.median_us))  # fmt: skip
        del x


def bus_factor(kind: str, ranks: int) -> float:
    return 2 * (ranks - 1) / ranks if kind == "all_reduce" else (ranks - 1) / ranks


def _rank_hip(
    rank: int, size: int, id_file: str, sizes_: list[int], quick: bool, report: Callable[..., None]
) -> None:
    """hip-core's collectives on this rank, size by size."""
    platform = Device(0)._api.platform
    device = Device(0 if platform == "cpu" else rank)
    device.make_current()  # this rank's synchronous fills and copies on its own device
    comm = Communicator(device, rendezvous_file(id_file, rank), rank, size)
    if rank == 0:  # which library ran (the path NCCL was opened from)
        report("library", "hip_core", 0, 0.0, size, repr(device._api.ncclAllReduce))
    stream = device.create_stream()
    flag = device.allocate(4)

    def meet() -> None:  # both ranks start each batch together
        comm.all_reduce(flag, flag, 1, "float32", stream=stream)
        stream.sync()

    for nbytes in sizes_:
        count = nbytes // 4
        source, target = device.allocate(nbytes), device.allocate(size * nbytes)
        source.fill(0)
        calls = calls_for(nbytes, quick)
        cases = {
            "all_reduce": lambda s=source, c=count: comm.all_reduce(s, s, c, "float32",
                                                                   stream=stream),
            "all_gather": lambda s=source, t=target, c=count: comm.all_gather(s, t, c, "float32",
                                                                             stream=stream),
        }  # fmt: skip
        for kind, call in cases.items():
            timed = per_call(call, calls, stream.sync, repeats=5, before=meet)
            report(kind, "hip_core", nbytes, timed.median_us, size)
        source.close()
        target.close()
    comm.close()


def _rank_torch(
    rank: int, size: int, port: int, sizes_: list[int], quick: bool, report: Callable[..., None]
) -> None:
    """torch.distributed's NCCL backend on this rank, the same sizes and loop."""
    import torch
    import torch.distributed as dist

    if not torch.cuda.is_available() or torch.cuda.device_count() < size:
        raise RuntimeError("torch.distributed NCCL needs one GPU per rank")
    torch.cuda.set_device(rank)
    dist.init_process_group(
        "nccl", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=size,
        device_id=torch.device("cuda", rank),
    )  # fmt: skip
    stream = torch.cuda.Stream()
    flag = torch.zeros(1, device="cuda")
    nccl = ".".join(map(str, torch.cuda.nccl.version()))
    report("library", "torch.distributed", 0, 0.0, size, f"torch {torch.__version__}, NCCL {nccl}")

    def meet() -> None:
        dist.all_reduce(flag)
        torch.cuda.synchronize()

    try:
        with torch.cuda.stream(stream):
            for nbytes in sizes_:
                source = torch.zeros(nbytes // 4, device="cuda")
                target = torch.empty(size * (nbytes // 4), device="cuda")
                calls = calls_for(nbytes, quick)
                cases = {
                    "all_reduce": lambda s=source: dist.all_reduce(s),
                    "all_gather": lambda s=source, t=target: dist.all_gather_into_tensor(t, s),
                }
                for kind, call in cases.items():
                    timed = per_call(call, calls, stream.synchronize, repeats=5, before=meet)
                    report(kind, "torch.distributed", nbytes, timed.median_us, size)
                del source, target
    finally:
        dist.destroy_process_group()


def rank_main(
    rank: int, size: int, id_file: str, port: int, sizes_: list[int], quick: bool, rows: Any
) -> None:
    """One rank: hip-core's collectives, then torch's, reporting rank 0's figures. A rank
    still running after RANK_SECONDS prints its stacks and exits (NCCL waits forever)."""
    os.environ["NCCL_NVLS_ENABLE"] = "0"
    faulthandler.dump_traceback_later(RANK_SECONDS, exit=True)

    def report(kind: str, impl: str, nbytes: int, us: float, ranks: int, note: str = "") -> None:
        if rank == 0 and note:
            rows.put(dict(bench=kind, impl=impl, note=note))
        elif rank == 0:
            algbw = gb_per_s(nbytes * (ranks if kind == "all_gather" else 1), us)
            busbw = algbw * bus_factor(kind, ranks)
            rows.put(dict(bench=kind, impl=impl, bytes=nbytes, us=us, ranks=ranks,
                          algbw_gb_per_s=algbw, busbw_gb_per_s=busbw))  # fmt: skip

    for impl, work in (
        ("hip_core", lambda: _rank_hip(rank, size, id_file, sizes_, quick, report)),
        ("torch.distributed", lambda: _rank_torch(rank, size, port, sizes_, quick, report)),
    ):
        try:
            work()
        except Exception as error:  # an anchor missing here is reported, not fatal
            if rank == 0:
                rows.put(dict(bench="skipped", impl=impl,
                              reason=f"{type(error).__name__}: {error}"[:300]))  # fmt: skip
    rows.put(None)


def collectives(sizes_: list[int], quick: bool, ranks: int = 2) -> None:
    with socket.socket() as probe:  # a free port for torch's TCP store
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    rows = SPAWN.Queue()
    with tempfile.TemporaryDirectory() as folder:
        id_file = str(Path(folder) / "unique.id")
        workers = [
            SPAWN.Process(target=rank_main, args=(r, ranks, id_file, port, sizes_, quick, rows))
            for r in range(ranks)
        ]
        for worker in workers:
            worker.start()
        try:
            finished = 0
            while finished < ranks:
                try:
                    row = rows.get(timeout=1.0)
                except queue.Empty:
                    if any(w.exitcode not in (None, 0) for w in workers):
                        codes = [w.exitcode for w in workers]
                        emit(bench="skipped", impl="collectives", reason=f"a rank died: {codes}")
                        return
                    continue
                if row is None:
                    finished += 1
                else:
                    emit(**row)
        finally:
            for worker in workers:
                worker.join(30)
                if worker.is_alive():
                    worker.kill()


def table() -> str:
    lines = ["| bench | MiB | impl | GB/s | hip / torch |", "| --- | ---: | --- | ---: | ---: |"]
    measured = [r for r in ROWS if r["bench"] not in ("skipped", "library")]
    for row in measured:
        value = row.get("busbw_gb_per_s", row.get("gb_per_s", 0.0))
        same = [p for p in measured if (p["bench"], p["bytes"]) == (row["bench"], row["bytes"])]
        anchor = next((p for p in same if p["impl"].startswith("torch")), None)
        ratio = ""
        if anchor is not None and row["impl"].startswith("hip_core"):
            other = anchor.get("busbw_gb_per_s", anchor.get("gb_per_s", 0.0))
            ratio = f"{value / other:.2f}" if other else ""
        lines.append(f"| {row['bench']} | {row['bytes'] / MiB:g} | {row['impl']} | "
                     f"{value:.1f} | {ratio} |")  # fmt: skip
    for row in ROWS:
        if row["bench"] in ("skipped", "library"):
            lines.append(
                f"| {row['bench']} | | {row['impl']} | {row.get('reason') or row['note']} | |"
            )
    return "\n".join(lines)


def main() -> None:
    flags = parser(__doc__)
    flags.add_argument("--max-mib", type=int, default=1024, help="largest size per rank (1024)")
    args = flags.parse_args()
    chosen = sizes(args.quick, args.max_mib)
    if Device.count() < 2:
        emit(bench="skipped", impl="peer copies", reason=f"{Device.count()} device(s)")
    else:
        run([
            ("hip_core peer copy", lambda: peer_copies(chosen, args.quick)),
            ("torch peer copy", lambda: torch_peer_copies(chosen, args.quick)),
        ])  # fmt: skip
    collectives(chosen, args.quick)
    save(args.out, "bench_multi_gpu", table())


if __name__ == "__main__":
    main()
