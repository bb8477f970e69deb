"""``debug.print`` inside ``make_jaxpr`` prints JAX 0.10.2's ``debug_print`` equation.

plax stages the print as its ``debug_callback`` primitive (so it runs as any debug callback
does); the printer shows it under JAX's name and parameters. The JAX text is recorded below
(NumPy's print options are filled in from the running NumPy, as both read them at trace
time), and a second test checks the record against JAX where it is installed.
"""
import numpy as np
import pytest

import plax
import plax.numpy as jnp


def program(debug):
    def f(x):
        debug.print("x={x}", x=x)
        debug.print("{} {}", x, x + 1, ordered=True)
        debug.print("{{a}} {} {s}", x, s="hi")
        return x
    return f


def _eqn(fmt, placeholders, tree, ordered, static, operands):
    return ("    debug_print[\n"
            f"      fmt={fmt}\n"
            f"      has_placeholders={placeholders}\n"
            f"      in_tree=PyTreeDef({tree})\n"
            "      logging_record=None\n"
            "      np_printoptions={OPTS}\n"
            f"      ordered={ordered}\n"
            "      partitioned=False\n"
            f"      static_args={static}\n"
            f"    ] {operands}\n")


JAX_TEXT = ("{ lambda ; a:f32[3]. let\n"
            + _eqn("x={x}", True, "((), {'x': *})", False, "()", "a")
            + "    b:f32[3] = add a 1.0:f32[]\n"
            + _eqn("{} {}", True, "((*, *), {})", True, "()", "a b")
            + _eqn("{{a}} {} {s}", False, "((*,), {'s': *})", False, "((1, 'hi'),)", "a")
            + "  in (a,) }")


def expected() -> str:
    return JAX_TEXT.replace("{OPTS}", str(tuple(np.get_printoptions().items())))


def test_plax_prints_debug_print_as_jax(capsys):
    f = program(plax.debug)
    assert str(plax.make_jaxpr(f)(jnp.ones(3, jnp.float32))) == expected()
    # the runtime behaviour is the callback's: each print runs when the program runs; the
    # third, not formatted (its first piece is a literal), cannot print its keyword argument
    # and fails when it runs, as JAX's does
    with pytest.raises(ValueError, match="no keyword arguments"):
        plax.jit(f)(jnp.arange(3.0))
    assert capsys.readouterr().out == "x=[0. 1. 2.]\n[0. 1. 2.] [1. 2. 3.]\n"


def test_other_debug_callbacks_keep_their_equation():
    text = str(plax.make_jaxpr(lambda x: plax.debug.callback(print, x) or x)(1.0))
    assert "debug_callback[callback=print ordered=False] a" in text


def test_record_is_jaxs():
    jax = pytest.importorskip("jax", reason="the recorded JAX text stands without jax")
    f = program(jax.debug)
    assert str(jax.make_jaxpr(f)(jax.numpy.ones(3, "float32"))) == expected()
