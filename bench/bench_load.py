"""Checkpoint loading and large host uploads beside their anchors, in one run.

Measures on the current platform (the H200 through the nvidia platform):
- warm page cache: `ModelRuntime.load` of a safetensors checkpoint (default 4 GiB: bf16
  matrices plus small vectors, as a transformer's) against `safetensors.torch.load_file(path,
  device="cuda:0")`; GB/s = file bytes / wall time until the tensors are resident;
- cold cache (when /proc/sys/vm/drop_caches is writable): the same load against a parallel raw
  read of the file (8 threads of `preadv` into ordinary memory), each after dropping the cache;
- pageable `DeviceTensor.from_numpy` of 1 GiB against HIP's own pageable copy (`hipMemcpy`
  from the numpy array) and torch's `tensor.to("cuda")`.
Each figure is the median of --repeats runs. Prints JSON lines and a table; writes
bench_load.jsonl, bench_load.md and bench_load.png (when matplotlib imports) under $OUT if set,
else bench/results/.

    PYTHONPATH=... python3 bench/bench_load.py [--gib 4] [--dir /tmp] [--repeats 3] [--keep]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import ml_dtypes
import numpy as np

from hip_core import Device, DeviceBuffer
from hip_runtime import DeviceTensor, ModelRuntime, save_safetensors

MiB = 1 << 20
RECORDS: list[dict[str, Any]] = []


def emit(**row: Any) -> None:
    RECORDS.append(row)
    print(json.dumps(row), flush=True)


def write_checkpoint(path: Path, gib: float) -> int:
    """A safetensors file of 64 MiB bf16 matrices and 16 KiB vectors, about `gib` GiB; returns
    the bytes of tensor data. Random bits, different in every layer."""
    rng = np.random.default_rng(0)
    block = rng.integers(0, 2**16, size=(4096, 8192), dtype=np.uint16)  # 64 MiB of bf16 bits
    tensors = {}
    for layer in range(max(1, int(gib * 1024 / 64))):
        bits = block ^ np.uint16(layer)
        tensors[f"layers.{layer}.norm.weight"] = bits[0].view(ml_dtypes.bfloat16)
        tensors[f"layers.{layer}.proj.weight"] = bits.view(ml_dtypes.bfloat16)
    save_safetensors(path, tensors, {"format": "pt"})
    return sum(t.nbytes for t in tensors.values())


def drop_caches() -> bool:
    try:
        os.sync()
        with open("/proc/sys/vm/drop_caches", "w") as f:
            f.write("3\n")
        return True
    except OSError:
        return False


def warm(path: Path) -> None:
    with open(path, "rb") as f:
        while f.readinto(bytearray(64 * MiB)):
            pass


def parallel_read(path: Path, threads: int = 8, chunk: int = 16 * MiB) -> None:
    size = path.stat().st_size
    fd = os.open(path, os.O_RDONLY)
    offsets = iter(range(0, size, chunk))
    lock = threading.Lock()

    def reader() -> None:
        buffer = bytearray(chunk)
        while True:
            with lock:
                start = next(offsets, None)
            if start is None:
                return
            os.preadv(fd, [buffer], start)

    workers = [threading.Thread(target=reader) for _ in range(threads)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    os.close(fd)


def timed(fn: Callable[[], Any], repeats: int, before: Callable[[], Any] = lambda: None) -> float:
    times = []
    for _ in range(repeats):
        before()
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def ours(path: Path) -> None:
    runtime = ModelRuntime.load(path)
    runtime.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gib", type=float, default=4.0)
    parser.add_argument("--dir", default="/tmp")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--keep", action="store_true", help="keep the checkpoint file")
    args = parser.parse_args()
    path = Path(args.dir) / "bench_load.safetensors"
    nbytes = write_checkpoint(path, args.gib)
    size = path.stat().st_size
    gb = size / 1e9
    print(f"checkpoint: {path} {size / 2**30:.2f} GiB")

    try:
        import safetensors.torch
        import torch
    except ImportError:
        torch = None
    device = Device(0)
    ours(path)  # warm-up: kernels, pinned staging, CUDA context
    warm(path)
    t = timed(lambda: ours(path), args.repeats)
    emit(bench="load", case="warm", impl="hip_runtime", gb_per_s=gb / t, seconds=t)
    if torch is not None:

        def anchor() -> None:
            tensors = safetensors.torch.load_file(str(path), device="cuda:0")
            torch.cuda.synchronize()
            del tensors

        anchor()
        t = timed(anchor, args.repeats)
        emit(bench="load", case="warm", impl="safetensors.torch", gb_per_s=gb / t, seconds=t)
    if drop_caches():
        t = timed(lambda: parallel_read(path), args.repeats, drop_caches)
        emit(
            bench="load",
            case="cold",
            impl="raw parallel read (8 threads)",
            gb_per_s=gb / t,
            seconds=t,
        )
        t = timed(lambda: ours(path), args.repeats, drop_caches)
        emit(bench="load", case="cold", impl="hip_runtime", gb_per_s=gb / t, seconds=t)
    else:
        print("cold cache: /proc/sys/vm/drop_caches is not writable here; skipped")

    host = np.random.default_rng(1).standard_normal(2**28, dtype=np.float32)  # 1 GiB
    target = DeviceBuffer.allocate(device, host.nbytes)
    t = timed(lambda: target.copy_from(host), args.repeats)
    emit(
        bench="upload",
        case="pageable 1 GiB",
        impl="hipMemcpy (pageable)",
        gb_per_s=host.nbytes / t / 1e9,
        seconds=t,
    )

    def upload() -> None:
        tensor = DeviceTensor.from_numpy(host, device=device)
        tensor.stream.sync()
        tensor.buffer.close()

    upload()
    t = timed(upload, args.repeats)
    emit(
        bench="upload",
        case="pageable 1 GiB",
        impl="DeviceTensor.from_numpy",
        gb_per_s=host.nbytes / t / 1e9,
        seconds=t,
    )
    if torch is not None:
        pinned_source = torch.from_numpy(host)
        t = timed(lambda: (pinned_source.to("cuda:0"), torch.cuda.synchronize()), args.repeats)
        emit(
            bench="upload",
            case="pageable 1 GiB",
            impl="torch .to('cuda')",
            gb_per_s=host.nbytes / t / 1e9,
            seconds=t,
        )
    if not args.keep:
        path.unlink()
    report(nbytes)


def report(nbytes: int) -> None:
    out = Path(os.environ.get("OUT") or Path(__file__).parent / "results")
    out.mkdir(parents=True, exist_ok=True)
    (out / "bench_load.jsonl").write_text("".join(json.dumps(r) + "\n" for r in RECORDS))
    lines = ["| bench | case | implementation | GB/s | ratio |", "|---|---|---|---:|---:|"]
    for r in RECORDS:
        peers = [p for p in RECORDS if p["case"] == r["case"] and p["impl"] != r["impl"]]
        ratio = (
            ""
            if r["impl"] != "hip_runtime" and r["impl"] != "DeviceTensor.from_numpy"
            else (" / ".join(f"{r['gb_per_s'] / p['gb_per_s']:.2f}x {p['impl']}" for p in peers))
        )
        lines.append(
            f"| {r['bench']} | {r['case']} | {r['impl']} | {r['gb_per_s']:.1f} | {ratio} |"
        )
    table = "\n".join(lines)
    print(table)
    (out / "bench_load.md").write_text(table + "\n")
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return
    fig, ax = plt.subplots(figsize=(9, 4))
    labels = [f"{r['case']}\n{r['impl']}" for r in RECORDS]
    colors = [
        "tab:red" if r["impl"] in ("hip_runtime", "DeviceTensor.from_numpy") else "tab:gray"
        for r in RECORDS
    ]
    ax.barh(labels, [r["gb_per_s"] for r in RECORDS], color=colors)
    ax.set_xlabel("GB/s (file or array bytes / wall time until resident on the device)")
    ax.set_title(f"Loading {nbytes / 2**30:.1f} GiB of safetensors and 1 GiB uploads (red: ours)")
    ax.invert_yaxis()
    fig.tight_layout()
    fig.savefig(out / "bench_load.png", dpi=120)


if __name__ == "__main__":
    main()
