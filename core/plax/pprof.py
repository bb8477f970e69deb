"""pprof's ``Profile`` protocol buffer, encoded by hand (the few messages a memory profile
needs: no protobuf dependency). The schema is ``profile.proto`` of github.com/google/pprof."""
from __future__ import annotations

from typing import Sequence


def _varint(n: int) -> bytes:
    out = bytearray()
    n &= (1 << 64) - 1  # int64 as two's complement, as protobuf writes negatives
    while True:
        byte = n & 0x7F
        n >>= 7
        if n:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _field_varint(number: int, value: int) -> bytes:
    return _varint(number << 3) + _varint(value)


def _field_bytes(number: int, payload: bytes) -> bytes:
    return _varint((number << 3) | 2) + _varint(len(payload)) + payload


def _packed(number: int, values: Sequence[int]) -> bytes:
    return _field_bytes(number, b"".join(_varint(v) for v in values))


def encode_profile(sample_types: Sequence[tuple[str, str]],
                   samples: Sequence[tuple[Sequence[str], Sequence[int], dict[str, str]]],
                   time_ns: int = 0) -> bytes:
    """A serialized ``perftools.profiles.Profile``.

    Args:
      sample_types: ``(type, unit)`` of each value of a sample (``("space", "bytes")``).
      samples: ``(stack, values, labels)``: the stack's frames as function names, outermost
        first; one value per sample type; string labels.
      time_ns: the profile's time.

    Returns:
      The message's bytes (not compressed).

    Example:
      >>> encode_profile([("space", "bytes")], [(["main"], [64], {})])[:2]
      b'\\n\\x04'
    """
    strings: dict[str, int] = {"": 0}

    def index(s: str) -> int:
        return strings.setdefault(s, len(strings))

    functions: dict[str, int] = {}  # name -> id (a location per function: same id)
    body = b"".join(_field_bytes(1, _field_varint(1, index(t)) + _field_varint(2, index(u)))
                    for t, u in sample_types)
    for stack, values, labels in samples:
        if len(values) != len(sample_types):
            raise ValueError(f"a sample has {len(values)} values for {len(sample_types)} "
                             "sample types")
        ids = [functions.setdefault(name, len(functions) + 1) for name in stack]
        message = _packed(1, ids[::-1]) + _packed(2, values)  # pprof: leaf first
        for key, value in labels.items():
            message += _field_bytes(3, _field_varint(1, index(key)) +
                                    _field_varint(2, index(value)))
        body += _field_bytes(2, message)
    for name, ident in functions.items():
        line = _field_varint(1, ident)
        body += _field_bytes(4, _field_varint(1, ident) + _field_bytes(4, line))
        body += _field_bytes(5, _field_varint(1, ident) + _field_varint(2, index(name)) +
                             _field_varint(3, index(name)))
    body += b"".join(_field_bytes(6, s.encode()) for s in strings)
    if time_ns:
        body += _field_varint(9, time_ns)
    return body
