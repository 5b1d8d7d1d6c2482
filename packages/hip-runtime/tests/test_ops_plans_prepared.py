"""Plans with prepared launches (issue 15: `Kernel.prepare`, `Blas.prepare`): a plan hit
launches with only its addresses written. Scalars a plan's launch was prepared with (eps,
scale, alpha, a pointwise op's parameters) may differ from call to call, a release anywhere
or a second thread must not make a stale launch, and results match the checked path's.

On the cpu platform in CI; the same tests run on nvidia (marked gpu) through the device fixture.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator

import numpy as np
import pytest

from hip_core import Device
from hip_runtime import HipBackend, testing

F32 = np.float32


@pytest.fixture(scope="module")
def backend(device: Device) -> Iterator[HipBackend]:
    with HipBackend(device) as backend:
        yield backend


def data(*shape: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(shape).astype(F32)


def test_scalars_that_differ_from_the_prepared_ones(backend: HipBackend) -> None:
    a, b, wa, ba = data(4, 32), data(32, 32, seed=1), data(32, seed=2), data(32, seed=3)
    x, y, w, bias = (backend.from_numpy(v) for v in (a, b, wa, ba))
    for eps in (1e-5, 1e-5, 0.5, 1e-5):
        expected = testing.layernorm(a, wa, ba, eps=eps).value
        np.testing.assert_allclose(backend.layernorm(x, w, bias, eps=eps).to_numpy(), expected,
                                   rtol=1e-5, atol=1e-5)  # fmt: skip
    for scale in (1.0, 1.0, 0.25, 1.0):
        expected = np.exp(scale * a - (scale * a).max(-1, keepdims=True))
        expected /= expected.sum(-1, keepdims=True)
        np.testing.assert_allclose(backend.softmax(x, scale=scale).to_numpy(), expected,
                                   rtol=1e-5, atol=1e-6)  # fmt: skip
    for alpha in (1.0, 1.0, 2.0, 1.0, 3):
        np.testing.assert_allclose(backend.matmul(x, y, alpha=alpha).to_numpy(), alpha * a @ b,
                                   rtol=1e-4, atol=1e-4)  # fmt: skip
    for value in (0.5, 0.5, 2.0, 0.5):
        np.testing.assert_allclose(backend.mul(x, value).to_numpy(), a * value, rtol=1e-6)


def test_a_release_between_calls_keeps_plans_right(backend: HipBackend) -> None:
    """Closing any buffer bumps hip-core's generation: prepared launches check their module
    and stream again and go on (nothing of theirs was closed)."""
    a, b = data(8, 8), data(8, 8, seed=1)
    x, y = backend.from_numpy(a), backend.from_numpy(b)
    out = backend.empty((8, 8), F32)
    for _ in range(3):
        backend.empty((4,), F32).buffer.close()
        np.testing.assert_array_equal(backend.add(x, y).to_numpy(), a + b)
        backend.add(x, y, out=out)
        np.testing.assert_array_equal(out.to_numpy(), a + b)
        np.testing.assert_allclose(backend.linear(x, y).to_numpy(), a @ b.T, rtol=1e-5,
                                   atol=1e-5)  # fmt: skip


def test_threads_sharing_one_plan(backend: HipBackend) -> None:
    """Two threads issuing the same planned op at once: each gets its own result (a thread
    that finds the prepared launch busy takes the checked path)."""
    a = data(16, 16)
    x = backend.from_numpy(a)
    ys = [backend.from_numpy(data(16, 16, seed=s)) for s in (1, 2)]
    outs = [backend.empty((16, 16), F32) for _ in ys]
    failures: list[BaseException] = []

    def work(y: object, out: object) -> None:
        try:
            for _ in range(50):
                backend.add(x, y, out=out)  # type: ignore[arg-type]
        except BaseException as error:  # reported below
            failures.append(error)

    threads = [threading.Thread(target=work, args=pair) for pair in zip(ys, outs, strict=True)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not failures
    for y, out in zip(ys, outs, strict=True):
        np.testing.assert_array_equal(out.to_numpy(), a + y.to_numpy())


@pytest.mark.parametrize("bad", ["shape", "dtype"])
def test_a_bad_call_after_a_plan_still_raises(backend: HipBackend, bad: str) -> None:
    x = backend.from_numpy(data(4, 4))
    backend.add(x, x), backend.add(x, x)
    other = backend.from_numpy(data(4, 5) if bad == "shape" else data(4, 4).astype(np.float16))
    with pytest.raises(ValueError):
        backend.add(x, other)
