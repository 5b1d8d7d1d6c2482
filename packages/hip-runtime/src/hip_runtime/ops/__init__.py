"""HipBackend's ops, one module per family, over a shared base (docs/ops.md lists them all).

- `base`: what every family shares: validation (ValueError before anything is queued), output
  allocation from the backend's pool, launch geometry.
- `pointwise` (+ `pointwise_core`): binary ops with numpy broadcasting, comparisons, where,
  unary functions, over any layout.
- `elementwise`, `activations`: add, mul, scale, add_row_bias, cast; silu, gelu, swiglu (the
  same pointwise kernels).
- `reductions` (+ `reduce_layout`): sum, mean, max, min, argmax, argmin, l2_normalize.
- `norms`: layernorm, rmsnorm. `softmax`: softmax and log_softmax along any axis.
- `linalg` (+ `gemm_plan`): matmul by numpy's rules, linear, mlp_swiglu (hipBLAS gemm-ex).
- `attention`: scaled_dot_product_attention (flash-style, grouped-query, masks).
- `indexing`: index_select, embedding, gather, scatter_add, index_add.
- `sorting`: argsort, topk. `creation`: arange, full, fill_, tril, triu, causal_mask.
  `joining`: cat, stack, split, chunk, pad. `layout`: rope, transpose.
- `quantized`: GGUF block dequantization (the loader's; not a HipBackend method).

`hip_runtime.HipBackend` composes the families; `hip_runtime.testing` holds float64 numpy
references.
"""
