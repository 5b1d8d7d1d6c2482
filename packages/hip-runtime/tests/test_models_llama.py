"""LlamaDecoder against transformers: prefill logits and last hidden states (f32 within 1e-4
relative; bf16 within a small multiple of torch's own bf16 error), greedy tokens equal, from
Hugging Face folders (sharded, tied) and GGUF files (F16, Q8_0, Q4_0; blocks kept for
quantized_linear or expanded; llama3 rope factors) made by tools/make_llama_reference.py;
device sampling (seeded, top-k/top-p respected, frequencies); stop tokens; bad configs, full
caches and closed decoders. Runs on the cpu platform and, marked gpu, on nvidia (plus a larger
model built with transformers on the fly)."""

from __future__ import annotations

import importlib.util
import json
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from hip_core import ClosedError, Device
from hip_runtime import DeviceTensor
from hip_runtime.models import LlamaDecoder
from hip_runtime.models.sampling import Sampler
from hip_runtime.ops.quantized_matmul import QuantizedWeight

DATA = Path(__file__).parent / "data" / "models"
EXAMPLE = Path(__file__).parents[3] / "docs" / "examples" / "generate_text.py"
MODELS = ("llama-gqa", "llama-tied")


def reference(name: str) -> dict[str, np.ndarray]:
    with np.load(DATA / name / "reference.npz") as data:
        return dict(data)


def gguf_path(name: str, kind: str) -> Path:
    """A model's GGUF file: beside its HF files, or (llama-tied, whose folder must hold one
    checkpoint) in a folder of its own."""
    folder = DATA / name if name == "llama-gqa" else DATA / f"{name}-gguf"
    return folder / f"model-{kind}.gguf"


def relative_error(got: np.ndarray, expected: np.ndarray, mask: np.ndarray) -> float:
    """Largest |got - expected| over the real tokens, relative to the largest |expected|."""
    real = mask.astype(bool)
    return float(np.abs(got - expected)[real].max() / np.abs(expected[real]).max())


@pytest.fixture(scope="module", params=MODELS)
def f32_decoder(
    request: pytest.FixtureRequest, device: Device, program_cache: Path
) -> Iterator[tuple[LlamaDecoder, dict[str, np.ndarray]]]:
    with LlamaDecoder.from_folder(DATA / request.param, device) as decoder:
        yield decoder, reference(request.param)


def test_prefill_matches_transformers(f32_decoder: Any) -> None:
    decoder, ref = f32_decoder
    ids, mask = ref["input_ids"], ref["attention_mask"]
    logits = decoder.forward(ids, mask)
    assert logits.shape == ref["logits"].shape and logits.dtype == np.float32
    assert relative_error(logits.to_numpy(), ref["logits"], mask) < 1e-4
    last = decoder.forward(ids, mask, last_only=True)  # the next tokens' logits only
    assert last.shape == (len(ids), ref["logits"].shape[2])
    assert relative_error(last.to_numpy(), ref["logits"][:, -1], mask[:, -1]) < 1e-4
    hidden = decoder.hidden_states(ids, mask).to_numpy()
    assert relative_error(hidden, ref["last_hidden"], mask) < 1e-4
    assert decoder.cache is not None
    assert decoder.cache.lengths[0].tolist() == mask.sum(axis=1).tolist()  # pads take no slot


def test_greedy_generation_matches_transformers(f32_decoder: Any) -> None:
    decoder, ref = f32_decoder
    new = ref["greedy"].shape[1] - ref["input_ids"].shape[1]
    tokens = decoder.generate(ref["input_ids"], ref["attention_mask"], max_new_tokens=new)
    np.testing.assert_array_equal(tokens, ref["greedy"])


@pytest.mark.gpu
def test_graph_replayed_decode_steps_match_eager_ones(f32_decoder: Any) -> None:
    """generate(graph=True): one captured step replayed; the same tokens, greedy and seeded."""
    decoder, ref = f32_decoder
    ids, mask, greedy = ref["input_ids"], ref["attention_mask"], ref["greedy"]
    new = greedy.shape[1] - ids.shape[1]
    np.testing.assert_array_equal(
        decoder.generate(ids, mask, max_new_tokens=new, graph=True), greedy
    )
    kept = decoder._graph_step
    options = dict(max_new_tokens=5, temperature=1.0, top_k=30, seed=3, eos_token_id=())
    sampled = decoder.generate(ids, mask, graph=True, **options)
    assert decoder._graph_step is kept  # the same cache: the graph is reused
    np.testing.assert_array_equal(sampled, decoder.generate(ids, mask, **options))


def test_decode_steps_match_the_prefill_of_the_longer_prompt(f32_decoder: Any) -> None:
    """Logits of a decode step over the cache equal those of a prefill of the whole sequence."""
    decoder, ref = f32_decoder
    ids, mask = ref["input_ids"], ref["attention_mask"]
    greedy = ref["greedy"]
    decoder.forward(ids, mask)
    width = ids.shape[1]
    stepped = [decoder.decode(greedy[:, width + i]).to_numpy() for i in range(2)]
    whole = np.concatenate([mask, np.ones((len(ids), 2), np.int64)], axis=1)
    full = decoder.forward(greedy[:, : width + 2], whole).to_numpy()
    for i in range(2):
        scale = np.abs(full[:, width + i]).max()
        assert np.abs(stepped[i] - full[:, width + i]).max() / scale < 1e-4


@pytest.mark.parametrize("graph", [False, True], ids=["eager", "graph"])
def test_decode_steps_upload_their_state_only_after_the_lengths_moved(
    f32_decoder: Any, monkeypatch: pytest.MonkeyPatch, graph: bool
) -> None:
    """The step state [3, B] stays on the device (one in-place increment per step): an upload
    waits for the stream, so one per step would keep the host from running ahead. It is
    uploaded when the lengths moved other than by steps (a prefill of another length), never
    while only steps ran; a prefill back to earlier lengths gives the same logits again."""
    decoder, ref = f32_decoder
    ids, mask, greedy = ref["input_ids"], ref["attention_mask"], ref["greedy"]
    width = ids.shape[1]
    decoder.forward(ids, mask)
    step = decoder.decode_step(graph)
    tokens = [decoder.backend.from_numpy(greedy[:, width + i]) for i in range(2)]
    uploads: list[tuple[int, ...]] = []
    upload = DeviceTensor.copy_from_host  # (every upload of a host array goes through it)

    def spy(self: DeviceTensor, array: Any) -> None:
        if np.shape(array) == (3, len(ids)):  # a step state (prompts are [B, S])
            uploads.append(np.shape(array))
        upload(self, array)

    monkeypatch.setattr(DeviceTensor, "copy_from_host", spy)
    stepped = [step(token).to_numpy() for token in tokens]
    assert len(uploads) == 1  # the first step's state only
    decoder.forward(greedy[:, : width + 1], np.concatenate([mask, np.ones_like(mask[:, :1])], 1))
    decoder.decode_step(graph)(tokens[1])
    assert len(uploads) == 2  # the lengths moved (one token fewer than after the steps)
    decoder.forward(ids, mask)  # back to the first prompt's lengths: the same logits again
    again = [decoder.decode_step(graph)(token).to_numpy() for token in tokens]
    assert len(uploads) == 3
    np.testing.assert_array_equal(np.stack(again), np.stack(stepped))


def test_stop_tokens_pad_finished_sequences_as_transformers(f32_decoder: Any) -> None:
    decoder, ref = f32_decoder
    ids, mask, greedy = ref["input_ids"], ref["attention_mask"], ref["greedy"]
    width, new = ids.shape[1], greedy.shape[1] - ids.shape[1]
    stop = int(greedy[0, width + 2])  # sequence 0 stops at its third new token
    tokens = decoder.generate(ids, mask, max_new_tokens=new, eos_token_id=stop, pad_token_id=0)
    expected = greedy[:, width:].copy()
    for row in expected:
        hits = np.flatnonzero(row == stop)
        if hits.size:
            row[hits[0] + 1 :] = 0
    done = (expected == stop).any(axis=1)
    if done.all():  # every sequence stopped: the columns after the last stop are left out
        expected = expected[:, : max(int(np.argmax(r == stop)) for r in expected) + 1]
    np.testing.assert_array_equal(tokens[:, width:], expected)


@pytest.mark.parametrize("name", MODELS)
def test_bf16_within_torchs_own_bf16_error(device: Device, program_cache: Path, name: str) -> None:
    ref = reference(name)
    with LlamaDecoder.from_folder(DATA / name, device, dtype="bfloat16") as decoder:
        logits = decoder.forward(ref["input_ids"], ref["attention_mask"])
        assert logits.dtype.name == "bfloat16"
        got = decoder.backend.cast(logits, np.float32).to_numpy()
    real = ref["attention_mask"].astype(bool)
    assert np.abs(got - ref["logits"])[real].max() <= 3 * float(ref["bf16_error"])


GGUF_CASES = [
    ("llama-gqa", "f16", "keep"), ("llama-gqa", "q8_0", "keep"), ("llama-gqa", "q4_0", "keep"),
    ("llama-gqa", "q8_0", "dequantize"), ("llama-tied", "q8_0", "keep"),
]  # fmt: skip


@pytest.mark.parametrize(("name", "kind", "quantized"), GGUF_CASES)
def test_gguf_matches_transformers_on_the_same_weights(
    device: Device, program_cache: Path, name: str, kind: str, quantized: str
) -> None:
    """The GGUF files as llama.cpp's converter writes them (permuted attn_q/attn_k rows; for
    llama-tied no output.weight and llama3's rope as rope_freqs factors) give the logits of the
    HF model whose weights went through the same F16 / Q8_0 / Q4_0 round trip, with the blocks
    kept (quantized_linear) or expanded at load."""
    ref = reference(name)
    path = gguf_path(name, kind)
    with LlamaDecoder.from_gguf(path, device, quantized=quantized) as decoder:
        if name == "llama-gqa":
            assert decoder.config.heads == 8 and decoder.config.kv_heads == 2
        else:
            assert (
                decoder.config.rope_factors is not None
                and decoder.weights.head is decoder.weights.embed
            )
        assert decoder.config.eos_token_ids == (2,)
        blocks = kind != "f16" and quantized == "keep"
        assert isinstance(decoder.weights.layers[0].down, QuantizedWeight) == blocks
        logits = decoder.forward(ref["input_ids"], ref["attention_mask"]).to_numpy()
    assert relative_error(logits, ref[f"logits_{kind}"], ref["attention_mask"]) < 1e-4


@pytest.mark.parametrize(("name", "kind"), [("llama-gqa", "q8_0"), ("llama-gqa", "q4_0"),
                                            ("llama-tied", "q8_0")])  # fmt: skip
def test_quantized_decode_steps_match_transformers(
    device: Device, program_cache: Path, platform: str, name: str, kind: str
) -> None:
    """Greedy generation with the blocks kept: every decode step's products read the blocks
    (quantized_linear's GEMV), and the tokens are those of the round-tripped HF model; replayed
    as a captured graph too (on a GPU)."""
    ref = reference(name)
    ids, mask, greedy = ref["input_ids"], ref["attention_mask"], ref[f"greedy_{kind}"]
    new = greedy.shape[1] - ids.shape[1]
    with LlamaDecoder.from_gguf(gguf_path(name, kind), device) as decoder:
        assert isinstance(decoder.weights.layers[1].q, QuantizedWeight)
        np.testing.assert_array_equal(decoder.generate(ids, mask, max_new_tokens=new), greedy)
        if platform != "cpu":  # (the cpu platform's graph replay: see the graph test above)
            tokens = decoder.generate(ids, mask, max_new_tokens=new, graph=True)
            np.testing.assert_array_equal(tokens, greedy)
            decoder._drop_graph()
    with pytest.raises(ValueError, match="quantized must be"):
        LlamaDecoder.from_gguf(gguf_path(name, kind), device, quantized="yes")


def test_seeded_sampling_is_reproducible(f32_decoder: Any) -> None:
    decoder, ref = f32_decoder
    ids, mask = ref["input_ids"], ref["attention_mask"]
    options = dict(max_new_tokens=6, temperature=1.5, top_k=20, top_p=0.9, eos_token_id=())
    first = decoder.generate(ids, mask, seed=11, **options)
    assert first.shape == (3, ids.shape[1] + 6)
    np.testing.assert_array_equal(decoder.generate(ids, mask, seed=11, **options), first)
    others = [decoder.generate(ids, mask, seed=s, **options) for s in (12, 13)]
    assert any((other != first).any() for other in others)


def test_sampling_respects_top_k_top_p_and_the_distribution(f32_decoder: Any) -> None:
    """Many rows of one tiny distribution: only allowed tokens, at their frequencies."""
    backend = f32_decoder[0].backend
    logits = np.log(np.array([0.05, 0.3, 0.1, 0.4, 0.15], np.float32))
    rows = 4000
    batch = backend.from_numpy(np.tile(logits, (rows, 1)))

    def frequencies(**options: Any) -> np.ndarray:
        tokens = Sampler(backend, seed=5, **options)(batch, 0).to_numpy()
        assert tokens.dtype == np.int64 and tokens.shape == (rows,)
        return np.bincount(tokens, minlength=5) / rows

    def close(got: np.ndarray, p: np.ndarray) -> bool:  # within 5 standard deviations
        return bool((np.abs(got - p) <= 5 * np.sqrt(p * (1 - p) / rows) + 1e-9).all())

    p = np.exp(logits) / np.exp(logits).sum()
    assert close(frequencies(temperature=1.0), p)
    top3 = np.where(np.isin(np.arange(5), [1, 3, 4]), p, 0)
    assert close(frequencies(temperature=1.0, top_k=3), top3 / top3.sum())
    # top_p 0.6: 0.4 alone is below it, 0.4 + 0.3 reaches it: tokens 3 and 1
    nucleus = np.where(np.isin(np.arange(5), [1, 3]), p, 0)
    assert close(frequencies(temperature=1.0, top_p=0.6), nucleus / nucleus.sum())
    assert close(frequencies(temperature=1.0, top_k=4, top_p=0.6), nucleus / nucleus.sum())
    sharp = np.exp(logits / 0.5) / np.exp(logits / 0.5).sum()
    assert close(frequencies(temperature=0.5), sharp)
    assert (frequencies() == np.eye(5)[3]).all()  # temperature 0: greedy
    draws = [Sampler(backend, temperature=1.0, seed=5)(batch, s).to_numpy() for s in (0, 0, 1)]
    assert (draws[0] == draws[1]).all() and (draws[0] != draws[2]).any()
    for bad in (dict(temperature=-1.0), dict(top_k=0), dict(top_p=0.0), dict(seed="x")):
        with pytest.raises(ValueError):
            Sampler(backend, **bad)  # type: ignore[arg-type]


def test_cache_limits(device: Device, program_cache: Path) -> None:
    ref = reference("llama-tied")
    ids, mask = ref["input_ids"], ref["attention_mask"]
    with LlamaDecoder.from_folder(DATA / "llama-tied", device, max_tokens=9) as decoder:
        with pytest.raises(ValueError, match="decode needs a forward"):
            decoder.decode([1, 2, 3])
        with pytest.raises(ValueError, match="do not fit the KV cache"):
            decoder.generate(ids, mask, max_new_tokens=4)  # 7 + 3 cached > 9
        assert decoder.generate(ids, mask, max_new_tokens=3).shape == (3, 10)
        decoder.forward(ids, mask)
        decoder.decode([5, 6, 7])
        decoder.decode([5, 6, 7])
        with pytest.raises(ValueError, match="is full"):
            decoder.decode([5, 6, 7])
        with pytest.raises(ValueError, match="batch has 3"):
            decoder.decode([5, 6])
        with pytest.raises(ValueError, match="do not fit"):
            decoder.forward(np.ones((1, 10), np.int64))
    with pytest.raises(ValueError, match="max_tokens must be a positive int"):
        LlamaDecoder.from_folder(DATA / "llama-tied", device, max_tokens=0)


def test_bad_inputs_and_a_closed_decoder(device: Device, program_cache: Path) -> None:
    ref = reference("llama-tied")
    decoder = LlamaDecoder.from_folder(DATA / "llama-tied", device)
    ids, mask = ref["input_ids"], ref["attention_mask"]
    for args, message in (
        ((ids + 1000, mask), "outside"),
        ((ids.astype(np.float32), mask), "integer token ids"),
        ((ids, mask[:, :3]), "attention_mask is"),
        ((ids, 2 * mask), "other than 0 and 1"),
        ((ids, np.zeros_like(mask)), "no real token"),
    ):
        with pytest.raises(ValueError, match=message):
            decoder.forward(*args)
    with pytest.raises(ValueError, match="LEFT-padded"):
        decoder.generate(ids, mask[:, ::-1].copy(), max_new_tokens=2)
    with pytest.raises(ValueError, match="max_new_tokens"):
        decoder.generate(ids, mask, max_new_tokens=0)
    assert "4/1" in repr(decoder)
    decoder.close()
    decoder.close()
    for call in (lambda: decoder.forward(ids, mask), lambda: decoder.decode([1, 2, 3]),
                 lambda: decoder.generate(ids, mask, max_new_tokens=2)):  # fmt: skip
        with pytest.raises(ClosedError):
            call()
    assert "closed" in repr(decoder)


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        ({"rope_parameters": {"rope_type": "yarn", "rope_theta": 1e4, "factor": 2.0}}, "yarn"),
        ({"num_key_value_heads": 3}, "not a multiple"),
        ({"rms_norm_eps": "small"}, "rms_norm_eps"),
        ({"hidden_size": None}, "hidden_size"),
    ],
)
def test_bad_configs_are_refused_before_loading(
    tmp_path: Path, device: Device, edit: dict[str, Any], message: str
) -> None:
    folder = tmp_path / "model"
    shutil.copytree(DATA / "llama-tied", folder)
    config = json.loads((folder / "config.json").read_text())
    config.update(edit)
    config = {k: v for k, v in config.items() if v is not None}
    (folder / "config.json").write_text(json.dumps(config))
    with pytest.raises(ValueError, match=message):
        LlamaDecoder.from_folder(folder, device)


def test_a_checkpoint_missing_tensors_is_refused(tmp_path: Path, device: Device) -> None:
    folder = tmp_path / "model"
    shutil.copytree(DATA / "llama-tied", folder)
    config = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps({**config, "num_hidden_layers": 3}))
    with pytest.raises(ValueError, match="lacks 9 tensors"):
        LlamaDecoder.from_folder(folder, device)


def test_the_docs_example_runs(device: Device, program_cache: Path) -> None:
    spec = importlib.util.spec_from_file_location("generate_text", EXAMPLE)
    assert spec is not None and spec.loader is not None
    example = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(example)
    ref = reference("llama-gqa")
    rows = zip(ref["input_ids"], ref["attention_mask"], strict=True)
    prompts = [[int(t) for t in row[m == 1]] for row, m in rows]
    greedy, sampled = example.generate_text(str(DATA / "llama-gqa"), prompts, 8, device)
    np.testing.assert_array_equal(greedy, ref["greedy"])
    assert sampled.shape == greedy.shape
    np.testing.assert_array_equal(sampled[:, : ref["input_ids"].shape[1]], ref["input_ids"])


@pytest.mark.gpu
def test_a_larger_model_built_by_transformers(
    tmp_path: Path, device: Device, platform: str
) -> None:
    """A 4-layer hidden-512 GQA Llama made on the fly (the GPU machine has transformers)."""
    if platform == "cpu":
        pytest.skip("the larger model runs on the GPU suite")
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    torch.manual_seed(0)
    config = transformers.LlamaConfig(
        vocab_size=4096, hidden_size=512, intermediate_size=1536, num_hidden_layers=4,
        num_attention_heads=8, num_key_value_heads=2, max_position_embeddings=512,
        pad_token_id=0, bos_token_id=1, eos_token_id=2,
    )  # fmt: skip
    model = transformers.LlamaForCausalLM(config).eval()
    with torch.no_grad():
        for p in model.parameters():
            p.normal_(0.0, 1.0 / p.shape[-1] ** 0.5) if p.ndim == 2 else p.fill_(1.0)
    model.save_pretrained(tmp_path)
    rng = np.random.default_rng(0)
    lengths = [96, 40, 7, 64]
    ids = np.zeros((4, 96), np.int64)
    mask = np.zeros_like(ids)
    for b, n in enumerate(lengths):
        ids[b, 96 - n :] = rng.integers(3, 4096, n)
        mask[b, 96 - n :] = 1
    positions = np.where(mask == 1, np.cumsum(mask, axis=1) - 1, 1)
    with torch.no_grad():
        args = dict(input_ids=torch.from_numpy(ids), attention_mask=torch.from_numpy(mask))
        expected = model(**args, position_ids=torch.from_numpy(positions)).logits.numpy()
        greedy = model.generate(**args, max_new_tokens=16, do_sample=False, eos_token_id=2)
    with LlamaDecoder.from_folder(tmp_path, device) as decoder:
        assert relative_error(decoder.forward(ids, mask).to_numpy(), expected, mask) < 1e-4
        tokens = decoder.generate(ids, mask, max_new_tokens=16, eos_token_id=2)
    np.testing.assert_array_equal(tokens, greedy.numpy())
