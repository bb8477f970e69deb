"""``pmap`` under ``jax_debug_nans`` / ``jax_debug_infs`` raises JAX's FloatingPointError for
an invalid value in its outputs (beside JAX where installed), and changes nothing when the
options are off or the values are finite."""
from __future__ import annotations

import numpy as np
import pytest

import plax
import plax.numpy as jnp


def _outcome(jx, np_, f, x, **options):
    """``("ok", values)`` or ``(exception type name, message)`` of ``pmap(f)(x)``."""
    x = np_.asarray(x)  # made before the options are on (creating a NaN would raise)
    saved = {k: getattr(jx.config, k) for k in options}
    try:
        for k, v in options.items():
            jx.config.update(k, v)
        try:
            return "ok", np.asarray(jx.pmap(f)(x))
        except FloatingPointError as e:
            return type(e).__name__, str(e)
    finally:
        for k, v in saved.items():
            jx.config.update(k, v)


_CASES = {
    "log_of_negative": (lambda np_: lambda x: np_.log(x), [-1.0], {"jax_debug_nans": True}),
    "finite": (lambda np_: lambda x: np_.log(x) * 2, [1.0], {"jax_debug_nans": True}),
    "nan_input_passed_through": (lambda np_: lambda x: x + 1, [np.nan],
                                 {"jax_debug_nans": True}),
    "inf_with_debug_infs": (lambda np_: lambda x: 1 / x, [0.0], {"jax_debug_infs": True}),
    "inf_with_debug_nans_only": (lambda np_: lambda x: 1 / x, [0.0], {"jax_debug_nans": True}),
    "options_off": (lambda np_: lambda x: np_.log(x), [-1.0], {}),
}

_EXPECTED = {
    "log_of_negative": ("FloatingPointError",
                        "Invalid value (nan) encountered in sharded computation."),
    "finite": ("ok", [0.0]),
    "nan_input_passed_through": ("FloatingPointError",
                                 "Invalid value (nan) encountered in sharded computation."),
    "inf_with_debug_infs": ("FloatingPointError",
                            "Invalid value (inf) encountered in sharded computation."),
    "inf_with_debug_nans_only": ("ok", [np.inf]),
    "options_off": ("ok", [np.nan]),
}


@pytest.mark.parametrize("case", sorted(_CASES))
def test_pmap_debug_nans(case):
    make, x, options = _CASES[case]
    kind, got = _outcome(plax, jnp, make(jnp), x, **options)
    want_kind, want = _EXPECTED[case]
    assert kind == want_kind
    if kind == "ok":
        np.testing.assert_array_equal(got, np.asarray(want, np.float32))
    else:
        assert got == want


@pytest.mark.parametrize("case", sorted(_CASES))
def test_pmap_debug_nans_beside_jax(case):
    jax = pytest.importorskip("jax", reason="compared with JAX where installed")
    if case == "nan_input_passed_through":
        pytest.skip("JAX 0.10.2 raises RecursionError here (its de-optimized rerun of a NaN "
                    "input recurses); plax raises the sharded computation's FloatingPointError")
    make, x, options = _CASES[case]
    ours = _outcome(plax, jnp, make(jnp), x, **options)
    theirs = _outcome(jax, jax.numpy, make(jax.numpy), x, **options)
    assert ours[0] == theirs[0]
    if ours[0] == "ok":
        np.testing.assert_array_equal(ours[1], theirs[1])
    else:
        assert ours[1] == theirs[1]


def test_context_manager_and_notice(capsys):
    x = jnp.array([-1.0])
    with plax.debug_nans(True):
        with pytest.raises(FloatingPointError, match=r"Invalid value \(nan\) encountered in "
                                                     r"sharded computation"):
            plax.pmap(jnp.log)(x)
    assert "Calling the de-optimized version" in capsys.readouterr().out
    np.testing.assert_array_equal(np.asarray(plax.pmap(jnp.log)(x)), [np.nan])  # off again
