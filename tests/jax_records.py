"""Answers recorded from JAX 0.10.2 (``record_device_typed.py``) and the comparison of plax's
answers with them that the placement tests share."""
from __future__ import annotations

import json
import pathlib


def recorded_answers(name: str) -> dict:
    """The ``answers`` of the record ``name`` (a JSON file beside this module)."""
    return json.loads(pathlib.Path(__file__).with_name(name).read_text())["answers"]


def assert_as_recorded(got: dict, want: dict, known_different: set) -> None:
    """Checks that ``got`` (plax's answers) has the cases of ``want`` (JAX's record) and
    gives JAX's answer to each but exactly those named in ``known_different`` (so a fixed
    difference has to be taken off that list, and a new one is seen)."""
    assert set(got) == set(want)
    differ = {k: (got[k], want[k]) for k in want if got[k] != want[k]}
    assert set(differ) == set(known_different), differ
