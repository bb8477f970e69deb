"""``plax.lowering.reads_before_updates``: the reads of an update's operand (and of views of
it) that do not depend on the update are scheduled before it, so a backend may write the
update into the operand's buffer; everything else keeps the program's order, and the
program computes the same values."""
from __future__ import annotations

import numpy as np

import plax
from plax import lax
from plax import numpy as jnp
from plax.core.interpret import eval_jaxpr
from plax.lowering import reads_before_updates


def _names(jaxpr) -> list:
    return [e.primitive.name for e in jaxpr.eqns]


def _position(jaxpr, name: str) -> int:
    return _names(jaxpr).index(name)


def _same_values(fn, args, jaxpr, moved) -> None:
    closed = plax.make_jaxpr(fn)(*args)
    want = eval_jaxpr(closed.jaxpr, closed.consts, *args)
    got = eval_jaxpr(moved, closed.consts, *args)
    for g, w in zip(got, want):
        np.testing.assert_array_equal(np.asarray(g), np.asarray(w))


def test_a_read_after_the_update_and_its_views_move_before_it():
    def step(c, row, i):
        new = c.at[i].add(row)
        old = c[1:3].reshape(-1) * 2.0          # slice, reshape (views), then a multiply
        return new, old, jnp.sin(row)
    args = (np.arange(12.0, dtype=np.float32).reshape(4, 3), np.ones(3, np.float32), 2)
    j = plax.make_jaxpr(step)(*args).jaxpr
    assert _position(j, "scatter-add") < _position(j, "slice")
    moved = reads_before_updates(j)
    for reader in ("slice", "reshape", "mul"):
        assert _position(moved, reader) < _position(moved, "scatter-add"), _names(moved)
    # an equation that does not read the operand keeps its place after the update
    assert _position(moved, "sin") > _position(moved, "scatter-add")
    assert sorted(_names(moved)) == sorted(_names(j))
    _same_values(step, args, j, moved)


def test_a_read_of_both_values_stays_after_the_update():
    def step(c, i):
        new = lax.dynamic_update_slice(c, jnp.ones((1, 3)), (i, 0))
        return new, c * new            # reads the old and the new value
    j = plax.make_jaxpr(step)(np.zeros((4, 3), np.float32), 1).jaxpr
    moved = reads_before_updates(j)
    assert _position(moved, "mul") > _position(moved, "dynamic_update_slice")


def test_nothing_to_move_gives_the_program_itself():
    def reads_first(c, i):
        total = c.sum()
        return c.at[i].set(0.0), total
    for fn in (reads_first, lambda c, i: jnp.sin(c) + i):
        j = plax.make_jaxpr(fn)(np.zeros(5, np.float32), 1).jaxpr
        assert reads_before_updates(j) is j


def test_two_updates_of_one_operand_and_every_scatter_kind():
    def two(c, i):
        a = c.at[i].set(1.0)
        b = c.at[i].mul(2.0)
        return a, b, c[0]
    j = plax.make_jaxpr(two)(np.arange(4.0, dtype=np.float32), 1).jaxpr
    moved = reads_before_updates(j)
    scatters = [k for k, n in enumerate(_names(moved)) if n.startswith("scatter")]
    assert len(scatters) == 2 and max(scatters) < len(moved.eqns)
    assert _position(moved, "slice") < min(scatters)
    _same_values(two, (np.arange(4.0, dtype=np.float32), 1), j, moved)
    for op in ("set", "add", "multiply", "min", "max"):
        fn = lambda c, i, op=op: (getattr(c.at[i], op)(3.0), c[2])
        j = plax.make_jaxpr(fn)(np.arange(4.0, dtype=np.float32), 1).jaxpr
        moved = reads_before_updates(j)
        assert _names(moved)[-1].startswith("scatter"), (op, _names(moved))


def test_effects_keep_their_order():
    def step(c, i):
        new = c.at[i].set(5.0)
        plax.debug.print("{}", new[0])
        plax.debug.print("{}", c[0])
        return new
    j = plax.make_jaxpr(step)(np.zeros(3, np.float32), 1).jaxpr
    moved = reads_before_updates(j)
    calls = [k for k, n in enumerate(_names(moved)) if "callback" in n or "print" in n]
    assert len(calls) == 2 and calls[0] > _position(moved, "scatter")
    # (the second print reads only the old value, but effects stay in order: the slice may
    # move, the print may not pass the first)
    assert calls == sorted(calls)
