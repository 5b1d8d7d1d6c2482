"""The tensor core: `DeviceTensor` and what every op reads it through.

`tensor` (storage, factories, host copies, `copy_`), `operators` (its Python operators), `views`
and `strides` (views and numpy's index and stride arithmetic on the host), `strided_copy` (copies
between strided tensors), `dtypes`, `dlpack` (DLPack and the CUDA Array Interface) and
`stream_order` (an op's stream ordered after another backend's). Importing this folder imports
none of them.
"""
