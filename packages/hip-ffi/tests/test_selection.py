"""Platform selection: HIP_PLATFORM, its aliases and errors, detection order, and how a
platform that is a distribution of its own (cpu: hip-cpu) is found."""

from __future__ import annotations

import importlib
import importlib.metadata
import importlib.util
import sys
import types
from typing import Any

import pytest

from hip_ffi import selection
from hip_ffi.errors import (
    LibraryNotFoundError,
    PlatformNotInstalledError,
    PlatformUnavailableError,
)


@pytest.mark.parametrize(
    ("value", "expected"),
    [("amd", "amd"), ("HCC", "amd"), ("nvidia", "nvidia"), ("nvcc", "nvidia"), (" cpu ", "cpu")],
)
def test_hip_platform_names_and_aliases(
    monkeypatch: pytest.MonkeyPatch, value: str, expected: str
) -> None:
    monkeypatch.setenv("HIP_PLATFORM", value)
    assert selection.requested_platform() == expected


def test_unset_or_empty_hip_platform_requests_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("HIP_PLATFORM", raising=False)
    assert selection.requested_platform() is None
    monkeypatch.setenv("HIP_PLATFORM", "")
    assert selection.requested_platform() is None


def test_unknown_hip_platform_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HIP_PLATFORM", "metal")
    with pytest.raises(ValueError, match=r"HIP_PLATFORM='metal'.*amd.*cpu.*nvidia"):
        selection.requested_platform()


class _FakeApi:
    def __init__(self, platform: str, devices: int) -> None:
        self.platform = platform
        self.platform_version = f"{platform} 1.0"
        self.devices = devices

    def __repr__(self) -> str:
        return f"<fake {self.platform}>"


def _fake_platforms(monkeypatch: pytest.MonkeyPatch, behaviour: dict[str, Any]) -> list[str]:
    """Replace platform loading: each entry is a device count or an exception to raise."""
    attempts: list[str] = []

    def load_platform(name: str) -> _FakeApi:
        attempts.append(name)
        outcome = behaviour[name]
        if isinstance(outcome, Exception):
            raise outcome
        return _FakeApi(name, outcome)

    monkeypatch.delenv("HIP_PLATFORM", raising=False)
    monkeypatch.setattr(selection, "load_platform", load_platform)
    monkeypatch.setattr(selection, "device_count", lambda api: (api.devices, ""))
    return attempts


def test_detection_prefers_amd_with_a_device(monkeypatch: pytest.MonkeyPatch) -> None:
    attempts = _fake_platforms(monkeypatch, {"amd": 1, "nvidia": 1, "cpu": 1})
    assert selection.select().platform == "amd"
    assert attempts == ["amd"]


def test_detection_passes_over_platforms_without_devices(monkeypatch: pytest.MonkeyPatch) -> None:
    missing = LibraryNotFoundError("HIP runtime", [("libamdhip64.so.7", "not found")])
    attempts = _fake_platforms(monkeypatch, {"amd": missing, "nvidia": 0, "cpu": 1})
    assert selection.select().platform == "cpu"
    assert attempts == ["amd", "nvidia", "cpu"]


def test_detection_failure_says_why_for_every_platform(monkeypatch: pytest.MonkeyPatch) -> None:
    missing = LibraryNotFoundError("CUDA runtime", [("libcudart.so.13", "not found")])
    _fake_platforms(
        monkeypatch, {"amd": 0, "nvidia": missing, "cpu": ImportError("no C++ compiler")}
    )
    with pytest.raises(PlatformUnavailableError) as caught:
        selection.select()
    assert set(caught.value.reasons) == {"amd", "nvidia", "cpu"}
    message = str(caught.value)
    assert "amd 1.0 loaded but sees no device" in message
    assert "libcudart.so.13: not found" in message
    assert "no C++ compiler" in message


def test_an_explicit_platform_is_loaded_even_without_devices(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    attempts = _fake_platforms(monkeypatch, {"amd": 0, "nvidia": 0, "cpu": 0})
    monkeypatch.setenv("HIP_PLATFORM", "nvidia")
    assert selection.select().platform == "nvidia"
    assert selection.select("amd").platform == "amd"
    assert attempts == ["nvidia", "amd"]


def test_unknown_platform_name_is_rejected() -> None:
    with pytest.raises(ValueError, match="unknown platform 'opencl'"):
        selection.load_platform("opencl")


def test_a_platform_of_its_own_distribution_comes_from_its_entry_point(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    loaded = _FakeApi("cpu", 1)
    monkeypatch.setattr(
        importlib.metadata,
        "entry_points",
        lambda group: (
            [_FakeEntryPoint("cpu", lambda: loaded)] if group == "hip_ffi.platforms" else []
        ),
    )
    monkeypatch.setattr(importlib.util, "find_spec", lambda name: None)  # never imported by name
    assert selection.platform_loader("cpu")() is loaded


def test_a_platform_not_installed_names_its_distribution(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(importlib.metadata, "entry_points", lambda group: [])
    real_find_spec = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util,
        "find_spec",
        lambda name: None if name == "hip_cpu" else real_find_spec(name),
    )
    with pytest.raises(PlatformNotInstalledError, match="pip install hip-cpu") as caught:
        selection.platform_loader("cpu")
    assert caught.value.distribution == "hip-cpu" and isinstance(caught.value, ImportError)
    # Detection passes it over with that reason (amd and nvidia found no device here).
    monkeypatch.setattr(selection, "_loaded", {})
    monkeypatch.delenv("HIP_PLATFORM", raising=False)
    monkeypatch.setattr(selection, "DETECTION_ORDER", ("cpu",))
    with pytest.raises(PlatformUnavailableError, match="pip install hip-cpu"):
        selection.select()


def test_from_a_source_tree_the_module_stands_in_for_the_entry_point(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(importlib.metadata, "entry_points", lambda group: [])
    fake = types.ModuleType("hip_cpu.loader")
    fake.load = lambda: _FakeApi("cpu", 1)  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "hip_cpu.loader", fake)
    monkeypatch.setattr(importlib.util, "find_spec", lambda name: object())
    assert selection.platform_loader("cpu")().platform == "cpu"
    assert (
        selection.platform_loader("amd")
        is importlib.import_module("hip_ffi.platforms.amd.loader").load
    )


class _FakeEntryPoint:
    def __init__(self, name: str, value: Any) -> None:
        self.name = name
        self._value = value

    def load(self) -> Any:
        return self._value
