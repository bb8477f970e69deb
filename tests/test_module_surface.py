"""plax's module surface matches JAX's shape, and promises nothing that does not exist."""
from __future__ import annotations

import re
import types

import pytest

import plax
import plax.numpy as jnp
from plax import errors


def test_ad_checkpoint_is_a_module_and_checkpoint_is_top_level():
    import plax.ad_checkpoint as adc
    assert isinstance(plax.ad_checkpoint, types.ModuleType) and plax.ad_checkpoint is adc
    for name in ("checkpoint_name", "print_saved_residuals"):
        assert callable(getattr(adc, name)), name
    assert isinstance(adc.checkpoint_policies, types.SimpleNamespace)  # as in JAX
    assert adc.checkpoint_policies is plax.checkpoint_policies
    assert not hasattr(adc, "checkpoint")  # removed from jax.ad_checkpoint in JAX 0.10
    assert plax.remat is plax.checkpoint


def test_checkpoint_name_is_the_identity_and_checks_its_name():
    from plax.ad_checkpoint import checkpoint_name
    x = jnp.arange(3.0)
    assert checkpoint_name(x, "x") is x
    assert plax.grad(lambda x: checkpoint_name(x * x, "sq"))(3.0) == 6.0
    with pytest.raises(TypeError, match="string name"):
        checkpoint_name(x, 3)


def test_print_saved_residuals_lists_arrays(capsys):
    from plax.ad_checkpoint import print_saved_residuals
    print_saved_residuals(lambda x: jnp.cos(jnp.sin(x)).sum(), jnp.ones(3))
    lines = capsys.readouterr().out.splitlines()
    assert lines, "reverse mode of cos(sin(x)) saves at least one value"
    assert all(re.fullmatch(r"f32\[3\] .+", line) for line in lines), lines


@pytest.mark.parametrize("name", ["nn", "scipy", "experimental", "sharding", "typing",
                                  "no_such_thing"])
def test_hasattr_is_false_for_what_does_not_exist(name):
    import importlib.util
    if importlib.util.find_spec(f"plax.{name}") is not None:
        assert hasattr(plax, name)  # it has been written since: then it must load
    else:
        assert not hasattr(plax, name)
        with pytest.raises(AttributeError, match=name):
            getattr(plax, name)


# JAX's top-level submodules (``jax.X`` after a bare ``import jax``) that plax has too
_JAX_SUBMODULES = ("api_util", "core", "custom_batching", "custom_derivatives", "debug",
                   "distributed", "dlpack", "dtypes", "errors", "experimental", "image", "lax",
                   "nn", "numpy", "ops", "profiler", "random", "ref", "scipy", "sharding",
                   "stages", "tree", "tree_util", "typing")


def test_jaxs_submodules_are_attributes_after_a_bare_import():
    # (in a fresh interpreter: here another test may have imported them already)
    from subprocess_util import last_json, run_python
    out = run_python("import json, types, plax; print(json.dumps({n: isinstance(getattr("
                     f"plax, n, None), types.ModuleType) for n in {list(_JAX_SUBMODULES)!r}}}))")
    assert [n for n, ok in last_json(out).items() if not ok] == []


def test_every_lazy_submodule_loads():
    for name in plax._LAZY_SUBMODULES:
        assert isinstance(getattr(plax, name), types.ModuleType), name


@pytest.mark.parametrize("exc_type", [errors.ConcretizationTypeError,
                                      errors.TracerBoolConversionError,
                                      errors.TracerIntegerConversionError])
def test_error_hints_name_only_lax_functions_that_exist(exc_type):
    text = str(exc_type("tracer"))
    assert "static_argnums" in text
    for name in re.findall(r"lax\.(\w+)", text):
        assert hasattr(plax.lax, name), f"the hint recommends lax.{name}, which plax lacks"


def test_error_hints_follow_what_lax_has(monkeypatch):
    monkeypatch.setattr(plax.lax, "while_loop", lambda *a: None, raising=False)
    assert "lax.while_loop" in str(errors.ConcretizationTypeError("tracer"))


def test_errors_hold_jaxs_index_and_jaxpr_errors():
    from plax.core import JaxprTypeError
    from plax.numpy import NonConcreteBooleanIndexError
    assert errors.JaxprTypeError is JaxprTypeError and issubclass(JaxprTypeError, TypeError)
    assert errors.NonConcreteBooleanIndexError is NonConcreteBooleanIndexError
    assert issubclass(NonConcreteBooleanIndexError, errors.JAXIndexError)
    assert issubclass(errors.JAXIndexError, IndexError)
    with pytest.raises(errors.JAXIndexError, match="boolean indices must be concrete"):
        plax.jit(lambda x: x[x > 0])(jnp.arange(3.0))


def test_flatten_util_loads_on_first_use():
    assert callable(plax.flatten_util.ravel_pytree)
