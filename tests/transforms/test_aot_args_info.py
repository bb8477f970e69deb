"""``Lowered.args_info`` / ``Compiled.args_info`` (and ``Compiled.out_info``) as JAX 0.10.2
gives them: the dynamic arguments' pytree of ArgInfo, donation resolved through the
signature; checked alone and beside JAX where it is installed."""
from __future__ import annotations

import warnings

import numpy as np
import pytest

import plax
from plax import numpy as jnp, stages


def _f(a, n, b, c=1.0):
    return b if isinstance(a, dict) else a * n + b


_CASES = [  # (jit options, args, kwargs)
    (dict(static_argnums=1, donate_argnums=(0, 2)), (np.ones(1, np.float32), 2, np.ones(2, np.float32)),
     dict(c=np.ones(3, np.float32))),
    (dict(static_argnums=1, donate_argnames=("b", "c")),
     (np.ones(1, np.float32), 2, np.ones(2, np.float32)), dict(c=np.ones(3, np.float32))),
    (dict(static_argnums=1, donate_argnames=("b", "c")),
     (np.ones(1, np.float32), 2, np.ones(2, np.float32), np.ones(3, np.float32)), {}),
    (dict(static_argnums=1, donate_argnums=3),
     (np.ones(1, np.float32), 2, np.ones(2, np.float32)), dict(c=np.ones(3, np.float32))),
    (dict(static_argnums=1, donate_argnums=-1),
     (np.ones(1, np.float32), 2, np.ones(2, np.float32), np.ones(3, np.float32)), {}),
    (dict(donate_argnums=0), ({"w": np.ones(2, np.int32), "b": [1, 2.0]}, 3, 0.5), {}),
]


def _summary(mod, opts, args, kwargs):
    f = mod.jit(_f, **opts)
    lowered = f.lower(*args, **kwargs)
    info = lowered.args_info
    leaves, tree = mod.tree_util.tree_flatten(info)
    compiled = lowered.compile()
    assert mod.tree_util.tree_structure(compiled.args_info) == tree
    return str(tree), [(a.shape, str(a.dtype), a.donated) for a in leaves]


def test_args_info_tree_and_donation():
    tree, leaves = _summary(plax, *_CASES[0])
    assert tree == "PyTreeDef(((*, *), {'c': *}))"
    assert leaves == [((1,), "float32", True), ((2,), "float32", True), ((3,), "float32", False)]
    # donate_argnames reach positional arguments through the signature, and back
    assert [d for *_, d in _summary(plax, *_CASES[2])[1]] == [False, True, True]
    assert [d for *_, d in _summary(plax, *_CASES[3])[1]] == [False, False, True]
    # a donated pytree argument donates every leaf; a static argument is left out
    tree, leaves = _summary(plax, _CASES[5][0], *_CASES[5][1:])
    assert [d for *_, d in leaves] == [True, True, True, False, False]


def test_arg_info_and_compiled_out_info():
    lowered = plax.jit(lambda x, y: x * y).lower(jnp.ones((2, 3)), 2.0)
    (x, y), kw = lowered.args_info
    assert kw == {} and isinstance(x, stages.ArgInfo)
    assert (x.shape, x.dtype, x.donated) == ((2, 3), np.dtype("float32"), False)
    assert y._aval.weak_type and repr(y).startswith("ArgInfo(_aval=")
    assert lowered.compile().out_info == plax.ShapeDtypeStruct((2, 3), jnp.float32)
    traced = plax.jit(jnp.sin).trace(1.0)
    assert traced.args_info[0][0].shape == ()


@pytest.mark.parametrize("case", range(len(_CASES)))
def test_args_info_beside_jax(case):
    jax = pytest.importorskip("jax", reason="JAX is not installed: nothing to compare with")
    opts, args, kwargs = _CASES[case]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # JAX-CPU: "Some donated buffers were not usable"
        theirs = _summary(jax, opts, args, kwargs)
    assert _summary(plax, opts, args, kwargs) == theirs
