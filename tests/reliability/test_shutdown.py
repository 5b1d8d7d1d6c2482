"""Interpreter exit with live objects: every resource of the stack still open and in use (work
queued on streams, a checkpoint load in the middle of its reads, a staged upload, a model
runtime with weights, KV cache and scratch) and nothing closed by the user. The process exits
with its own status and writes nothing to stderr: no "Exception ignored", no thread traceback,
no fatal error, no hang.

Each case is a subprocess; they run two at a time.
"""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Any

import pytest

#: Builds everything the cases keep alive: `backend`, `runtime` (with weights, KV cache and
#: scratch), queued ops, a staged upload, a pool allocation, a copier of its own and a load
#: of argv[1] (3 GiB) just started. Prints "alive" when all of it exists.
LIVE = """
    import sys, threading
    import numpy as np
    from hip_core import Device, MemoryPool
    from hip_runtime import (
        AsyncLoader, DeviceTensor, HipBackend, ModelRuntime, StagedCopier, save_safetensors,
    )

    device = Device(0)
    backend = HipBackend(device)
    x = backend.from_numpy(np.random.default_rng(0).standard_normal((256, 256), np.float32))
    queued = [backend.matmul(x, x), backend.layernorm(x), backend.softmax(x)]
    upload = DeviceTensor.from_numpy(np.ones(9 << 20, np.float32), device=device)  # staged
    pool = MemoryPool(device)
    held = pool.allocate(1 << 20, stream=backend.stream)
    small = sys.argv[2]
    save_safetensors(small, {"w": np.ones((64, 64), np.float32), "n": np.ones(64, np.float32)})
    runtime = ModelRuntime.load(small, device)
    runtime.allocate_kv_cache(layers=2, max_tokens=32, kv_heads=2, head_dim=8)
    scratch = runtime.reserve_scratch(1 << 16).tensor((16, 16), np.float32)
    y = runtime.backend.linear(runtime.backend.from_numpy(np.ones((8, 64), np.float32)),
                               runtime.weights["w"])
    copier = StagedCopier(device, threads=2, streams=1)
    job = AsyncLoader(device, copier=copier).start(sys.argv[1])
    print("alive", flush=True)
"""

#: How each case ends: (the code after LIVE, the exit status expected, what stderr must be).
ENDINGS: dict[str, tuple[str, int, str | None]] = {
    "the script ends": ("", 0, ""),
    "sys.exit(0) mid-load": ("sys.exit(0)", 0, ""),
    "an unhandled exception": ("raise RuntimeError('boom')", 1, "RuntimeError: boom"),
    "a thread still loading": (
        "def loads():\n"
        "    for _ in range(40):\n"
        "        AsyncLoader(device).load(small)\n"
        "threading.Thread(target=loads).start()\n",
        0,
        "",
    ),
    "objects dropped in a cycle": (
        "import gc\n"
        "cycle = [backend, runtime, job, copier, upload, held, pool]\n"
        "cycle.append(cycle)\n"
        "del backend, runtime, job, copier, upload, held, pool, cycle, queued, x, y, scratch\n",
        0,
        "",
    ),
}


@pytest.mark.parametrize("ending", sorted(ENDINGS))
def test_exit_with_live_objects_is_clean(
    ending: str, spawn_python: Any, sparse_checkpoint: Path, tmp_path: Path
) -> None:
    tail, status, stderr = ENDINGS[ending]
    code = textwrap.dedent(LIVE) + tail + "\n"
    child = spawn_python(code, str(sparse_checkpoint), str(tmp_path / "small.safetensors"))
    assert child.readline(timeout=120) == "alive"
    done = child.wait(timeout=120)
    assert done.returncode == status, child.report()
    if stderr == "":
        assert done.stderr == "", child.report()
    else:  # the traceback of the error and nothing after it
        assert stderr is not None and done.stderr.rstrip().endswith(stderr), child.report()
        for noise in ("Exception ignored", "Fatal Python error", "Exception in thread"):
            assert noise not in done.stderr, child.report()
