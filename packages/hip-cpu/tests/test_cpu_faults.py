"""Kernel bad accesses and traps on the cpu platform are launch errors, as on a GPU; the process
lives.

Every case first runs in a subprocess (this file as a script), so that a regression fails the
test instead of killing the test run, then in this process. A case is a launch whose next
synchronize must return its code with the kernel, block and thread in
`HipApi.error_detail(code)`, after which the same stream runs a good kernel correctly. A trap
(__builtin_trap(): SIGILL, abort(), std::abort(), __trap()) ends the launch with
hipErrorLaunchFailure, as a GPU's trap does. A fault that is not a kernel's still kills the
process, as it would without the platform's handler.
"""

from __future__ import annotations

import json
import platform
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import hip_ffi
from hip_cpu import faults
from hip_ffi import constants
from hip_ffi.rtc import compile_source

E = constants.ERROR_CODES
ILLEGAL, FAILURE = E["hipErrorIllegalAddress"], E["hipErrorLaunchFailure"]
FAR = 1 << 46  # elements past a buffer: outside the 47-bit address space
SOURCE = b"""
extern "C" __global__ void poke(float* p, long long at) {
    if (blockIdx.x == 2 && threadIdx.x == 3) p[at] = 1.0f;
}
extern "C" __global__ void everywhere(float* p, long long at) { p[at + threadIdx.x] = 1.0f; }
extern "C" __global__ void rope_like(const float* table, const int* positions, float* out) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    out[i] = table[(long long)positions[i] * 64];
}
extern "C" __global__ void after_barrier(float* p, long long at) {
    __shared__ float seen[64];
    seen[threadIdx.x] = 1.0f;
    __syncthreads();
    if (threadIdx.x == 5) p[at] = seen[0];
}
extern "C" __global__ void dynamic_shared(float* out, int at) {
    extern __shared__ float dynamic[];
    dynamic[at] = 2.0f;
    out[0] = dynamic[at];
}
extern "C" __global__ void static_shared(float* out, long long at) {
    __shared__ float fixed[256];
    fixed[at] = 2.0f;
    out[0] = fixed[0];
}
__device__ __noinline__ int deep(int n) {
    volatile char pad[4096];
    pad[n & 4095] = (char)n;
    return n <= 0 ? 0 : deep(n - 1) + pad[n & 4095];
}
extern "C" __global__ void recurse(int* out, int depth) { out[0] = deep(depth); }
extern "C" __global__ void divide(int* out, int by) { out[0] = 1000 / by; }
__device__ void stop_as(int how) {
    if (how == 0) __builtin_trap();
    if (how == 1) abort();
    if (how == 2) std::abort();
    if (how == 3) __trap();
}
extern "C" __global__ void stop(float* p, int how) {
    if (blockIdx.x == 2 && threadIdx.x == 3) stop_as(how);
    p[threadIdx.x] = 1.0f;
}
extern "C" __global__ void stop_after_barrier(float* p, int how) {
    __shared__ float seen[64];
    seen[threadIdx.x] = 1.0f;
    __syncthreads();
    if (threadIdx.x == 5) stop_as(how);
    p[threadIdx.x] = seen[63 - threadIdx.x];
}
extern "C" __global__ void fill(float* p, float v) { p[blockIdx.x * blockDim.x + threadIdx.x] = v; }
"""
WHERE = r"in block \[{}\], thread \[{}\]"
#: Where the address lands decides between a page fault (address, read or write) and, past the
#: 47-bit address space, a general protection fault (no address, SIGSEGV or SIGBUS).
ANYWHERE = r"illegal address (0x[0-9a-f]+|outside the address space) \(\w+, SIG(SEGV|BUS)\) "
BUFFER, NULL, POSITIONS = ("void*", "buffer"), ("void*", None), ("void*", "positions")
Case = tuple[str, int, int, tuple[tuple[str, Any], ...], int, int, str]
#: name: (kernel, grid, block, arguments as (C type, value), dynamic shared bytes, the status
#: the synchronize returns, a pattern its detail matches)
CASES: dict[str, Case] = {
    "out-of-range write": ("poke", 4, 8, (BUFFER, ("long long", FAR)), 0, ILLEGAL,
                           "kernel poke: illegal address outside the address space "
                           r"\(access, SIG(SEGV|BUS)\) " + WHERE.format("2,0,0", "3,0,0")),
    "null pointer": ("poke", 4, 8, (NULL, ("long long", 0)), 0, ILLEGAL,
                     r"illegal address 0x0 \(write, SIGSEGV\) " + WHERE.format("2,0,0", "3,0,0")),
    "rope-like read": ("rope_like", 2, 32, (BUFFER, POSITIONS, BUFFER), 0, ILLEGAL,
                       "kernel rope_like: " + ANYWHERE + WHERE.format("1,0,0", "7,0,0")),
    "after a barrier": ("after_barrier", 1, 64, (BUFFER, ("long long", FAR)), 0, ILLEGAL,
                        WHERE.format("0,0,0", "5,0,0")),
    "static shared overrun": ("static_shared", 1, 1, (BUFFER, ("long long", FAR)), 0, ILLEGAL,
                              "kernel static_shared: illegal address"),
    "stack overflow": ("recurse", 1, 1, (BUFFER, ("int", 1 << 20)), 0, ILLEGAL,
                       "kernel recurse: illegal address"),
    "division by zero": ("divide", 1, 1, (BUFFER, ("int", 0)), 0, FAILURE,
                         r"integer divide by zero\) " + WHERE.format("0,0,0", "0,0,0")),
    "every block": ("everywhere", 512, 64, (BUFFER, ("long long", FAR)), 0, ILLEGAL,
                    "kernel everywhere: illegal address"),
}  # fmt: skip
#: Traps: how stop_as stops (its `how`) and what the detail says first.
TRAPS = {
    "__builtin_trap": (0, r"trap: illegal instruction \(SIGILL, as __builtin_trap\(\) raises\) "),
    "abort": (1, r"abort\(\) was called "),
    "std::abort": (2, r"abort\(\) was called "),
    "__trap": (3, r"__trap\(\) was called "),
}
for _name, (_how, _said) in TRAPS.items():  # one GPU thread of one block stops
    _stopping = (BUFFER, ("int", _how))
    CASES[_name] = ("stop", 4, 8, _stopping, 0, FAILURE,
                    f"kernel stop: {_said}{WHERE.format('2,0,0', '3,0,0')}")  # fmt: skip
    CASES[f"{_name} after a barrier"] = (
        "stop_after_barrier", 1, 64, _stopping, 0, FAILURE,
        f"kernel stop_after_barrier: {_said}{WHERE.format('0,0,0', '5,0,0')}",
    )  # fmt: skip
#: Only the checked mode sees these: just past a buffer, and past the dynamic shared size.
CHECKED_CASES: dict[str, Case] = {
    "just past a buffer": ("poke", 4, 8, (BUFFER, ("long long", 1024)), 0, ILLEGAL,
                           r"kernel poke: illegal address 0x[0-9a-f]+ \(write, SIGSEGV\)"),
    "past the dynamic shared size": ("dynamic_shared", 1, 1, (BUFFER, ("int", 256 + 2048)), 1024,
                                     ILLEGAL, "kernel dynamic_shared: illegal address"),
}  # fmt: skip


class Device:
    """The faults program and one stream, a 4 KiB buffer and the rope-like positions."""

    def __init__(self, hip: Any) -> None:
        self.hip, ffi = hip, hip.ffi
        result = compile_source(hip, SOURCE, name="faults.hip")
        assert result.status == 0, result.log
        self.module, self.stream = ffi.new("hipModule_t*"), ffi.new("hipStream_t*")
        assert hip.hipModuleLoadData(self.module, result.code) == 0
        assert hip.hipStreamCreateWithFlags(self.stream, 0) == 0
        self.buffer = self.allocate(np.zeros(1024, np.float32))  # 4 KiB: ends on a guard page
        positions = np.arange(64, dtype=np.int32) % 16  # the buffer as a table of 16 rows of 64
        positions[39] = 2**31 - 1  # block 1, thread 7: a row far out of range
        self.positions = self.allocate(positions)

    def allocate(self, array: np.ndarray) -> Any:
        hip = self.hip
        pointer = hip.ffi.new("void**")
        assert hip.hipMalloc(pointer, array.nbytes) == 0
        assert hip.hipMemcpy(pointer[0], hip.ffi.from_buffer(array), array.nbytes, 1) == 0
        return pointer[0]

    def run(
        self, kernel: str, grid: int, block: int, arguments: tuple[tuple[str, Any], ...],
        shared: int = 0,
    ) -> tuple[int, str]:  # fmt: skip
        """Launch on the stream and synchronize it: (its status, the error's detail)."""
        hip, ffi = self.hip, self.hip.ffi
        pointers = {"buffer": self.buffer, None: ffi.NULL, "positions": self.positions}
        boxes = [ffi.new(f"{ctype}*", pointers[value] if ctype == "void*" else value)
                 for ctype, value in arguments]  # fmt: skip
        params = ffi.new("void*[]", [ffi.cast("void*", box) for box in boxes])
        function = ffi.new("hipFunction_t*")
        assert hip.hipModuleGetFunction(function, self.module[0], kernel.encode()) == 0
        launched = hip.hipModuleLaunchKernel(function[0], grid, 1, 1, block, 1, 1, shared,
                                             self.stream[0], params, ffi.NULL)  # fmt: skip
        assert launched == 0
        code = hip.hipStreamSynchronize(self.stream[0])
        return code, hip.error_detail(code)

    def still_works(self) -> bool:
        """The same stream runs a good kernel, and the device synchronizes cleanly."""
        out = np.zeros(1024, np.float32)
        ran = self.run("fill", 4, 256, (BUFFER, ("float", 3.0))) == (0, "")
        copied = self.hip.hipMemcpy(self.hip.ffi.from_buffer(out), self.buffer, out.nbytes, 2)
        clean = self.hip.hipDeviceSynchronize() == 0
        return ran and copied == 0 and clean and bool(np.all(out == 3.0))


def run_cases(checked: bool) -> dict[str, list[Any]]:
    """Every case (and the checked ones when `checked`): {name: [status, detail, usable after]}."""
    faults.CHECKED = checked
    device = Device(hip_ffi.load("cpu"))
    cases = {**CASES, **(CHECKED_CASES if checked else {})}
    seen = {}
    for name, (kernel, grid, block, arguments, shared, _, _) in cases.items():
        code, detail = device.run(kernel, grid, block, arguments, shared)
        seen[name] = [code, detail, device.still_works()]
    return seen


def check(seen: dict[str, list[Any]], checked: bool) -> None:
    cases = {**CASES, **(CHECKED_CASES if checked else {})}
    for name, (*_, code, pattern) in cases.items():
        status, detail, usable = seen[name]
        assert status == code, (name, status, detail)
        assert re.search(pattern, detail), (name, detail)
        assert usable, name


@pytest.mark.parametrize("checked", [False, True], ids=["default", "checked"])
def test_bad_accesses_in_a_subprocess(checked: bool) -> None:
    done = subprocess.run([sys.executable, __file__, str(int(checked))], capture_output=True,
                          text=True, timeout=300)  # fmt: skip
    assert done.returncode == 0, f"the process died ({done.returncode}): {done.stderr[-3000:]}"
    check(json.loads(done.stdout.splitlines()[-1]), checked)


@pytest.fixture
def restore_mode() -> Iterator[None]:
    mode = faults.CHECKED
    yield
    faults.CHECKED = mode


@pytest.mark.parametrize("checked", [False, True], ids=["default", "checked"])
def test_bad_accesses_in_process(checked: bool, restore_mode: None) -> None:
    check(run_cases(checked), checked)


def test_without_checks_small_overruns_go_unseen(restore_mode: None) -> None:
    faults.CHECKED = False
    device = Device(hip_ffi.load("cpu"))
    for name, (kernel, grid, block, arguments, shared, _, _) in CHECKED_CASES.items():
        assert device.run(kernel, grid, block, arguments, shared) == (0, ""), name


def test_many_faulting_launches_leave_nothing_behind() -> None:
    device = Device(hip_ffi.load("cpu"))
    for _ in range(50):
        assert device.run("everywhere", 64, 64, (BUFFER, ("long long", FAR)))[0] == ILLEGAL
    assert device.still_works()


#: How a process faults outside kernels: (Python code, the signal it dies of, faulthandler's name).
#: The illegal instruction is x86's ud2 (what __builtin_trap() compiles to) in a mapped page.
OUTSIDE = {
    "bad access": ("ctypes.string_at(8)", 11, "Segmentation fault"),
    "illegal instruction": (
        "import mmap; page = mmap.mmap(-1, 4096, prot=7); page.write(b'\\x0f\\x0b');"
        "ctypes.CFUNCTYPE(None)(ctypes.addressof(ctypes.c_char.from_buffer(page)))()",
        4, "Illegal instruction"),
}  # fmt: skip


@pytest.mark.parametrize("faulthandler", [False, True])
@pytest.mark.parametrize("fault", list(OUTSIDE))
def test_a_fault_outside_kernels_still_kills_the_process(faulthandler: bool, fault: str) -> None:
    code, signal, name = OUTSIDE[fault]
    if fault == "illegal instruction" and platform.machine() not in ("x86_64", "AMD64"):
        pytest.skip("the illegal instruction is x86's ud2")
    script = (
        "import ctypes, hip_ffi, sys; sys.path.insert(0, sys.argv[1]);"
        "from test_cpu_faults import Device; device = Device(hip_ffi.load('cpu'));"
        f"assert device.still_works(); print('loaded', flush=True); {code}"
    )
    options = ["-X", "faulthandler"] if faulthandler else []
    here = str(Path(__file__).parent)
    done = subprocess.run([sys.executable, *options, "-c", script, here], capture_output=True,
                          text=True, timeout=300)  # fmt: skip
    assert done.stdout.startswith("loaded") and done.returncode == -signal, done.stderr[-2000:]
    assert (f"Fatal Python error: {name}" in done.stderr) == faulthandler


if __name__ == "__main__":
    print(json.dumps(run_cases(bool(int(sys.argv[1])))))
