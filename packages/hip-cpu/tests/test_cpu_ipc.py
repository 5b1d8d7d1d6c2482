"""hipIpc* on the cpu platform: device memory and events shared with another, real process
(a child Python driven line by line over pipes), and every refusal with HIP's code.
"""

from __future__ import annotations

import subprocess
import sys
import threading
from collections.abc import Iterator
from typing import Any

import pytest

import hip_ffi
from hip_cpu import faults, ipc
from hip_ffi import constants

E = constants.ERROR_CODES
IPC_EVENT = constants.EVENT_INTERPROCESS | constants.EVENT_DISABLE_TIMING
LAZY = constants.IPC_MEM_LAZY_ENABLE_PEER_ACCESS

#: The other process: one command a line on stdin, one answer a line on stdout.
CHILD = r"""
import sys, time
import hip_ffi
hip = hip_ffi.load("cpu")
ffi = hip.ffi
state = {}

@ffi.callback("void(void*)")
def nap(_):
    time.sleep(2)

def handle(kind, text):
    out = ffi.new(kind + "*")
    ffi.memmove(out.reserved, bytes.fromhex(text), 64)
    return out[0]

for line in sys.stdin:
    command, *args = line.split()
    if command == "open_memory":
        out = ffi.new("void**")
        answer = hip.hipIpcOpenMemHandle(out, handle("hipIpcMemHandle_t", args[0]), 1)
        state["memory"] = out[0]
    elif command == "read":
        answer = bytes(ffi.buffer(ffi.cast("char*", state["memory"]), int(args[0]))).hex()
    elif command == "write":
        data = bytes.fromhex(args[0])
        answer = hip.hipMemcpy(state["memory"], data, len(data), 1)
    elif command == "type":
        attributes = ffi.new("hipPointerAttribute_t*")
        answer = hip.hipPointerGetAttributes(attributes, state["memory"]) or attributes.type
    elif command == "close_memory":
        answer = hip.hipIpcCloseMemHandle(state["memory"])
    elif command == "open_event":
        out = ffi.new("hipEvent_t*")
        answer = hip.hipIpcOpenEventHandle(out, handle("hipIpcEventHandle_t", args[0]))
        state["event"] = out[0]
    elif command == "query":
        answer = hip.hipEventQuery(state["event"])
    elif command == "sync":
        answer = hip.hipEventSynchronize(state["event"])
    elif command == "nap_then_record":
        answer = hip.hipLaunchHostFunc(ffi.NULL, nap, ffi.NULL) or hip.hipEventRecord(
            state["event"], ffi.NULL)
    elif command == "destroy":
        answer = hip.hipEventDestroy(state["event"])
    print(answer, flush=True)
"""


class Child:
    """Another process with the cpu platform loaded, answering one command at a time."""

    def __init__(self) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-c", CHILD], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            text=True, bufsize=1,
        )  # fmt: skip

    def ask(self, *words: object) -> str:
        assert self.process.stdin is not None and self.process.stdout is not None
        self.process.stdin.write(" ".join(map(str, words)) + "\n")
        answer = self.process.stdout.readline().strip()
        assert answer, f"the child died ({self.process.poll()}) on {words[0]}"
        return answer

    def close(self) -> None:
        assert self.process.stdin is not None
        self.process.stdin.close()
        assert self.process.wait(60) == 0


@pytest.fixture(scope="module")
def hip() -> Any:
    return hip_ffi.load("cpu")


@pytest.fixture
def child() -> Iterator[Child]:
    other = Child()
    yield other
    other.close()


def memory_handle(hip: Any, pointer: Any) -> bytes:
    out = hip.ffi.new("hipIpcMemHandle_t*")
    assert hip.hipIpcGetMemHandle(out, pointer) == 0
    return bytes(hip.ffi.buffer(out.reserved))


def malloc(hip: Any, size: int) -> Any:
    out = hip.ffi.new("void**")
    assert hip.hipMalloc(out, size) == 0
    return out[0]


def test_handles_are_64_checked_bytes() -> None:
    handle = ipc.Handle(1, 1234, 7, 1 << 20, 4096, 9, 3, 0, 0xFEEDFACE)
    raw = ipc.pack(handle)
    assert len(raw) == constants.IPC_HANDLE_SIZE == 64 and ipc.unpack(raw) == handle
    for i in range(64):  # any byte changed, the handle is refused
        assert ipc.unpack(raw[:i] + bytes([raw[i] ^ 0x10]) + raw[i + 1 :]) is None
    assert ipc.unpack(raw[:63]) is None and ipc.unpack(bytes(64)) is None


def test_memory_crosses_processes_without_a_copy(hip: Any, child: Child) -> None:
    pointer = malloc(hip, 1 << 20)
    view = hip.ffi.buffer(hip.ffi.cast("char*", pointer), 1 << 20)
    view[:6] = b"parent"
    try:
        raw = memory_handle(hip, pointer)
        assert memory_handle(hip, pointer) == raw  # exporting again: the same handle
        assert child.ask("open_memory", raw.hex()) == "0"
        assert bytes.fromhex(child.ask("read", 6)) == b"parent"
        assert child.ask("write", b"child!".hex()) == "0"
        assert view[:6] == b"child!"  # the child wrote into this process's buffer
        view[:6] = b"again!"
        assert bytes.fromhex(child.ask("read", 6)) == b"again!"
        assert child.ask("type") == str(constants.MEMORY_TYPES["Device"])
        assert child.ask("close_memory") == "0"
        assert child.ask("close_memory") == str(E["hipErrorInvalidValue"])  # closed already
        assert view[:6] == b"again!"  # the importer's close frees nothing here
        assert child.ask("open_memory", raw.hex()) == "0"  # opened again, closed by exiting
    finally:
        assert hip.hipFree(pointer) == 0
    assert child.ask("open_memory", raw.hex()) == str(E["hipErrorInvalidHandle"])  # freed


def test_refusals_with_hips_codes(hip: Any) -> None:
    ffi, out, opened = hip.ffi, hip.ffi.new("hipIpcMemHandle_t*"), hip.ffi.new("void**")
    pointer = malloc(hip, 4096)
    try:
        assert hip.hipIpcGetMemHandle(out, pointer) == 0
        # The exporting process itself (HIP's hipErrorInvalidContext), then a corrupt handle:
        assert hip.hipIpcOpenMemHandle(opened, out[0], LAZY) == E["hipErrorInvalidContext"]
        out.reserved[20] = bytes([out.reserved[20][0] ^ 1])
        assert hip.hipIpcOpenMemHandle(opened, out[0], LAZY) == E["hipErrorInvalidValue"]
        assert hip.hipIpcOpenMemHandle(opened, out[0], 4) == E["hipErrorInvalidValue"]  # flags
        assert hip.hipIpcGetMemHandle(ffi.NULL, pointer) == E["hipErrorInvalidValue"]
        assert hip.hipIpcCloseMemHandle(pointer) == E["hipErrorInvalidValue"]  # not imported
    finally:
        assert hip.hipFree(pointer) == 0
    assert hip.hipIpcGetMemHandle(out, pointer) == E["hipErrorInvalidValue"]  # freed
    pinned, pool = ffi.new("void**"), ffi.new("void**")
    assert hip.hipHostMalloc(pinned, 4096, 0) == 0 and hip.hipMallocAsync(pool, 4096, ffi.NULL) == 0
    try:
        assert hip.hipIpcGetMemHandle(out, pinned[0]) == E["hipErrorInvalidValue"]
        assert hip.hipIpcGetMemHandle(out, pool[0]) == E["hipErrorInvalidValue"]  # as on CUDA
    finally:
        assert hip.hipHostFree(pinned[0]) == 0 and hip.hipFreeAsync(pool[0], ffi.NULL) == 0
    hip.hipGetLastError()


def test_checked_mode_memory_cannot_be_exported(hip: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(faults, "CHECKED", True)
    pointer = malloc(hip, 4096)
    try:
        out = hip.ffi.new("hipIpcMemHandle_t*")
        assert hip.hipIpcGetMemHandle(out, pointer) == E["hipErrorNotSupported"]
    finally:
        assert hip.hipFree(pointer) == 0


def test_a_handle_of_a_process_that_is_gone_does_not_open(hip: Any) -> None:
    exporter = (
        "import hip_ffi; hip = hip_ffi.load('cpu'); p = hip.ffi.new('void**');"
        "h = hip.ffi.new('hipIpcMemHandle_t*'); assert hip.hipMalloc(p, 64) == 0;"
        "assert hip.hipIpcGetMemHandle(h, p[0]) == 0;"
        "print(bytes(hip.ffi.buffer(h.reserved)).hex())"
    )
    done = subprocess.run([sys.executable, "-c", exporter], capture_output=True, text=True,
                          timeout=120, check=True)  # fmt: skip
    handle = hip.ffi.new("hipIpcMemHandle_t*")
    hip.ffi.memmove(handle.reserved, bytes.fromhex(done.stdout.strip()), 64)
    opened = hip.ffi.new("void**")
    assert hip.hipIpcOpenMemHandle(opened, handle[0], LAZY) == E["hipErrorInvalidHandle"]
    hip.hipGetLastError()


def test_an_event_crosses_processes(hip: Any, child: Child) -> None:
    ffi, gate = hip.ffi, threading.Event()
    event, stream = ffi.new("hipEvent_t*"), ffi.new("hipStream_t*")
    assert hip.hipEventCreateWithFlags(event, IPC_EVENT) == 0
    assert hip.hipStreamCreateWithFlags(stream, constants.STREAM_NON_BLOCKING) == 0
    handle = ffi.new("hipIpcEventHandle_t*")

    @ffi.callback("void(void*)")
    def hold(_: Any) -> None:
        gate.wait(30)

    try:
        assert hip.hipIpcGetEventHandle(handle, event[0]) == 0
        assert child.ask("open_event", bytes(ffi.buffer(handle.reserved)).hex()) == "0"
        assert child.ask("query") == "0"  # never recorded: complete
        assert hip.hipLaunchHostFunc(stream[0], hold, ffi.NULL) == 0
        assert hip.hipEventRecord(event[0], stream[0]) == 0
        assert child.ask("query") == str(E["hipErrorNotReady"])  # this stream is held
        gate.set()
        assert child.ask("sync") == "0" and child.ask("query") == "0"
        # The other way: the child records behind two seconds of work on its null stream.
        assert child.ask("nap_then_record") == "0"
        assert hip.hipEventQuery(event[0]) == E["hipErrorNotReady"]
        assert hip.hipStreamWaitEvent(stream[0], event[0], 0) == 0
        assert hip.hipStreamQuery(stream[0]) == E["hipErrorNotReady"]  # waits for the child
        assert hip.hipEventSynchronize(event[0]) == 0 and hip.hipEventQuery(event[0]) == 0
        assert hip.hipStreamSynchronize(stream[0]) == 0
        assert child.ask("destroy") == "0"
    finally:
        gate.set()
        assert hip.hipStreamDestroy(stream[0]) == 0 and hip.hipEventDestroy(event[0]) == 0


def test_event_refusals_with_hips_codes(hip: Any) -> None:
    ffi = hip.ffi
    event, opened = ffi.new("hipEvent_t*"), ffi.new("hipEvent_t*")
    handle = ffi.new("hipIpcEventHandle_t*")
    # Interprocess events cannot time (HIP and CUDA refuse the flags together):
    assert (
        hip.hipEventCreateWithFlags(event, constants.EVENT_INTERPROCESS)
        == (E["hipErrorInvalidValue"])
    )
    assert hip.hipEventCreateWithFlags(event, constants.EVENT_DISABLE_TIMING) == 0
    try:  # an event made without hipEventInterprocess
        assert hip.hipIpcGetEventHandle(handle, event[0]) == E["hipErrorInvalidConfiguration"]
    finally:
        assert hip.hipEventDestroy(event[0]) == 0
    assert hip.hipIpcGetEventHandle(handle, event[0]) == E["hipErrorInvalidHandle"]  # destroyed
    assert hip.hipEventCreateWithFlags(event, IPC_EVENT) == 0
    try:
        assert hip.hipIpcGetEventHandle(handle, event[0]) == 0
        assert hip.hipIpcOpenEventHandle(opened, handle[0]) == E["hipErrorInvalidContext"]
        as_memory = ffi.new("hipIpcMemHandle_t*")  # an event's handle is no memory handle
        ffi.memmove(as_memory.reserved, handle.reserved, 64)
        assert (
            hip.hipIpcOpenMemHandle(ffi.new("void**"), as_memory[0], LAZY)
            == (E["hipErrorInvalidValue"])
        )
    finally:
        assert hip.hipEventDestroy(event[0]) == 0
    hip.hipGetLastError()
