"""Strided DeviceTensor views against numpy, under hypothesis: random shapes of rank 0-5 (size-0
and size-1 axes), every dtype, random chains of views (indexing with steps, negative too, None
and Ellipsis; permute, transpose, T, mT, narrow, expand, broadcast_to, squeeze, unsqueeze,
reshape where numpy can without copying, view as a dtype of the same size), each applied to a
device tensor and to a numpy array alike. The layouts must agree with numpy's (the same first
element, the same strides: proof that nothing was copied), and `to_numpy()`, `contiguous()` and
`copy_()` between strided views must give numpy's bits.

On the cpu platform in CI; the same tests run on nvidia (marked gpu) through the device fixture.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable
from typing import Any

import ml_dtypes
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hip_core import Device
from hip_runtime import DeviceTensor

DTYPES = [
    np.dtype(t)
    for t in (np.float32, np.float64, np.float16, ml_dtypes.bfloat16, np.int8, np.int16,
              np.int32, np.int64, np.uint8, np.uint32, np.bool_)
]  # fmt: skip
SAME_SIZE = {size: [t for t in DTYPES if t.itemsize == size] for size in (1, 2, 4, 8)}
SETTINGS = settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow], database=None
)

Op = tuple[str, Callable[[Any], Any], Callable[[np.ndarray], np.ndarray]]


def bits(array: np.ndarray) -> np.ndarray:
    """Every byte of the elements in row-major order: copies move bits, NaN payloads included."""
    return np.ascontiguousarray(array).reshape(-1).view(np.uint8)


def host_array(rng: np.random.Generator, shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
    if dtype == np.bool_:
        return rng.integers(0, 2, shape).astype(bool)
    count = int(np.prod(shape))
    return rng.integers(0, 256, count * dtype.itemsize, np.uint8).view(dtype).reshape(shape)


# Axes of 0 to 5 elements; empty axes one time in ten, or most rank-5 arrays would be empty.
shapes = st.lists(st.sampled_from([1, 2, 3, 4, 5, 0, 1, 2, 3, 4]), max_size=5).map(tuple)


def index_key(draw: st.DrawFn, shape: tuple[int, ...]) -> tuple[Any, ...]:
    """A basic index: per axis an int or a slice with any step; a run of axes maybe replaced
    by an Ellipsis, trailing axes maybe left out, Nones inserted anywhere."""
    items: list[Any] = []
    for size in shape:
        if size and draw(st.booleans()):
            items.append(draw(st.integers(-size, size - 1)))
        else:
            bound = st.none() | st.integers(-size - 2, size + 2)
            step = draw(st.sampled_from([None, 1, 2, 3, -1, -2, -3]))
            items.append(slice(draw(bound), draw(bound), step))
    if draw(st.booleans()):
        start = draw(st.integers(0, len(items)))
        stop = draw(st.integers(start, len(items)))
        items[start:stop] = [Ellipsis]
    elif items:
        items = items[: draw(st.integers(0, len(items)))]
    for _ in range(draw(st.integers(0, 2))):
        items.insert(draw(st.integers(0, len(items))), None)
    return tuple(items)


@st.composite
def view_op(draw: st.DrawFn, shape: tuple[int, ...], itemsize: int) -> Op:
    """One view, as (description, what it does to a DeviceTensor, what it does to numpy)."""
    ndim = len(shape)
    kinds = ["index", "unsqueeze", "expand", "reshape", "view"]
    kinds += ["permute", "transpose", "T", "narrow"] if ndim else []
    kinds += ["mT"] if ndim >= 2 else []
    kinds += ["squeeze"] if 1 in shape else []
    kind = draw(st.sampled_from(kinds))
    if kind == "index":
        key = index_key(draw, shape)
        plain = key[0] if len(key) == 1 and draw(st.booleans()) else key
        # numpy gives a scalar (a copy) for an int on every axis; with an Ellipsis, a 0-d view.
        np_key = key if Ellipsis in key else (*key, Ellipsis)
        return f"[{key}]", lambda t: t[plain], lambda a: a[np_key]
    if kind == "permute":
        order = tuple(draw(st.permutations(range(ndim))))
        return f"permute{order}", lambda t: t.permute(*order), lambda a: a.transpose(order)
    if kind == "transpose":
        d0, d1 = draw(st.integers(-ndim, ndim - 1)), draw(st.integers(-ndim, ndim - 1))
        return f"transpose({d0}, {d1})", lambda t: t.transpose(d0, d1), lambda a: a.swapaxes(d0, d1)
    if kind == "T":
        return "T", lambda t: t.T, lambda a: a.T
    if kind == "mT":
        return "mT", lambda t: t.mT, lambda a: a.swapaxes(-1, -2)
    if kind == "narrow":
        dim = draw(st.integers(-ndim, ndim - 1))
        size = shape[dim]
        start = draw(st.integers(-size, size)) if size else 0
        first = start + size if start < 0 else start
        length = draw(st.integers(0, size - first))
        key = (slice(None),) * (dim % ndim) + (slice(first, first + length), Ellipsis)
        name = f"narrow({dim}, {start}, {length})"
        return name, lambda t: t.narrow(dim, start, length), lambda a: a[key]
    if kind == "expand":
        lead = draw(st.lists(st.integers(0, 3), max_size=2))
        target = [*lead, *(draw(st.sampled_from([0, 1, 2, 3])) if d == 1 else d for d in shape)]
        sizes = [-1 if i >= len(lead) and d == shape[i - len(lead)] and draw(st.booleans())
                 else d for i, d in enumerate(target)]  # fmt: skip
        if draw(st.booleans()):
            return (
                f"expand{sizes}",
                lambda t: t.expand(*sizes),
                lambda a: np.broadcast_to(a, target),
            )
        name = f"broadcast_to{target}"
        return name, lambda t: t.broadcast_to(target), lambda a: np.broadcast_to(a, target)
    if kind == "squeeze":
        ones = [a for a, d in enumerate(shape) if d == 1]
        axes = draw(st.none() | st.lists(st.sampled_from(ones), min_size=1, unique=True).map(tuple))
        return f"squeeze({axes})", lambda t: t.squeeze(axes), lambda a: np.squeeze(a, axes)
    if kind == "unsqueeze":
        dim = draw(st.integers(-ndim - 1, ndim))
        return f"unsqueeze({dim})", lambda t: t.unsqueeze(dim), lambda a: np.expand_dims(a, dim)
    if kind == "view":
        dtype = draw(st.sampled_from(SAME_SIZE[itemsize]))
        return f"view({dtype})", lambda t: t.view(dtype), lambda a: a.view(dtype)
    size = int(np.prod(shape))
    new = draw(reshape_target(size))
    if -1 not in new and draw(st.booleans()) and new:
        new = tuple(-1 if i == 0 else d for i, d in enumerate(new)) if size else new
    return f"reshape{new}", lambda t: t.reshape(new), lambda a: np.reshape(a, new, copy=False)


@st.composite
def reshape_target(draw: st.DrawFn, size: int) -> tuple[int, ...]:
    """A shape of `size` elements: its prime factors dealt to up to 5 axes, size-1 axes
    sprinkled in (a zero somewhere when size is 0)."""
    factors, rest, p = [], size, 2
    while rest > 1:
        while rest % p == 0:
            factors.append(p)
            rest //= p
        p += 1
    rank = draw(st.integers(1 if size != 1 else 0, 5))
    dims = [1] * rank
    for f in factors:
        dims[draw(st.integers(0, rank - 1))] *= f
    if size == 0:
        dims = draw(st.lists(st.integers(0, 4), min_size=1, max_size=5))
        dims[draw(st.integers(0, len(dims) - 1))] = 0
    return tuple(dims)


@st.composite
def chains(draw: st.DrawFn) -> tuple[np.ndarray, list[Op]]:
    """A random host array and up to 6 views applied one after the other."""
    rng = np.random.default_rng(draw(st.integers(0, 2**32)))
    array = host_array(rng, draw(shapes), draw(st.sampled_from(DTYPES)))
    ops: list[Op] = []
    current = array
    for _ in range(draw(st.integers(1, 6))):
        op = draw(view_op(current.shape, current.dtype.itemsize))
        try:
            current = op[2](current)
        except ValueError:  # numpy cannot reshape without a copy: DeviceTensor must refuse too
            ops.append((op[0] + " (refused)", op[1], op[2]))
            continue
        ops.append(op)
    return array, ops


def apply(
    tensor: DeviceTensor, array: np.ndarray, ops: list[Op]
) -> tuple[DeviceTensor, np.ndarray]:
    for name, on_tensor, on_array in ops:
        if name.endswith("(refused)"):
            with pytest.raises(ValueError, match=r"contiguous\(\)"):
                on_tensor(tensor)
            continue
        tensor, array = on_tensor(tensor), on_array(array)
    return tensor, array


def assert_same_layout(
    view: DeviceTensor, base: DeviceTensor, got: np.ndarray, start: np.ndarray
) -> None:
    """The view's first element and strides are numpy's: nothing was copied."""
    assert view.shape == got.shape and view.dtype == got.dtype
    assert view.is_contiguous == got.flags.c_contiguous
    assert view.buffer is base.buffer
    if got.size:
        address = got.__array_interface__["data"][0] - start.__array_interface__["data"][0]
        assert view.ptr - base.ptr == address
        item = got.dtype.itemsize
        for d, ours, theirs in zip(got.shape, view.strides, got.strides, strict=True):
            assert d == 1 or ours * item == theirs, (view.strides, got.strides)


@SETTINGS
@given(chain=chains())
def test_view_chains_match_numpy(device: Device, chain: tuple[np.ndarray, list[Op]]) -> None:
    array, ops = chain
    base = DeviceTensor.from_numpy(array, device=device)
    view, expected = apply(base, array, ops)
    assert_same_layout(view, base, expected, array)
    got = view.to_numpy()
    assert got.shape == expected.shape and got.dtype == expected.dtype and got.flags.c_contiguous
    np.testing.assert_array_equal(bits(got), bits(expected), err_msg=str([op[0] for op in ops]))
    dense = view.contiguous()
    assert dense.is_contiguous and (dense is view) == view.is_contiguous
    np.testing.assert_array_equal(bits(dense.to_numpy()), bits(expected))


def overlapping(view: DeviceTensor) -> bool:
    return any(s == 0 and d > 1 for d, s in zip(view.shape, view.strides, strict=True))


@SETTINGS
@given(chain=chains(), data=st.data())
def test_copy_into_strided_views_matches_numpy(
    device: Device, chain: tuple[np.ndarray, list[Op]], data: st.DataObject
) -> None:
    """dst.copy_(src): dst a random view, src a permuted, possibly broadcast tensor of the same
    values numpy assigns (or dst itself reversed: overlapping memory). Where each element of
    dst lives in the base is tracked by applying the chain to an array of flat indices."""
    array, ops = chain
    ops = [op for op in ops if not op[0].startswith("view(")]  # indices are int64
    base = DeviceTensor.from_numpy(array, device=device)
    view, _ = apply(base, array, ops)
    where = np.arange(array.size).reshape(array.shape)
    for name, _, on_array in ops:
        where = where if name.endswith("(refused)") else on_array(where)
    if overlapping(view):
        with pytest.raises(ValueError, match="overlap"):
            view.copy_(view.contiguous())
        return
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32)))
    if data.draw(st.booleans()) and view.ndim:  # the view reversed onto itself
        flip = (slice(None, None, -1),) * view.ndim
        values, source = view.to_numpy()[flip], view[flip]
    else:
        drop = data.draw(st.integers(0, view.ndim))  # fewer axes and size-1 axes broadcast
        shape = tuple(1 if data.draw(st.booleans()) else d for d in view.shape[drop:])
        values = host_array(rng, shape, array.dtype)
        order = data.draw(st.permutations(range(len(shape))))
        inverse = tuple(np.argsort(order))
        source = DeviceTensor.from_numpy(values.transpose(inverse), device=device).permute(*order)
    expected = array.copy()
    expected.reshape(-1)[where.reshape(-1)] = np.broadcast_to(values, view.shape).reshape(-1)
    assert view.copy_(source) is view
    np.testing.assert_array_equal(bits(base.to_numpy()), bits(expected))


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_copy_into_a_strided_view_from_the_host(device: Device, dtype: np.dtype) -> None:
    rng = np.random.default_rng(secrets.randbits(32))
    array = host_array(rng, (5, 7, 3), dtype)
    base = DeviceTensor.from_numpy(array, device=device)
    values = host_array(rng, (3, 4, 5), dtype)
    base[:, ::-2, :].permute(2, 1, 0).copy_from_host(values)
    array[:, ::-2, :].transpose(2, 1, 0)[...] = values
    np.testing.assert_array_equal(bits(base.to_numpy()), bits(array))


def test_views_of_other_item_sizes(device: Device) -> None:
    """view(dtype) of another size: numpy's result where the last axis is contiguous."""
    array = np.arange(4 * 6 * 8, dtype=np.uint8).reshape(4, 6, 8)
    tensor = DeviceTensor.from_numpy(array, device=device)
    for view, expected in [
        (tensor.view(np.float32), array.view(np.float32)),
        (tensor[1:, ::2].view(np.uint16), array[1:, ::2].view(np.uint16)),
        (tensor[::-1].view(np.int64), array[::-1].view(np.int64)),
        (tensor.view(np.float64).view(np.int8), array.view(np.float64).view(np.int8)),
    ]:
        assert view.strides == tuple(s // view.dtype.itemsize for s in expected.strides)
        np.testing.assert_array_equal(bits(view.to_numpy()), bits(expected))
    with pytest.raises(ValueError, match="stride 1"):
        tensor.T.view(np.float32)  # the last axis is strided
    with pytest.raises(ValueError, match="divide"):
        tensor[..., :6].view(np.float32)  # 6 bytes are not whole floats
    with pytest.raises(ValueError, match="divide"):
        tensor[..., 1:].reshape(4, 6, 7)[..., :4].view(np.float32)  # misaligned: offset 1
    with pytest.raises(ValueError):
        tensor[0, 0, 0].view(np.uint16)


def test_view_arguments_are_checked(device: Device) -> None:
    tensor = DeviceTensor.empty((2, 3, 4), device=device)
    for call, error in [
        (lambda: tensor[0, 0, 0, 0], IndexError),
        (lambda: tensor[..., ...], IndexError),
        (lambda: tensor[2], IndexError),
        (lambda: tensor[:, -4], IndexError),
        (lambda: tensor[::0], ValueError),
        (lambda: tensor[[0, 1]], TypeError),
        (lambda: tensor[True], TypeError),
        (lambda: tensor[1.0], TypeError),
        (lambda: tensor.permute(0, 1), ValueError),
        (lambda: tensor.permute(0, 1, 1), ValueError),
        (lambda: tensor.transpose(0, 3), IndexError),
        (lambda: tensor.narrow(1, 2, 2), IndexError),
        (lambda: tensor.expand(2, 5, 4), ValueError),
        (lambda: tensor.expand(-1, 2, 3, 4), ValueError),
        (lambda: tensor.broadcast_to((3, 4)), ValueError),
        (lambda: tensor.squeeze(1), ValueError),
        (lambda: tensor.unsqueeze(4), IndexError),
        (lambda: tensor.reshape(5, -1), ValueError),
        (lambda: tensor.T.reshape(-1), ValueError),
        (lambda: tensor[0].mT[0].mT, ValueError),
        (lambda: tensor.view(np.float16).T.view(np.float32), ValueError),
    ]:
        with pytest.raises(error):
            call()


def test_more_axes_than_the_kernel_takes(device: Device) -> None:
    """A reversed permutation of 10 axes merges into none: the host splits the launch."""
    array = np.arange(2**10, dtype=np.float16).reshape((2,) * 10)
    tensor = DeviceTensor.from_numpy(array, device=device).permute(*reversed(range(10)))
    np.testing.assert_array_equal(tensor.to_numpy(), array.transpose())
    target = DeviceTensor.zeros((2,) * 10, np.float16, device=device)
    target.permute(*reversed(range(10)))[1].copy_(tensor[0])
    expected = np.zeros_like(array)
    expected.transpose()[1] = array.transpose()[0]
    np.testing.assert_array_equal(target.to_numpy(), expected)
