"""hip-backend's tests run the installed `hip-backend` console script in a subprocess (as a user
would) on whatever platform is selected: `HIP_PLATFORM`, else detection — the cpu platform in
CI. Kernels compile into a private program cache once per test session."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

Cli = Callable[..., subprocess.CompletedProcess[str]]


@pytest.fixture(scope="session")
def cli_env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    env = dict(os.environ)
    env["HIP_CORE_CACHE_DIR"] = str(tmp_path_factory.mktemp("program-cache"))
    env.pop("HIP_CORE_CACHE", None)
    yield env


@pytest.fixture(scope="session")
def cli(cli_env: dict[str, str]) -> Cli:
    """Runs `hip-backend ARGS...`; returns the completed process (text stdout and stderr)."""
    script = shutil.which("hip-backend", path=str(Path(sys.executable).parent))
    assert script is not None, "the hip-backend console script is not installed next to python"

    def run(*args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [script, *args], capture_output=True, text=True, env=cli_env, timeout=timeout
        )

    return run
