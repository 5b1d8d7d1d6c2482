"""ForwardGraph: a forward captured once replays the eager result bit for bit, with new inputs.

On the cpu platform in CI; the same tests run on nvidia (marked gpu) through the device fixture.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from hip_core import ClosedError, Device
from hip_runtime import DeviceTensor, ForwardGraph, HipBackend

HIDDEN, FFN, ROWS = 32, 64, 24


@pytest.fixture(params=["blas", "kernel"])
def backend(device: Device, request: pytest.FixtureRequest) -> HipBackend:
    """Products through BLAS, or (all of depth k <= 128 here) through the small-product kernel
    (hip_runtime.libraries.small_gemm)."""
    return HipBackend(device, small_gemm=0 if request.param == "blas" else 2**62)


def _encoder_layer(backend: HipBackend) -> tuple[Callable[..., Any], np.ndarray]:
    """A small encoder-like forward (attention-free: matmul, bias, layernorm, gelu, softmax)
    with random weights, and an input for it."""
    rng = np.random.default_rng(15)

    def weight(*shape: int) -> DeviceTensor:
        return backend.from_numpy((rng.standard_normal(shape) / np.sqrt(shape[0])).astype("f4"))

    w1, b1, w2, b2 = weight(HIDDEN, FFN), weight(FFN), weight(FFN, HIDDEN), weight(HIDDEN)
    gamma, beta = weight(HIDDEN), weight(HIDDEN)

    def forward(x: DeviceTensor) -> tuple[DeviceTensor, DeviceTensor]:
        h = backend.gelu(backend.add_row_bias(backend.matmul(x, w1), b1))
        y = backend.add(backend.add_row_bias(backend.matmul(h, w2), b2), x)
        y = backend.layernorm(y, gamma, beta)
        return y, backend.softmax(y, scale=0.5)

    return forward, rng.standard_normal((ROWS, HIDDEN)).astype(np.float32)


def _bits(tensors: Any) -> list[np.ndarray]:
    return [t.to_numpy().view(np.uint32) for t in tensors]


def test_a_replay_gives_the_eager_result_bit_for_bit(backend: HipBackend) -> None:
    forward, example = _encoder_layer(backend)
    graph = ForwardGraph(backend, forward, example)
    # The warm-up sized the graph's memory: the capture allocated nothing more.
    assert len(graph.memory.chunks) == 1 and graph.memory.allocated == graph.memory.used
    rng = np.random.default_rng(1)
    for _ in range(3):  # new host data each time: the replay sees it
        x = rng.standard_normal(example.shape).astype(np.float32)
        eager = _bits(forward(backend.from_numpy(x)))
        replayed = graph(x)
        assert replayed is graph.outputs
        for got, expected in zip(_bits(replayed), eager, strict=True):
            np.testing.assert_array_equal(got, expected)


def test_inputs_from_the_device_and_in_place(backend: HipBackend) -> None:
    forward, example = _encoder_layer(backend)
    graph = ForwardGraph(backend, forward, backend.from_numpy(example))
    x = backend.from_numpy(example * 2)
    expected = _bits(forward(x))
    np.testing.assert_array_equal(_bits(graph(x))[0], expected[0])
    graph.inputs[0].copy_from_host(example * 2)  # written by the caller, then replayed as is
    np.testing.assert_array_equal(_bits(graph.replay())[1], expected[1])


def test_an_output_kept_by_copy_survives_the_next_replay(backend: HipBackend) -> None:
    square = ForwardGraph(backend, lambda x: backend.mul(x, x), np.ones(8, np.float32))
    graph = ForwardGraph(backend, lambda x: backend.mul(x, x), np.ones(8, np.float32), warmup=False)
    assert square.memory.recorded and not graph.memory.recorded
    first = graph(np.full(8, 3, np.float32))
    keep = backend.empty(first.shape, first.dtype)
    keep.copy_(first)
    graph(np.full(8, 5, np.float32))
    assert (keep.to_numpy() == 9).all() and (graph.outputs.to_numpy() == 25).all()


@pytest.mark.parametrize(
    ("bad", "match"),
    [
        (np.zeros((ROWS, HIDDEN + 1), np.float32), "captured for"),  # shape
        (np.zeros((ROWS, HIDDEN), np.float64), "captured for"),  # dtype
        (np.zeros((ROWS * HIDDEN,), np.float32), "captured for"),  # same size, other shape
    ],
)
def test_wrong_inputs_are_refused_before_anything_is_queued(
    backend: HipBackend, bad: np.ndarray, match: str
) -> None:
    forward, example = _encoder_layer(backend)
    graph = ForwardGraph(backend, forward, example)
    before = graph(example)[0].to_numpy()
    with pytest.raises(ValueError, match=match):
        graph(bad)
    with pytest.raises(ValueError, match="takes 1 inputs"):
        graph(example, example)
    np.testing.assert_array_equal(graph.inputs[0].to_numpy(), example)  # nothing copied in
    np.testing.assert_array_equal(graph.replay()[0].to_numpy(), before)


def test_a_forward_that_forks_to_another_stream_and_joins(backend: HipBackend) -> None:
    """Work forked to a second stream through events is captured and ordered on replay."""
    side = backend.device.create_stream(non_blocking=True)
    fork, join = backend.device.create_event(timing=False), backend.device.create_event()

    def forward(x: DeviceTensor) -> DeviceTensor:
        doubled = backend.add(x, x)
        copied = backend.empty(x.shape, x.dtype)
        fork.record(backend.stream)
        side.wait(fork)
        copied.region().copy_from(doubled.region(), stream=side)  # on the side stream
        squared = backend.mul(x, x)  # meanwhile on the backend's stream
        join.record(side)
        backend.stream.wait(join)
        return backend.add(copied, squared)

    example = np.arange(16, dtype=np.float32)
    graph = ForwardGraph(backend, forward, example)
    for scale in (1.0, -2.5):
        x = example * scale
        np.testing.assert_array_equal(graph(x).to_numpy(), (x + x) + x * x)


def test_a_closed_graph_refuses_replays(backend: HipBackend) -> None:
    graph = ForwardGraph(backend, lambda x: backend.add(x, x), np.ones(4, np.float32))
    graph.close()
    with pytest.raises(ClosedError):
        graph(np.ones(4, np.float32))


def test_forward_must_return_tensors(backend: HipBackend) -> None:
    with pytest.raises(TypeError, match="must return a DeviceTensor"):
        ForwardGraph(backend, lambda x: 3, np.ones(4, np.float32))
