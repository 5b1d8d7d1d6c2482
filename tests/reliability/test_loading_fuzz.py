"""Corrupt checkpoints, fuzzed with a fixed seed: every outcome is a FormatError or a correct load.

Two small valid checkpoints (safetensors with every dtype and awkward shapes; GGUF with
metadata of every kind and F32/F16/BF16/Q8_0/Q4_0 tensors) are mutated case by case:
truncations, bit flips, byte runs and appended bytes (mostly in the header, where parsing
happens), and edits that keep the file well-formed but change one field: a number or string
of the safetensors JSON (then the header length is fixed up, or not), a count, length, type,
dimension, offset or alignment of the GGUF header. Each case goes through `open_checkpoint`
and, when that accepts it, a full `AsyncLoader` load whose tensors must equal the file's bytes
(dequantized GGUF blocks must equal `hip_runtime.testing.dequantize`). A safetensors case we
load must load in the `safetensors` package too, with the same tensors.

Anything else fails the test: another exception, device memory or a descriptor left behind,
a hang (the loop runs in a subprocess with a deadline) or a crash (the subprocess dies).
Sized for CI: about ten seconds on two cores.
"""

from __future__ import annotations

import json
import os
import random
import re
import struct
import sys
import traceback
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

SEED = 20260513
CASES = {"safetensors": 2500, "gguf": 2500}

# --- the valid checkpoints -------------------------------------------------------------------


def safetensors_base(path: Path) -> int:
    """A valid .safetensors file at `path`; returns where its header ends."""
    import ml_dtypes

    from hip_runtime import save_safetensors

    rng = np.random.default_rng(SEED)
    tensors = {
        "embed": rng.standard_normal((3, 5)).astype(np.float32),
        "norm": rng.standard_normal(7).astype(ml_dtypes.bfloat16),
        "proj": rng.standard_normal((2, 3)).astype(np.float16),
        "ids": rng.integers(-(2**40), 2**40, 4, dtype=np.int64),
        "bytes": rng.integers(0, 255, 5, dtype=np.uint8),
        "mask": np.array([True, False, True]),
        "fp8": rng.standard_normal(4).astype(ml_dtypes.float8_e4m3fn),
        "empty": np.zeros((0, 3), np.float32),
        "scalar": np.array(1.5, np.float32),
    }
    save_safetensors(path, tensors, {"format": "pt", "note": "fuzz"})
    return 8 + int.from_bytes(path.read_bytes()[:8], "little")


def _gstr(text: str) -> bytes:
    return struct.pack("<Q", len(text.encode())) + text.encode()


def gguf_base(path: Path) -> tuple[int, list[tuple[int, int]]]:
    """A valid GGUF v3 file at `path`; returns where its header ends and the (offset, size) of
    every count, length, type code and number in its header (what the edits overwrite)."""
    import gguf

    fields: list[tuple[int, int]] = []
    out = bytearray()

    def put(fmt: str, *values: Any) -> None:
        packed = struct.pack("<" + fmt, *values)
        if fmt not in ("s",):
            fields.append((len(out), len(packed)))
        out.extend(packed)

    def put_str(text: str) -> None:
        raw = text.encode()
        put("Q", len(raw))
        out.extend(raw)

    Q = gguf.GGMLQuantizationType
    rng = np.random.default_rng(SEED)
    blocks = {
        name: np.asarray(gguf.quants.quantize(rng.standard_normal(shape).astype(np.float32), q))
        for name, shape, q in (("q8", (2, 32), Q.Q8_0), ("q4", (1, 64), Q.Q4_0))
    }
    tensors = [  # name, ne (ggml order), ggml type, bytes
        ("tok", (5, 3), 0, rng.standard_normal(15).astype(np.float32).tobytes()),
        ("norm", (7,), 1, rng.standard_normal(7).astype(np.float16).tobytes()),
        ("bias", (3, 2), 30, rng.integers(0, 2**16, 6, dtype=np.uint16).tobytes()),
        ("q8", (32, 2), 8, blocks["q8"].tobytes()),
        ("q4", (64, 1), 2, blocks["q4"].tobytes()),
    ]
    kvs: list[tuple[str, int, Callable[[], None]]] = [
        ("general.architecture", 8, lambda: put_str("llama")),
        ("general.alignment", 4, lambda: put("I", 32)),
        ("t.u8", 0, lambda: put("B", 200)),
        ("t.i64", 11, lambda: put("q", -(2**40))),
        ("t.f32", 6, lambda: put("f", 0.25)),
        ("t.bool", 7, lambda: put("B", 1)),
        ("t.ints", 9, lambda: (put("I", 5), put("Q", 3), put("3i", 1, -2, 3))),
        ("t.strs", 9, lambda: (put("I", 8), put("Q", 2), put_str("a"), put_str("ünï"))),
    ]
    out.extend(b"GGUF")
    put("I", 3)
    put("Q", len(tensors))
    put("Q", len(kvs))
    for key, kind, value in kvs:
        put_str(key)
        put("I", kind)
        value()
    offset = 0
    for name, ne, ggml_type, data in tensors:
        put_str(name)
        put("I", len(ne))
        put(f"{len(ne)}Q", *ne)
        put("I", ggml_type)
        put("Q", offset)
        offset += -(-len(data) // 32) * 32
    header_end = len(out)
    out.extend(bytes(-len(out) % 32))
    for _, _, _, data in tensors:
        out.extend(data + bytes(-len(data) % 32))
    path.write_bytes(bytes(out))
    return header_end, fields


# --- mutations ---------------------------------------------------------------------------------

SPECIAL_BYTES = (0x00, 0xFF, 0x7F, 0x80, 0x20, 0x22, 0x5B, 0x7B)
SPECIAL_NUMBERS = (
    "0", "1", "-1", "-0", "7", "2147483648", "4294967296", "9223372036854775808",
    "18446744073709551616", "1" * 30, "9" * 5000, "1e400", "1.5", "NaN", "Infinity", "null",
)  # fmt: skip
SPECIAL_STRINGS = (
    "", "F32", "BF16", "F16", "I64", "F8_E4M3", "F8_E8M0", "F4", "BOOL", "\\ud800",
    "__metadata__", "x" * 300, "embed", "a\\u0000b",
)  # fmt: skip
SPECIAL_INTS = (0, 1, 2, 3, 4, 5, 31, 32, 33, 2**31, 2**32 - 1, 2**32, 2**63, 2**64 - 1)


def _at(rng: random.Random, size: int, header_end: int) -> int:
    """A position, four times in five inside the header."""
    end = header_end if rng.random() < 0.8 else size
    return rng.randrange(max(end, 1))


def mutate_bytes(rng: random.Random, data: bytes, header_end: int) -> tuple[str, bytes]:
    """A byte-level corruption of `data`: (its kind, the bytes)."""
    out = bytearray(data)
    kind = rng.choice(("truncate", "flip", "run", "append"))
    if kind == "truncate":
        return kind, bytes(out[: _at(rng, len(out), header_end + 16)])
    if kind == "flip":  # half of them in the tensor data: files that must load, bit for bit
        end = header_end if rng.random() < 0.5 else len(out)
        for _ in range(rng.choice((1, 1, 2, 4, 8))):
            out[rng.randrange(end)] ^= 1 << rng.randrange(8)
    elif kind == "run":
        at = _at(rng, len(out), header_end)
        for i in range(at, min(at + rng.randint(1, 8), len(out))):
            out[i] = rng.choice(SPECIAL_BYTES) if rng.random() < 0.5 else rng.randrange(256)
    else:
        out.extend(rng.randbytes(rng.randint(1, 64)))
    return kind, bytes(out)


_NUMBER = re.compile(rb"-?\d+")
_STRING = re.compile(rb'"(?:[^"\\]|\\.)*"')


def edit_safetensors_header(rng: random.Random, data: bytes) -> tuple[str, bytes]:
    """One number or string token of the JSON header replaced; the header length is fixed up
    to match, three times in four."""
    length = int.from_bytes(data[:8], "little")
    header = data[8 : 8 + length]
    tokens = list((_NUMBER if rng.random() < 0.5 else _STRING).finditer(header))
    token = rng.choice(tokens)
    if token.group().startswith(b'"'):
        new = b'"' + rng.choice(SPECIAL_STRINGS).encode() + b'"'
    elif rng.random() < 0.5:
        new = rng.choice(SPECIAL_NUMBERS).encode()
    else:  # a nearby value: off by a little
        new = str(int(token.group()) + rng.choice((-9, -8, -1, 1, 2, 8, 4096))).encode()
    header = header[: token.start()] + new + header[token.end() :]
    fixed = rng.random() < 0.75
    prefix = len(header).to_bytes(8, "little") if fixed else data[:8]
    return "header edit", prefix + header + data[8 + length :]


def edit_gguf_field(
    rng: random.Random, data: bytes, fields: list[tuple[int, int]]
) -> tuple[str, bytes]:
    """One count, length, type code or number of the GGUF header overwritten with a boundary
    value or a near one."""
    offset, size = rng.choice(fields)
    old = int.from_bytes(data[offset : offset + size], "little")
    value = rng.choice(SPECIAL_INTS) if rng.random() < 0.6 else old + rng.choice((-1, 1, 2, 32))
    new = (value % 2 ** (8 * size)).to_bytes(size, "little")
    return "header edit", data[:offset] + new + data[offset + size :]


# --- one case ------------------------------------------------------------------------------------


def check_load(loader: Any, path: Path, data: bytes) -> tuple[str, Any]:
    """Open and load `path`: ("refused", None) for a FormatError, ("loaded", records) for a
    load whose every tensor equals the file's bytes. Anything else raises."""
    from hip_runtime import FormatError, open_checkpoint, testing

    try:
        checkpoint = open_checkpoint(path)
    except FormatError as error:
        assert error.path.startswith(str(path.parent)), error  # it names the file
        return "refused", None
    result = loader.load(checkpoint)
    try:
        for record in checkpoint.tensors:
            got = result.tensors[record.name].to_numpy()
            stored = data[record.offset : record.offset + record.nbytes]
            if record.encoding == "raw":
                assert got.tobytes() == stored, record.name
            else:
                expected = testing.dequantize(np.frombuffer(stored, np.uint8), record.encoding)
                assert np.array_equal(got.reshape(-1), expected, equal_nan=True), record.name
    finally:
        if result.arena is not None:
            result.arena.close()
        for tensor in result.tensors.values():
            tensor.buffer.close()
    return "loaded", checkpoint


def compare_with_safetensors(path: Path, checkpoint: Any) -> str:
    """How the `safetensors` package reads the header we read: "both load" (the same names,
    dtypes and sizes), "both refuse", "only we refuse"; AssertionError if only we load.
    (`safe_open` validates the whole header and data layout as `load_file` does, without
    turning tensors into numpy arrays: numpy has no float8.)"""
    from safetensors import safe_open

    from hip_runtime.loading.formats.safetensors import DTYPES

    codes = {dtype: code for code, dtype in DTYPES.items()}
    try:
        with safe_open(str(path), "np") as f:
            theirs = {k: (f.get_slice(k).get_dtype(), f.get_slice(k).get_shape()) for k in f.keys()}  # noqa: SIM118
    except Exception:  # SafetensorError
        theirs = None
    if checkpoint is None:
        return "both refuse" if theirs is None else "only we refuse"
    assert theirs is not None, "we loaded a file the safetensors package refuses"
    ours = {r.name: (codes[r.dtype], r.count) for r in checkpoint.tensors}
    assert ours == {k: (dtype, int(np.prod(shape))) for k, (dtype, shape) in theirs.items()}
    return "both load"


def fuzz(fmt: str, cases: int, folder: Path) -> dict[str, Any]:
    """Run `cases` cases of `fmt` ("safetensors" or "gguf") in this process (the cpu platform);
    returns the outcome counts, the failures and what was left behind."""
    from hip_core import Device, use_platform
    from hip_runtime import AsyncLoader, StagedCopier

    rng = random.Random(f"{SEED}-{fmt}")
    base = folder / f"base.{fmt}"
    if fmt == "safetensors":
        header_end, fields = safetensors_base(base), []
    else:
        header_end, fields = gguf_base(base)
    data = base.read_bytes()
    counts: Counter[str] = Counter()
    kinds: Counter[str] = Counter()  # failures by kind of case and error
    failures: list[str] = []
    made: list[Any] = []
    with use_platform("cpu"):
        original = Device.allocate

        def allocate(self: Device, size: int) -> Any:
            made.append(original(self, size))
            return made[-1]

        Device.allocate = allocate  # type: ignore[method-assign]
        copier = StagedCopier(Device(0), threads=2, streams=1, chunk_bytes=4096, max_chunks=4)
        loader = AsyncLoader(Device(0), copier=copier)
        check_load(loader, base, data)  # warm: kernels compiled, threads made once
        descriptors = len(os.listdir("/proc/self/fd"))
        for case in range(cases):
            if rng.random() < 0.4:
                edit = edit_safetensors_header if fmt == "safetensors" else edit_gguf_field
                kind, mutated = edit(rng, data) if not fields else edit(rng, data, fields)  # type: ignore[call-arg]
            else:
                kind, mutated = mutate_bytes(rng, data, header_end)
            path = folder / f"case-{case}.{fmt}"
            path.write_bytes(mutated)
            try:
                outcome, checkpoint = check_load(loader, path, mutated)
                counts[f"{kind}: {outcome}"] += 1
                counts[outcome] += 1
                if fmt == "safetensors":
                    counts[compare_with_safetensors(path, checkpoint)] += 1
                unfreed = [b for b in made if not b.closed]
                assert not unfreed, f"{len(unfreed)} device buffers left allocated"
            except BaseException as error:  # anything but a FormatError or a correct load
                counts["failed"] += 1
                signature = re.sub(r"\d+", "N", str(error).replace(str(folder), ""))[:70]
                kinds[f"{kind}: {type(error).__name__}: {signature}"] += 1
                where = "".join(traceback.format_exception(error)[-3:])
                failures.append(f"case {case} ({kind}): {type(error).__name__}: {error}\n{where}")
            finally:
                path.unlink()
            made.clear()
        copier.close()
        leaked = len(os.listdir("/proc/self/fd")) - descriptors
    return {"cases": cases, "counts": dict(counts), "failures": failures[:20],
            "failure_kinds": dict(kinds), "descriptors_left": leaked}  # fmt: skip


def main(argv: list[str]) -> None:
    """The subprocess's entry: fuzz(format, cases, folder), printed as one JSON line."""
    fmt, cases, folder = argv
    print(json.dumps(fuzz(fmt, int(cases), Path(folder))))


# --- the tests ---------------------------------------------------------------------------------


@pytest.mark.parametrize("fmt", sorted(CASES))
def test_corrupt_checkpoints_are_format_errors_or_correct_loads(
    fmt: str, run_python: Any, tmp_path: Path
) -> None:
    code = f"import runpy, sys; runpy.run_path({__file__!r})['main'](sys.argv[1:])"
    done = run_python(code, fmt, str(CASES[fmt]), str(tmp_path), timeout=300)
    assert done.returncode == 0, f"the fuzz loop crashed:\n{done.stderr[-4000:]}"
    report = json.loads(done.stdout.splitlines()[-1])
    print(json.dumps(report["counts"], indent=1, sort_keys=True))  # the table, with -s
    assert not report["failures"], "\n".join(report["failures"])
    counts = report["counts"]
    assert counts.get("refused", 0) + counts.get("loaded", 0) == report["cases"]
    assert counts.get("refused") and counts.get("loaded")  # both outcomes are exercised
    assert report["descriptors_left"] <= 0
    assert not done.stderr, done.stderr


if __name__ == "__main__":
    main(sys.argv[1:])
