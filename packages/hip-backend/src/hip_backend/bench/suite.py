"""The `hip-backend bench` measurements: launch latency, copies, ops, checkpoint loading and,
with two or more devices, an all-reduce across all of them, on the current platform, at sizes
that finish in seconds even on the cpu platform.

Each measurement yields `Row`s; one that cannot run here (no ModelRuntime yet, a platform
without hipBLAS) yields a row with `skipped` set to the reason instead of stopping the run.
The repository's bench/ scripts measure the same things at full size beside their anchors.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from hip_backend.bench.measure import gb_per_s, per_call

EMPTY_KERNEL = 'extern "C" __global__ void empty(float* p, int n) {}\n'


@dataclass(frozen=True)
class Sizes:
    """How big and how many: `quick` is a smoke run of well under ten seconds on the cpu
    platform; the default stays well under a minute there."""

    launches: int
    copy_bytes: int
    rows: int
    cols: int
    matmul: int
    checkpoint_bytes: int
    all_reduce_bytes: int

    @classmethod
    def of(cls, quick: bool) -> Sizes:
        if quick:
            return cls(launches=200, copy_bytes=1 << 20, rows=16, cols=1024, matmul=64,
                       checkpoint_bytes=4 << 20, all_reduce_bytes=1 << 20)  # fmt: skip
        return cls(launches=2000, copy_bytes=16 << 20, rows=256, cols=4096, matmul=256,
                   checkpoint_bytes=64 << 20, all_reduce_bytes=64 << 20)  # fmt: skip


@dataclass(frozen=True)
class Row:
    """One measurement. `us`: microseconds per call (median); `rate` in `unit` (GB/s or
    TFLOP/s) where one applies; `skipped`: why it did not run."""

    group: str
    name: str
    size: str
    us: float | None = None
    rate: float | None = None
    unit: str | None = None
    skipped: str | None = None


def launch(device: Any, sizes: Sizes) -> Iterator[Row]:
    """`Kernel.launch` of an empty two-argument kernel, one thread, back to back."""
    from hip_core import Program

    stream = device.create_stream()
    buffer = device.allocate(64)
    kernel = Program(EMPTY_KERNEL, name="empty.hip").load(device).get_kernel("empty")
    timing = per_call(lambda: kernel.launch(1, 1, buffer, 0, stream=stream), sizes.launches,
                      stream.sync)  # fmt: skip
    yield Row("launch", "Kernel.launch (empty kernel)", "1 thread", timing.median_us)
    stream.close()


def copies(device: Any, sizes: Sizes) -> Iterator[Row]:
    """Synchronous host<->device copies, pinned and pageable, and device to device."""
    n = sizes.copy_bytes
    size = f"{n >> 20} MiB"
    pinned, pageable = device.allocate_pinned(n), np.ones(n, np.uint8)
    first, second = device.allocate(n), device.allocate(n)
    calls = 10
    cases: list[tuple[str, Callable[[], None]]] = [
        ("host->device, pinned", lambda: first.copy_from(pinned)),
        ("device->host, pinned", lambda: first.copy_to(pinned)),
        ("host->device, pageable", lambda: first.copy_from(pageable)),
        ("device->host, pageable", lambda: first.copy_to(pageable)),
        ("device->device", lambda: second.copy_from(first)),
    ]
    for name, copy in cases:
        timing = per_call(copy, calls, device.synchronize)
        yield Row("copy", name, size, timing.median_us, gb_per_s(n, timing.median_us), "GB/s")


def ops(device: Any, sizes: Sizes) -> Iterator[Row]:
    """HipBackend ops: effective bandwidth (bytes read + written per call) of row and
    elementwise ops, and f32 matmul throughput."""
    from hip_runtime import HipBackend

    rows, cols = sizes.rows, sizes.cols
    rng = np.random.default_rng(0)
    with HipBackend(device) as backend:
        for dtype in ("float32", "bfloat16"):
            x32 = backend.from_numpy(rng.standard_normal((rows, cols), np.float32))
            x = backend.cast(x32, dtype)
            w = backend.cast(backend.from_numpy(np.ones(cols, np.float32)), dtype)
            for name, op, passes in _row_ops(backend, x, w, backend.empty((rows, cols), dtype)):
                timing = per_call(op, 20, backend.synchronize)
                moved = passes * x.nbytes
                rate = gb_per_s(moved, timing.median_us)
                size = f"{rows}x{cols}"
                yield Row("op", f"{name} {dtype}", size, timing.median_us, rate, "GB/s")
        n = sizes.matmul
        a = backend.from_numpy(rng.standard_normal((n, n), np.float32))
        c = backend.empty((n, n))
        try:
            timing = per_call(lambda: backend.matmul(a, a, out=c), 5, backend.synchronize)
        except Exception as error:  # e.g. a platform without hipBLAS
            yield Row("op", "matmul float32", f"{n}^3", skipped=f"{type(error).__name__}: {error}")
        else:
            tflops = 2 * n**3 / timing.median_us / 1e6
            yield Row("op", "matmul float32", f"{n}^3", timing.median_us, tflops, "TFLOP/s")


def _row_ops(backend: Any, x: Any, w: Any, out: Any) -> list[tuple[str, Callable[[], Any], int]]:
    """(name, call, tensors of x's size moved per call) of the ops `ops` times."""
    return [
        ("layernorm", lambda: backend.layernorm(x, w, w, out=out), 2),
        ("rmsnorm", lambda: backend.rmsnorm(x, w, out=out), 2),
        ("softmax", lambda: backend.softmax(x, out=out), 2),
        ("add", lambda: backend.add(x, x, out=out), 3),
    ]


def loading(device: Any, sizes: Sizes) -> Iterator[Row]:
    """ModelRuntime.load of a freshly written safetensors file (the page cache is warm: this
    is the loader's rate, not the disk's): the median of three loads after one warm-up."""
    from hip_backend.loading import load_checkpoint, model_runtime_class

    name = "ModelRuntime.load (safetensors)"
    size = f"{sizes.checkpoint_bytes >> 20} MiB"
    try:
        model_runtime_class()
    except ImportError as error:
        yield Row("load", name, size, skipped=str(error))
        return
    per_tensor = 1 << 20
    tensors = {
        f"layers.{i}.weight": np.full(per_tensor // 4, i, np.float32)
        for i in range(max(sizes.checkpoint_bytes // per_tensor, 1))
    }
    with tempfile.TemporaryDirectory(prefix="hip-backend-bench-") as folder:
        path = Path(folder) / "model.safetensors"
        from hip_runtime import save_safetensors

        save_safetensors(path, tensors)
        load_checkpoint(path, device)  # the first load pins the loader's staging chunks
        reports = sorted((load_checkpoint(path, device) for _ in range(3)),
                         key=lambda r: float(r["seconds"]))  # fmt: skip
        report = reports[1]  # the median of three
    yield Row("load", name, size, report["seconds"] * 1e6, report["gb_per_s"], "GB/s")


def collectives(device: Any, sizes: Sizes) -> Iterator[Row]:
    """With two or more devices: a sum all-reduce of f32 across every device of the platform,
    one process driving them (Communicator.all_for, each rank's call issued in one group, on a
    stream of its device). The rate is the bus bandwidth as nccl-tests reports it: bytes /
    time · 2(n-1)/n, what each device's links carry. No row with one device."""
    from hip_core import Communicator, Device

    count = Device.count()
    if count < 2:
        return
    devices = [Device(i) for i in range(count)]
    nbytes = sizes.all_reduce_bytes
    elements = nbytes // 4
    name = f"all_reduce float32 sum, {count} devices (bus bandwidth)"
    size = f"{nbytes >> 20} MiB"
    try:
        comms = Communicator.all_for(devices)
    except Exception as error:  # e.g. no NCCL / RCCL library on this machine
        yield Row("collectives", name, size, skipped=f"{type(error).__name__}: {error}")
        return
    buffers, streams = [], []
    try:
        for d in devices:
            with d:  # a synchronous copy runs on the current device's null stream
                buffers.append(d.allocate(nbytes))
                buffers[-1].copy_from(np.ones(elements, np.float32))
            streams.append(d.create_stream())

        def all_reduce() -> None:
            with Communicator.group():
                for comm, buffer, stream in zip(comms, buffers, streams, strict=True):
                    comm.all_reduce(buffer, buffer, elements, "float32", stream=stream)

        def sync() -> None:
            for stream in streams:
                stream.sync()

        timing = per_call(all_reduce, 5, sync)
        bus = gb_per_s(nbytes, timing.median_us) * 2 * (count - 1) / count
        yield Row("collectives", name, size, timing.median_us, bus, "GB/s")
    finally:
        for resource in (*comms, *streams, *buffers):
            resource.close()


GROUPS: dict[str, Callable[[Any, Sizes], Iterator[Row]]] = {
    "launch": launch,
    "copy": copies,
    "op": ops,
    "load": loading,
    "collectives": collectives,
}


def run_bench(device: Any, *, quick: bool = False, groups: tuple[str, ...] = ()) -> list[Row]:
    """Every row of the named groups (all of GROUPS when none), in order."""
    unknown = sorted(set(groups) - set(GROUPS))
    if unknown:
        raise ValueError(f"no benchmark group {', '.join(unknown)}; there are {', '.join(GROUPS)}")
    sizes = Sizes.of(quick)
    return [row for group, measure in GROUPS.items() if not groups or group in groups
            for row in measure(device, sizes)]  # fmt: skip


__all__ = [
    "GROUPS",
    "Row",
    "Sizes",
    "collectives",
    "copies",
    "launch",
    "loading",
    "ops",
    "run_bench",
]
