"""`hip-backend info` lists peer links and `hip-backend bench` gains a collectives row when the
platform has two or more devices: the cpu platform with HIP_FFI_CPU_DEVICES=2 (and one device,
where neither appears), run as a user would, in a subprocess."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest


def hip_backend(cli_env: dict[str, str], devices: int, *args: str) -> str:
    """stdout of `hip-backend ARGS` on the cpu platform with `devices` devices (exit 0)."""
    script = shutil.which("hip-backend", path=str(Path(sys.executable).parent))
    assert script is not None, "the hip-backend console script is not installed next to python"
    env = {**cli_env, "HIP_PLATFORM": "cpu", "HIP_FFI_CPU_DEVICES": str(devices)}
    done = subprocess.run([script, *args], capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_info_lists_each_ordered_pair_of_three_devices(cli_env: dict[str, str]) -> None:
    report = json.loads(hip_backend(cli_env, 3, "info", "--json"))
    links = report["peer_links"]
    pairs = [(link["device"], link["peer"]) for link in links]
    assert pairs == [(a, b) for a in range(3) for b in range(3) if a != b]
    assert all(isinstance(link["can_access"], bool) and "error" not in link for link in links)
    text = hip_backend(cli_env, 3, "info")
    matrix = text.split("peer access", 1)[1].splitlines()
    rows = {line.split()[0]: line.split()[1:] for line in matrix if line.startswith("[")}
    for link in links:  # the text's matrix says what the JSON says
        said = rows[f"[{link['device']}]"][link["peer"]]
        assert said == ("yes" if link["can_access"] else "no"), (link, said)
    assert rows["[1]"][1] == "-"


def test_info_with_one_device_has_no_peer_links(cli_env: dict[str, str]) -> None:
    assert json.loads(hip_backend(cli_env, 1, "info", "--json"))["peer_links"] == []
    assert "peer access" not in hip_backend(cli_env, 1, "info")


@pytest.mark.parametrize("devices", [1, 2])
def test_bench_has_a_collectives_row_with_two_devices(
    cli_env: dict[str, str], devices: int
) -> None:
    args = ("bench", "--quick", "--only", "collectives", "--json")
    rows = json.loads(hip_backend(cli_env, devices, *args))["rows"]
    if devices == 1:
        assert rows == []
        return
    [row] = rows
    assert row["skipped"] is None, row
    assert row["name"] == "all_reduce float32 sum, 2 devices (bus bandwidth)"
    assert row["size"] == "1 MiB" and row["unit"] == "GB/s"
    assert row["us"] > 0 and row["rate"] > 0
