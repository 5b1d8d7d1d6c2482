"""`import hip_backend` imports no op, compiler or loader until a name needs one (issue 15).
Checked by which modules a fresh interpreter holds, never by a clock."""

from __future__ import annotations

import json
import subprocess
import sys


def test_import_hip_backend_loads_no_module_it_does_not_use() -> None:
    script = "import hip_backend, json, sys\nprint(json.dumps(sorted(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    loaded = set(json.loads(out.stdout.splitlines()[-1]))
    assert not {"hip_runtime.backend", "hip_runtime.tensors.tensor", "hip_core.program"} & loaded
