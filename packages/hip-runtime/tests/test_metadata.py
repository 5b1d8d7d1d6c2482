"""The installed hip-runtime agrees with itself and pins its siblings at its own version."""

import importlib.metadata
import re

import hip_runtime

DIST = "hip-runtime"


def test_version_matches_distribution_metadata() -> None:
    assert hip_runtime.__version__ == importlib.metadata.version(DIST)


def test_sibling_pins_are_exact_and_lockstep() -> None:
    requires = importlib.metadata.requires(DIST) or []
    pins = [r for r in requires if r.startswith("hip-")]
    for requirement in pins:
        pin = requirement.split(";")[0].strip()  # (an extra's marker: hip-ffi[cpu] is hip-cpu)
        assert re.fullmatch(r"hip-(ffi|cpu|core|runtime|backend)==[^;,\s]+", pin), requirement
        assert pin.split("==")[1] == hip_runtime.__version__, pin
