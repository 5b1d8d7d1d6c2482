"""HipBackend's ops, one module per family, over a shared base.

- `base`: what every family shares: validation (ValueError before anything is queued), output
  allocation from the backend's pool, launch geometry.
- `elementwise`: add, mul, scale, add_row_bias, cast.
- `activations`: silu, gelu, swiglu.
- `norms`: layernorm, rmsnorm.
- `softmax`: softmax (with causal masking).
- `linalg`: matmul, linear, mlp_swiglu (hipBLAS gemm-ex).
- `layout`: rope, embedding, transpose (elements moved or picked by index).
- `quantized`: GGUF block dequantization (the loader's; not a HipBackend method).

`hip_runtime.HipBackend` composes the families; `hip_runtime.testing` holds a float64 numpy
reference of each op.
"""
