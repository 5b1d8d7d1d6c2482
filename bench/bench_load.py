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
bench_load.jsonl, bench_load.md and bench_load.png (when matplotlib imports) under --out.
--quick: a 64 MiB checkpoint and 64 MiB uploads, 2 runs each.

    PYTHONPATH=... python3 bench/bench_load.py [--quick] [--out DIR] [--gib 4] [--dir /tmp]
        [--repeats 3] [--keep]
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import ml_dtypes
import numpy as np
from _harness import ROWS, emit, parser, pyplot, save, seconds

from hip_core import Device, DeviceBuffer
from hip_runtime import DeviceTensor, ModelRuntime, save_safetensors

MiB = 1 << 20
GiB = 1 << 30


def emit_rate(bench: str, case: str, impl: str, nbytes: int, time_s: float) -> None:
    """One row: `nbytes` in `time_s` seconds as GB/s (1e9 bytes per second)."""
    emit(bench=bench, case=case, impl=impl, gb_per_s=nbytes / time_s / 1e9, seconds=time_s)


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


def timed(fn: Callable[[], Any], repeats: int, before: Callable[[], Any] | None = None) -> float:
    """Median seconds of `fn` over `repeats`, no warm-up (the caller warms up where it should);
    `before` runs untimed before each (dropping the page cache)."""
    return seconds(fn, repeats, warmup=0, before=before)


def ours(path: Path) -> None:
    runtime = ModelRuntime.load(path)
    runtime.close()


def main() -> None:
    flags = parser(__doc__)
    flags.add_argument("--gib", type=float, help="checkpoint size, GiB (4; --quick: 1/16)")
    flags.add_argument("--dir", default="/tmp", help="where the checkpoint is written")
    flags.add_argument("--repeats", type=int, help="runs per figure (3; --quick: 2)")
    flags.add_argument("--keep", action="store_true", help="keep the checkpoint file")
    args = flags.parse_args()
    gib = args.gib or (1 / 16 if args.quick else 4.0)
    repeats = args.repeats or (2 if args.quick else 3)
    upload_bytes = 64 * MiB if args.quick else GiB
    path = Path(args.dir) / "bench_load.safetensors"
    nbytes = write_checkpoint(path, gib)
    size = path.stat().st_size
    print(f"checkpoint: {path} {size / GiB:.2f} GiB")

    try:
        import safetensors.torch
        import torch
    except ImportError:
        torch = None
    device = Device(0)
    ours(path)  # warm-up: kernels, pinned staging, CUDA context
    warm(path)
    emit_rate("load", "warm", "hip_runtime", size, timed(lambda: ours(path), repeats))
    if torch is not None:

        def anchor() -> None:
            tensors = safetensors.torch.load_file(str(path), device="cuda:0")
            torch.cuda.synchronize()
            del tensors

        anchor()
        emit_rate("load", "warm", "safetensors.torch", size, timed(anchor, repeats))
    if drop_caches():
        t = timed(lambda: parallel_read(path), repeats, drop_caches)
        emit_rate("load", "cold", "raw parallel read (8 threads)", size, t)
        emit_rate(
            "load", "cold", "hip_runtime", size, timed(lambda: ours(path), repeats, drop_caches)
        )
    else:
        print("cold cache: /proc/sys/vm/drop_caches is not writable here; skipped")

    host = np.random.default_rng(1).standard_normal(upload_bytes // 4, dtype=np.float32)
    upload = _size(host.nbytes)
    case = f"pageable {upload}"
    target = DeviceBuffer.allocate(device, host.nbytes)
    emit_rate("upload", case, "hipMemcpy (pageable)", host.nbytes,
              timed(lambda: target.copy_from(host), repeats))  # fmt: skip

    def from_numpy() -> None:
        tensor = DeviceTensor.from_numpy(host, device=device)
        tensor.stream.sync()
        tensor.buffer.close()

    from_numpy()
    emit_rate("upload", case, "DeviceTensor.from_numpy", host.nbytes, timed(from_numpy, repeats))
    if torch is not None:
        pinned_source = torch.from_numpy(host)
        t = timed(lambda: (pinned_source.to("cuda:0"), torch.cuda.synchronize()), repeats)
        emit_rate("upload", case, "torch .to('cuda')", host.nbytes, t)
    if not args.keep:
        path.unlink()
    report(args.out, nbytes, upload)


def _size(nbytes: int) -> str:
    return f"{nbytes / GiB:g} GiB" if nbytes >= GiB else f"{nbytes // MiB} MiB"


def report(out: Path, nbytes: int, upload: str) -> None:
    lines = ["| bench | case | implementation | GB/s | ratio |", "|---|---|---|---:|---:|"]
    for r in ROWS:
        peers = [p for p in ROWS if p["case"] == r["case"] and p["impl"] != r["impl"]]
        ratio = (
            ""
            if r["impl"] != "hip_runtime" and r["impl"] != "DeviceTensor.from_numpy"
            else (" / ".join(f"{r['gb_per_s'] / p['gb_per_s']:.2f}x {p['impl']}" for p in peers))
        )
        lines.append(
            f"| {r['bench']} | {r['case']} | {r['impl']} | {r['gb_per_s']:.1f} | {ratio} |"
        )
    save(out, "bench_load", "\n".join(lines))
    plt = pyplot()
    if plt is None:
        return
    fig, ax = plt.subplots(figsize=(9, 4))
    labels = [f"{r['case']}\n{r['impl']}" for r in ROWS]
    colors = [
        "tab:red" if r["impl"] in ("hip_runtime", "DeviceTensor.from_numpy") else "tab:gray"
        for r in ROWS
    ]
    ax.barh(labels, [r["gb_per_s"] for r in ROWS], color=colors)
    ax.set_xlabel("GB/s (file or array bytes / wall time until resident on the device)")
    ax.set_title(f"Loading {nbytes / GiB:.1f} GiB of safetensors and {upload} uploads (red: ours)")
    ax.invert_yaxis()
    fig.tight_layout()
    fig.savefig(out / "bench_load.png", dpi=120)


if __name__ == "__main__":
    main()
