"""jit's TypeError for an argument that is not an array (JAX 0.10.2's text: the function, the
value's type and the argument's path), checked against recorded text and beside JAX."""
import re

import pytest

import plax

_TAIL = ("\nThis typically means that a jit-wrapped function was called with a non-array "
         "argument, and this argument was not marked as static using the static_argnums or "
         "static_argnames parameters of jax.jit.")


class _Opaque:
    def method(self, x):
        return x


def _f(x):
    return x


def _g(x, y=2):
    return x


def _star(*a):
    return a[0]


def _s(a, b, c):
    return a


# (function, jit keywords, args, kwargs, the value's type as printed, the path)
CASES = [
    (_f, {}, ("s",), {}, "<class 'str'>", "x"),
    (_f, {}, ({"a": 1, "b": ["x"]},), {}, "<class 'str'>", "x['b'][0]"),
    (_f, {}, ((1, object()),), {}, "<class 'object'>", "x[1]"),
    (_g, {}, (1,), {"y": "a"}, "<class 'str'>", "y"),
    (_star, {}, (1, "a"), {}, "<class 'str'>", "a[1]"),
    (_Opaque.method, {}, (_Opaque(), 1), {}, f"<class '{__name__}._Opaque'>", "self"),
    (_s, {"static_argnums": 1}, (1, 2, "s"), {}, "<class 'str'>", "c"),
]


def _message(jax_mod, fun, kw, args, kwargs, how):
    jitted = jax_mod.jit(fun, **kw)
    with pytest.raises(TypeError) as info:
        if how == "call":
            jitted(*args, **kwargs)
        else:
            jitted.lower(*args, **kwargs)
    return str(info.value)


@pytest.mark.parametrize("how", ["call", "lower"])
@pytest.mark.parametrize("case", CASES, ids=lambda c: c[-1])
def test_recorded_message(case, how):
    fun, kw, args, kwargs, typ, path = case
    got = _message(plax, fun, kw, args, kwargs, how)
    assert got == (f"Error interpreting argument to {fun!r} as an abstract array. The "
                   f"problematic value is of type {typ} and was passed to the function at path "
                   f"{path}." + _TAIL)


def test_inside_a_transform_names_the_inner_argument():
    inner = lambda a, b: a  # noqa: E731
    with pytest.raises(TypeError, match=r"at path b\.\n"):
        plax.grad(lambda x: plax.jit(inner)(x, "s"))(1.0)


@pytest.mark.parametrize("case", CASES, ids=lambda c: c[-1])
def test_same_message_as_jax(case):
    jax = pytest.importorskip("jax")
    fun, kw, args, kwargs, _, _ = case
    mask = lambda m: re.sub(r"0x[0-9a-f]+", "0x?", m)  # noqa: E731
    assert mask(_message(plax, fun, kw, args, kwargs, "call")) == \
        mask(_message(jax, fun, kw, args, kwargs, "call"))
