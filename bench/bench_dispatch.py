"""Host cost per op (issue 15): HipBackend beside torch eager and CuPy, and hip-core's event
creation and small copies beside cuda.core, in one run.

Ops on small tensors (`--size`, 64: 64 x 64 f32), where the kernels take a few µs and the
time per call is the host's cost of issuing it: add (a new output, and `out=`), mul by a
broadcast row (a new output), mul by a Python scalar, where(mask, x, scalar), layernorm (new
output and `out=`), softmax, matmul 64^3 (new output and `out=`), embedding (64 int32 ids
into a 1000 x 64 table) and cast (f32 -> f16, which CuPy has too). Per call = host wall time
of back-to-back calls then one synchronize, divided by the calls (hip_backend.bench.per_call
through _harness: median of 7 repeats after a warm-up). CuPy has no layernorm: that row is
left empty, never composed.

hip-core vs cuda.core: event creation + destruction (timing off, as cuda.core's default), and
synchronous 4 KiB host<->device copies from pinned memory (cuda.core: copy_to on a stream
then its sync). Goal of issue 15: every ratio <= 1.0.

An anchor that is not installed or cannot run here (torch, CuPy, cuda.core need the nvidia
platform) is a `skipped` row, with its reason printed. Prints JSON lines, then a table;
writes bench_dispatch.jsonl and bench_dispatch.md under --out.

`--profile C`: where each HipBackend op's host time goes, for rows above 1.0x: C calls of each
under cProfile after the timing, the functions of most own time as `profile` rows (µs per op
call, inflated by the profiler itself: compare the functions, not the totals).

    python bench/bench_dispatch.py [--quick] [--out DIR] [--size N] [--calls C] [--profile C]
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
from _harness import ROWS, cuda_core, emit, median_us, parser, pyplot, run, save

from hip_core import hip_api
from hip_runtime import HipBackend

VOCAB = 1000
COPY_BYTES = 4096
OBJECT_CALLS = 2000
#: (m, k, n) of the device-time rows: 64³ (the small-product limit), a GEMV-like row of the
#: same work but deeper than the kernel takes (so hipBLAS's by default), two products at the
#: kernel's depth limit (128), a narrow result and a smaller square.
SMALL_PRODUCTS = (
    (64, 64, 64), (1, 512, 512), (16, 128, 128), (128, 128, 16), (512, 64, 8), (32, 32, 32),
)  # fmt: skip
PROFILED_FUNCTIONS = 8


def host_arrays(n: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(15)
    return {
        "x": rng.standard_normal((n, n)).astype(np.float32),
        "y": rng.standard_normal((n, n)).astype(np.float32),
        "row": rng.standard_normal(n).astype(np.float32),
        "w": rng.standard_normal(n).astype(np.float32),
        "b": rng.standard_normal(n).astype(np.float32),
        "table": rng.standard_normal((VOCAB, n)).astype(np.float32),
        "ids": rng.integers(0, VOCAB, n).astype(np.int32),
        "mask": rng.standard_normal((n, n)) > 0,
    }


def _discard(fn: Callable[[], Any]) -> Callable[[], None]:
    """`fn` returning nothing (the timing loop reads a returned value as a status)."""

    def call() -> None:
        fn()

    return call


def time_ops(impl: str, ops: dict[str, Callable[[], Any]], sync: Callable[[], Any], calls: int,
             **extra: Any) -> None:  # fmt: skip
    for op, fn in ops.items():
        call = _discard(fn)
        try:
            call()  # compiles, plans, allocates once outside the warm-up's count
            sync()
            emit(bench="op", op=op, impl=impl, us=median_us(call, calls, sync), **extra)
        except Exception as error:  # one op that cannot run here leaves the others' rows
            emit(bench="skipped", impl=f"{impl} {op}", reason=f"{type(error).__name__}: {error}")


def profile_ops(ops: dict[str, Callable[[], Any]], sync: Callable[[], Any], calls: int) -> None:
    """`profile` rows: each op's PROFILED_FUNCTIONS functions of most own time over `calls`
    calls under cProfile (µs per op call)."""
    import cProfile
    import pstats

    for op, fn in ops.items():
        profiler = cProfile.Profile()
        profiler.enable()
        for _ in range(calls):
            fn()
        sync()
        profiler.disable()
        stats = pstats.Stats(profiler).stats  # function -> (calls, calls, own, total, callers)
        rows = sorted(stats.items(), key=lambda item: -item[1][2])[:PROFILED_FUNCTIONS]
        for (path, line, name), (_, count, own, total, _) in rows:
            where = f"{path.rsplit('/', 1)[-1]}:{line}({name})"
            emit(bench="profile", op=op, function=where, calls_per_op=count / calls,
                 own_us=own / calls * 1e6, total_us=total / calls * 1e6)  # fmt: skip


def bench_hip(arrays: dict[str, np.ndarray], calls: int, profile: int = 0) -> None:
    backend = HipBackend()
    blas = HipBackend(small_gemm=0)  # every product through hipBLAS
    t = {name: backend.from_numpy(a) for name, a in arrays.items()}
    x, y, w, b = t["x"], t["y"], t["w"], t["b"]
    out = backend.empty(x.shape, x.dtype)
    ops: dict[str, Callable[[], Any]] = {
        "add": lambda: backend.add(x, y),
        "add out=": lambda: backend.add(x, y, out=out),
        "mul broadcast row": lambda: backend.mul(x, t["row"]),
        "mul by scalar": lambda: backend.mul(x, 0.5),
        "where scalar": lambda: backend.where(t["mask"], x, -1e9),
        "layernorm": lambda: backend.layernorm(x, w, b),
        "layernorm out=": lambda: backend.layernorm(x, w, b, out=out),
        "softmax": lambda: backend.softmax(x),
        "matmul": lambda: backend.matmul(x, y),
        "matmul out=": lambda: backend.matmul(x, y, out=out),
        "matmul [hipBLAS]": lambda: blas.matmul(x, y),
        "matmul out= [hipBLAS]": lambda: blas.matmul(x, y, out=out),
        "embedding": lambda: backend.embedding(t["ids"], t["table"]),
        "cast f32->f16": lambda: backend.cast(x, np.float16),
    }

    def sync() -> None:  # (both backends' streams: the [hipBLAS] rows queue on blas's)
        backend.synchronize()
        blas.synchronize()

    time_ops("hip_runtime", ops, sync, calls, platform=hip_api().platform)
    if profile:
        profile_ops(ops, sync, profile)
    blas.close()
    backend.close()


def bench_small_products(per_graph: int = 100) -> None:
    """Device time of small products: `per_graph` matmuls (out=) of one shape captured into
    a graph, replayed, µs per product (no host cost in it). What HipBackend queues by
    default (the small-product kernel of hip_runtime.libraries.small_gemm within its limits, hipBLAS
    beyond) beside hipBLAS alone."""
    from hip_core import capture
    from hip_runtime.libraries.small_gemm import SMALL_GEMM_WORK

    rng = np.random.default_rng(15)
    for engine, work in (("default", SMALL_GEMM_WORK), ("hipBLAS", 0)):
        backend = HipBackend(small_gemm=work)
        for m, k, n in SMALL_PRODUCTS:
            a = backend.from_numpy(rng.standard_normal((m, k)).astype(np.float32))
            b = backend.from_numpy(rng.standard_normal((k, n)).astype(np.float32))
            out = backend.matmul(a, b)
            with capture(backend.stream) as captured:
                for _ in range(per_graph):
                    backend.matmul(a, b, out=out)
            graph = captured.graph.instantiate()  # type: ignore[union-attr]
            us = median_us(lambda g=graph, s=backend.stream: g.launch(s), 20, backend.synchronize)
            emit(bench="device", op=f"{m}x{k}x{n}", impl=engine, us=us / per_graph)
        backend.close()


def _needs_nvidia(anchor: str) -> None:
    platform = hip_api().platform
    if platform != "nvidia":
        raise RuntimeError(f"{anchor} runs on CUDA only; this platform is {platform}")


def bench_torch(arrays: dict[str, np.ndarray], calls: int) -> None:
    _needs_nvidia("torch")
    try:
        import torch
    except ImportError:
        raise RuntimeError("torch is not installed") from None
    functional = torch.nn.functional
    t = {name: torch.from_numpy(a).cuda() for name, a in arrays.items()}
    x, y, w, b = t["x"], t["y"], t["w"], t["b"]
    ids = t["ids"]
    out = torch.empty_like(x)
    shape = (x.shape[-1],)
    ops: dict[str, Callable[[], Any]] = {
        "add": lambda: torch.add(x, y),
        "add out=": lambda: torch.add(x, y, out=out),
        "mul broadcast row": lambda: torch.mul(x, t["row"]),
        "mul by scalar": lambda: torch.mul(x, 0.5),
        "where scalar": lambda: torch.where(t["mask"], x, -1e9),
        "layernorm": lambda: functional.layer_norm(x, shape, w, b),
        # torch's layer_norm has no out=: it allocates in both rows (as in issue 15's table)
        "layernorm out=": lambda: functional.layer_norm(x, shape, w, b),
        "softmax": lambda: torch.softmax(x, -1),
        "matmul": lambda: torch.matmul(x, y),
        "matmul out=": lambda: torch.matmul(x, y, out=out),
        "embedding": lambda: functional.embedding(ids, t["table"]),
        "cast f32->f16": lambda: x.to(torch.float16),
    }
    with torch.inference_mode():
        time_ops("torch", ops, torch.cuda.synchronize, calls)


def bench_cupy(arrays: dict[str, np.ndarray], calls: int) -> None:
    _needs_nvidia("CuPy")
    try:
        import cupy as cp
        from cupyx.scipy.special import softmax
    except ImportError:
        raise RuntimeError("CuPy is not installed") from None
    t = {name: cp.asarray(a) for name, a in arrays.items()}
    x, y = t["x"], t["y"]
    out = cp.empty_like(x)
    ops: dict[str, Callable[[], Any]] = {
        "add": lambda: cp.add(x, y),
        "add out=": lambda: cp.add(x, y, out=out),
        "mul broadcast row": lambda: cp.multiply(x, t["row"]),
        "mul by scalar": lambda: cp.multiply(x, 0.5),
        "where scalar": lambda: cp.where(t["mask"], x, -1e9),
        "softmax": lambda: softmax(x, axis=-1),
        "matmul": lambda: cp.matmul(x, y),
        "matmul out=": lambda: cp.matmul(x, y, out=out),
        "embedding": lambda: cp.take(t["table"], t["ids"], axis=0),
        "cast f32->f16": lambda: x.astype(cp.float16),
    }
    time_ops("cupy", ops, cp.cuda.get_current_stream().synchronize, calls)


def bench_hip_core() -> None:
    from hip_core import Device

    device = Device(0)
    stream = device.create_stream()
    emit(bench="core", op="event create", impl="hip_core",
         us=median_us(lambda: device.create_event(timing=False).close(), OBJECT_CALLS,
                      stream.sync))  # fmt: skip
    pinned, buffer = device.allocate_pinned(COPY_BYTES), device.allocate(COPY_BYTES)
    for op, copy in (("4 KiB H2D", buffer.copy_from), ("4 KiB D2H", buffer.copy_to)):
        us = median_us(lambda c=copy: c(pinned), OBJECT_CALLS, stream.sync)
        emit(bench="core", op=op, impl="hip_core", us=us)
    bench_bare_binding(device, pinned, buffer, stream.sync)


def bench_bare_binding(device: Any, pinned: Any, buffer: Any, sync: Callable[[], Any]) -> None:
    """The same rows as the bare native calls hip-core makes, through cffi from Python and
    nothing else (`HipApi.fast`; no checks, no objects): the floor of any binding of cffi's
    ABI mode, which the gap from it to cuda.core's Cython is."""
    from hip_ffi.constants import (
        EVENT_DISABLE_TIMING,
        MEMCPY_DEVICE_TO_HOST,
        MEMCPY_HOST_TO_DEVICE,
    )

    api = hip_api()
    create, destroy = api.fast("hipEventCreateWithFlags"), api.fast("hipEventDestroy")
    memcpy = api.fast("hipMemcpy")
    cell = api.ffi.new("hipEvent_t*")
    host, dev = pinned._void(), buffer._void()

    def event() -> None:
        create(cell, EVENT_DISABLE_TIMING)
        destroy(cell[0])

    with device:
        emit(bench="core", op="event create", impl="bare cffi",
             us=median_us(event, OBJECT_CALLS, sync))  # fmt: skip
        for op, args in (
            ("4 KiB H2D", (dev, host, COPY_BYTES, MEMCPY_HOST_TO_DEVICE)),
            ("4 KiB D2H", (host, dev, COPY_BYTES, MEMCPY_DEVICE_TO_HOST)),
        ):
            us = median_us(lambda a=args: memcpy(*a), OBJECT_CALLS, sync)
            emit(bench="core", op=op, impl="bare cffi", us=us)


def bench_cuda_core() -> None:
    _needs_nvidia("cuda.core")
    try:
        cc = cuda_core()
    except ImportError:
        raise RuntimeError("cuda.core is not installed") from None
    device = cc.Device()
    device.set_current()
    stream = device.create_stream()
    emit(bench="core", op="event create", impl="cuda.core",
         us=median_us(lambda: device.create_event().close(), OBJECT_CALLS,
                      stream.sync))  # fmt: skip
    pinned = cc.LegacyPinnedMemoryResource().allocate(COPY_BYTES)
    buffer = device.allocate(COPY_BYTES, stream=stream)
    for op, (src, dst) in (("4 KiB H2D", (pinned, buffer)), ("4 KiB D2H", (buffer, pinned))):

        def copy(s: Any = src, d: Any = dst) -> None:
            s.copy_to(d, stream=stream)
            stream.sync()

        emit(bench="core", op=op, impl="cuda.core", us=median_us(copy, OBJECT_CALLS, stream.sync))


def table() -> str:
    cells: dict[tuple[str, str], dict[str, float]] = {}
    for row in ROWS:
        if row["bench"] in ("op", "core", "device"):
            cells.setdefault((row["bench"], row["op"]), {})[row["impl"]] = row["us"]
    lines = [
        "| op | hip µs | torch µs | CuPy µs | hip / torch | hip / CuPy |",
        "| --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    core = ["", "| hip-core | hip_core µs | bare cffi µs | cuda.core µs | hip_core / cuda.core |",
            "| --- | ---: | ---: | ---: | ---: |"]  # fmt: skip
    device = ["", "| product m×k×n, device µs | default | hipBLAS | default / hipBLAS |",
              "| --- | ---: | ---: | ---: |"]  # fmt: skip

    def us(value: float | None) -> str:
        return f"{value:.2f}" if value else "-"

    def ratio(a: float | None, b: float | None) -> str:
        return f"{a / b:.2f}" if a and b else "-"

    for (bench, op), impls in cells.items():
        if bench == "op":
            # ("matmul [hipBLAS]": another path of hip's "matmul", beside the same anchors)
            anchors = cells.get(("op", op.split(" [")[0]), impls)
            hip, torch, cupy = impls.get("hip_runtime"), anchors.get("torch"), anchors.get("cupy")
            lines.append(f"| {op} | {us(hip)} | {us(torch)} | {us(cupy)} | "
                         f"{ratio(hip, torch)} | {ratio(hip, cupy)} |")  # fmt: skip
        elif bench == "core":
            ours, bare = impls.get("hip_core"), impls.get("bare cffi")
            anchor = impls.get("cuda.core")
            core.append(f"| {op} | {us(ours)} | {us(bare)} | {us(anchor)} | "
                        f"{ratio(ours, anchor)} |")  # fmt: skip
        else:
            default, blas = impls.get("default"), impls.get("hipBLAS")
            device.append(f"| {op} | {us(default)} | {us(blas)} | {ratio(default, blas)} |")
    lines += core + device
    profiled = [r for r in ROWS if r["bench"] == "profile"]
    if profiled:
        lines += ["", "| op | function (cProfile) | calls per op | own µs | total µs |",
                  "| --- | --- | ---: | ---: | ---: |"]  # fmt: skip
        lines += [f"| {r['op']} | {r['function']} | {r['calls_per_op']:g} | {r['own_us']:.2f} | "
                  f"{r['total_us']:.2f} |" for r in profiled]  # fmt: skip
    lines += [f"skipped {r['impl']}: {r['reason']}" for r in ROWS if r["bench"] == "skipped"]
    return "\n".join(lines)


def plot(path: Path) -> None:
    """Bars of each row's ratio to its anchor (hip / torch eager, hip-core / cuda.core), with
    issue 15's goal (1.0) as a line."""
    plt = pyplot()
    if plt is None:
        return
    us = {(r["bench"], r["op"], r["impl"]): r["us"] for r in ROWS if r["bench"] in ("op", "core")}
    bars = []
    for (bench, op, impl), value in us.items():
        if (bench, impl) in (("op", "hip_runtime"), ("core", "hip_core")):
            anchor = us.get((bench, op.split(" [")[0], "torch" if bench == "op" else "cuda.core"))
            if anchor:
                bars.append((op, value / anchor))
    if not bars:
        return
    fig, ax = plt.subplots(figsize=(8, 0.35 * len(bars) + 1.5))
    ax.barh(range(len(bars)), [ratio for _, ratio in bars])
    ax.axvline(1.0, color="k", linestyle="--", label="goal: the anchor's time")
    ax.set_yticks(range(len(bars)), [op for op, _ in bars])
    ax.invert_yaxis()
    ax.set_xlabel("host time per call / anchor's (torch eager; cuda.core for hip-core rows)")
    ax.legend(loc="lower right")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    print(f"plot: {path}")


def main() -> None:
    flags = parser(__doc__)
    flags.add_argument("--size", type=int, default=64, help="N of the N x N operands (64)")
    flags.add_argument("--calls", type=int, default=None, help="calls per timed sample")
    flags.add_argument("--profile", type=int, default=0, metavar="C",
                       help="profile C calls of each HipBackend op (0: no profile)")  # fmt: skip
    args = flags.parse_args()
    calls = args.calls or (200 if args.quick else 5000)
    arrays = host_arrays(args.size)
    run(
        (
            ("hip_runtime", lambda: bench_hip(arrays, calls, args.profile)),
            ("small products", bench_small_products),
            ("torch", lambda: bench_torch(arrays, calls)),
            ("cupy", lambda: bench_cupy(arrays, calls)),
            ("hip_core", bench_hip_core),
            ("cuda.core", bench_cuda_core),
        )
    )
    save(args.out, "bench_dispatch", table())
    plot(args.out / "bench_dispatch.png")


if __name__ == "__main__":
    main()
