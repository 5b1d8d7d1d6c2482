"""The model runtime: what a model holds between calls.

`model_runtime` (`ModelRuntime`: a backend, its weights and caches), `kv_cache` (`KVCache`),
`scratch` (`ScratchArena`) and `forward_graph` (`ForwardGraph`: a forward captured once,
replayed with new inputs). Importing this folder imports none of them.
"""
