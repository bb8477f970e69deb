"""Records known answers from real JAX for plax.random's tests.

Run it where ``jax`` is installed (the test suite imports only ``call_case`` from here, never JAX):

    python tests/random/record_jax_values.py

It evaluates every case below with ``jax.random`` in both threefry layouts
(``jax_threefry_partitionable`` True and False), in float32 (x64 off) and
float64 (x64 on), and writes the calls and their results to
``tests/random/jax_known_answers.json``. ``test_known_answers.py`` replays
each call with ``plax.random`` and compares.

A call is described in JSON as ``{"fn": name, "key": seed-or-null, "typed": bool,
"args": [...], "kwargs": {...}}``; arrays are ``{"ndarray": nested list, "dtype":
name}``. Gradient cases (``"grad": argnum``) record ``grad(lambda x: fn(...).sum())``.
"""
from __future__ import annotations

import json
import os
import sys

import numpy as np

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "jax_known_answers.json")


def arr(values, dtype):
    """An array argument, as it is written into the JSON."""
    return {"ndarray": np.asarray(values, dtype).tolist(), "dtype": str(np.dtype(dtype))}


def case(fn, key=0, *args, typed=False, grad=None, **kwargs):
    return {"fn": fn, "key": key, "typed": typed, "args": list(args), "kwargs": kwargs,
            "grad": grad}


def cases_for(x64: bool) -> list[dict]:
    """The calls recorded in one configuration (float64 variants only when x64 is on)."""
    fdt = "float64" if x64 else "float32"
    idt = "int64" if x64 else "int32"
    out: list[dict] = []
    # --- keys
    for seed in (0, 1, 42, -1, 2 ** 31, 2 ** 32 + 5, 2 ** 40 + 3, -2 ** 40):
        out.append(case("PRNGKey", None, seed))
        out.append(case("key_data_of_key", None, seed))
    for seed in (0, 42):
        for num in (2, 3, 4, 1, [2, 3]):
            out.append(case("split", seed, num))
        out.append(case("split", seed, 3, typed=True))
        for data in (0, 1, 7, 2 ** 31, 2 ** 32 - 1):
            out.append(case("fold_in", seed, data))
        out.append(case("fold_in", seed, 5, typed=True))
    for seed in (0, 42):
        for shape in ([], [1], [5], [3, 7]):
            for dtype in ("uint8", "uint16", "uint32") + (("uint64",) if x64 else ()):
                out.append(case("bits", seed, shape, dtype))
    out.append(case("bits", 3, [4], typed=True))
    # --- uniform family
    for seed in (0, 42):
        for shape in ([], [7], [2, 3]):
            out.append(case("uniform", seed, shape, fdt))
        out.append(case("uniform", seed, [9], fdt, minval=-1.0, maxval=1.0))
        out.append(case("uniform", seed, [9], fdt, minval=-3.0, maxval=2.5))
        out.append(case("uniform", seed, [2, 3], fdt, minval=arr([0.0, 1.0, -5.0], fdt),
                        maxval=arr([[1.0], [7.5]], fdt)))
    out.append(case("uniform", 5, [6], typed=True))
    out.append(case("uniform", 5, [4], "float16"))
    out.append(case("uniform", 5, [4], "bfloat16"))
    for seed in (0, 42, 7):
        out.append(case("normal", seed, [], fdt))
        out.append(case("normal", seed, [3, 4], fdt))
    out.append(case("normal", 1, [300], fdt))
    out.append(case("normal", 1, [3], "complex128" if x64 else "complex64"))
    out.append(case("normal", 2, [5], typed=True))
    out.append(case("truncated_normal", 0, -1.5, 0.5, [20], fdt))
    out.append(case("truncated_normal", 1, arr([-2.0, 0.0, 1.0], fdt), 3.0, None, fdt))
    out.append(case("bernoulli", 0, 0.3, [50]))
    out.append(case("bernoulli", 1, arr([0.1, 0.5, 0.9], fdt)))
    out.append(case("bernoulli", 2, 0.3, [20], "high"))
    out.append(case("rademacher", 0, [20]))
    out.append(case("rademacher", 1, [5], "float32"))
    out.append(case("randint", 0, [20], 0, 10))
    out.append(case("randint", 1, [20], -1000, 7777, idt))
    out.append(case("randint", 2, [20], 0, 256, "uint8"))
    out.append(case("randint", 3, [20], -100, 100, "int8"))
    out.append(case("randint", 4, [2, 3], arr([0, 5, 10], "int32"), 20))
    out.append(case("randint", 5, [6], 3, 3))
    for fn in ("exponential", "laplace", "logistic", "cauchy"):
        out.append(case(fn, 0, [30], fdt))
        out.append(case(fn, 1, [], fdt))
    for mode in ("low", "high") + (() if x64 else ("highest",)):
        out.append(case("gumbel", 0, [30], fdt, mode))
    # --- discrete
    out.append(case("permutation", 0, 10))
    out.append(case("permutation", 1, arr(np.arange(12).reshape(3, 4), "int32")))
    out.append(case("permutation", 2, arr(np.arange(12).reshape(3, 4), "int32"), axis=1))
    out.append(case("permutation", 3, arr(np.arange(12).reshape(3, 4), "int32"), axis=1,
                    independent=True))
    out.append(case("choice", 0, 10, [5]))
    out.append(case("choice", 1, 10, [5], replace=False))
    out.append(case("choice", 2, 4, [20], p=arr([0.1, 0.2, 0.3, 0.4], fdt)))
    out.append(case("choice", 3, 4, [3], replace=False, p=arr([0.1, 0.2, 0.3, 0.4], fdt)))
    out.append(case("choice", 4, arr(np.arange(12).reshape(3, 4), fdt), [2], axis=1))
    out.append(case("choice", 5, arr([10, 20, 30], "int32"), [2, 2]))
    logits = np.log(np.array([[0.1, 0.6, 0.3], [0.5, 0.25, 0.25]]))
    out.append(case("categorical", 0, arr(logits, fdt)))
    out.append(case("categorical", 1, arr(logits, fdt), shape=[7, 2]))
    out.append(case("categorical", 2, arr(logits, fdt), axis=0, shape=[5, 3]))
    out.append(case("categorical", 3, arr(logits, fdt), shape=[2, 2], replace=False))
    for seed, lam in enumerate((0.5, 4.0, 9.9, 10.0, 50.0, 1000.0)):
        out.append(case("poisson", seed, lam, [40]))
    out.append(case("poisson", 9, arr([0.0, 1.0, 5.0, 20.0, 200.0], "float32")))
    out.append(case("poisson", 10, 3.0, [10], idt))
    # --- gamma family
    for seed, a in enumerate((0.3, 1.0, 2.5, 40.0)):
        out.append(case("gamma", seed, a, [30], fdt))
    out.append(case("gamma", 7, arr([0.1, 1.0, 10.0], fdt), None, fdt))
    out.append(case("loggamma", 0, 0.01, [20], fdt))
    out.append(case("loggamma", 1, 3.0, [10], fdt))
    out.append(case("beta", 0, 0.5, 2.0, [20], fdt))
    out.append(case("beta", 1, arr([1.0, 3.0], fdt), 2.0, None, fdt))
    out.append(case("dirichlet", 0, arr([0.5, 1.0, 3.0], fdt), [5], fdt))
    out.append(case("dirichlet", 1, arr([[1.0, 1.0], [2.0, 0.2]], fdt), None, fdt))
    # --- vectors and matrices
    cov = np.array([[2.0, 0.3, 0.1], [0.3, 1.0, -0.2], [0.1, -0.2, 0.5]])
    out.append(case("multivariate_normal", 0, arr([1.0, -2.0, 0.5], fdt), arr(cov, fdt), [10]))
    out.append(case("multivariate_normal", 1, arr(np.zeros((4, 3)), fdt), arr(cov, fdt)))
    out.append(case("orthogonal", 0, 4, [], fdt))
    out.append(case("orthogonal", 1, 3, [2], fdt, m=5))
    out.append(case("orthogonal", 2, 5, [], fdt, m=2))
    out.append(case("generalized_normal", 0, 1.5, [20], fdt))
    out.append(case("ball", 0, 3, 2, [10], fdt))
    out.append(case("ball", 1, 4, 1, [5], fdt))
    # --- gradients (reparameterised samplers)
    out.append(case("uniform", 0, [5], fdt, arr(-1.0, fdt), arr(2.0, fdt), grad=3))
    out.append(case("truncated_normal", 0, arr(-1.0, fdt), arr(0.5, fdt), [5], fdt, grad=1))
    out.append(case("gamma", 0, arr([0.2, 0.7, 1.0, 3.0, 20.0], fdt), None, fdt, grad=1))
    out.append(case("loggamma", 0, arr([0.2, 0.7, 1.0, 3.0, 20.0], fdt), None, fdt, grad=1))
    out.append(case("beta", 0, arr([0.5, 2.0], fdt), arr([1.5, 0.7], fdt), None, fdt, grad=1))
    out.append(case("dirichlet", 0, arr([0.5, 1.0, 3.0], fdt), None, fdt, grad=1))
    return out


# ------------------------------------------------------------------ evaluating with JAX

def _decode(value, jnp):
    if isinstance(value, dict) and "ndarray" in value:
        return jnp.asarray(np.asarray(value["ndarray"], value["dtype"]))
    if isinstance(value, list):
        return tuple(value)
    return value


def _encode(result) -> dict:
    a = np.asarray(result)
    if a.dtype.kind == "c":
        data = [[float(v.real), float(v.imag)] for v in a.reshape(-1)]
    elif a.dtype.kind == "V" or a.dtype.name == "bfloat16":
        data = a.astype(np.float32).reshape(-1).tolist()
    else:
        data = a.reshape(-1).tolist()
    return {"dtype": a.dtype.name, "shape": list(a.shape), "data": data}


def call_case(c: dict, random, grad, decode):
    """Calls ``random.<fn>`` as case ``c`` says. Shared by this recorder (``jax.random``) and
    the replaying test (``plax.random``), so both sides make exactly the same call."""
    fn = c["fn"]
    args = [decode(a) for a in c["args"]]
    kwargs = {k: decode(v) for k, v in c["kwargs"].items()}
    if fn == "PRNGKey":
        return random.PRNGKey(*args)
    if fn == "key_data_of_key":
        return random.key_data(random.key(*args))
    key = random.key(c["key"]) if c["typed"] else random.PRNGKey(c["key"])
    f = getattr(random, fn)
    if c["grad"] is not None:
        i = c["grad"]

        def scalar(x):
            full = [key] + args
            full[i] = x
            return f(*full, **kwargs).sum()

        return grad(scalar)(([key] + args)[i])
    out = f(key, *args, **kwargs)
    if c["typed"] and fn in ("split", "fold_in"):
        out = random.key_data(out)
    return out


def evaluate(c: dict):
    import jax
    import jax.numpy as jnp
    from jax import random
    return call_case(c, random, jax.grad, lambda a: _decode(a, jnp))


def main() -> None:
    import jax
    records = []
    for partitionable in (True, False):
        for x64 in (False, True):
            jax.config.update("jax_enable_x64", x64)
            jax.config.update("jax_threefry_partitionable", partitionable)
            for c in cases_for(x64):
                c = dict(c, x64=x64, partitionable=partitionable)
                c["result"] = _encode(evaluate(c))
                records.append(c)
    payload = {"jax_version": jax.__version__, "cases": records}
    with open(OUT, "w") as f:
        json.dump(payload, f, separators=(",", ":"))
    print(f"wrote {len(records)} cases to {OUT} ({os.path.getsize(OUT) / 1e3:.0f} kB)")


if __name__ == "__main__":
    sys.exit(main())
