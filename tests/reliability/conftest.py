"""What the reliability tests share: Python in a subprocess with a deadline, and the counters
a leak shows in (resident memory, open descriptors, the files behind them).

Test modules cannot import this file (pytest runs with --import-mode=importlib), so each helper
is a fixture. Subprocesses run the interpreter running pytest, on the platform chosen by
`HIP_PLATFORM` (the cpu platform unless set) and with this session's private program cache, so
what a test compiled in the parent is not compiled again in each child.
"""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import sys
import textwrap
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from hip_core import Device, use_platform

#: Seconds a subprocess may run before it counts as hung (and is killed).
DEFAULT_TIMEOUT = 120.0


@pytest.fixture(scope="session", autouse=True)
def ctrl_c_raises() -> None:
    """Ctrl-C raises KeyboardInterrupt in this process and in the interpreters it starts, as in
    a terminal. A shell starts a background job (`cmd &`, nohup) with SIGINT ignored, and
    Python then installs no handler, so the interrupt tests would see nothing; a handler set
    here is reset to the default on exec, so each child installs Python's own."""
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)


@pytest.fixture(scope="session")
def reliability_env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    """The environment of the session and of its subprocesses: a private program cache (also
    set in this process while the session runs) and HIP_PLATFORM (cpu unless set)."""
    cache = str(tmp_path_factory.mktemp("reliability-programs"))
    saved = {name: os.environ.get(name) for name in ("HIP_CORE_CACHE_DIR", "HIP_CORE_CACHE")}
    os.environ["HIP_CORE_CACHE_DIR"] = cache
    os.environ.pop("HIP_CORE_CACHE", None)
    env = dict(os.environ)
    env.setdefault("HIP_PLATFORM", "cpu")
    env["PYTHONUNBUFFERED"] = "1"
    env.pop("PYTHONWARNINGS", None)
    yield env
    for name, value in saved.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value


@pytest.fixture(
    scope="module",
    params=[pytest.param("cpu"), pytest.param("nvidia", marks=pytest.mark.gpu)],
)
def device(request: pytest.FixtureRequest, reliability_env: dict[str, str]) -> Iterator[Device]:
    """Device 0 of each platform (nvidia runs are marked `gpu`), with the session's private
    program cache."""
    with use_platform(request.param):
        yield Device(0)


class Child:
    """A Python subprocess started by `spawn_python`: read its stdout line by line with a
    deadline, signal it, and wait for it with a deadline (killed and reported if it hangs).
    Two threads drain its stdout and stderr, so a chatty child never blocks on a full pipe."""

    def __init__(self, code: str, env: dict[str, str], args: tuple[str, ...]) -> None:
        self.code = code
        self.process = subprocess.Popen(
            [sys.executable, "-c", code, *args],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
        )  # fmt: skip
        self._lines: queue.Queue[str | None] = queue.Queue()
        self._out: list[str] = []
        self._err: list[str] = []
        self._drains = [
            threading.Thread(target=self._drain, args=(self.process.stdout, self._out, True)),
            threading.Thread(target=self._drain, args=(self.process.stderr, self._err, False)),
        ]
        for drain in self._drains:
            drain.daemon = True
            drain.start()

    def _drain(self, stream: Any, into: list[str], lines: bool) -> None:
        for line in stream:
            into.append(line)
            if lines:
                self._lines.put(line.rstrip("\n"))
        if lines:
            self._lines.put(None)  # end of output

    @property
    def stdout(self) -> str:
        return "".join(self._out)

    @property
    def stderr(self) -> str:
        return "".join(self._err)

    def readline(self, timeout: float = DEFAULT_TIMEOUT) -> str:
        """The next line of stdout (without its newline); fails the test after `timeout` s or if
        the child's output ends first."""
        try:
            line = self._lines.get(timeout=timeout)
        except queue.Empty:
            self.kill()
            pytest.fail(f"no line from the child in {timeout} s:\n{self.report()}")
        if line is None:
            self.wait(10)
            pytest.fail(f"the child's output ended before the line awaited:\n{self.report()}")
        return line

    def wait(self, timeout: float = DEFAULT_TIMEOUT) -> subprocess.CompletedProcess[str]:
        """Wait for the exit; kill and fail the test after `timeout` seconds."""
        try:
            self.process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            pytest.fail(f"the child did not exit within {timeout} s (hung):\n{self.report()}")
        for drain in self._drains:
            drain.join(10)
        return subprocess.CompletedProcess(
            self.process.args, self.process.returncode, self.stdout, self.stderr
        )

    def kill(self) -> None:
        """Kill the child (if it still runs) and collect what it wrote."""
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait()
        for drain in self._drains:
            drain.join(10)

    def report(self) -> str:
        return (
            f"--- code ---\n{self.code}\n--- exit status ---\n{self.process.returncode}\n"
            f"--- stdout ---\n{self.stdout}\n--- stderr ---\n{self.stderr}"
        )


SpawnPython = Callable[..., Child]
RunPython = Callable[..., subprocess.CompletedProcess[str]]


@pytest.fixture
def spawn_python(reliability_env: dict[str, str]) -> Iterator[SpawnPython]:
    """spawn_python(code, *args, env={...}) -> Child: `python -c code args...` started now
    (code is dedented); killed at the end of the test if still running."""
    children: list[Child] = []

    def spawn(code: str, *args: str, env: dict[str, str] | None = None) -> Child:
        child = Child(textwrap.dedent(code), {**reliability_env, **(env or {})}, args)
        children.append(child)
        return child

    yield spawn
    for child in children:
        if child.process.poll() is None:
            child.kill()


@pytest.fixture
def run_python(spawn_python: SpawnPython) -> RunPython:
    """run_python(code, *args, timeout=120, env={...}) -> CompletedProcess (text): the code
    run to its end in a subprocess; a hang past `timeout` seconds kills it and fails the test
    with its output."""

    def run(
        code: str, *args: str, timeout: float = DEFAULT_TIMEOUT, env: dict[str, str] | None = None
    ) -> subprocess.CompletedProcess[str]:
        return spawn_python(code, *args, env=env).wait(timeout)

    return run


def resident_bytes() -> int:
    """This process's resident memory (bytes), from /proc/self/statm."""
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def open_descriptors() -> dict[int, str]:
    """This process's open file descriptors and what each names (a path, pipe:[…], …)."""
    found = {}
    for name in os.listdir("/proc/self/fd"):
        try:
            found[int(name)] = os.readlink(f"/proc/self/fd/{name}")
        except OSError:  # the descriptor listdir itself used, closed by now
            continue
    return found


@pytest.fixture
def rss() -> Callable[[], int]:
    """rss() -> this process's resident memory in bytes."""
    return resident_bytes


@pytest.fixture
def open_fds() -> Callable[[], dict[int, str]]:
    """open_fds() -> {descriptor: what it names} of this process."""
    return open_descriptors


@pytest.fixture
def cpu_platform(reliability_env: dict[str, str]) -> Iterator[Any]:
    """The cpu platform as hip-core's process-wide one for the test; yields its device 0."""
    from hip_core import Device, use_platform

    with use_platform("cpu"):
        yield Device(0)


@pytest.fixture(scope="session")
def reliability_data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder for files the session's tests share (checkpoints built once)."""
    return tmp_path_factory.mktemp("reliability-data")


@pytest.fixture(scope="session")
def sparse_checkpoint(reliability_data: Path) -> Path:
    """A 3 GiB safetensors checkpoint of 48 uint8 tensors that takes a few seconds to load on
    the cpu platform. Sparse: only its header is written (the data is a hole that reads as
    zeros), so it costs no disk and no time to make."""
    path = reliability_data / "sparse.safetensors"
    if not path.exists():
        count, size = 48, 64 << 20
        header = {
            f"layer.{i}": {
                "dtype": "U8",
                "shape": [size],
                "data_offsets": [i * size, (i + 1) * size],
            }
            for i in range(count)
        }
        raw = json.dumps(header).encode()
        raw += b" " * (-len(raw) % 8)
        with open(path, "wb") as f:
            f.write(len(raw).to_bytes(8, "little") + raw)
            f.truncate(8 + len(raw) + count * size)
    return path
