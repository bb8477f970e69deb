"""``jax.linear_transpose``: the transpose of a linear function, as a function of its output
cotangent.

The function is traced once (at the types of ``primals``) to check that every equation
depending on its inputs is linear in them (a clear TypeError otherwise; the bodies of loops
and calls are not looked into); its pullback at zeros (``vjp``: linearize, then the transpose
rules) is then the transpose. An affine function's constant part is dropped, as in JAX.
"""
from __future__ import annotations

from typing import Any, Callable

import numpy as np

from plax import tree_util
from plax.core.jaxpr import Jaxpr, Literal
from plax.core.shaped_array import ShapedArray


def _aval(x) -> ShapedArray:
    from plax.core.trace import get_aval
    if hasattr(x, "shape") and hasattr(x, "dtype") and not hasattr(x, "aval"):
        from plax import dtypes
        return ShapedArray(tuple(x.shape), dtypes.canonicalize_dtype(x.dtype),
                           bool(getattr(x, "weak_type", False)))
    return get_aval(x)


def _is_float(dtype) -> bool:
    return np.dtype(dtype).kind in "fc" or np.dtype(dtype).name == "bfloat16"


def _pp_aval(a: ShapedArray) -> str:
    """A ShapedArray as JAX's error messages print it: ``ShapedArray(float32[2,3])``."""
    weak = ", weak_type=True" if a.weak_type else ""
    return f"ShapedArray({np.dtype(a.dtype).name}[{','.join(map(str, a.shape))}]{weak})"


# primitives linear in each operand separately (bilinear), and those linear in some operands
# only: a linear function may not have inputs flowing into more than one of them
_LINEAR_OPERANDS = {"mul": (0, 1), "dot_general": (0, 1), "conv_general_dilated": (0, 1),
                    "div": (0,)}


def _check_linear(jaxpr: Jaxpr) -> None:
    """A clear TypeError for an equation that is not linear in the function's inputs."""
    from plax.core import registry
    linear = set(jaxpr.invars)
    for eqn in jaxpr.eqns:
        which = [k for k, v in enumerate(eqn.invars)
                 if not isinstance(v, Literal) and v in linear]
        if not which:
            continue  # a constant of the linear map
        allowed = _LINEAR_OPERANDS.get(eqn.primitive.name)
        has_rule = registry.rule_table("transpose").get(eqn.primitive) is not None
        if not has_rule or (allowed is not None and (len(which) > 1
                                                     or not set(which) <= set(allowed))):
            raise TypeError(f"linear_transpose: the function is not linear in its arguments: "
                            f"{eqn.primitive.name} takes {len(which)} value(s) computed from "
                            "them (a linear function adds, scales and rearranges its inputs; "
                            "use jax.vjp for the derivative of a nonlinear one).")
        linear.update(eqn.outvars)


def linear_transpose(fun: Callable, *primals: Any, reduce_axes=()) -> Callable:
    """The transpose of the linear function ``fun``: a function mapping a cotangent of its
    output to the tuple of cotangents of its inputs.

    Args:
      fun: a function linear in its (pytree) arguments.
      *primals: example arguments (arrays, or ShapeDtypeStructs): only their shapes and
        dtypes are used.
      reduce_axes: accepted for compatibility with older JAX (must be empty).

    Returns:
      ``transpose(out_cotangent) -> tuple`` of cotangents, one per primal.

    Raises:
      TypeError: (here) for a function mixing integer and inexact inputs or outputs;
        (when called) for a cotangent of another structure, shape or dtype than the output.

    Example:
      >>> f_t = jax.linear_transpose(lambda x, y: 0.5 * x - 3 * y, 1.0, 1.0)
      >>> f_t(1.0)
      (Array(0.5, dtype=float32, weak_type=True), Array(-3., dtype=float32, weak_type=True))
    """
    from plax.core import ShapeDtypeStruct
    from plax.transforms.jit import make_jaxpr
    if reduce_axes:
        raise NotImplementedError("reduce_axes argument to transpose is deprecated")
    flat, in_tree = tree_util.tree_flatten(primals)
    in_avals = [_aval(x) for x in flat]

    out_tree_box: list = []

    def tree_fun(*xs):
        out = fun(*tree_util.tree_unflatten(in_tree, xs))
        leaves, tree = tree_util.tree_flatten(out)
        out_tree_box.append(tree)
        return leaves

    specs = [ShapeDtypeStruct(a.shape, a.dtype, weak_type=a.weak_type) for a in in_avals]
    closed = make_jaxpr(tree_fun)(*specs)
    out_tree = out_tree_box[-1]
    out_avals = [v.aval for v in closed.jaxpr.outvars]
    in_dtypes = [a.dtype for a in in_avals]
    out_dtypes = [a.dtype for a in out_avals]
    if not (all(map(_is_float, in_dtypes + out_dtypes))
            or all(np.dtype(d).kind in "iu" for d in in_dtypes + out_dtypes)):
        raise TypeError("linear_transpose only supports [float or complex] -> [float or "
                        "complex], and integer -> integer functions, but got "
                        f"{[np.dtype(d) for d in in_dtypes]} -> "
                        f"{[np.dtype(d) for d in out_dtypes]}.")
    _check_linear(closed.jaxpr)
    # the pullback at zeros is the transpose of a linear map (an affine one's constant part
    # dropped): reverse mode's linearize-then-transpose, which splits loops and calls into
    # their known and linear parts
    from plax import numpy as jnp
    from plax.transforms.autodiff import vjp
    from plax import lax
    zeros = [lax.convert_element_type(jnp.zeros(a.shape, a.dtype), a.dtype, a.weak_type)
             for a in in_avals]
    _, pullback = vjp(lambda *xs: tree_fun(*xs), *zeros)

    def transposed(out_cotangent):
        cts, ct_tree = tree_util.tree_flatten(out_cotangent)
        if ct_tree != out_tree:
            raise TypeError("cotangent tree does not match function output, expected "
                            f"{out_tree} but got {ct_tree}")
        ct_avals = [_aval(c) for c in cts]
        if any(c.shape != o.shape or c.dtype != o.dtype for c, o in zip(ct_avals, out_avals)):
            expected = ", ".join(map(_pp_aval, out_avals))
            expected = f"({expected},)" if len(out_avals) == 1 else f"({expected})"
            raise TypeError("cotangent type does not match function output, expected "
                            f"{expected} but got {cts}")
        from plax import numpy as jnp
        cts = [c if hasattr(c, "aval") else jnp.asarray(c) for c in cts]
        in_cts = pullback(cts)
        return tree_util.tree_unflatten(in_tree, list(in_cts))
    return transposed
