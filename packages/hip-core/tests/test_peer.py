"""Peer access between two devices, peer copies between their buffers (synchronous and on a
stream) and pools made accessible to a peer, on the cpu platform with two devices and, marked
`gpu`, on two GPUs.

The cpu platform reads its device count once per process, so
`test_in_a_process_with_two_cpu_devices` runs this file again in a subprocess started with
HIP_FFI_CPU_DEVICES=2; in a process with fewer than two devices the tests are skipped, saying so.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from hip_core import ClosedError, Device, MemoryPool, Program, peer
from hip_cpu import ordinals, testing

KERNEL = r"""
#include <hip/hip_runtime.h>
extern "C" __global__ void add_one(int* data, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) data[i] += 1;
}
"""


@pytest.fixture
def pair(platform: str) -> tuple[Device, Device]:
    count = Device.count()
    if count < 2:
        if platform == "cpu":
            pytest.skip("one cpu device here: test_in_a_process_with_two_cpu_devices runs these")
        pytest.skip(f"peer tests need two devices; the {platform} platform has {count}")
    return Device(0), Device(1)


def linked(pair: tuple[Device, Device]) -> tuple[Device, Device]:
    a, b = pair
    if not (a.can_access_peer(b) and b.can_access_peer(a)):
        pytest.skip(f"{a} and {b} cannot access each other's memory")
    return a, b


def test_in_a_process_with_two_cpu_devices() -> None:
    if ordinals.count() >= 2:
        pytest.skip("this process has several cpu devices: the tests of this file ran in it")
    passed, _ = testing.rerun_with_devices(2, __file__)
    assert passed >= 6


def test_a_peer_copy_links_the_pair_but_keeps_a_disable(pair: tuple[Device, Device]) -> None:
    """The first copy between two devices enables peer access both ways (CUDA stages an
    unlinked peer copy through the host: 38 GB/s against 394 on two H100s), except where the
    program disabled it."""
    a, b = linked(pair)
    if (id(a._api), a.ordinal, b.ordinal) in peer._linked:
        pytest.skip("an earlier copy in this process linked the pair already")
    b.disable_peer_access(a)  # the program's choice: a copy must not undo it
    on_a, on_b = a.allocate(4096), b.allocate(4096)
    on_a.fill(5)
    on_b.copy_from(on_a)
    assert peer.enabled(a, b) and not peer.enabled(b, a)
    out = bytearray(4096)
    with b:
        on_b.copy_to(out)
    assert out == b"\x05" * 4096
    b.enable_peer_access(a)


def test_peer_access_is_idempotent(pair: tuple[Device, Device]) -> None:
    a, b = pair
    assert not a.can_access_peer(a)  # a device is never its own peer
    a, b = linked(pair)
    for _ in range(2):
        a.enable_peer_access(b)
        b.enable_peer_access(a)
    for _ in range(2):
        a.disable_peer_access(b)
    a.enable_peer_access(b)
    with pytest.raises(ValueError, match="not its own peer"):
        a.enable_peer_access(a)
    with pytest.raises(TypeError, match=r"hip_core\.Device"):
        a.can_access_peer(1)  # type: ignore[arg-type]


def test_peer_copies(pair: tuple[Device, Device]) -> None:
    a, b = pair
    rng = np.random.default_rng()
    data = rng.integers(0, 2**31, 1 << 16, dtype=np.int32)
    on_a, on_b = a.allocate(data.nbytes), b.allocate(data.nbytes)
    out = np.zeros_like(data)
    on_a.copy_from(data)
    on_b.copy_from(on_a)  # synchronous: the null streams of both devices
    with b:
        on_b.copy_to(out)
    np.testing.assert_array_equal(out, data)
    on_a.fill(0)
    a.synchronize()  # (a fill may still run on a's null stream, which b's streams do not wait on)
    half = data.nbytes // 2
    for stream in (a.create_stream(), b.create_stream()):  # a stream of either device
        on_b.view(half).copy_to(on_a.view(0, half), stream=stream)
        stream.sync()
        with a:
            on_a.copy_to(out)
        np.testing.assert_array_equal(out[: data.size // 2], data[data.size // 2 :])
        assert not out[data.size // 2 :].any()


def test_peer_copies_are_checked_before_reaching_a_device(pair: tuple[Device, Device]) -> None:
    a, b = pair
    small, large = a.allocate(64), b.allocate(128)
    with pytest.raises(ValueError, match="source holds 128 bytes; this buffer only 64"):
        small.copy_from(large)
    with pytest.raises(ValueError, match="destination holds 128"):
        small.copy_to(large.view(0, 128), stream=b.create_stream())
    with pytest.raises(ValueError, match="outside the buffer"):
        large.view(100, 64)
    large.close()
    with pytest.raises(ClosedError):
        small.copy_to(large)
    with pytest.raises(TypeError, match="stream must be"):
        small.copy_to(b.allocate(64), stream=0)  # type: ignore[arg-type]


@pytest.mark.parametrize("backend", ["hip", "caching"])
def test_a_pool_made_accessible_to_a_peer(
    pair: tuple[Device, Device], backend: str, cache_dir: Path
) -> None:
    owner, peer = linked(pair)
    kernel = Program(KERNEL, name="add_one.hip").load(peer).get_kernel("add_one")
    with MemoryPool(owner, backend=backend) as pool:
        if backend == "hip" and pool.backend != "hip":
            pytest.skip(f"{owner} has no HIP memory pools")
        with pytest.raises(ValueError, match="not its own peer"):
            pool.enable_peer_access(owner)
        pool.enable_peer_access(peer)
        pool.enable_peer_access(peer)  # idempotent
        assert pool.peer_access(peer)
        n = 4096
        buffer = pool.allocate(4 * n, stream=None)
        buffer.copy_from(np.arange(n, dtype=np.int32))
        stream = peer.create_stream()
        kernel.launch((n + 255) // 256, 256, buffer, n, stream=stream)  # on the peer
        stream.sync()
        out = np.empty(n, dtype=np.int32)
        with owner:
            buffer.copy_to(out)
        np.testing.assert_array_equal(out, np.arange(n, dtype=np.int32) + 1)
        buffer.close()
        pool.disable_peer_access(peer)
        pool.disable_peer_access(peer)
        assert not pool.peer_access(peer)


def test_copies_between_devices_keep_working_after_errors(pair: tuple[Device, Device]) -> None:
    """A refused peer copy leaves nothing behind: the next one works."""
    a, b = pair
    on_a, on_b = a.allocate(256), b.allocate(128)
    with pytest.raises(ValueError):
        on_b.copy_from(on_a)
    on_a.fill(3)
    on_b.copy_from(on_a.view(0, 128))
    out = bytearray(128)
    with b:
        on_b.copy_to(out)
    assert out == b"\x03" * 128


def test_copies_and_fills_run_on_their_buffers_device(pair: tuple[Device, Device]) -> None:
    """With device 0 current, a buffer of device 1 is filled, written and read, synchronously
    and on device 1's stream, and device 0 stays current (on nvidia the async copy used to be
    hipErrorInvalidValue and the synchronous ones ran on device 0's null stream)."""
    a, b = pair
    on_b, stream = b.allocate(64), b.create_stream()
    with a:
        on_b.fill(7)
        got = bytearray(64)
        on_b.copy_to(got)
        assert got == b"\x07" * 64
        on_b.copy_from(bytes(range(64)), stream=stream)
        on_b.fill(9, stream=stream)  # after the copy: stream order
        stream.sync()
        on_b.copy_to(got, stream=stream)
        stream.sync()
        assert got == b"\x09" * 64
        assert Device.current() == a
