"""Checkpoints into device memory.

- `formats`: find, parse and validate a checkpoint's layout (safetensors, GGUF) without reading
  tensor data; `save_safetensors`.
- `loader`: `AsyncLoader` and `LoadJob`: validate, allocate, stream the bytes in, report.
- `placement`: where each tensor's bytes land on a device, and the planner of staged reads.
- `sharding`: a load over several devices (`shard=` rules: each tensor whole on some devices
  or split along an axis) and its reads, the file read once; one device is its simplest case.
- `checksum`: CRC-32 of a tensor from the CRCs of the chunks it was read in.

Quantized GGUF tensors are expanded on the device by `hip_runtime.ops.quantized`. The pinned
staging the reads go through is `hip_runtime.transfers.staging` (below `tensor`, whose uploads use
it).
"""
