"""Sharded loading (issue 20): a checkpoint loaded over two devices vs one, beside torch.

The checkpoint is bench_load's (default 4 GiB: [4096, 8192] bf16 matrices and small vectors).
Sharded: even layers' matrices column-parallel (axis 0: a contiguous half per device), odd
layers' row-parallel (axis 1: every 16 KiB row split, the interleaved case), vectors
replicated. Warm page cache, each figure the median of --repeats runs; GB/s = file bytes /
wall time until every device's tensors are resident (a replicated vector counts once). Rows:
- hip_runtime, one device: `ModelRuntime.load(path, device=0)`;
- hip_runtime, sharded over the first two devices: `ModelRuntime.load(path, devices=[0, 1],
  shard=...)`, and replicated (`shard=None`: every byte to both, 2x the device bytes);
- anchors (torch): `safetensors.torch.load_file(path, device="cuda:0")` for one device, and for
  the sharded layout what a tensor-parallel torch user writes: `safe_open(...).get_slice(name)`
  sliced per device, then `.to("cuda:k")`.
The sharded result is checked against the file's bytes before anything is timed. Prints JSON
lines and a table with ratios; writes bench_sharded_load.jsonl / .md under --out.
--quick: a 128 MiB checkpoint, 2 runs (runs on the cpu platform, HIP_FFI_CPU_DEVICES=2).

    HIP_PLATFORM=nvidia NCCL_NVLS_ENABLE=0 python3 bench/bench_sharded_load.py [--quick]
        [--out DIR] [--gib 4] [--dir /tmp] [--repeats 3]
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

os.environ.setdefault("HIP_FFI_CPU_DEVICES", "2")  # the cpu platform's devices (--quick)

import numpy as np
from _harness import ROWS, parser, run, save
from bench_load import GiB, emit_rate, timed, warm, write_checkpoint

from hip_core import Device
from hip_runtime import ModelRuntime

SHARD = {
    "layers.*[02468].proj.weight": "column",
    "layers.*[13579].proj.weight": "row",
}


def check(runtime: ModelRuntime, path: Path) -> None:
    """Each device's parts of a column- and a row-parallel matrix equal the file's halves."""
    from safetensors.numpy import load_file

    stored = load_file(str(path))
    for name, axis in (("layers.0.proj.weight", 0), ("layers.1.proj.weight", 1)):
        if name not in stored:
            continue
        whole = stored[name].view(np.uint16)
        for k, part in enumerate(np.split(whole, 2, axis=axis)):
            got = runtime.shards[k][name].to_numpy().view(np.uint16)
            assert np.array_equal(got, part), f"{name} on device {k} differs from the file"


def load(path: Path, **placement: Any) -> None:
    runtime = ModelRuntime.load(path, **placement)
    runtime.close()


def main() -> None:
    flags = parser(__doc__)
    flags.add_argument("--gib", type=float, help="checkpoint size, GiB (4; --quick: 1/8)")
    flags.add_argument("--dir", default="/tmp", help="where the checkpoint is written")
    flags.add_argument("--repeats", type=int, help="runs per figure (3; --quick: 2)")
    args = flags.parse_args()
    if Device.count() < 2:
        raise SystemExit(f"sharded loading needs two devices; this platform has {Device.count()}")
    gib = args.gib or (1 / 8 if args.quick else 4.0)  # two layers at least: column and row
    repeats = args.repeats or (2 if args.quick else 3)
    path = Path(args.dir) / "bench_sharded_load.safetensors"
    write_checkpoint(path, gib)
    size = path.stat().st_size
    print(f"checkpoint: {path} {size / GiB:.2f} GiB; devices: {Device(0).name}, {Device(1).name}")
    try:
        with ModelRuntime.load(path, devices=[0, 1], shard=SHARD) as runtime:  # also a warm-up
            check(runtime, path)
        load(path, device=0)
        warm(path)
        one, two = "1 device", "2 devices, sharded (column / row)"
        emit_rate("load", one, "hip_runtime", size, timed(lambda: load(path, device=0), repeats))
        sharded = timed(lambda: load(path, devices=[0, 1], shard=SHARD), repeats)
        emit_rate("load", two, "hip_runtime", size, sharded)
        replicated = timed(lambda: load(path, devices=[0, 1]), repeats)
        emit_rate("load", "2 devices, replicated", "hip_runtime", size, replicated)
        run([("torch", lambda: torch_anchors(path, size, repeats, one, two))])
    finally:
        path.unlink()
    report(args.out)


def torch_anchors(path: Path, size: int, repeats: int, one: str, two: str) -> None:
    import safetensors.torch
    import torch
    from safetensors import safe_open

    def whole() -> None:
        tensors = safetensors.torch.load_file(str(path), device="cuda:0")
        torch.cuda.synchronize(0)
        del tensors

    def sliced() -> None:
        held: list[Any] = []
        with safe_open(str(path), framework="pt") as f:
            for name in f.keys():  # noqa: SIM118 - safe_open has no __iter__
                axis = 0 if name.endswith(("0.proj.weight", "2.proj.weight", "4.proj.weight",
                                           "6.proj.weight", "8.proj.weight")) else 1  # fmt: skip
                tensor = f.get_slice(name)
                if name.endswith("norm.weight"):
                    whole_tensor = tensor[:]
                    held += [whole_tensor.to(f"cuda:{k}") for k in range(2)]
                    continue
                rows, cols = tensor.get_shape()
                for k in range(2):
                    part = (tensor[k * rows // 2 : (k + 1) * rows // 2, :] if axis == 0
                            else tensor[:, k * cols // 2 : (k + 1) * cols // 2])  # fmt: skip
                    held.append(part.to(f"cuda:{k}"))
        for k in range(2):
            torch.cuda.synchronize(k)
        del held

    whole()
    emit_rate("load", one, "safetensors.torch load_file", size, timed(whole, repeats))
    sliced()
    emit_rate("load", two, "safetensors get_slice + .to", size, timed(sliced, repeats))


def report(out: Path) -> None:
    lines = ["| case | implementation | GB/s | ratio |", "|---|---|---:|---:|"]
    single = next((r for r in ROWS if r.get("impl") == "hip_runtime"), None)
    for r in ROWS:
        if "gb_per_s" not in r:
            lines.append(f"| skipped | {r['impl']} | | {r.get('reason', '')} |")
            continue
        peers = [p for p in ROWS if p.get("case") == r["case"] and p["impl"] != r["impl"]]
        ratios = [f"{r['gb_per_s'] / p['gb_per_s']:.2f}x {p['impl']}" for p in peers]
        if single is not None and r is not single and r["impl"] == "hip_runtime":
            ratios.append(f"{r['gb_per_s'] / single['gb_per_s']:.2f}x 1 device")
        shown = " / ".join(ratios) if r["impl"] == "hip_runtime" else ""
        lines.append(f"| {r['case']} | {r['impl']} | {r['gb_per_s']:.1f} | {shown} |")
    save(out, "bench_sharded_load", "\n".join(lines))


if __name__ == "__main__":
    main()
