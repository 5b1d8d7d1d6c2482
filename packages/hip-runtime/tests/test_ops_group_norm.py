"""group_norm's two kernels of kernels/channel_norms.hip against hip_runtime.testing.conv's
float64 reference: the on-chip one (the group held in dynamic shared memory, one read of x)
where the group's bytes fit the device's opt-in limit, and the two-read one otherwise; which
of them a call launches (a group at the limit and one element past it); 16-byte vectors and
by-element rows (spatial sizes not a multiple of 16 bytes), partly filled passes, both
in-flight depths and block sizes; f32 / f16 / bf16; large offsets (the shifted statistics).

On the cpu platform in CI (64 KiB of dynamic shared memory a block: the small groups take the
on-chip kernel there, the large ones the two-read kernel); the same tests run on nvidia
(marked gpu) through the device fixture. Each knob setting runs on a fresh backend: a plan
keeps the kernel and its arguments.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hip_core import Device, Kernel
from hip_runtime import HipBackend, testing
from hip_runtime.ops import channel_norms
from hip_runtime.testing import conv as testing_conv

TYPES = ["f32", "f16", "bf16"]
ITEMSIZE = {"f32": 4, "f16": 2, "bf16": 2}


@pytest.fixture(scope="module")
def backend(device: Device, program_cache: Path) -> Iterator[HipBackend]:
    with HipBackend(device) as backend:
        yield backend


@pytest.fixture(scope="module")
def on_chip_backend(device: Device, program_cache: Path) -> Iterator[HipBackend]:
    """A backend of its own for the on-chip tests: its plans all come from on-chip routes."""
    with HipBackend(device) as backend:
        yield backend


@pytest.fixture
def on_chip(monkeypatch: pytest.MonkeyPatch) -> None:
    """The on-chip kernel where a group fits (off by default: channel_norms._ON_CHIP)."""
    monkeypatch.setattr(channel_norms, "_ON_CHIP", True)


@pytest.fixture
def launches(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, int]]:
    """(kernel name, dynamic shared bytes) of every kernel launched while the test runs."""
    seen: list[tuple[str, int]] = []
    launch = Kernel.launch

    def spy(self: Kernel, *args: Any, **kwargs: Any) -> None:
        seen.append((self.name, kwargs.get("shared_mem", 0)))
        launch(self, *args, **kwargs)

    monkeypatch.setattr(Kernel, "launch", spy)
    return seen


def normalized(device: Device, x: np.ndarray, groups: int, weight: Any = None,
               bias: Any = None) -> np.ndarray:  # fmt: skip
    """group_norm on a fresh backend (the knobs as set now), checked equal to a planned call
    into out=."""
    with HipBackend(device) as fresh:
        params = [None if p is None else fresh.from_numpy(p) for p in (weight, bias)]
        first = fresh.group_norm(fresh.from_numpy(x), groups, *params)
        again = fresh.group_norm(fresh.from_numpy(x), groups, *params,
                                 out=fresh.empty(first.shape, first.dtype))  # fmt: skip
        result = first.to_numpy()
        np.testing.assert_array_equal(again.to_numpy().view(np.uint8), result.view(np.uint8))
        return result


def opt_in_limit(backend: HipBackend, dtype: str) -> int:
    """The dynamic shared bytes the on-chip kernel of `dtype` may take on this device."""
    kernel = backend._kernel("channel_norms.hip", f"group_norm_on_chip_{dtype}")
    static = kernel.attribute("SHARED_SIZE_BYTES")
    return int(backend.device.attribute("SharedMemPerBlockOptin")) - static


@pytest.mark.parametrize("dtype", TYPES)
def test_the_route_follows_the_devices_shared_memory_limit(
    backend: HipBackend, dtype: str, launches: list[tuple[str, int]]
) -> None:
    """With _ON_CHIP, a group of exactly the limit's elements is held on chip (launched with
    its bytes); one element more goes to the two-read kernel (no dynamic shared memory: its
    four-in-flight build, group_norm_deep). By default (_ON_CHIP off) every group goes
    there."""
    size = ITEMSIZE[dtype]
    fits = opt_in_limit(backend, dtype) // size
    rng = np.random.default_rng(7)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(channel_norms, "_ON_CHIP", True)
        for elements, expected in ((fits, (f"group_norm_on_chip_{dtype}", fits * size)),
                                   (fits + 1, (f"group_norm_deep_{dtype}", 0))):  # fmt: skip
            x = testing.random(rng, (1, 2, elements), dtype, scale=2.0, shift=1.0)
            launches.clear()
            got = normalized(backend.device, x, 2)
            assert launches == [expected, expected]  # the first call and the plan's
            testing.assert_close(got, testing_conv.group_norm(x, 2), dtype, 1e-3)
    launches.clear()
    normalized(backend.device, np.ascontiguousarray(x[:, :, :8]), 2)
    assert launches == [(f"group_norm_deep_{dtype}", 0)] * 2


@pytest.mark.parametrize(
    ("shape", "groups"),
    [
        ((2, 8, 64, 64), 2),  # 16-byte vectors, several a thread (bf16 32 KiB a group)
        ((1, 2, 120, 128), 1),  # 16-bit: 60 KiB, 3840 vectors: full flights of 8 at 512
        ((1, 6, 8, 37), 2),  # 296 elements a channel: by element (not a multiple of 8 or 4)
        ((3, 4, 5, 3), 4),  # 15 elements a group: a block of 64 threads, most idle
        ((1, 2, 16, 300), 1),  # 9600 elements: f32 38 KiB, vectors of 4 floats
        ((2, 3, 1000), 3),  # one channel a group, 1000 elements: 125 bf16 vectors, 250 f32
        ((1, 5, 1), 5),  # one element a group: exactly 0
    ],
)
@pytest.mark.parametrize("dtype", TYPES)
def test_on_chip_and_two_reads_match_numpy(
    backend: HipBackend, shape: tuple[int, ...], groups: int, dtype: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    """Both kernels (_ON_CHIP off: two reads; on: on chip where the group fits, as all but
    the f32 120 x 128 one do on cpu), both in-flight depths and block sizes of the on-chip
    one, one block per group or persistent (on cpu one block a core: the groups beyond the
    cores are loaded while the previous ones are written), against float64 (weight and bias
    given)."""
    rng = np.random.default_rng(19)
    x = testing.random(rng, shape, dtype, scale=2.0, shift=1.0)
    weight, bias = (testing.random(rng, (shape[1],), dtype) for _ in range(2))
    expected = testing_conv.group_norm(x, groups, weight, bias, 1e-5)
    variants = [(True, 8, 1024, False), (True, 4, 1024, False), (True, 8, 512, False),
                (True, 8, 1024, True), (True, 4, 512, True), (False, 8, 1024, False)]  # fmt: skip
    for on_chip, flight, block, persistent in variants:
        monkeypatch.setattr(channel_norms, "_ON_CHIP", on_chip)
        monkeypatch.setattr(channel_norms, "_ON_CHIP_PERSISTENT", persistent)
        monkeypatch.setattr(channel_norms, "_ON_CHIP_FLIGHT", flight)
        monkeypatch.setattr(channel_norms, "_ON_CHIP_BLOCK", block)
        got = normalized(backend.device, x, groups, weight, bias)
        testing.assert_close(got, expected, dtype, 1e-3 if dtype == "f32" else 0.0)


@pytest.mark.parametrize("dtype", TYPES)
def test_groups_past_the_limit_take_two_reads(
    backend: HipBackend, dtype: str, launches: list[tuple[str, int]]
) -> None:
    """Groups of twice the on-chip limit (on cpu 128 KiB; an H100's 454 KiB), by vector and
    by element (one element more a channel), through the two-read kernel (group_norm_deep)."""
    size = ITEMSIZE[dtype]
    inner = opt_in_limit(backend, dtype) // size
    rng = np.random.default_rng(23)
    for spatial in (inner - inner % 8, inner - inner % 8 + 1):
        x = testing.random(rng, (1, 4, spatial), dtype, scale=2.0, shift=1.0)
        launches.clear()
        got = normalized(backend.device, x, 2)
        assert {name for name, _ in launches} == {f"group_norm_deep_{dtype}"}
        testing.assert_close(got, testing_conv.group_norm(x, 2), dtype, 1e-3)


@pytest.mark.parametrize(("offset", "spread"), [(1e4, 1e-2), (1e3, 1.0), (-5e5, 3.0), (0.0, 1e-3)])
def test_on_chip_statistics_of_large_offsets(
    backend: HipBackend, offset: float, spread: float, launches: list[tuple[str, int]],
    on_chip: None,
) -> None:  # fmt: skip
    """f32 groups far from 0 beside their spread, one element 50 sigma out: the statistics of
    x less the group's first element keep the error near f32's rounding of the result (65aeabd
    measured 1e-5 on the two-read kernel; unshifted, 5e-2 at 1e4 +- 1e-2)."""
    rng = np.random.default_rng(11)
    x = (rng.standard_normal((2, 8, 40, 40)) * spread + offset).astype(np.float32)
    x[1, 5, 3, 7] = offset + 50 * spread
    got = normalized(backend.device, x, 4)
    assert {name for name, _ in launches} == {"group_norm_on_chip_f32"}
    error = np.abs(got.astype(np.float64) - testing_conv.group_norm(x, 4)).max()
    assert error < 1e-4, error


@settings(
    max_examples=25,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(data=st.data())
def test_on_chip_matches_numpy(on_chip_backend: HipBackend, on_chip: None, data: Any) -> None:
    """Random shapes that fit on chip: channels per group, spatial sizes (odd ones by
    element), offsets, optional weight and bias, on one backend (plans included)."""
    backend = on_chip_backend
    dtype = data.draw(st.sampled_from(TYPES))
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1)))
    groups = data.draw(st.integers(1, 4))
    c = groups * data.draw(st.integers(1, 4))
    spatial = tuple(data.draw(st.lists(st.integers(1, 40), min_size=1, max_size=2)))
    shape = (data.draw(st.integers(1, 2)), c, *spatial)
    x = testing.random(rng, shape, dtype, scale=2.0, shift=data.draw(st.sampled_from([0, 3])))
    params = [testing.random(rng, (c,), dtype) if data.draw(st.booleans()) else None
              for _ in range(2)]  # fmt: skip
    tensors = [None if p is None else backend.from_numpy(p) for p in params]
    got = backend.group_norm(backend.from_numpy(x), groups, *tensors).to_numpy()
    # The f32 statistics' rounding (up to 6400 elements a group) is at the scale of the
    # normalized values (~1), not of each output: one near 0 gets no tighter bound of its own
    # (seen: 1.4e-5 off at 3e-3, f16).
    testing.assert_close(got, testing_conv.group_norm(x, groups, *params), dtype,
                         10.0 if dtype == "f32" else 0.1)  # fmt: skip
