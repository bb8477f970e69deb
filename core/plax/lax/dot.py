"""dot_general: tensor contraction with batch dimensions (matmul, dot, einsum are built on it)."""
from __future__ import annotations

import numpy as np

from plax import dtypes
from plax.config import config as _config
from plax.core.pretty_print import pp_param_rules
from plax.core.primitive import Primitive
from plax.core.registry import register_rule
from plax.core.shaped_array import ShapedArray
from plax.lax.base import NUMBER, asarray, aval_of, check_dtype, out_sharded
from plax.transforms.jvp import Zero, bilinear_jvp

dot_general_p = Primitive("dot_general")


def _free(ndim, contract, batch):
    return [i for i in range(ndim) if i not in contract and i not in batch]


def _type_rank(dt: np.dtype) -> tuple:
    # How wide a type is, as XLA (and so JAX) orders operand types of a product: complex
    # first, then exponent range, mantissa, bit width, and signed over unsigned.
    real = dtypes.real_dtype(dt) if dtypes.is_complex(dt) else dt
    floating = dtypes.is_float(real)
    bits = 1 if dtypes.is_bool(dt) else np.dtype(real).itemsize * 8
    return (dtypes.is_complex(dt), dtypes.finfo(real).maxexp if floating else -1,
            dtypes.finfo(real).nmant if floating else -1, bits,
            not np.issubdtype(real, np.unsignedinteger))


def dot_result_dtype(lhs_dtype, rhs_dtype, preferred_element_type=None) -> np.dtype:
    """The dtype of ``dot_general`` of operands of ``lhs_dtype`` and ``rhs_dtype``.

    As JAX 0.10: operands may differ (``int8 x float32``, ``float16 x float32``); the
    result has the wider of the two (XLA's order: complex, exponent range, precision, bit
    width, signedness), or ``preferred_element_type`` when given. A real or integer
    ``preferred_element_type`` for complex operands keeps the real part of the complex
    product (JAX 0.10 accepts it as long as it is not narrower than the operands' real
    parts). Backends' kernels use it to convert mixed operands.

    Args:
      lhs_dtype, rhs_dtype: the operands' dtypes.
      preferred_element_type: the requested result dtype, or None.

    Returns:
      The result's NumPy dtype.

    Raises:
      TypeError: two different types of equal width (no wider one), or a
        ``preferred_element_type`` narrower than an integer or complex result.

    Example:
      >>> dot_result_dtype(np.dtype("int8"), np.dtype("float32"))
      dtype('float32')
    """
    if lhs_dtype == rhs_dtype and preferred_element_type is None:  # the usual product
        return lhs_dtype
    lhs_dtype, rhs_dtype = np.dtype(lhs_dtype), np.dtype(rhs_dtype)
    if lhs_dtype == rhs_dtype:
        dt = lhs_dtype
    else:
        lr, rr = _type_rank(lhs_dtype), _type_rank(rhs_dtype)
        if lr == rr:
            raise TypeError(f"lax.dot_general argument type error: {lhs_dtype.name}, "
                            f"{rhs_dtype.name}")
        dt = lhs_dtype if lr > rr else rhs_dtype
    pet = preferred_element_type
    if pet is None or pet == dt:
        return dt
    if not dtypes.is_float(dt) and _type_rank(pet)[3] < _type_rank(dt)[3]:
        raise TypeError("`preferred_element_type` must not be narrower than the original "
                        f"type, got preferred_element_type of {pet.name} for result type of "
                        f"{dt.name}.")
    # A real (or integer) type for complex operands is accepted, as JAX 0.10 does: the
    # product is computed in the complex type and its real part kept.
    return np.dtype(pet)


@dot_general_p.def_abstract_eval
def _dot_general_abstract_eval(lhs, rhs, *, dimension_numbers, precision, preferred_element_type):
    (lc, rc), (lb, rb) = dimension_numbers
    for x in (lhs, rhs):
        check_dtype("dot_general", x, NUMBER + ("bool",))
    if len(lc) != len(rc) or len(lb) != len(rb):
        raise TypeError(f"dot_general requires equal numbers of lhs and rhs contracting and batch "
                        f"dimensions, got dimension_numbers {dimension_numbers}")
    for dims, x, what in ((lc, lhs, "lhs contracting"), (rc, rhs, "rhs contracting"),
                          (lb, lhs, "lhs batch"), (rb, rhs, "rhs batch")):
        if len(set(dims)) != len(dims) or any(not 0 <= d < x.ndim for d in dims):
            raise TypeError(f"dot_general {what} dimensions {dims} are invalid for shape {x.shape}")
    if set(lc) & set(lb) or set(rc) & set(rb):
        raise TypeError(f"dot_general batch and contracting dimensions must be disjoint, got "
                        f"{dimension_numbers}")
    for a, b in zip(lc, rc):
        if lhs.shape[a] != rhs.shape[b]:
            raise TypeError(f"dot_general requires contracting dimensions to have the same shape, "
                            f"got {tuple(lhs.shape[d] for d in lc)} and "
                            f"{tuple(rhs.shape[d] for d in rc)} (lhs shape {lhs.shape}, rhs "
                            f"shape {rhs.shape}).")
    for a, b in zip(lb, rb):
        if lhs.shape[a] != rhs.shape[b]:
            raise TypeError(f"dot_general requires lhs batch dimensions and rhs batch dimensions "
                            f"to have the same shape, got {tuple(lhs.shape[d] for d in lb)} and "
                            f"{tuple(rhs.shape[d] for d in rb)}.")
    shape = (tuple(lhs.shape[d] for d in lb) + tuple(lhs.shape[d] for d in _free(lhs.ndim, lc, lb))
             + tuple(rhs.shape[d] for d in _free(rhs.ndim, rc, rb)))
    dt = dot_result_dtype(lhs.dtype, rhs.dtype, preferred_element_type)
    return ShapedArray(shape, dt, lhs.weak_type and rhs.weak_type)


def dot_general(lhs, rhs, dimension_numbers, precision=None, preferred_element_type=None,
                out_sharding=None):
    """General tensor contraction: ``dimension_numbers = ((lhs_contract, rhs_contract),
    (lhs_batch, rhs_batch))``. The output holds batch axes, then lhs free axes, then rhs free axes.

    Example:
      >>> lax.dot_general(jnp.ones((2, 3)), jnp.ones((3, 4)), (((1,), (0,)), ((), ()))).shape
      (2, 4)
    """
    if out_sharding is not None:  # the result's explicit sharding
        return out_sharded(lambda: dot_general(lhs, rhs, dimension_numbers, precision,
                                               preferred_element_type), out_sharding)
    try:
        dn = _dn_cache[dimension_numbers]
    except (KeyError, TypeError):  # new, or unhashable (lists)
        dn = _canonical_dimension_numbers(dimension_numbers)
    pet = None if preferred_element_type is None else dtypes.canonicalize_dtype(preferred_element_type)
    return dot_general_p.bind(asarray(lhs), asarray(rhs), dimension_numbers=dn,
                              precision=_canonical_precision(precision),
                              preferred_element_type=pet)


_dn_cache: dict = {}
_config_values = _config._values  # read per product (thread-aware while contexts are active)


def _canonical_dimension_numbers(dimension_numbers):
    (lc, rc), (lb, rb) = dimension_numbers
    dn = ((tuple(int(d) for d in lc), tuple(int(d) for d in rc)),
          (tuple(int(d) for d in lb), tuple(int(d) for d in rb)))
    try:
        if len(_dn_cache) < 1024:
            _dn_cache[dimension_numbers] = dn
    except TypeError:
        pass
    return dn


# jax_default_matmul_precision's values as JAX canonicalises them: a Precision for both
# operands, or (other values) the name of a dot algorithm preset
_PRECISION_NAMES = {"highest": "HIGHEST", "float32": "HIGHEST", "high": "HIGH",
                    "bfloat16_3x": "HIGH", "tensorfloat32": "HIGH", "default": "DEFAULT",
                    "bfloat16": "DEFAULT", "fastest": "DEFAULT"}


def _default_precision():
    """``jax_default_matmul_precision`` as the ``precision`` parameter of a product that
    passes none, as JAX records it in the jaxpr (a pair of Precision names, or a dot
    algorithm preset's name); None when the option is unset. Backends decide what it means:
    the CPU backends compute float32 products in float32 whatever is asked (as XLA's CPU
    backend), the CuPy backend selects TF32 or bfloat16 tensor-core math (docs/config.md)."""
    value = _config_values["default_matmul_precision"]
    if value is None:
        return None
    name = _PRECISION_NAMES.get(value)
    return (name, name) if name else str(value)


def _precision_name(precision) -> str:
    """A Precision's name (``"highest"``, ``Precision.HIGHEST`` -> ``"HIGHEST"``), else the
    name of a dot algorithm preset (``DotAlgorithmPreset.BF16_BF16_F32`` -> its name)."""
    name = str(precision).rsplit(".", 1)[-1]
    return _PRECISION_NAMES.get(name.lower(), name)


def _canonical_precision(precision):
    """``precision=`` as JAX records it: a pair of Precision names for a Precision (one for
    both operands, as given, or per operand), a dot algorithm preset's name, or the
    configured default for None."""
    if precision is None:
        return _default_precision()
    if isinstance(precision, (list, tuple)):
        return tuple(None if p is None else _precision_name(p) for p in precision)
    name = _precision_name(precision)
    return (name, name) if name.lower() in _PRECISION_NAMES else name


def _dot_general_pp_params(params: dict) -> dict:
    # as JAX prints it: None values left out, dimension numbers as lists, a Precision pair
    # as its enum members
    shown = {k: v for k, v in params.items() if v is not None}
    (lc, rc), (lb, rb) = params["dimension_numbers"]
    shown["dimension_numbers"] = str(((list(lc), list(rc)), (list(lb), list(rb))))
    precision = shown.get("precision")
    if isinstance(precision, tuple):
        shown["precision"] = "(" + ", ".join(
            "None" if p is None else f"Precision.{p}" for p in precision) + ")"
    return shown


pp_param_rules[dot_general_p] = _dot_general_pp_params


def dot(lhs, rhs, precision=None, preferred_element_type=None, *, dimension_numbers=None,
        out_sharding=None):
    """Vector/matrix products: 1-D . 1-D, 2-D . 1-D, 1-D . 2-D and 2-D . 2-D (lax.dot); with
    ``dimension_numbers``, :func:`dot_general`.

    Raises:
      ValueError: without ``dimension_numbers``, for operands that are not 1-D or 2-D or whose
        contracted sizes (the last of ``lhs``, the first of ``rhs``) differ.
    """
    if out_sharding is not None:  # the result's explicit sharding
        return out_sharded(lambda: dot(lhs, rhs, precision, preferred_element_type,
                                       dimension_numbers=dimension_numbers), out_sharding)
    if dimension_numbers is None:
        ls, rs = _shape_of(lhs), _shape_of(rhs)
        if not (1 <= len(ls) <= 2 and 1 <= len(rs) <= 2 and ls[-1] == rs[0]):
            raise ValueError(f"lax.dot needs 1-D or 2-D operands whose contracted sizes (the "
                             f"last of lhs, the first of rhs) agree, got shapes {ls} and {rs}; "
                             f"pass dimension_numbers for other contractions.")
        dimension_numbers = (((len(ls) - 1,), (0,)), ((), ()))
    return dot_general(lhs, rhs, dimension_numbers, precision, preferred_element_type)


def _shape_of(x) -> tuple:
    return aval_of(x).shape if hasattr(x, "aval") else np.shape(x)


def _ranges_like(*xs):
    start = 0
    for x in xs:
        yield tuple(range(start, start + len(x)))
        start += len(x)


def _transpose_lhs(ct, x_aval, y, dimension_numbers, precision, preferred_element_type, swap):
    """Cotangent of the lhs ``x`` of ``dot_general(x, y)`` (or of the rhs when ``swap``)."""
    (xc, yc), (xb, yb) = dimension_numbers
    x_free = _free(x_aval.ndim, xc, xb)
    y_free = _free(aval_of(y).ndim, yc, yb)
    # ct axes: batch, then lhs-free, then rhs-free (in the original, unswapped order).
    if swap:
        ct_batch, ct_y_free, _ = _ranges_like(xb, y_free, x_free)
    else:
        ct_batch, _, ct_y_free = _ranges_like(xb, x_free, y_free)
    dims = ((ct_y_free, tuple(y_free)), (ct_batch, tuple(yb)))
    # res axes correspond to x axes: xb, x_free, then xc ordered as yc is sorted.
    order = list(xb) + x_free + [xc[i] for i in np.argsort(yc)]
    from plax.sharding_types import dot_out_sharding, dims_spec, explicit_sharding, type_dims
    if all(explicit_sharding(a) is None for a in (x_aval, aval_of(ct), aval_of(y))):
        res = dot_general_p.bind(ct, y, dimension_numbers=dims, precision=precision,
                                 preferred_element_type=preferred_element_type)
    else:  # typed as the primal x (as JAX's rule does; unsplit when x has no sharding):
        # contracting a split dimension (a data-parallel batch) sums partial products
        x_dims = type_dims(x_aval)
        with dot_out_sharding(dims_spec(tuple(x_dims[k] for k in order))):
            res = dot_general_p.bind(ct, y, dimension_numbers=dims, precision=precision,
                                     preferred_element_type=preferred_element_type)
    perm = tuple(int(i) for i in np.argsort(order))
    from plax.lax.shape import transpose
    out = transpose(res, perm)
    if aval_of(out).dtype != x_aval.dtype:
        from plax.lax.convert import convert_element_type
        out = convert_element_type(out, x_aval.dtype)
    return out


@register_rule("transpose", dot_general_p)
def _dot_general_transpose(ct, lhs, rhs, *, dimension_numbers, precision, preferred_element_type):
    from plax.transforms.transpose import is_undefined_primal
    if type(ct) is Zero:
        return [None, None]
    (lc, rc), (lb, rb) = dimension_numbers
    if is_undefined_primal(lhs) and is_undefined_primal(rhs):
        raise TypeError("dot_general is bilinear, not linear in both operands at once")
    if is_undefined_primal(lhs):
        return [_transpose_lhs(ct, lhs.aval, rhs, dimension_numbers, precision,
                               preferred_element_type, False),
                None]
    swapped = ((rc, lc), (rb, lb))
    return [None, _transpose_lhs(ct, rhs.aval, lhs, swapped, precision, preferred_element_type,
                                 True)]


register_rule("jvp", dot_general_p)(bilinear_jvp(dot_general_p))


@register_rule("batch", dot_general_p)
def _dot_general_batch(vals, dims, *, dimension_numbers, precision, preferred_element_type):
    (lhs, rhs), (dl, dr) = vals, dims
    (lc, rc), (lb, rb) = dimension_numbers
    params = dict(precision=precision, preferred_element_type=preferred_element_type)
    shift = lambda ds, d: tuple(x + (x >= d) for x in ds)  # noqa: E731
    if dl is not None and dr is not None:
        # both batched: the mapped axes join the batch dimensions, first, where they are (as
        # JAX's rule: no transposes), so the result's batch axis is its first
        dn = ((shift(lc, dl), shift(rc, dr)), ((dl,) + shift(lb, dl), (dr,) + shift(rb, dr)))
        return dot_general_p.bind(lhs, rhs, dimension_numbers=dn, **params), 0
    if dl is not None:
        dn = ((shift(lc, dl), rc), (shift(lb, dl), rb))
        lhs_free = _free(aval_of(lhs).ndim, dn[0][0], dn[1][0])
        out_dim = len(lb) + lhs_free.index(dl)
        return dot_general_p.bind(lhs, rhs, dimension_numbers=dn, **params), out_dim
    dn = ((lc, shift(rc, dr)), (lb, shift(rb, dr)))
    lhs_free = _free(aval_of(lhs).ndim, lc, lb)
    rhs_free = _free(aval_of(rhs).ndim, dn[0][1], dn[1][1])
    out_dim = len(lb) + len(lhs_free) + rhs_free.index(dr)
    return dot_general_p.bind(lhs, rhs, dimension_numbers=dn, **params), out_dim

