"""scaled_dot_product_attention beside torch SDPA's backends, in one run (bf16, and f32 encoders).

- prefill, causal: B4 H32 S2048 D128 and B1 H32 S8192 D128, in TFLOP/s (4·B·H·Sq·Skv·D / 2
  for causal), beside torch's flash, cuDNN and memory-efficient SDPA backends, each forced
  with `torch.nn.attention.sdpa_kernel` (a backend this torch or GPU lacks is a skipped row);
  and a sentence encoder's (bench_encoder: BERT-small heads), B32 H12 S128 D32, not causal,
  with a key-padding bool mask [B, 1, 1, S] (sequences of S/2 to S tokens, the first full);
- f32 encoders with the same padding mask: all-MiniLM-L6-v2's B128 H12 S128 D32 (bench_encoder's
  row) and B16 H12 S128 D64, on the register-tiled portable kernel ("hip") and on the scalar
  kernel it replaced ("hip scalar": ops.attention._SCALAR_D64), beside torch's backends (f32:
  memory-efficient only);
- decode, one query per sequence: B32 Hq32/Hkv8 KV4096 D128 and B1 Hq32/Hkv8 KV32768 D128, in
  GB/s of K and V read, beside the same torch backends (GQA through `enable_gqa` where torch
  has it, else K/V repeated per query head outside the timing) and the same run's copy rate;
  attention_decode (split-KV, lengths on the device) in rows beside them (`decode_split`).
Device time per call with events (bench_ops' method). Writes bench_attention.jsonl and .md
under --out.

    PYTHONPATH=... python3 bench/bench_attention.py [--quick] [--out DIR] [--repeats R]
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np
from _harness import ROWS, emit, parser, save
from bench_ops import HipTimer, TorchTimer, bench_copy, import_torch, time_ms

from hip_core import hip_api
from hip_runtime import HipBackend

# B, H, S, D, causal (else a key-padding mask)
PREFILL = ((4, 32, 2048, 128, True), (1, 32, 8192, 128, True), (32, 12, 128, 32, False))
DECODE = ((32, 32, 8, 4096, 128), (1, 32, 8, 32768, 128))  # B, Hq, Hkv, KV, D
QUICK_PREFILL = ((1, 4, 256, 64, True), (2, 4, 64, 32, False))
F32_PREFILL = ((128, 12, 128, 32, False), (16, 12, 128, 64, False))
QUICK_F32_PREFILL = ((2, 4, 100, 32, False),)
QUICK_DECODE = ((2, 4, 2, 512, 64),)
TORCH_BACKENDS = ("FLASH_ATTENTION", "CUDNN_ATTENTION", "EFFICIENT_ATTENTION")


def tensors(
    backend: HipBackend, torch: Any, shapes: list[tuple[int, ...]], dtype: str = "bfloat16"
) -> tuple[list, list]:
    """Random tensors: torch ones when torch is here (shared through DLPack), else ours."""
    if torch is None:
        return [backend.zeros(s, dtype) for s in shapes], []
    theirs = [torch.randn(s, device="cuda", dtype=getattr(torch, dtype)) for s in shapes]
    torch.cuda.synchronize()
    return [backend.from_dlpack(t) for t in theirs], theirs


def torch_rows(torch: Any, run: Any, name: str, measure: Any, repeats: int) -> dict[str, float]:
    """ms per call of each torch SDPA backend (skipped rows for the ones that cannot run)."""
    found = {}
    for which in TORCH_BACKENDS:
        try:
            from torch.nn.attention import SDPBackend, sdpa_kernel

            with sdpa_kernel(getattr(SDPBackend, which)):
                timer = TorchTimer(torch)
                ms = time_ms(run, timer.start, timer.stop, repeats)
        except Exception as error:  # this torch or GPU lacks the backend for these shapes
            emit(bench="skipped", case=name, impl=f"torch {which.lower()}",
                 reason=f"{type(error).__name__}: {error}"[:200])  # fmt: skip
            continue
        found[which.lower()] = ms
        emit(bench=name, impl=f"torch {which.lower()}", ms=ms, rate=measure(ms))
    return found


def padding_mask(b: int, s: int) -> np.ndarray:
    """[b, 1, 1, s] bool, True where a key is a token: lengths S/2..S, the first full."""
    lengths = np.random.default_rng(0).integers(s // 2, s + 1, b)
    lengths[0] = s
    return (np.arange(s)[None, :] < lengths[:, None]).reshape(b, 1, 1, s)


def prefill(
    backend: HipBackend, torch: Any, shape: tuple[Any, ...], repeats: int, dtype: str = "bfloat16"
) -> None:
    """One prefill case: ours, then torch's backends; f32 also on the scalar kernel (A/B)."""
    from hip_runtime.ops import attention as op

    b, h, s, d, causal = shape
    name = f"prefill B{b} H{h} S{s} D{d} " + ("causal" if causal else "padding mask")
    name += " f32" if dtype == "float32" else ""
    flops = 4 * b * h * s * s * d / (2 if causal else 1)
    ours, theirs = tensors(backend, torch, [(b, h, s, d)] * 3, dtype)
    mask = None if causal else padding_mask(b, s)
    our_mask = None if mask is None else backend.from_numpy(mask)
    timer = HipTimer(backend)
    sdpa = functools.partial(backend.scaled_dot_product_attention, causal=causal, mask=our_mask)
    if dtype == "float32" and d <= 64:  # the kernel the register-tiled one replaced
        op._SCALAR_D64 = True
        try:
            old = time_ms(lambda: sdpa(*ours), timer.start, timer.stop, repeats)
        finally:
            op._SCALAR_D64 = False
        emit(bench=name, impl="hip scalar", ms=old, rate=flops / old / 1e9)
    ms = time_ms(lambda: sdpa(*ours), timer.start, timer.stop, repeats)
    row: dict[str, Any] = dict(bench=name, impl="hip", ms=ms, rate=flops / ms / 1e9)
    if theirs:
        their_mask = None if mask is None else torch.from_numpy(mask).cuda()
        f = functools.partial(
            torch.nn.functional.scaled_dot_product_attention, is_causal=causal, attn_mask=their_mask
        )
        best = torch_rows(torch, lambda: f(*theirs), name, lambda m: flops / m / 1e9, repeats)
        if best:
            row["vs_best_torch"] = min(best.values()) / ms
    emit(**row)


def decode(
    backend: HipBackend, torch: Any, shape: tuple[int, ...], repeats: int, copy: float
) -> None:
    b, hq, hkv, kv, d = shape
    name = f"decode B{b} Hq{hq}/Hkv{hkv} KV{kv} D{d}"
    nbytes = 2 * b * hkv * kv * d * 2  # K and V, bf16
    ours, theirs = tensors(backend, torch, [(b, hq, 1, d), (b, hkv, kv, d), (b, hkv, kv, d)])
    timer = HipTimer(backend)
    sdpa = backend.scaled_dot_product_attention
    ms = time_ms(lambda: sdpa(*ours), timer.start, timer.stop, repeats)
    rate = nbytes / ms / 1e6
    row: dict[str, Any] = dict(bench=name, impl="hip", ms=ms, rate=rate, of_copy=rate / copy)
    if theirs:
        f = torch.nn.functional.scaled_dot_product_attention
        q, k, v = theirs
        try:
            f(q, k, v, enable_gqa=True)
            run = lambda: f(q, k, v, enable_gqa=True)  # noqa: E731
        except TypeError:  # an older torch: repeat K/V per query head, untimed
            k, v = (x.repeat_interleave(hq // hkv, dim=1) for x in (k, v))
            run = lambda: f(q, k, v)  # noqa: E731
        best = torch_rows(torch, run, name, lambda m: nbytes / m / 1e6, repeats)
        if best:
            row["vs_best_torch"] = min(best.values()) / ms
    emit(**row)


def decode_split(
    backend: HipBackend, torch: Any, shape: tuple[int, ...], repeats: int, copy: float
) -> None:
    """attention_decode (the split-KV decode op, lengths on the device, all = KV here) on the
    decode cases, beside the torch rows `decode` emitted, on torch's own [B, Hkv, KV, D]
    tensors: "hip decode (default)" with the op's own chunking; where that splits the keys
    (too few blocks to fill the device unsplit), the chunking at other blocks-per-multiprocessor
    targets; where it does not, "split anyway" rows at those targets (the `_UNSPLIT_ABOVE`
    override); then the default on a cache stored [B, KV, Hkv, D] read through its
    [B, Hkv, KV, D] view."""
    from hip_runtime.ops import attention_decode as op

    b, hq, hkv, kv, d = shape
    name = f"decode B{b} Hq{hq}/Hkv{hkv} KV{kv} D{d}"
    nbytes = 2 * b * hkv * kv * d * 2  # K and V, bf16
    lengths = backend.full((b,), kv, "int32")
    torch_ms = [r["ms"] for r in ROWS if r["bench"] == name and r["impl"].startswith("torch")]
    default = (op._UNSPLIT_ABOVE, op._BLOCKS_PER_MULTIPROCESSOR)
    sms = backend.device.properties.multiprocessors
    splits = op._decode_split(kv, b * hkv * -(-(hq // hkv) // op._ROWS), sms)[1] > 1
    cases: list[tuple[str, tuple[int, int], bool]] = [("hip decode (default)", default, False)]
    for n in (2, 8, 16) if splits else (2, 4, 8):
        impl = f"hip decode, {n} blocks/SM" if splits else f"hip decode split anyway, {n}/SM"
        cases.append((impl, (default[0] if splits else 1 << 20, n), False))
    cases.append(("hip decode (default), BSHD cache", default, True))
    for impl, (unsplit, per_sm), bshd in cases:
        if bshd or impl == cases[0][0]:  # new inputs for the first case and the BSHD cache
            cache = (b, kv, hkv, d) if bshd else (b, hkv, kv, d)
            (q, k, v), _ = tensors(backend, torch, [(b, hq, 1, d), cache, cache])
            if bshd:
                k, v = k.permute(0, 2, 1, 3), v.permute(0, 2, 1, 3)
        op._UNSPLIT_ABOVE, op._BLOCKS_PER_MULTIPROCESSOR = unsplit, per_sm
        timer = HipTimer(backend)
        run = functools.partial(backend.attention_decode, q, k, v, lengths)
        try:
            ms = time_ms(run, timer.start, timer.stop, repeats)
        finally:
            op._UNSPLIT_ABOVE, op._BLOCKS_PER_MULTIPROCESSOR = default
        rate = nbytes / ms / 1e6
        row: dict[str, Any] = dict(bench=name, impl=impl, ms=ms, rate=rate, of_copy=rate / copy)
        if torch_ms:
            row["vs_best_torch"] = min(torch_ms) / ms
        emit(**row)


def table(copy: float) -> str:
    lines = [f"D2D copy (read + write): {copy:.0f} GB/s", "",
             "| case | impl | ms | TFLOP/s or GB/s | hip / best torch |",
             "| --- | --- | --- | --- | --- |"]  # fmt: skip
    for r in ROWS:
        if r["bench"].startswith(("prefill", "decode")):
            ratio = f"{r['vs_best_torch']:.3f}" if "vs_best_torch" in r else ""
            lines.append(f"| {r['bench']} | {r['impl']} | {r['ms']:.3f} | {r['rate']:.0f} | "
                         f"{ratio} |")  # fmt: skip
        elif r["bench"] == "skipped" and "case" in r:
            lines.append(f"| {r['case']} | {r['impl']} | skipped: {r['reason'][:80]} | | |")
    return "\n".join(lines)


def main() -> None:
    flags = parser(__doc__)
    flags.add_argument("--repeats", type=int, help="timed batches per figure (10; --quick: 3)")
    args = flags.parse_args()
    repeats = args.repeats or (3 if args.quick else 10)
    backend = HipBackend()
    platform = hip_api().platform
    torch = import_torch(platform)
    emit(bench="setup", platform=platform, device=backend.device.name,
         torch=getattr(torch, "__version__", "skipped: not importable with a GPU"))  # fmt: skip
    copy = bench_copy(backend, torch, 1 << 28, repeats)
    for shape in QUICK_PREFILL if args.quick else PREFILL:
        prefill(backend, torch, shape, repeats)
    for shape in QUICK_F32_PREFILL if args.quick else F32_PREFILL:
        prefill(backend, torch, shape, repeats, "float32")
    for shape in QUICK_DECODE if args.quick else DECODE:
        decode(backend, torch, shape, repeats, copy)
        decode_split(backend, torch, shape, repeats, copy)
    backend.close()
    save(args.out, "bench_attention", table(copy))


if __name__ == "__main__":
    main()
