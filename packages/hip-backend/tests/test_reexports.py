"""hip_backend re-exports every layer: each public name of each layer, the layer packages as
submodules, and one version for all five distributions."""

from __future__ import annotations

import importlib
import importlib.metadata

import pytest

import hip_backend
import hip_core
import hip_ffi
import hip_runtime

LAYERS = {"ffi": hip_ffi, "core": hip_core, "runtime": hip_runtime}


@pytest.mark.parametrize("alias", LAYERS)
def test_every_public_name_of_every_layer_is_reachable(alias: str) -> None:
    layer = LAYERS[alias]
    names = [name for name in layer.__all__ if not name.startswith("__")]
    assert names, f"{layer.__name__} exports nothing"
    for name in names:
        assert getattr(hip_backend, name) is getattr(layer, name), name
        assert name in hip_backend.__all__, name
        assert name in dir(hip_backend), name


def test_layers_names_do_not_collide() -> None:
    """Two layers may export one name only for one object (a class re-exported from below)."""
    seen: dict[str, object] = {}
    for layer in LAYERS.values():
        for name in layer.__all__:
            if not name.startswith("__"):
                value = getattr(layer, name)
                assert seen.setdefault(name, value) is value, f"{layer.__name__}.{name} differs"


def test_a_shared_name_is_the_lower_layers_object() -> None:
    assert "DeviceProperties" in hip_ffi.__all__ and "DeviceProperties" in hip_core.__all__
    assert hip_backend.DeviceProperties is hip_core.DeviceProperties is hip_ffi.DeviceProperties


@pytest.mark.parametrize("alias", LAYERS)
def test_layers_are_submodules(alias: str) -> None:
    assert getattr(hip_backend, alias) is LAYERS[alias]
    assert importlib.import_module(f"hip_backend.{alias}") is LAYERS[alias]
    assert hip_backend.LAYERS[alias] is LAYERS[alias]


def test_star_import_brings_every_name() -> None:
    namespace: dict[str, object] = {}
    exec("from hip_backend import *", namespace)
    assert {"HipBackend", "Device", "HipApi", "ModelRuntime", "core", "ffi"} <= namespace.keys()
    assert all(name in namespace for name in hip_backend.__all__)


def test_unknown_name_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="no_such_name"):
        hip_backend.no_such_name  # noqa: B018


def test_every_version_agrees() -> None:
    versions = {
        "hip-backend": hip_backend.__version__,
        "hip-ffi": hip_backend.ffi.__version__,
        "hip-cpu": importlib.import_module("hip_cpu").__version__,  # no public names to re-export
        "hip-core": hip_backend.core.__version__,
        "hip-runtime": hip_backend.runtime.__version__,
    }
    assert len(set(versions.values())) == 1, versions
    for dist, version in versions.items():
        assert importlib.metadata.version(dist) == version, dist


def test_console_script_is_declared() -> None:
    scripts = importlib.metadata.entry_points(group="console_scripts")
    (script,) = [s for s in scripts if s.name == "hip-backend"]
    assert script.value == "hip_backend.cli:console"
    assert script.load() is importlib.import_module("hip_backend.cli").console
