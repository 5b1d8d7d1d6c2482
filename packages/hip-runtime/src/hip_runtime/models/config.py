"""A Hugging Face model folder's `config.json`, read and checked before any weight is loaded.

A model class names the fields it needs (`require`, `positive_int`, `positive_float`, `flag`);
a missing or mistyped field is a ValueError naming the file and the field, raised before the
device is touched.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

CONFIG_NAME = "config.json"


def read_config(folder: str | os.PathLike[str]) -> dict[str, Any]:
    """The parsed `config.json` of the model folder `folder`.

    FileNotFoundError when the folder or its config.json is missing; ValueError naming the file
    when it is not a JSON object (not UTF-8, not JSON, or nested too deep for Python's parser).
    """
    path = Path(folder) / CONFIG_NAME
    if not path.is_file():
        raise FileNotFoundError(f"{folder}: no {CONFIG_NAME} (a Hugging Face model folder has one)")
    try:
        config = json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise ValueError(f"{path}: not JSON ({error})") from None
    except RecursionError:  # json's parser recurses once per bracket: '[' * 100000 gets here
        raise ValueError(f"{path}: arrays or objects nested too deep to parse") from None
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


def positive_int(
    config: Mapping[str, Any], name: str, where: str, default: int | None = None
) -> int:
    """`config[name]` checked to be an int >= 1 (not a bool); `default` when the field is absent
    or null, if one is given (else it is required). ValueError naming `where` and the field."""
    value = config.get(name)
    if value is None and default is not None:
        return default
    if name not in config:
        raise ValueError(f"{where}: the field {name!r} is missing")
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{where}: {name!r} must be a positive int, not {value!r}")
    return value


def positive_float(
    config: Mapping[str, Any], name: str, where: str, default: float | None = None
) -> float:
    """`config[name]` checked to be a finite number > 0 (an int or a float, not a bool or a
    string), as a float; `default` when the field is absent (not when it is null), if one is
    given. ValueError naming `where` and the field: a zero, negative or NaN scale or epsilon
    would only show as NaN logits."""
    if name not in config:
        if default is not None:
            return default
        raise ValueError(f"{where}: the field {name!r} is missing")
    value = config[name]
    number = math.nan
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        try:
            number = float(value)
        except OverflowError:  # an integer past f64
            number = math.inf
    if not (math.isfinite(number) and number > 0):
        raise ValueError(f"{where}: {name!r} must be a finite number > 0, not {value!r}")
    return number


def flag(config: Mapping[str, Any], name: str, where: str, default: bool) -> bool:
    """`config[name]` checked to be a JSON boolean (the string "false" is refused, not read as
    true); `default` when the field is absent. ValueError naming `where` and the field."""
    return bool(require(config, name, bool, where)) if name in config else default
