"""Importing a layer imports only what it needs at once (issue 15): public names load their
modules on first use. Checked by which modules a fresh interpreter holds, never by a clock."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest


def _loaded_after(code: str) -> set[str]:
    script = f"{code}\nimport json, sys\nprint(json.dumps(sorted(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    return set(json.loads(out.stdout.splitlines()[-1]))


@pytest.mark.parametrize(
    ("code", "absent"),
    [
        (
            "import hip_core",
            {"hip_core.program", "hip_core.kernel", "hip_core.graph", "hip_core.pool"},
        ),
        ("import hip_runtime", {"hip_runtime.backend", "hip_runtime.loading", "hip_core.device"}),
        (
            "from hip_core import Device",
            {"hip_core.program", "hip_core.kernel", "hip_core.signature"},
        ),
    ],
)
def test_an_import_loads_no_module_it_does_not_use(code: str, absent: set[str]) -> None:
    assert not absent & _loaded_after(code)


def test_names_load_on_first_use_and_stay_bound() -> None:
    loaded = _loaded_after(
        "import hip_runtime\n"
        "assert hip_runtime.ForwardGraph.__name__ == 'ForwardGraph'\n"
        "assert 'ForwardGraph' in vars(hip_runtime) and hip_runtime.testing.__name__ == "
        "'hip_runtime.testing'"
    )
    assert {
        "hip_runtime.runtime.forward_graph",
        "hip_runtime.backend",
        "hip_runtime.testing",
    } <= loaded
