"""All five distributions share one version, and every sibling pin is that version.

Reads the source tree (VERSION, each _version.py, each pyproject.toml) through
tools/version.py and the installed metadata of the five wheels.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import shutil
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _version_tool():  # type: ignore[no-untyped-def]
    spec = importlib.util.spec_from_file_location("version_tool", ROOT / "tools" / "version.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules["version_tool"] = module
    spec.loader.exec_module(module)
    return module


def test_source_tree_agrees_on_one_version() -> None:
    assert _version_tool().disagreements() == []


def test_installed_distributions_agree() -> None:
    expected = _version_tool().read_version()
    for dist in ("hip-ffi", "hip-cpu", "hip-core", "hip-runtime", "hip-backend"):
        assert importlib.metadata.version(dist) == expected


@pytest.fixture
def copied_tool(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):  # type: ignore[no-untyped-def]
    """The version tool pointed at a scratch copy of every versioned file."""
    tool = _version_tool()
    copy = tmp_path / "repo"
    for path in [
        tool.VERSION_FILE,
        *tool.version_files().values(),
        *tool.pyproject_files().values(),
    ]:
        target = copy / path.relative_to(ROOT)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(path, target)
    monkeypatch.setattr(tool, "ROOT", copy)
    monkeypatch.setattr(tool, "VERSION_FILE", copy / "VERSION")
    return tool


def test_a_hand_edited_pin_is_caught(copied_tool) -> None:  # type: ignore[no-untyped-def]
    tool = copied_tool
    copy = tool.ROOT
    pyproject = copy / "packages" / "hip-core" / "pyproject.toml"
    version = tool.read_version()
    pyproject.write_text(pyproject.read_text().replace(f"hip-ffi=={version}", "hip-ffi==9.9.9"))
    problems = tool.disagreements()
    assert len(problems) == 1
    assert "hip-ffi==9.9.9" in problems[0] and "hip-core" in problems[0]


def test_bump_writes_every_place(copied_tool) -> None:  # type: ignore[no-untyped-def]
    tool = copied_tool
    copy = tool.ROOT
    tool.bump("7.8.9")
    assert tool.read_version() == "7.8.9"
    assert tool.disagreements() == []
    assert '"hip-ffi==7.8.9"' in (copy / "packages/hip-backend/pyproject.toml").read_text()
    assert '"hip-cpu==7.8.9"' in (copy / "packages/hip-core/pyproject.toml").read_text()
    version_py = copy / "packages/hip-cpu/src/hip_cpu/_version.py"
    assert '__version__ = "7.8.9"' in version_py.read_text()


def test_the_tool_covers_every_distribution() -> None:
    tool = _version_tool()
    on_disk = {path.parent.name for path in ROOT.glob("packages/*/pyproject.toml")}
    assert set(tool.PACKAGES) == on_disk
