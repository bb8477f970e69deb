"""Programs with float0 tangents (integer inputs or outputs), written once for plax and JAX.

Shared by tests/test_float0_backends.py in this process and in the simulated-GPU child:
:func:`report` runs every case eagerly or under ``jit(..., backend=...)`` and describes each
result leaf as ``[kind, dtype, shape, values]`` (kind ``"ndarray"`` for a NumPy array, as
JAX returns float0 values, ``"Array"`` otherwise), so the two libraries compare as JSON.
"""
from __future__ import annotations

import numpy as np


def cases(lib, jnp, float0) -> dict:
    """name -> (function, arguments), for ``lib`` (plax or jax) and its numpy module."""
    to_int = lambda x: (x * 2).astype(jnp.int32)  # noqa: E731 - an integer output
    times3 = lambda n: n * 3  # noqa: E731 - an integer input and output
    x = jnp.asarray(np.arange(6, dtype=np.float32).reshape(3, 2) / 4)
    n = jnp.asarray(np.arange(6, dtype=np.int32).reshape(3, 2))

    def weighted(n, y):
        return (n * y).sum()

    return {
        "vmap_jvp_int_out": (lambda x: lib.vmap(lambda x, t: lib.jvp(to_int, (x,), (t,)))(x, x),
                             (x,)),
        "vmap_jvp_int_in": (lambda n: lib.vmap(lambda n: lib.jvp(
            times3, (n,), (np.zeros(n.shape, float0),)))(n), (n,)),
        "jvp_int_out": (lambda x: lib.jvp(to_int, (x,), (x,)), (x,)),
        "jacfwd_int_out": (lambda x: lib.jacfwd(to_int)(x[0]), (x,)),
        "vmap_jacfwd_int_out": (lambda x: lib.vmap(lib.jacfwd(to_int))(x), (x,)),
        "grad_allow_int": (lambda n: lib.grad(weighted, argnums=(0, 1), allow_int=True)(
            n[0], 2.0), (n,)),
        "vmap_grad_allow_int": (lambda n: lib.vmap(lib.grad(weighted, allow_int=True))(
            n, jnp.ones(3)), (n,)),
        "nested_jit_vmap_jvp": (lambda x: lib.jit(lambda x: lib.vmap(
            lambda x, t: lib.jvp(to_int, (x,), (t,)))(x, x))(x), (x,)),
        "vmap_vjp_int_in": (lambda n: lib.vmap(lambda c: lib.vjp(
            lambda n, y: n * y, n[0], 2.0)[1](c))(jnp.ones((3, 2))), (n,)),
    }


def describe(tree, jax_array_type) -> list:
    """Each leaf of ``tree`` as ``[kind, dtype, shape, values]`` (values None for float0)."""
    import jax.tree_util as jtu  # the tree structures of the two libraries are the same
    out = []
    for leaf in jtu.tree_leaves(tree):
        is_np = isinstance(leaf, np.ndarray) and not isinstance(leaf, jax_array_type)
        arr = np.asarray(leaf)
        float0 = arr.dtype.kind == "V" and arr.dtype.names == ("float0",)
        out.append(["ndarray" if is_np else "Array", "float0" if float0 else arr.dtype.name,
                    list(arr.shape), None if float0 else arr.astype(np.float64).tolist()])
    return out


def report(backend: str | None = None, jit: bool = False) -> dict:
    """plax's results of every case: eager, or under ``jit(f, backend=backend)``."""
    import plax
    import plax.numpy as pnp
    from plax.array import Array
    out = {}
    for name, (f, args) in cases(plax, pnp, plax.dtypes.float0).items():
        run = plax.jit(f, backend=backend) if jit else f
        try:
            out[name] = describe(run(*args), Array)
        except Exception as err:  # noqa: BLE001 - reported, and the test fails on it
            out[name] = f"{type(err).__name__}: {err}"
    return out


def jax_report() -> dict:
    """JAX's results of every case (on its CPU)."""
    import jax
    import jax.numpy as jjnp
    out = {}
    for name, (f, args) in cases(jax, jjnp, jax.dtypes.float0).items():
        out[name] = describe(f(*args), jax.Array)
    return out
