"""JSON as the `safetensors` package reads a header (Rust's serde_json), not as Python's `json`.

Python's `json` takes more than serde_json does, and each difference would let a file the
format's own reader refuses load here: bytes in UTF-16 or UTF-32 (`json.loads(bytes)` guesses
the encoding) or with a byte order mark, NaN and Infinity, numbers past f64 (serde_json refuses
them; Python keeps big integers, and raises a bare ValueError past 4300 digits), lone
surrogate escapes such as "\\ud800" (not Unicode), and nesting past serde_json's depth limit.
`loads` refuses all of these with a `JsonError` saying which; objects whose keys repeat come
back as `Object`s that name the repeated keys, so that the caller can refuse the ones serde
refuses (known fields of a struct) and keep the last value of the others, as serde does.

Everything added costs nothing on an ordinary header: the number hooks look at the length of
the digits first, and strings are searched for surrogates only when the raw text holds a
surrogate escape.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

#: serde_json's recursion limit, as the safetensors package meets it: a header whose arrays and
#: objects nest deeper than this is refused.
MAX_DEPTH = 127

_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")
_F64_DIGITS = 300  # integers with fewer digits than this always fit an f64


class JsonError(ValueError):
    """Text that is not JSON as serde_json reads it; the message says why."""


class Object(dict[str, Any]):
    """A JSON object in which some keys appeared more than once (`repeated`); the value kept is
    the last one, as serde_json keeps for a map."""

    repeated: frozenset[str] = frozenset()


def loads(raw: bytes) -> Any:
    """Parse `raw` (strict UTF-8 JSON) as serde_json would; JsonError if it would not."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as error:
        raise JsonError(f"not UTF-8 ({error.reason} at byte {error.start})") from None
    try:
        value = json.loads(
            text, object_pairs_hook=_object, parse_int=_integer, parse_float=_float,
            parse_constant=_constant,
        )  # fmt: skip
    except RecursionError:  # a hostile header of deeply nested brackets
        raise JsonError(f"nested more than {MAX_DEPTH} deep") from None
    except JsonError:
        raise
    except ValueError as error:  # json.JSONDecodeError
        raise JsonError(f"{type(error).__name__}: {error}") from None
    if _SURROGATE_ESCAPE.search(text):
        check_tree(value, MAX_DEPTH, strings=True)
    return value


def check_tree(value: Any, depth: int, *, strings: bool = False) -> None:
    """JsonError if `value` nests arrays and objects more than `depth` deep (`value` itself
    counts as one level when it is an array or object) or, with `strings`, if a key or string
    in it holds a lone surrogate."""
    stack = [(value, 1)]
    while stack:
        item, level = stack.pop()
        if isinstance(item, str):
            if strings:
                _check_string(item)
            continue
        if not isinstance(item, (list, dict)):
            continue
        if level > depth:
            raise JsonError(f"nested more than {MAX_DEPTH} deep")
        if isinstance(item, dict):
            if strings:
                for key in item:
                    _check_string(key)
            stack.extend((child, level + 1) for child in item.values())
        else:
            stack.extend((child, level + 1) for child in item)


def _check_string(text: str) -> None:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as error:
        bad = ord(text[error.start])
        raise JsonError(f"a lone surrogate \\u{bad:04x} in a string") from None


def _object(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    found = dict(pairs)
    if len(found) == len(pairs):
        return found
    seen: set[str] = set()
    repeated: set[str] = set()
    for key, _ in pairs:
        (repeated if key in seen else seen).add(key)
    kept = Object(found)
    kept.repeated = frozenset(repeated)
    return kept


def _integer(text: str) -> int | float:
    if len(text) >= _F64_DIGITS and math.isinf(float(text)):
        raise JsonError(f"a number out of range (an integer of {len(text.lstrip('-'))} digits)")
    # serde reads "-0" as a negative number, which no count (shape, offset) may be: a float
    # keeps it out of every field that takes only integers.
    return -0.0 if text == "-0" else int(text)


def _float(text: str) -> float:
    value = float(text)
    if math.isinf(value):
        raise JsonError(f"a number out of range ({text[:20]})")
    return value


def _constant(text: str) -> float:
    raise JsonError(f"{text} is not a JSON number")


__all__ = ["MAX_DEPTH", "JsonError", "Object", "check_tree", "loads"]
