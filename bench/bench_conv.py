"""Convolutions, pooling and group_norm beside torch (cuDNN), in one run (bf16).

- conv: ResNet-50's convolutions at batch 32 (the 7x7 stride-2 stem, the bottlenecks' 1x1 and
  3x3 at each stage, the stride-2 3x3 and 1x1 downsampling ones) and Whisper-base's two conv1d
  layers (80→512 and 512→512 stride 2, window 3, over 3000 frames, batch 8), NCHW and NHWC,
  through the backend's DNN library (`backend._dnn()`: cuDNN here; "unavailable" when the
  backend has none) and through the portable kernels (im2col + hipBLAS, depthwise direct),
  beside torch.nn.functional.conv2d / conv1d (cuDNN, `cudnn.benchmark` on: its best
  algorithm), in TFLOP/s; `vs_torch` = torch ms / ours.
- pooling (ResNet's 3x3 stride-2 max pool on [32, 64, 112, 112]) and group_norm (32 groups on
  [8, 512, 64, 64]) in GB/s read + written, beside torch and the same run's copy rate: that of
  a 256 MiB copy (`vs_copy`), and that of a copy moving the op's own bytes (`vs_copy_same`: a
  copy of half of them, read + written), whose launch and tail weigh as much as the op's.
Device time per call with events (bench_ops' method). Writes bench_conv.jsonl and .md under
--out.

    PYTHONPATH=... python3 bench/bench_conv.py [--quick] [--out DIR] [--repeats R]
        [--only conv,pool,group_norm]
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import ml_dtypes
import numpy as np
from _harness import ROWS, emit, parser, save
from bench_ops import HipTimer, TorchTimer, bench_copy, import_torch, time_ms

from hip_core import hip_api
from hip_runtime import DeviceTensor, HipBackend

# (name, N, C, H, W, K, R, S, stride, padding); 1-D ones have H = R = 1.
RESNET = (
    ("resnet stem 7x7/2", 32, 3, 224, 224, 64, 7, 7, 2, 3),
    ("resnet l1 1x1 64-64", 32, 64, 56, 56, 64, 1, 1, 1, 0),
    ("resnet l1 3x3 64-64", 32, 64, 56, 56, 64, 3, 3, 1, 1),
    ("resnet l1 1x1 64-256", 32, 64, 56, 56, 256, 1, 1, 1, 0),
    ("resnet l2 3x3/2 128-128", 32, 128, 56, 56, 128, 3, 3, 2, 1),
    ("resnet l2 1x1/2 256-512", 32, 256, 56, 56, 512, 1, 1, 2, 0),
    ("resnet l2 3x3 128-128", 32, 128, 28, 28, 128, 3, 3, 1, 1),
    ("resnet l3 1x1 1024-256", 32, 1024, 14, 14, 256, 1, 1, 1, 0),
    ("resnet l3 3x3 256-256", 32, 256, 14, 14, 256, 3, 3, 1, 1),
    ("resnet l4 3x3 512-512", 32, 512, 7, 7, 512, 3, 3, 1, 1),
    ("resnet l4 1x1 512-2048", 32, 512, 7, 7, 2048, 1, 1, 1, 0),
)
WHISPER = (
    ("whisper conv1 80-512 k3", 8, 80, 1, 3000, 512, 1, 3, 1, 1),
    ("whisper conv2 512-512 k3/2", 8, 512, 1, 3000, 512, 1, 3, 2, 1),
)
QUICK = (
    ("quick 3x3 32-32", 4, 32, 28, 28, 32, 3, 3, 1, 1),
    ("quick conv1d 80-128 k3", 2, 80, 1, 300, 128, 1, 3, 1, 1),
)
POOL = (32, 64, 112, 112)
GROUP_NORM = (8, 512, 64, 64, 32)


def conv_case(
    backend: HipBackend, torch: Any, case: tuple[Any, ...], channels_last: bool, repeats: int
) -> None:
    name, n, c, h, w, k, r, s, stride, pad = case
    one_d = h == 1 and r == 1
    layout = "NHWC" if channels_last else "NCHW"
    ho = 1 if one_d else (h + 2 * pad - r) // stride + 1
    wo = (w + 2 * pad - s) // stride + 1
    flops = 2.0 * n * k * ho * wo * c * r * s
    x, wt, tx, tw = inputs(backend, torch, (n, c, h, w), (k, c, r, s), channels_last, one_d)
    if one_d:
        run: Callable[[], Any] = lambda: backend.conv1d(  # noqa: E731
            x, wt, None, stride, pad, channels_last=channels_last, out=y
        )
        y = backend.conv1d(x, wt, None, stride, pad, channels_last=channels_last)
    else:
        run = lambda: backend.conv2d(  # noqa: E731
            x, wt, None, stride, pad, channels_last=channels_last, out=y
        )
        y = backend.conv2d(x, wt, None, stride, pad, channels_last=channels_last)
    torch_ms = None
    if torch is not None:
        f = torch.nn.functional.conv1d if one_d else torch.nn.functional.conv2d
        timer = TorchTimer(torch)
        torch_ms = time_ms(lambda: f(tx, tw, None, stride, pad), timer.start, timer.stop, repeats)
        emit(bench="conv", case=name, layout=layout, impl="torch", ms=torch_ms,
             tflops=flops / torch_ms / 1e9)  # fmt: skip
    for impl, ms in both_paths(backend, run, repeats):
        if ms is None:
            emit(bench="skipped", case=name, layout=layout, impl=impl,
                 reason="no DNN library on this backend")  # fmt: skip
            continue
        row = {"bench": "conv", "case": name, "layout": layout, "impl": impl, "ms": ms,
               "tflops": flops / ms / 1e9}  # fmt: skip
        if torch_ms is not None:
            row["vs_torch"] = torch_ms / ms
        emit(**row)


def both_paths(
    backend: HipBackend, run: Callable[[], Any], repeats: int
) -> list[tuple[str, float | None]]:
    """(impl, ms per call) of `run` through the DNN library (None when the backend has none)
    and through the portable kernels."""
    library = backend._dnn() if hasattr(backend, "_dnn") else None
    found: list[tuple[str, float | None]] = []
    for impl, use_library in (("hip library", True), ("hip portable", False)):
        if use_library and library is None:
            found.append((impl, None))
            continue
        backend._conv_use_library = use_library
        timer = HipTimer(backend)
        try:
            found.append((impl, time_ms(run, timer.start, timer.stop, repeats)))
        finally:
            backend._conv_use_library = True
    return found


def inputs(
    backend: HipBackend, torch: Any, xs: tuple[int, ...], ws: tuple[int, ...],
    channels_last: bool, one_d: bool,
) -> tuple[DeviceTensor, DeviceTensor, Any, Any]:  # fmt: skip
    """x and weight as DeviceTensors in the op's layout, and torch's views of the same memory
    (channels_last memory format for NHWC) when torch is here."""
    order = (0, 2, 3, 1) if channels_last else (0, 1, 2, 3)
    stored = [tuple(shape[i] for i in order) for shape in (xs, ws)]
    if one_d:  # [N, C, L] / [N, L, C]: the unit H axis dropped
        stored = [tuple(d for i, d in enumerate(shape) if i != (1 if channels_last else 2))
                  for shape in stored]  # fmt: skip
    if torch is None:
        rng = np.random.default_rng(0)
        made = [backend.from_numpy(rng.standard_normal(sh).astype(ml_dtypes.bfloat16))
                for sh in stored]  # fmt: skip
        return made[0], made[1], None, None
    theirs = [torch.randn(sh, device="cuda", dtype=torch.bfloat16) for sh in stored]
    torch.cuda.synchronize()
    ours = [backend.from_dlpack(t) for t in theirs]
    if channels_last:  # torch's logical [N, C, ...] views of the channels-last memory
        theirs = [t.movedim(-1, 1) for t in theirs]
    return ours[0], ours[1], theirs[0], theirs[1]


def pool_case(
    backend: HipBackend, torch: Any, channels_last: bool, repeats: int, copy: float
) -> None:
    """ResNet's max pool in GB/s (bytes read + written), ours (both paths) and torch's."""
    n, c, h, w = POOL
    layout = "NHWC" if channels_last else "NCHW"
    shape = (n, h, w, c) if channels_last else (n, c, h, w)
    tx = torch.randn(shape, device="cuda", dtype=torch.bfloat16)
    x = backend.from_dlpack(tx)
    y = backend.max_pool2d(x, 3, 2, 1, channels_last=channels_last)
    nbytes = x.nbytes + y.nbytes
    run = lambda: backend.max_pool2d(x, 3, 2, 1, channels_last=channels_last, out=y)  # noqa: E731
    same = bench_copy(backend, torch, nbytes // 2, repeats)
    for impl, ms in both_paths(backend, run, repeats):
        if ms is not None:
            emit_rate("max_pool2d 3x3/2", layout, impl, ms, nbytes, copy, same)
    tv = tx.movedim(-1, 1) if channels_last else tx
    f = torch.nn.functional.max_pool2d
    timer = TorchTimer(torch)
    ms = time_ms(lambda: f(tv, 3, 2, 1), timer.start, timer.stop, repeats)
    emit_rate("max_pool2d 3x3/2", layout, "torch", ms, nbytes, copy, same)


def group_norm_case(backend: HipBackend, torch: Any, repeats: int, copy: float) -> None:
    """group_norm in GB/s (bytes read + written), ours and torch's."""
    n, c, h, w, groups = GROUP_NORM
    tx = torch.randn((n, c, h, w), device="cuda", dtype=torch.bfloat16)
    x = backend.from_dlpack(tx)
    y = backend.group_norm(x, groups)
    nbytes = 2 * x.nbytes
    same = bench_copy(backend, torch, x.nbytes, repeats)
    timer = HipTimer(backend)
    ms = time_ms(lambda: backend.group_norm(x, groups, out=y), timer.start, timer.stop, repeats)
    emit_rate("group_norm 32 groups", "NCHW", "hip", ms, nbytes, copy, same)
    f = torch.nn.functional.group_norm
    anchor = TorchTimer(torch)
    ms = time_ms(lambda: f(tx, groups), anchor.start, anchor.stop, repeats)
    emit_rate("group_norm 32 groups", "NCHW", "torch", ms, nbytes, copy, same)


def emit_rate(
    bench: str, layout: str, impl: str, ms: float, nbytes: int, copy: float, same: float
) -> None:
    """A memory-bound op's row: GB/s (nbytes read + written in ms) and its fraction of the
    256 MiB copy rate `copy` and of `same`, the rate of a copy moving nbytes."""
    gb_s = nbytes / ms / 1e6
    emit(bench=bench, layout=layout, impl=impl, ms=ms, gb_s=gb_s, vs_copy=gb_s / copy,
         vs_copy_same=gb_s / same)  # fmt: skip


def table(copy: float) -> str:
    lines = [f"copy rate (the better of hipMemcpyAsync and torch): {copy:.0f} GB/s", "",
             "| case | layout | impl | ms | TFLOP/s or GB/s | vs torch or copy |",
             "| --- | --- | --- | --- | --- | --- |"]  # fmt: skip
    for r in ROWS:
        if r["bench"] == "conv":
            ratio = f"{r['vs_torch']:.3f}" if "vs_torch" in r else ""
            lines.append(f"| {r['case']} | {r['layout']} | {r['impl']} | {r['ms']:.4f} | "
                         f"{r['tflops']:.1f} | {ratio} |")  # fmt: skip
        elif "gb_s" in r and r["bench"] != "d2d_copy":
            lines.append(f"| {r['bench']} | {r['layout']} | {r['impl']} | {r['ms']:.4f} | "
                         f"{r['gb_s']:.0f} GB/s | {r['vs_copy']:.3f} of copy "
                         f"({r['vs_copy_same']:.3f} of a same-size one) |")  # fmt: skip
        elif r["bench"] == "skipped" and "case" in r:
            lines.append(f"| {r['case']} | {r.get('layout', '')} | {r['impl']} | skipped: "
                         f"{r['reason'][:60]} | | |")  # fmt: skip
    return "\n".join(lines)


def main() -> None:
    flags = parser(__doc__)
    flags.add_argument("--repeats", type=int, help="timed batches per figure (8; --quick: 3)")
    flags.add_argument("--only", default="conv,pool,group_norm",
                       help="which parts to run, comma-separated (default: all three)")  # fmt: skip
    args = flags.parse_args()
    parts = set(args.only.split(","))
    if parts - {"conv", "pool", "group_norm"}:
        flags.error(f"--only takes conv, pool, group_norm; not {sorted(parts)}")
    repeats = args.repeats or (3 if args.quick else 8)
    backend = HipBackend()
    platform = hip_api().platform
    torch = import_torch(platform)
    if torch is not None:
        torch.backends.cudnn.benchmark = True
    emit(bench="setup", platform=platform, device=backend.device.name,
         torch=getattr(torch, "__version__", "skipped: not importable with a GPU"))  # fmt: skip
    copy = bench_copy(backend, torch, 1 << 28, repeats)
    for case in (QUICK if args.quick else RESNET + WHISPER) if "conv" in parts else ():
        for channels_last in (False, True):
            try:
                conv_case(backend, torch, case, channels_last, repeats)
            except Exception as error:  # one case failing is a row, not the end of the run
                emit(bench="skipped", case=case[0], layout="NHWC" if channels_last else "NCHW",
                     impl="hip", reason=f"{type(error).__name__}: {error}"[:300])  # fmt: skip
    if not args.quick and torch is not None:  # (torch's tensors feed ours through DLPack)
        for channels_last in (False, True) if "pool" in parts else ():
            pool_case(backend, torch, channels_last, repeats, copy)
        if "group_norm" in parts:
            group_norm_case(backend, torch, repeats, copy)
    backend.close()
    save(args.out, "bench_conv", table(copy))


if __name__ == "__main__":
    main()
