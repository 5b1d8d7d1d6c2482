"""config.json fields and checkpoints that disagree with them (issue 39): each bad value is a
ValueError naming the file and the field, raised before the device is touched, where it used
to be a TypeError or KeyError, NaN logits, a string read as a boolean, a field ignored, or a
model truncated to the config's layers without a word.

The folders are copies of tests/data/models' with config.json (or a tensor) edited.
"""

from __future__ import annotations

import json
import re
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from safetensors.numpy import load_file

from hip_core import Device
from hip_runtime.models import BertEncoder, LlamaDecoder, read_config

DATA = Path(__file__).parent / "data" / "models"
DROP = object()  # a field to remove (None writes null)


def edited(tmp_path: Path, name: str, edit: dict[str, Any]) -> Path:
    """A copy of the stored model `name` whose config.json has `edit` applied."""
    folder = tmp_path / name
    shutil.copytree(DATA / name, folder)
    config = json.loads((folder / "config.json").read_text())
    config.update(edit)
    config = {key: value for key, value in config.items() if value is not DROP}
    (folder / "config.json").write_text(json.dumps(config))  # (NaN as JSON's NaN literal)
    return folder


def llama3(**changes: Any) -> dict[str, Any]:
    """llama-tied's rope_parameters with `changes` (DROP removes one)."""
    rope = {"rope_type": "llama3", "rope_theta": 500000.0, "factor": 8.0,
            "low_freq_factor": 1.0, "high_freq_factor": 4.0,
            "original_max_position_embeddings": 16, **changes}  # fmt: skip
    return {"rope_parameters": {k: v for k, v in rope.items() if v is not DROP}}


def top_level_theta(value: Any) -> dict[str, Any]:
    """rope_theta at the top level (transformers 4's place), no rope_parameters."""
    return {"rope_parameters": DROP, "rope_theta": value}


def scaling(**rope: Any) -> dict[str, Any]:
    """transformers 4's rope_scaling, with the default theta."""
    return {"rope_parameters": DROP, "rope_scaling": rope}


LLAMA_CASES = {
    "rope_theta null": (top_level_theta(None), "'rope_theta'"),
    "rope_theta string": (top_level_theta("abc"), "'rope_theta'"),
    "rope_theta 0": (top_level_theta(0), "'rope_theta'"),
    "rope_theta -1": (top_level_theta(-1), "'rope_theta'"),
    "rope_parameters theta 0": (llama3(rope_theta=0), "rope_parameters: 'rope_theta'"),
    "linear factor 0": (scaling(rope_type="linear", factor=0), "rope_scaling: 'factor'"),
    "linear factor missing": (scaling(type="linear"), "rope_scaling: the field 'factor'"),
    "llama3 factor missing": (llama3(factor=DROP), "rope_parameters: the field 'factor'"),
    "llama3 low = high": (llama3(low_freq_factor=4.0), "low_freq_factor 4.0 must be below"),
    "llama3 old length 0": (
        llama3(original_max_position_embeddings=0), "'original_max_position_embeddings'"
    ),
    "rope_scaling not an object": ({"rope_scaling": "linear", "rope_parameters": DROP},
                                   "rope_scaling must be an object"),
    "rms_norm_eps -1": ({"rms_norm_eps": -1}, "'rms_norm_eps'"),
    "rms_norm_eps NaN": ({"rms_norm_eps": float("nan")}, "'rms_norm_eps'"),
    "tie_word_embeddings string": ({"tie_word_embeddings": "false"}, "'tie_word_embeddings'"),
    "partial_rotary_factor": ({"partial_rotary_factor": 0.5}, "partial_rotary_factor 0.5"),
    "partial_rotary_factor true": ({"partial_rotary_factor": True}, "partial_rotary_factor"),
    "head_dim 0": ({"head_dim": 0}, "'head_dim'"),
    "kv heads 0": ({"num_key_value_heads": 0}, "'num_key_value_heads'"),
    "kv heads a string": ({"num_key_value_heads": "1"}, "'num_key_value_heads'"),
    "kv heads not dividing": ({"num_key_value_heads": 3}, "num_key_value_heads"),
    "layers 0": ({"num_hidden_layers": 0}, "'num_hidden_layers'"),
    "max_position_embeddings 0": ({"max_position_embeddings": 0}, "'max_position_embeddings'"),
    "attention_bias": ({"attention_bias": True}, "attention_bias True is not supported"),
    "hidden_act": ({"hidden_act": "gelu"}, "hidden_act 'gelu' is not supported"),
}  # fmt: skip


@pytest.mark.parametrize(("edit", "message"), LLAMA_CASES.values(), ids=LLAMA_CASES.keys())
def test_llama_config_fields_are_checked(
    tmp_path: Path, device: Device, edit: dict[str, Any], message: str
) -> None:
    folder = edited(tmp_path, "llama-tied", edit)
    where = re.escape(f"{folder}/config.json: ")
    with pytest.raises(ValueError, match=where + ".*" + message):
        LlamaDecoder.from_folder(folder, device)


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        ({"layer_norm_eps": -1e-12}, "'layer_norm_eps'"),
        ({"layer_norm_eps": float("nan")}, "'layer_norm_eps'"),
    ],
    ids=["layer_norm_eps negative", "layer_norm_eps NaN"],
)
def test_bert_config_fields_are_checked(
    tmp_path: Path, device: Device, edit: dict[str, Any], message: str
) -> None:
    folder = edited(tmp_path, "bert-tiny", edit)
    with pytest.raises(ValueError, match=re.escape(f"{folder}/config.json: ") + message):
        BertEncoder.from_folder(folder, device)


@pytest.mark.parametrize(
    ("name", "load", "message"),
    [
        ("bert-tiny", BertEncoder.from_folder, "layers up to 1; config.json's num_hidden_layers"),
        ("bert-mlm-tiny", BertEncoder.from_folder, "layers up to 1; config.json's num_hidden"),
        ("llama-tied", LlamaDecoder.from_folder, "layers up to 1; the config's num_hidden"),
    ],
)
def test_a_config_with_fewer_layers_than_the_checkpoint_is_refused(
    tmp_path: Path, device: Device, name: str, load: Callable[..., Any], message: str
) -> None:
    """The checkpoints hold 2 layers; a config of 1 would run half the model."""
    folder = edited(tmp_path, name, {"num_hidden_layers": 1})
    with pytest.raises(ValueError, match=message):
        load(folder, device)


def test_llama_layer_tensors_the_decoder_would_not_read_are_refused(
    tmp_path: Path, device: Device, save_safetensors: Callable[..., Path]
) -> None:
    """A q_proj bias (attention_bias models, Qwen2's) was loaded and never added."""
    folder = edited(tmp_path, "llama-tied", {})
    tensors = load_file(folder / "model.safetensors")
    tensors["model.layers.1.self_attn.q_proj.bias"] = np.zeros(96, np.float32)
    save_safetensors(folder / "model.safetensors", tensors)
    with pytest.raises(ValueError, match=r"1 layer tensors .* model\.layers\.1\.self_attn\.q_p"):
        LlamaDecoder.from_folder(folder, device)


@pytest.mark.parametrize("text", ["[" * 100_000, '{"a":' * 100_000])
def test_a_deeply_nested_config_is_a_value_error_naming_the_file(tmp_path: Path, text: str) -> None:
    (tmp_path / "config.json").write_text(text)
    where = re.escape(f"{tmp_path}/config.json: ")
    with pytest.raises(ValueError, match=where + ".*nested too deep"):
        read_config(tmp_path)


def test_stop_token_ids_from_gguf_arrays_and_json_lists() -> None:
    """GGUF's numeric arrays are numpy arrays now (loading/formats/gguf.py): a stop-token array
    must keep its ids, as a JSON list does; non-integers are left out."""
    from hip_runtime.models.llama_config import _tokens

    assert _tokens(np.array([128001, 128009], np.int32)) == (128001, 128009)
    assert _tokens(np.uint32(2)) == (2,)
    assert _tokens([1, True, "x", 3]) == (1, 3)
    assert _tokens(None) == ()
