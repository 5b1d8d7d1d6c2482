"""A Hugging Face model folder's `config.json`, read and checked before any weight is loaded.

A model class names the fields it needs (`require`); a missing or mistyped field is a ValueError
naming the folder and the field, raised before the device is touched.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

CONFIG_NAME = "config.json"


def read_config(folder: str | os.PathLike[str]) -> dict[str, Any]:
    """The parsed `config.json` of the model folder `folder`.

    FileNotFoundError when the folder or its config.json is missing; ValueError when the file
    is not a JSON object.
    """
    path = Path(folder) / CONFIG_NAME
    if not path.is_file():
        raise FileNotFoundError(f"{folder}: no {CONFIG_NAME} (a Hugging Face model folder has one)")
    try:
        config = json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise ValueError(f"{path}: not JSON ({error})") from None
    if not isinstance(config, dict):
        raise ValueError(f"{path}: a JSON object expected, not {type(config).__name__}")
    return config


def require(config: Mapping[str, Any], name: str, kind: type, where: str = "config") -> Any:
    """`config[name]`, checked to be a `kind` (int fields refuse bools; float fields take ints).

    ValueError naming `where` and the field when it is missing or of another type.
    """
    if name not in config:
        raise ValueError(f"{where}: the field {name!r} is missing")
    value = config[name]
    accepted: tuple[type, ...] = (int, float) if kind is float else (kind,)
    if (isinstance(value, bool) and kind is not bool) or not isinstance(value, accepted):
        raise ValueError(f"{where}: {name!r} must be {kind.__name__}, not {value!r}")
    return value
