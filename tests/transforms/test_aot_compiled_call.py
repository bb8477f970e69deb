"""Calling an AOT-compiled function (``jit(f).trace(...).lower().compile()``) as JAX 0.10.2
does: only the dynamic arguments are passed (static ones were fixed at tracing), results have
the types compiled for, and mismatched arguments raise JAX's TypeError naming each one.
Recorded values, and the same calls beside JAX where it is installed."""
import pytest

import plax


def _f(x, y):
    return 2 * x + y


def _calls(jax):
    jnp = jax.numpy
    i32 = jax.ShapeDtypeStruct((), jnp.dtype("int32"))
    return [
        lambda: jax.jit(_f, static_argnums=0).trace(7, 8).lower().compile()(5),
        lambda: jax.jit(_f, static_argnums=0).trace(10, i32).lower().compile()(5),
        lambda: jax.jit(_f, static_argnames="x").trace(x=10, y=i32).lower().compile()(y=5),
        lambda: jax.jit(_f, static_argnums=1).trace(10, 3).lower().compile()(jnp.int32(5)),
        lambda: jax.jit(_f).trace(i32, i32).lower().compile()(3, 4),
    ]


# repr of each call's result, as JAX 0.10.2 prints them
RECORDED = [
    "Array(19, dtype=int32, weak_type=True)",
    "Array(25, dtype=int32)",
    "Array(25, dtype=int32)",
    "Array(13, dtype=int32, weak_type=True)",
    "Array(10, dtype=int32)",
]

_MISMATCH = ("Argument types differ from the types for which this computation was compiled. "
             "Perhaps you are calling the compiled executable with a different enable_x64 mode "
             "than when it was AOT compiled? The mismatches are:\n")


@pytest.mark.parametrize("i", range(len(RECORDED)))
def test_static_arguments_are_not_passed_again(i):
    assert repr(_calls(plax)[i]()) == RECORDED[i]


def _mismatch_messages(jax):
    jnp = jax.numpy
    out = []
    c = jax.jit(_f).lower(jnp.ones(3), 1.).compile()
    for args in [(jnp.ones(4), 1.), (jnp.ones(3, jnp.int32), 1), (jnp.ones(3), jnp.ones(2))]:
        with pytest.raises(TypeError) as info:
            c(*args)
        out.append(str(info.value))
    c = jax.jit(lambda d: d["a"]).lower({"a": jnp.ones(3), "b": [jnp.ones(2)]}).compile()
    with pytest.raises(TypeError) as info:
        c({"a": jnp.ones(3), "b": [jnp.ones(3)]})
    out.append(str(info.value))
    return out


def test_mismatched_arguments_are_named():
    assert _mismatch_messages(plax) == [
        _MISMATCH + "Argument 'x' compiled with float32[3] and called with float32[4]",
        _MISMATCH + "Argument 'x' compiled with float32[3] and called with int32[3]\n"
                    "Argument 'y' compiled with float32[] and called with int32[]",
        _MISMATCH + "Argument 'y' compiled with float32[] and called with float32[2]",
        _MISMATCH + "Argument 'd['b'][0]' compiled with float32[2] and called with float32[3]",
    ]


def test_passing_the_static_argument_again_is_a_structure_error():
    c = plax.jit(_f, static_argnums=0).trace(7, 8).lower().compile()
    with pytest.raises(TypeError, match="Function compiled with input pytree does not match "
                                        "the input pytree it was called with"):
        c(7, 5)


def test_same_as_jax():
    jax = pytest.importorskip("jax")
    assert [repr(g()) for g in _calls(jax)] == RECORDED
    assert _mismatch_messages(jax) == _mismatch_messages(plax)
    with pytest.raises(TypeError, match="Function compiled with input pytree does not match "
                                        "the input pytree it was called with"):
        jax.jit(_f, static_argnums=0).trace(7, 8).lower().compile()(7, 5)
