"""``jax.debug.visualize_array_sharding`` prints JAX 0.10.2's table (issue 25, item 2).

The expected tables below are what JAX 0.10.2 prints (through ``rich``, on output that is
not a colour terminal) for the same arrays: cells sized by the fraction of the array each
block covers (``scale`` x 10 lines high, 2.5 columns per line of width times the aspect
ratio, ``min_width``..``max_width`` columns), naming the devices holding each block. Where
JAX and ``rich`` are installed, a second test prints them with JAX and compares.
"""
import importlib.util

import pytest

from sharding_child import PRELUDE, run_child

SCRIPT = PRELUDE + r'''
import contextlib, io
mesh = jax.make_mesh((2, 4), ("X", "Y"))
line = jax.make_mesh((8,), ("d",))
cases = {
    "X,Y": ((8, 4), mesh, P("X", "Y"), {}),
    "X": ((8, 4), mesh, P("X", None), {}),
    "None,Y": ((8, 4), mesh, P(None, "Y"), {}),
    "Y,X square": ((8, 8), mesh, P("Y", "X"), {}),
    "replicated": ((8, 4), mesh, P(), {}),
    "rank 1": ((16,), line, P("d"), {}),
    "rank 1 replicated over Y": ((16,), mesh, P("X"), {}),
    "X*Y": ((8, 4), mesh, P(("X", "Y")), {}),
    "scale 0.5": ((8, 4), mesh, P("X", "Y"), {"scale": 0.5}),
}
out = {}
for name, (shape, m, spec, kwargs) in cases.items():
    x = jax.device_put(np.zeros(shape, np.float32), jax.NamedSharding(m, spec))
    text = io.StringIO()
    with contextlib.redirect_stdout(text):
        jax.debug.visualize_array_sharding(x, **kwargs)
    out[name] = text.getvalue()
print(json.dumps(out))
'''

EXPECTED = {
    "X,Y": """\
┌───────┬───────┬───────┬───────┐
│       │       │       │       │
│ CPU 0 │ CPU 1 │ CPU 2 │ CPU 3 │
│       │       │       │       │
│       │       │       │       │
├───────┼───────┼───────┼───────┤
│       │       │       │       │
│ CPU 4 │ CPU 5 │ CPU 6 │ CPU 7 │
│       │       │       │       │
│       │       │       │       │
└───────┴───────┴───────┴───────┘
""",
    "X": """\
┌───────────┐
│           │
│CPU 0,1,2,3│
│           │
│           │
├───────────┤
│           │
│CPU 4,5,6,7│
│           │
│           │
└───────────┘
""",
    "None,Y": """\
┌───────┬───────┬───────┬───────┐
│       │       │       │       │
│       │       │       │       │
│       │       │       │       │
│       │       │       │       │
│CPU 0,4│CPU 1,5│CPU 2,6│CPU 3,7│
│       │       │       │       │
│       │       │       │       │
│       │       │       │       │
│       │       │       │       │
└───────┴───────┴───────┴───────┘
""",
    "Y,X square": """\
┌──────────┬──────────┐
│  CPU 0   │  CPU 4   │
├──────────┼──────────┤
│  CPU 1   │  CPU 5   │
├──────────┼──────────┤
│  CPU 2   │  CPU 6   │
├──────────┼──────────┤
│  CPU 3   │  CPU 7   │
└──────────┴──────────┘
""",
    "replicated": """\
┌───────────────────┐
│                   │
│                   │
│                   │
│                   │
│CPU 0,1,2,3,4,5,6,7│
│                   │
│                   │
│                   │
│                   │
└───────────────────┘
""",
    "rank 1": """\
┌───────┬───────┬───────┬───────┬───────┬───────┬───────┬───────┐
│ CPU 0 │ CPU 1 │ CPU 2 │ CPU 3 │ CPU 4 │ CPU 5 │ CPU 6 │ CPU 7 │
└───────┴───────┴───────┴───────┴───────┴───────┴───────┴───────┘
""",
    "rank 1 replicated over Y": """\
┌───────────┬───────────┐
│CPU 0,1,2,3│CPU 4,5,6,7│
└───────────┴───────────┘
""",
    "X*Y": """\
┌──────────┐
│  CPU 0   │
├──────────┤
│  CPU 1   │
├──────────┤
│  CPU 2   │
├──────────┤
│  CPU 3   │
├──────────┤
│  CPU 4   │
├──────────┤
│  CPU 5   │
├──────────┤
│  CPU 6   │
├──────────┤
│  CPU 7   │
└──────────┘
""",
    "scale 0.5": """\
┌───────┬───────┬───────┬───────┐
│ CPU 0 │ CPU 1 │ CPU 2 │ CPU 3 │
├───────┼───────┼───────┼───────┤
│ CPU 4 │ CPU 5 │ CPU 6 │ CPU 7 │
└───────┴───────┴───────┴───────┘
""",
}


def _run(which: str) -> dict:
    return run_child(SCRIPT, which, TERM="dumb", COLUMNS="100")


@pytest.fixture(scope="module")
def plax_tables() -> dict:
    return _run("plax")


@pytest.mark.parametrize("case", list(EXPECTED))
def test_table_as_jax_prints_it(plax_tables, case):
    assert plax_tables[case] == EXPECTED[case]


def test_rank_3_is_refused():
    from plax.sharding_visualize import sharding_table
    from plax.sharding import SingleDeviceSharding
    import plax
    with pytest.raises(ValueError, match="only works for shapes with 1 and 2 dimensions"):
        sharding_table((2, 2, 2), SingleDeviceSharding(plax.devices()[0]))


@pytest.mark.skipif(importlib.util.find_spec("jax") is None
                    or importlib.util.find_spec("rich") is None,
                    reason="jax and rich are not both installed: the expected tables are not "
                           "re-checked against JAX")
def test_expected_tables_are_jax_s():
    assert _run("jax") == EXPECTED


def test_inspect_array_sharding_eagerly_and_traced():
    import numpy as np
    import plax
    mesh = plax.make_mesh((1,), ("X",))
    seen = []
    with plax.set_mesh(mesh):
        x = plax.device_put(np.ones((2, 2), np.float32), plax.P("X"))
        plax.debug.inspect_array_sharding({"x": x, "y": plax.numpy.ones(3)}, callback=seen.append)
        plax.jit(lambda t: plax.debug.inspect_array_sharding(t * 2, callback=seen.append))(x)
    device = plax.devices()[0]
    named = plax.NamedSharding(mesh, plax.P("X"))
    # an array made under the mesh lies on it, replicated (as JAX places it)
    assert seen == [named, plax.NamedSharding(mesh, plax.P(None)), named]
    assert plax.sharding.make_single_device_sharding(device) == \
        plax.sharding.SingleDeviceSharding(device)
