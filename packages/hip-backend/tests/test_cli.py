"""The command line's help, `info`, usage errors and exit codes."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

import pytest

import hip_backend
import hip_ffi
from hip_backend.cli import FAILED, OK, UNAVAILABLE, USAGE, main

if TYPE_CHECKING:
    from conftest import Cli

COMMANDS = ("info", "selftest", "bench", "load")


def test_exit_codes_are_distinct() -> None:
    assert len({OK, FAILED, USAGE, UNAVAILABLE}) == 4 and OK == 0 and USAGE == 2


def test_top_level_help_lists_every_command(cli: Cli) -> None:
    done = cli("--help")
    assert done.returncode == 0, done.stderr
    for command in COMMANDS:
        assert command in done.stdout
    assert "exit codes" in done.stdout and "--platform" in done.stdout


@pytest.mark.parametrize("command", COMMANDS)
def test_every_command_has_help(cli: Cli, command: str) -> None:
    done = cli(command, "--help")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(f"usage: hip-backend {command}")
    assert "--platform" in done.stdout


def test_version(cli: Cli) -> None:
    done = cli("--version")
    assert (done.returncode, done.stdout.strip()) == (0, f"hip-backend {hip_backend.__version__}")


@pytest.mark.parametrize(
    "args", [(), ("frobnicate",), ("info", "--no-such-option"), ("--platform", "tpu", "info")]
)
def test_usage_errors_exit_2_with_a_message(cli: Cli, args: tuple[str, ...]) -> None:
    done = cli(*args)
    assert done.returncode == USAGE
    assert "usage: hip-backend" in done.stderr and "Traceback" not in done.stderr


def test_info_json_names_the_selected_platform(cli: Cli) -> None:
    done = cli("info", "--json")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["platform"] == hip_ffi.load().platform  # same environment, same choice
    assert report["version"] == hip_backend.__version__
    assert report["device_count"] == len(report["devices"]) >= 1
    device = report["devices"][0]
    assert device["name"] and device["total_memory"] > 0 and device["warp_size"] >= 1
    assert report["libraries"] and all(lib["path"] for lib in report["libraries"])


def test_info_text_shows_platform_libraries_and_devices(cli: Cli) -> None:
    done = cli("info", "--platform", "cpu")
    assert done.returncode == 0, done.stderr
    assert "platform: cpu" in done.stdout
    assert "c++ compiler" in done.stdout  # the cpu platform's "hiprtc"
    assert "devices: 1" in done.stdout and "[0]" in done.stdout


@pytest.mark.parametrize("where", ["before", "after"])
def test_platform_option_before_or_after_the_command(cli: Cli, where: str) -> None:
    args = ("--platform", "cpu", "info", "--json")
    done = cli(*args) if where == "before" else cli(*args[2:], *args[:2])
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["platform"] == "cpu"


def test_bad_hip_platform_is_a_usage_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HIP_PLATFORM", "tpu")
    assert main(["info"]) == USAGE


def test_no_usable_platform_exits_3(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def unavailable(platform: str | None = None) -> None:
        raise hip_ffi.PlatformUnavailableError({"amd": "no ROCm", "nvidia": "no CUDA"})

    monkeypatch.setattr(hip_ffi, "load", unavailable)
    assert main(["info"]) == UNAVAILABLE
    error = capsys.readouterr().err
    assert "no usable HIP platform" in error and "Traceback" not in error
