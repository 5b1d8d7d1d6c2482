"""The collective surface at the C level: the cpu platform's own answers (ids, versions,
argument checks, a communicator of one rank, a group of one), and the lazy opening of RCCL /
NCCL on the other platforms (a missing library is an error at the first call, never at load).
The collectives themselves, across threads and processes, are tested through hip-core
(packages/hip-core/tests/test_collectives*.py).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import hip_ffi
from hip_cpu import collective_rendezvous
from hip_ffi import collective_constants as nccl
from hip_ffi.errors import FunctionUnavailableError
from hip_ffi.platforms.amd import rccl
from hip_ffi.platforms.nvidia import nccl as nvidia_nccl

FLOAT32, SUM, MAX = nccl.DATA_TYPES["float32"], nccl.REDUCTION_OPS["sum"], nccl.REDUCTION_OPS["max"]


@pytest.fixture(scope="module")
def hip() -> Any:
    return hip_ffi.load("cpu")


def test_versions_ids_and_error_strings(hip: Any) -> None:
    ffi = hip.ffi
    version = ffi.new("int*")
    assert hip.ncclGetVersion(version) == 0
    assert nccl.unpack_version(version[0]) >= (2, 13, 0)
    first, second = ffi.new("ncclUniqueId*"), ffi.new("ncclUniqueId*")
    assert hip.ncclGetUniqueId(first) == 0 and hip.ncclGetUniqueId(second) == 0
    raw = bytes(ffi.buffer(first))
    assert raw.startswith(collective_rendezvous.MAGIC) and raw != bytes(ffi.buffer(second))
    text = ffi.string(hip.ncclGetErrorString(nccl.REMOTE_ERROR)).decode()
    assert text == "remote process exited or there was a network error"
    assert ffi.string(hip.ncclGetErrorString(99)) == b"unknown result code"
    assert nccl.unpack_version(2708) == (2, 7, 8)  # the packing before NCCL 2.9


def test_arguments_are_refused_with_nccls_codes(hip: Any) -> None:
    ffi = hip.ffi
    comm = ffi.new("ncclComm_t*")
    unique_id = ffi.new("ncclUniqueId*")
    assert hip.ncclGetUniqueId(unique_id) == 0
    assert hip.ncclCommInitRank(comm, 2, unique_id[0], 2) == nccl.INVALID_ARGUMENT
    assert b"rank 2 of 2" in ffi.string(hip.ncclGetLastError(ffi.NULL))
    assert hip.ncclCommInitRank(ffi.NULL, 1, unique_id[0], 0) == nccl.INVALID_ARGUMENT
    foreign = ffi.new("ncclUniqueId*")  # all zeros: not an id of this platform
    assert hip.ncclCommInitRank(comm, 1, foreign[0], 0) == nccl.INVALID_ARGUMENT
    assert hip.ncclGroupEnd() == nccl.INVALID_USAGE  # no group started
    assert hip.ncclAllReduce(ffi.NULL, ffi.NULL, 0, FLOAT32, SUM, ffi.NULL, ffi.NULL) == (
        nccl.INVALID_ARGUMENT
    )
    devices = ffi.new("int[]", [0, 0])
    assert hip.ncclCommInitAll(ffi.new("ncclComm_t[]", 2), 2, devices) == nccl.INVALID_USAGE


def test_a_communicator_of_one_rank(hip: Any) -> None:
    ffi = hip.ffi
    comm, unique_id = ffi.new("ncclComm_t*"), ffi.new("ncclUniqueId*")
    assert hip.ncclGetUniqueId(unique_id) == 0
    assert hip.ncclCommInitRank(comm, 1, unique_id[0], 0) == 0
    out = ffi.new("int*")
    assert hip.ncclCommCount(comm[0], out) == 0 and out[0] == 1
    assert hip.ncclCommUserRank(comm[0], out) == 0 and out[0] == 0
    assert hip.ncclCommCuDevice(comm[0], out) == 0 and out[0] == 0
    data = np.arange(8, dtype=np.float32)
    pointer = ffi.new("void**")
    assert hip.hipMalloc(pointer, data.nbytes) == 0
    assert hip.hipMemcpy(pointer[0], ffi.from_buffer(data), data.nbytes, 1) == 0
    c = comm[0]
    assert hip.ncclAllReduce(pointer[0], pointer[0], 8, 42, SUM, c, ffi.NULL) == (
        nccl.INVALID_ARGUMENT  # no such data type: refused, nothing queued
    )
    assert hip.ncclBroadcast(pointer[0], pointer[0], 8, FLOAT32, 1, c, ffi.NULL) == (
        nccl.INVALID_ARGUMENT  # no rank 1
    )
    assert hip.ncclGroupStart() == 0
    assert hip.ncclSend(pointer[0], 8, FLOAT32, 0, c, ffi.NULL) == 0  # to itself, in a group
    assert hip.ncclRecv(pointer[0], 8, FLOAT32, 0, c, ffi.NULL) == 0
    assert hip.ncclAllReduce(pointer[0], pointer[0], 8, FLOAT32, MAX, c, ffi.NULL) == 0
    assert hip.ncclGroupEnd() == 0
    assert hip.hipDeviceSynchronize() == 0
    result = ffi.new("ncclResult_t*")
    assert hip.ncclCommGetAsyncError(c, result) == 0 and result[0] == 0
    back = np.zeros_like(data)
    assert hip.hipMemcpy(ffi.from_buffer(back), pointer[0], data.nbytes, 2) == 0
    np.testing.assert_array_equal(back, data)
    assert hip.ncclCommDestroy(c) == 0
    assert hip.ncclCommDestroy(c) == nccl.INVALID_ARGUMENT  # gone
    assert hip.hipFree(pointer[0]) == 0


@pytest.mark.parametrize(
    ("module", "variable", "what"),
    [(rccl, "HIP_FFI_RCCL_PATH", "RCCL"), (nvidia_nccl, "HIP_FFI_NCCL_PATH", "NCCL")],
)
def test_a_missing_library_is_an_error_at_the_first_call_only(
    module: Any, variable: str, what: str, monkeypatch: pytest.MonkeyPatch, hip: Any
) -> None:
    monkeypatch.setenv(variable, "/nonexistent/libnothing.so")
    functions = module.bind(hip.ffi)  # opens nothing yet
    assert set(functions) == set(hip_ffi.surface.COLLECTIVES)
    assert "not opened yet" in repr(functions["ncclGetVersion"])
    for _ in range(2):  # the second call says the same, without searching again
        with pytest.raises(FunctionUnavailableError, match=f"no {what} library.*{variable}"):
            functions["ncclGetVersion"](hip.ffi.new("int*"))


def test_nccl_is_found_in_nvidias_wheel(tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    # nvidia-nccl-cu13 / -cu12 put libnccl.so.2 in site-packages/nvidia/nccl/lib (torch's venv)
    folder = tmp_path / "site" / "nvidia" / "nccl" / "lib"
    folder.mkdir(parents=True)
    (folder / "libnccl.so.2").write_bytes(b"")
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    monkeypatch.delenv("HIP_FFI_NCCL_PATH", raising=False)
    from hip_ffi.platforms.nvidia.libraries import nccl_spec

    candidates = nccl_spec().candidates()
    assert str(folder / "libnccl.so.2") in candidates
    assert candidates[-2:] == ["libnccl.so.2", "libnccl.so"]  # then the dynamic linker
