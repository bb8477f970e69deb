"""Every callable plax.numpy exports has a test: its name must appear in the numpy tests, as
``jnp.<name>`` or as a quoted name in one of their tables. A new export without a test fails
here."""
from __future__ import annotations

import inspect
import pathlib
import re

import numpy as np

import plax.numpy as jnp

HERE = pathlib.Path(__file__).parent


def exported_callables() -> list[str]:
    """The public callables of plax.numpy: functions, scalar types, classes (not submodules)."""
    # dir() and getattr(), not vars(): some names load on first use
    objs = {name: getattr(jnp, name) for name in dir(jnp) if not name.startswith("_")}
    return sorted(name for name, obj in objs.items()
                  if callable(obj) and not inspect.ismodule(obj))


def _test_sources() -> str:
    return "\n".join(p.read_text() for p in sorted(HERE.glob("test_*.py")))


def _names_in_tests(sources: str) -> set[str]:
    """The names written as ``jnp.<name>`` or as a quoted name (``"name"``, ``'name'``) in
    ``sources``: one pass over them (a search per export took ~8 CPU s). The lookahead finds
    quoted names that share a quote with the one before them."""
    return (set(re.findall(r"\bjnp\.(\w+)", sources))
            | set(re.findall(r"(?=[\"'](\w+)[\"'])", sources)))


def test_every_exported_callable_is_tested():
    written = _names_in_tests(_test_sources())
    untested = [name for name in exported_callables() if name not in written]
    assert not untested, f"plax.numpy exports without a test: {untested}"


def test_names_in_tests_reads_attributes_and_quoted_names():
    # made-up names: this file is one of the sources read for the real exports
    found = _names_in_tests("jnp.zz_a(x); jnp.zz_b.zz_c; 'zz_d' \"zz_e\"zz_f\" jnp.zz_g_")
    assert {"zz_a", "zz_b", "zz_d", "zz_e", "zz_f", "zz_g_"} <= found
    assert not {"zz_c", "x", "zz_g"} & found


def test_exports_cover_the_foundation_list():
    """The functions the foundation issue asks for are exported."""
    required = """array asarray zeros ones full empty zeros_like ones_like full_like empty_like
        arange linspace eye sum mean var std max min prod argmax argmin all any reshape
        transpose squeeze expand_dims concatenate stack dot matmul inner outer where clip
        isclose allclose nan_to_num einsum tensordot kron cross searchsorted sort argsort
        nonzero argwhere flatnonzero unique split array_split repeat tile roll diag diagonal
        trace tril triu take take_along_axis pad meshgrid indices""".split()
    missing = [name for name in required if not callable(getattr(jnp, name, None))]
    assert not missing, missing


def test_abstract_scalar_categories_work_with_issubdtype():
    cases = [("generic", np.float32, True), ("number", np.int8, True), ("inexact", jnp.bfloat16,
             True), ("floating", jnp.bfloat16, True), ("complexfloating", np.complex64, True),
             ("integer", np.uint8, True), ("signedinteger", np.uint8, False),
             ("unsignedinteger", np.uint8, True), ("floating", np.int32, False),
             ("character", np.bytes_, True), ("flexible", np.str_, True)]
    for name, dtype, expected in cases:
        assert jnp.issubdtype(dtype, getattr(jnp, name)) is expected, (name, dtype)


def test_ndarray_is_the_array_type():
    x = jnp.ones(2)
    assert isinstance(x, jnp.ndarray) and isinstance(x, jnp.Array)
    assert x.__array_namespace__() is jnp
