"""hip_runtime.testing itself: the references agree with independent ones (gguf's dequantization,
plain formulas), the comparisons catch what they must, and the module needs no test framework.
(That the kernels agree with the references is what every kernel and op test checks.)"""

from __future__ import annotations

import subprocess
import sys

import gguf
import numpy as np
import pytest

from hip_runtime import testing
from hip_runtime.ops.quantized import BLOCK_ENCODINGS
from hip_runtime.testing import DTYPES, Mismatch, Reference, assert_bits_equal, assert_close

QTYPES = {"q8_0": gguf.GGMLQuantizationType.Q8_0, "q4_0": gguf.GGMLQuantizationType.Q4_0}


def test_importing_testing_imports_no_test_framework() -> None:
    code = "import sys, hip_runtime.testing; assert 'pytest' not in sys.modules, 'pytest'"
    subprocess.run([sys.executable, "-c", code], check=True)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("encoding", QTYPES)
def test_dequantize_is_ggufs_rounded_once(encoding: str, dtype: str) -> None:
    rng = np.random.default_rng(0)
    blocks = rng.integers(0, 256, (512, BLOCK_ENCODINGS[encoding][1]), dtype=np.uint8)
    with np.errstate(all="ignore"):  # random bytes make infinite and NaN scales too
        theirs = np.asarray(gguf.quants.dequantize(blocks, QTYPES[encoding]), np.float32)
        expected = theirs.reshape(-1).astype(DTYPES[dtype])
    assert_bits_equal(testing.dequantize(blocks, encoding, dtype), expected)


def test_assert_close_bounds_nans_dtypes_and_shapes() -> None:
    expected = np.array([1.0, -2.0, 0.0])
    rtol, atol = testing.tolerance("f16")
    edge = expected + (rtol * np.abs(expected) + atol) * 0.99
    assert 0.9 < assert_close(edge.astype(np.float16), expected, "f16") <= 1.0
    with pytest.raises(Mismatch, match=r"1/3 elements out of tolerance; first at \(1,\)"):
        assert_close(np.array([1.0, -2.1, 0.0], np.float16), expected, np.float16)
    with pytest.raises(Mismatch, match="out of tolerance"):
        assert_close(np.array([1.0, np.nan, 0.0], np.float32), expected, "f32")
    with pytest.raises(Mismatch, match="dtype"):
        assert_close(expected.astype(np.float32), expected, "bf16")
    with pytest.raises(Mismatch, match="shape"):
        assert_close(expected[:2].astype(np.float32), expected, "f32")
    with pytest.raises(ValueError, match="int32"):
        testing.tolerance(np.int32)


def test_a_reference_brings_its_magnitude() -> None:
    got = np.array([1e-3], np.float32)  # the sum of two large terms that cancelled
    with pytest.raises(Mismatch):
        assert_close(got, np.array([0.0]), "f32")
    assert assert_close(got, Reference(np.array([0.0]), np.array([1000.0])), "f32") < 1.0


def test_assert_bits_equal_matches_any_nan_and_nothing_else() -> None:
    quiet, payload = np.array([np.nan, 1.0], np.float32), np.array([0x7FC00001, 0x3F800000])
    assert_bits_equal(payload.astype(np.uint32).view(np.float32), quiet)
    with pytest.raises(Mismatch, match="differ in bits"):
        assert_bits_equal(np.array([-0.0], np.float32), np.array([0.0], np.float32))
    with pytest.raises(Mismatch, match="NaNs differ"):
        assert_bits_equal(np.array([1.0], np.float32), np.array([np.nan], np.float32))
    with pytest.raises(Mismatch):
        assert_bits_equal(np.zeros(2, np.float16), np.zeros(2, np.float32))


def test_references_agree_with_the_formulas() -> None:
    rng = np.random.default_rng(1)
    x = testing.random(rng, (5, 16), "bf16", scale=2.0, shift=1.0)
    assert x.dtype == DTYPES["bf16"]
    v = x.astype(np.float64)
    np.testing.assert_allclose(testing.softmax(x).sum(-1), 1.0)
    masked = testing.softmax(np.zeros((4, 3)), causal_rows=4)  # 4 queries over 3 keys
    np.testing.assert_array_equal(masked[0], 0.0)  # the first query sees no key
    np.testing.assert_allclose(masked[3], 1 / 3)
    norm = testing.layernorm(x, eps=0.0).value
    np.testing.assert_allclose(norm.mean(-1), 0.0, atol=1e-12)
    np.testing.assert_allclose(norm.std(-1), 1.0)
    np.testing.assert_allclose(testing.rmsnorm(x, eps=0.0), v / np.sqrt((v * v).mean(-1))[:, None])
    np.testing.assert_allclose(testing.gelu(x, approximate="tanh"), testing.gelu(x), atol=1e-3)
    np.testing.assert_allclose(testing.swiglu(x, x), testing.silu(x) * v)
    np.testing.assert_array_equal(testing.matmul(x, x, transpose_a=True).value, v.T @ v)
    np.testing.assert_array_equal(testing.matmul(x, x, transpose_b=True).value, v @ v.T)
    cos, sin = testing.rope_tables(8, 4)
    heads = testing.random(rng, (3, 2, 6), "f32")
    turned = testing.rope(heads, cos, sin, np.array([0, 7, 3]), rot_dim=4)
    np.testing.assert_array_equal(turned[0], heads[0])  # position 0: no rotation
    np.testing.assert_array_equal(turned[..., 4:], heads[..., 4:])  # past rot_dim: copied
    norms = np.hypot(turned[..., [0, 1]], turned[..., [2, 3]])
    np.testing.assert_allclose(norms, np.hypot(heads[..., [0, 1]], heads[..., [2, 3]]))
    table = np.arange(6, dtype=np.float16).reshape(3, 2)
    np.testing.assert_array_equal(testing.embedding(np.array([2, -1, 3]), table),
                                  [[4, 5], [0, 0], [0, 0]])  # fmt: skip
