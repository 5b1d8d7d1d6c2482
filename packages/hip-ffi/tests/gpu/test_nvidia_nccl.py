"""NCCL through the nvidia platform's collective surface on real GPUs (`pytest -m gpu`, two
H100s/H200s, NCCL_NVLS_ENABLE=0): libnccl found and opened at the first call, one process
driving two GPUs (ncclCommInitAll, a group) for an all-reduce and a send/recv pair. With fewer
than two GPUs the two-GPU test skips, saying so. hip-core's test_collectives*.py run the whole
suite (every collective, two processes) on nvidia too.
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np
import pytest

import hip_ffi
from hip_ffi import collective_constants as nccl

pytestmark = pytest.mark.gpu
os.environ["NCCL_NVLS_ENABLE"] = "0"  # NVLink multicast stays off
FLOAT32, SUM = nccl.DATA_TYPES["float32"], nccl.REDUCTION_OPS["sum"]
H2D, D2H = 1, 2


def test_nccl_opens_at_the_first_call(hip: Any) -> None:
    version = hip.ffi.new("int*")
    assert hip.ncclGetVersion(version) == 0
    assert nccl.unpack_version(version[0]) >= (2, 13, 0)
    assert "NCCL" in repr(hip.ncclGetVersion) and "not opened yet" not in repr(hip.ncclGetVersion)
    text = hip.ffi.string(hip.ncclGetErrorString(nccl.INVALID_ARGUMENT)).decode()
    assert "invalid argument" in text


def test_two_gpus_in_one_process(hip: Any) -> None:
    ffi = hip.ffi
    count, _ = hip_ffi.device_count(hip)
    if count < 2:
        pytest.skip(f"needs two GPUs; this machine has {count}")
    comms = ffi.new("ncclComm_t[]", 2)
    assert hip.ncclCommInitAll(comms, 2, ffi.new("int[]", [0, 1])) == 0
    n = 1 << 20
    sources, targets = [], []
    for rank in range(2):
        assert hip.hipSetDevice(rank) == 0
        source, target = ffi.new("void**"), ffi.new("void**")
        assert hip.hipMalloc(source, 4 * n) == 0 and hip.hipMalloc(target, 4 * n) == 0
        data = np.full(n, rank + 1, np.float32)
        assert hip.hipMemcpy(source[0], ffi.from_buffer(data), 4 * n, H2D) == 0
        sources.append(source[0])
        targets.append(target[0])
    assert hip.ncclGroupStart() == 0
    for rank in range(2):
        assert (
            hip.ncclAllReduce(sources[rank], targets[rank], n, FLOAT32, SUM, comms[rank], ffi.NULL)
            == 0
        )
    assert hip.ncclGroupEnd() == 0
    assert hip.ncclGroupStart() == 0  # rank 0 sends its source to rank 1's source
    assert hip.ncclSend(sources[0], n, FLOAT32, 1, comms[0], ffi.NULL) == 0
    assert hip.ncclRecv(sources[1], n, FLOAT32, 0, comms[1], ffi.NULL) == 0
    assert hip.ncclGroupEnd() == 0
    for rank in range(2):
        assert hip.hipSetDevice(rank) == 0 and hip.hipDeviceSynchronize() == 0
        out = np.zeros(n, np.float32)
        assert hip.hipMemcpy(ffi.from_buffer(out), targets[rank], 4 * n, D2H) == 0
        assert (out == 3).all()
        assert hip.hipMemcpy(ffi.from_buffer(out), sources[rank], 4 * n, D2H) == 0
        assert (out == 1).all()
        result = ffi.new("ncclResult_t*")
        assert hip.ncclCommGetAsyncError(comms[rank], result) == 0 and result[0] == 0
    for rank in range(2):
        assert hip.ncclCommDestroy(comms[rank]) == 0
        assert hip.hipFree(sources[rank]) == 0 and hip.hipFree(targets[rank]) == 0
    assert hip.hipSetDevice(0) == 0
