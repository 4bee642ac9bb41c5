"""JSON objects in protobuf Structs, and back: the one conversion server, worker and SDK use.

A ``google.protobuf.Struct`` holds every number as a double. Task params were JSON, where
``3`` is an int, so decoding turns integral doubles (below 2**53, exact) back into ints.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from google.protobuf import json_format
from google.protobuf.struct_pb2 import Struct


def dict_to_struct(value: Mapping[str, Any]) -> Struct:
    """A JSON object as a Struct. Raises ValueError/TypeError for non-JSON values."""
    out = Struct()
    out.update(dict(value))
    return out


def struct_to_dict(value: Struct) -> dict[str, Any]:
    """A Struct as a plain dict, whole numbers as ``int`` (``3``, not ``3.0``)."""
    decoded: dict[str, Any] = _json_numbers(json_format.MessageToDict(value))
    return decoded


def _json_numbers(value: Any) -> Any:
    if isinstance(value, float) and value.is_integer() and abs(value) < 2**53:
        return int(value)
    if isinstance(value, dict):
        return {k: _json_numbers(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_json_numbers(v) for v in value]
    return value
