"""Records real JAX's answers for the kit's checks that compare with JAX, so that the kit runs
them without JAX installed.

Run it once, where ``jax`` is installed, from a checkout (it rewrites the JSON file beside it)::

    python -m plax.testing.conformance.record_jax_answers

It writes ``jax_answers.json``:

* ``nonsmooth``: for each case of ``test_nonsmooth.CASES`` (derivatives at ties, bounds and
  zeros), the arguments, the tangents and JAX's JVP, the cotangents and JAX's VJP (float32);
* ``wrapper_errors``: for each case of ``test_errors.WRAPPER_CASES``, the class of the exception
  JAX's ``jax.lax`` raises and its base classes, by name (or null if it raised nothing).

The tests (``test_nonsmooth.py``, ``test_errors.py``) read the file and never import JAX.
"""
from __future__ import annotations

import json
import os

import numpy as np

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "jax_answers.json")
F = np.float32


def _flat(out) -> list:
    return [np.asarray(o) for o in (out if isinstance(out, (list, tuple)) else [out])]


def _tolist(arrays) -> list:
    return [np.asarray(a, F).tolist() for a in arrays]


def record_nonsmooth(jax) -> dict:
    import jax.numpy as jnp

    from plax.testing.conformance.test_nonsmooth import CASES
    rng = np.random.default_rng(0)
    answers = {}
    for label, make, args in CASES:
        f = make(jax.lax)
        tangents = [rng.standard_normal(np.shape(a)).astype(F) for a in args]
        primals = tuple(map(jnp.asarray, args))
        out, t_out = jax.jvp(f, primals, tuple(map(jnp.asarray, tangents)))
        cts = [rng.standard_normal(np.shape(o)).astype(F) for o in _flat(out)]
        multiple = isinstance(out, (list, tuple))
        ct = type(out)(map(jnp.asarray, cts)) if multiple else jnp.asarray(cts[0])
        _, f_vjp = jax.vjp(f, *primals)
        answers[label] = {"args": _tolist(args), "tangents": _tolist(tangents),
                          "jvp": _tolist(_flat(t_out)), "cotangents": _tolist(cts),
                          "vjp": _tolist(_flat(f_vjp(ct)))}
    return answers


def record_wrapper_errors(jax) -> dict:
    from plax.testing.conformance.test_errors import WRAPPER_CASES
    answers = {}
    for name, call, _exc, _pattern in WRAPPER_CASES:
        try:
            call(jax.lax)
        except Exception as err:  # what JAX raises is the answer
            answers[name] = [c.__name__ for c in type(err).__mro__]
        else:
            answers[name] = None
    return answers


def _dumps(data: dict) -> str:
    """JSON with one line per recorded case (readable diffs when answers are re-recorded)."""
    lines = ["{"]
    for i, (key, value) in enumerate(sorted(data.items())):
        comma = "," if i < len(data) - 1 else ""
        if not isinstance(value, dict):
            lines.append(f" {json.dumps(key)}: {json.dumps(value)}{comma}")
            continue
        lines.append(f" {json.dumps(key)}: {{")
        for j, (name, case) in enumerate(sorted(value.items())):
            inner = "," if j < len(value) - 1 else ""
            lines.append(f"  {json.dumps(name)}: {json.dumps(case, sort_keys=True)}{inner}")
        lines.append(f" }}{comma}")
    lines.append("}")
    return "\n".join(lines)


def main() -> None:
    import jax
    jax.config.update("jax_enable_x64", False)
    data = {
        "jax_version": jax.__version__,
        "nonsmooth": record_nonsmooth(jax),
        "wrapper_errors": record_wrapper_errors(jax),
    }
    with open(OUT, "w") as f:
        f.write(_dumps(data) + "\n")
    print(f"wrote {OUT} (jax {jax.__version__}: {len(data['nonsmooth'])} derivative cases, "
          f"{len(data['wrapper_errors'])} error cases)")


if __name__ == "__main__":
    main()
