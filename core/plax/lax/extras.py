"""The rest of ``jax.lax`` that is written on other primitives: shape helpers, composites
(``tile``, ``reduce`` with any computation, convolution
patches, ...), identity-like staging functions, and the enums and dimension-number types.

Nothing here is a new primitive: each function composes primitives that have their rules and
kernels, so it differentiates, batches and compiles like them.
"""
from __future__ import annotations

import enum
import functools
import math
from typing import Any, Callable, NamedTuple, Optional, Sequence, Union

import numpy as np

from plax import dtypes as _dtypes
from plax import tree_util

__all__ = [
    "AccuracyMode", "ConvGeneralDilatedDimensionNumbers", "DotAlgorithm", "DotAlgorithmPreset",
    "DotDimensionNumbers", "Precision", "PrecisionLike",
    "RandomAlgorithm", "Tolerance", "approx_max_k", "approx_min_k", "batch_matmul",
    "broadcast_like", "broadcast_shapes", "broadcast_to_rank", "composite",
    "conv_general_dilated_local", "conv_general_dilated_patches", "conv_general_permutations",
    "conv_general_shape_tuple", "conv_shape_tuple", "conv_transpose_shape_tuple", "dce_sink",
    "dtype", "empty", "index_take", "optimization_barrier", "platform_dependent",
    "reciprocal", "reduce", "reduce_window_shape_tuple", "scatter_apply",
    "scatter_sub", "shape_as_value", "stage", "tile",
    "custom_linear_solve", "custom_root",
]

Array = Any
ArrayLike = Any


def _lax():
    import plax.lax as lax
    return lax


def _jnp():
    import plax.numpy as jnp
    return jnp


# ------------------------------------------------------------------ enums and types

class Precision(enum.Enum):
    """Precision of a matrix product or convolution on accelerators (as JAX's
    ``lax.Precision``). plax's CPU kernels always compute at full precision; the value is
    accepted wherever JAX takes ``precision=``. ``Precision("highest")`` and the aliases
    ``"fastest"``, ``"bfloat16"``, ``"tensorfloat32"``, ``"float32"`` are accepted."""
    DEFAULT = 0
    HIGH = 1
    HIGHEST = 2

    @classmethod
    def _missing_(cls, value):
        aliases = {"default": cls.DEFAULT, "fastest": cls.DEFAULT, "bfloat16": cls.DEFAULT,
                   "high": cls.HIGH, "bfloat16_3x": cls.HIGH, "tensorfloat32": cls.HIGH,
                   "highest": cls.HIGHEST, "float32": cls.HIGHEST}
        if isinstance(value, str) and value.lower() in aliases:
            return aliases[value.lower()]
        return None

    def __str__(self) -> str:
        return self.name


PrecisionLike = Union[None, str, Precision, tuple]


class DotAlgorithmPreset(enum.Enum):
    """Named dot-product algorithms (JAX's presets; plax computes every one at the operands'
    full precision on CPU)."""
    DEFAULT = enum.auto()
    ANY_F8_ANY_F8_F32 = enum.auto()
    ANY_F8_ANY_F8_F32_FAST_ACCUM = enum.auto()
    ANY_F8_ANY_F8_ANY = enum.auto()
    ANY_F8_ANY_F8_ANY_FAST_ACCUM = enum.auto()
    F16_F16_F16 = enum.auto()
    F16_F16_F32 = enum.auto()
    BF16_BF16_BF16 = enum.auto()
    BF16_BF16_F32 = enum.auto()
    BF16_BF16_F32_X3 = enum.auto()
    BF16_BF16_F32_X6 = enum.auto()
    BF16_BF16_F32_X9 = enum.auto()
    TF32_TF32_F32 = enum.auto()
    TF32_TF32_F32_X3 = enum.auto()
    F32_F32_F32 = enum.auto()
    F64_F64_F64 = enum.auto()

    def __str__(self) -> str:
        return self.name


class DotAlgorithm(NamedTuple):
    """An explicit dot-product algorithm (operand storage types, accumulation type, component
    counts), as JAX's ``lax.DotAlgorithm``; accepted and recorded, computed at full precision."""
    lhs_precision_type: Any
    rhs_precision_type: Any
    accumulation_type: Any
    lhs_component_count: int = 1
    rhs_component_count: int = 1
    num_primitive_operations: int = 1
    allow_imprecise_accumulation: bool = False


class AccuracyMode(enum.Enum):
    """Accuracy request for transcendental functions on accelerators (JAX's
    ``lax.AccuracyMode``); plax's kernels are always the accurate ones."""
    HIGHEST = 1
    DEFAULT = 2


class Tolerance(NamedTuple):
    """Tolerances for transcendental functions (JAX's ``lax.Tolerance``)."""
    atol: float = 0.0
    rtol: float = 0.0
    ulps: int = 0


class RandomAlgorithm(enum.IntEnum):
    """The bit-generator algorithms of ``rng_bit_generator`` (JAX's enum)."""
    RNG_DEFAULT = 0
    RNG_THREE_FRY = 1
    RNG_PHILOX = 2

    def __str__(self) -> str:
        return self.name


# ((lhs_contracting, rhs_contracting), (lhs_batch, rhs_batch)), as JAX's alias
DotDimensionNumbers = tuple
ConvGeneralDilatedDimensionNumbers = Union[None, Any, tuple]


# ------------------------------------------------------------------ small helpers

def dtype(x: Any, *, canonicalize: bool = False) -> np.dtype:
    """The dtype of a value or type, as JAX's ``lax.dtype``.

    Args:
      x: an array, scalar, dtype or scalar type.
      canonicalize: map 64-bit types to 32-bit ones when x64 is off.

    Returns:
      A NumPy dtype (Python scalars give the default types: float32 unless x64 is on).

    Example:
      >>> lax.dtype(jnp.ones(2, jnp.int8))
      dtype('int8')
    """
    if hasattr(x, "dtype") and not isinstance(x, type):
        dt = np.dtype(x.dtype)
    elif isinstance(x, (bool, np.bool_)):
        dt = np.dtype(bool)
    elif isinstance(x, (int, float, complex)):
        # Python scalars take the default (weak) types: 32-bit unless x64 is on, as in JAX
        dt = _dtypes.canonicalize_dtype(np.asarray(x).dtype)
    else:
        dt = _dtypes.to_numpy_dtype(x) if hasattr(_dtypes, "to_numpy_dtype") else np.dtype(x)
    return _dtypes.canonicalize_dtype(dt) if canonicalize else dt


def broadcast_shapes(*shapes: Sequence[int]) -> tuple[int, ...]:
    """The NumPy broadcast of several shapes.

    Raises:
      ValueError: when the shapes are incompatible (naming them).

    Example:
      >>> lax.broadcast_shapes((2, 1), (3,))
      (2, 3)
    """
    try:
        return tuple(int(d) for d in np.broadcast_shapes(*[tuple(s) for s in shapes]))
    except ValueError:
        raise ValueError(f"Incompatible shapes for broadcasting: {tuple(map(tuple, shapes))}") \
            from None


def broadcast_to_rank(x: ArrayLike, rank: int) -> Array:
    """``x`` with leading axes of size 1 added up to rank ``rank`` (unchanged if already at
    least that rank).

    Example:
      >>> lax.broadcast_to_rank(jnp.ones(3), 3).shape
      (1, 1, 3)
    """
    lax = _lax()
    x = _jnp().asarray(x)
    if x.ndim >= rank:
        return x
    return lax.broadcast(x, (1,) * (rank - x.ndim))


def broadcast_like(arr: ArrayLike, like_arr: ArrayLike) -> Array:
    """``arr`` broadcast to the shape of ``like_arr``.

    Example:
      >>> lax.broadcast_like(jnp.float32(2), jnp.ones((2, 2)))
      Array([[2., 2.],
             [2., 2.]], dtype=float32)
    """
    jnp = _jnp()
    return jnp.broadcast_to(jnp.asarray(arr), np.shape(like_arr))


def empty(shape: Sequence[int], dtype: Any, *, out_sharding=None) -> Array:
    """An array of ``shape`` and ``dtype`` whose values are unspecified (plax gives zeros).

    Example:
      >>> lax.empty((2,), jnp.float32).shape
      (2,)
    """
    return _lax().full(shape, 0, dtype)


def shape_as_value(shape: Sequence[int]) -> Array:
    """A shape as an integer array (JAX's shape-polymorphism helper; plax shapes are static).

    Example:
      >>> lax.shape_as_value((2, 3))
      Array([2, 3], dtype=int32)
    """
    jnp = _jnp()
    return jnp.asarray(np.asarray(tuple(shape), dtype=_dtypes.canonicalize_dtype(np.int64)))


def reciprocal(x: ArrayLike) -> Array:
    """Elementwise ``1 / x`` (``integer_pow(x, -1)``, as in JAX).

    Example:
      >>> lax.reciprocal(jnp.array([2.0, 4.0]))
      Array([0.5 , 0.25], dtype=float32)
    """
    return _lax().integer_pow(x, -1)


def batch_matmul(lhs: Array, rhs: Array, precision: PrecisionLike = None) -> Array:
    """Batched matrix product of ``(..., m, k)`` and ``(..., k, n)`` arrays of one rank.

    Raises:
      ValueError: for ranks below 2, unequal ranks or mismatched batch dimensions.

    Example:
      >>> lax.batch_matmul(jnp.ones((2, 3, 4)), jnp.ones((2, 4, 5))).shape
      (2, 3, 5)
    """
    lhs, rhs = _jnp().asarray(lhs), _jnp().asarray(rhs)
    if min(lhs.ndim, rhs.ndim) < 2:
        raise ValueError(f"Arguments to batch_matmul must be at least 2D, got {lhs.ndim}, "
                         f"{rhs.ndim}")
    if lhs.ndim != rhs.ndim:
        raise ValueError(f"Arguments to batch_matmul must have same ndim, got {lhs.ndim}, "
                         f"{rhs.ndim}")
    batch = tuple(range(lhs.ndim - 2))
    dn = (((lhs.ndim - 1,), (rhs.ndim - 2,)), (batch, batch))
    return _lax().dot_general(lhs, rhs, dn, precision=precision)


# ------------------------------------------------------------------ identities and staging

def optimization_barrier(operand: Any, /) -> Any:
    """Returns ``operand`` (a pytree) unchanged: plax's compilers do not move work across
    function boundaries the way XLA does, so the barrier has nothing to prevent.

    Example:
      >>> lax.optimization_barrier((1.0, jnp.ones(2)))[1]
      Array([1., 1.], dtype=float32)
    """
    return tree_util.tree_map(lambda v: _jnp().asarray(v), operand)


def stage(x: ArrayLike, /) -> Array:
    """``x`` as an array (JAX's way to lift a value into the current trace).

    Example:
      >>> lax.stage(3.0)
      Array(3., dtype=float32, weak_type=True)
    """
    return _jnp().asarray(x)


def dce_sink(val: Any, *, prevent_mlir_dce: bool = False) -> None:
    """Marks ``val`` as used (JAX's dead-code-elimination sink); returns nothing.

    Example:
      >>> lax.dce_sink(jnp.ones(2)) is None
      True
    """
    return None


def composite(decomposition: Callable, name: str, version: int = 0) -> Callable:
    """A function with the semantics of ``decomposition``, named ``name`` (JAX stages it as
    one composite operation; plax calls the decomposition, which every backend runs).

    Example:
      >>> my_tanh = lax.composite(lambda x: lax.tanh(x), name="my.tanh")
      >>> my_tanh(jnp.float32(0.0))
      Array(0., dtype=float32)
    """
    @functools.wraps(decomposition)
    def call(*args, **kwargs):
        return decomposition(*args, **kwargs)
    call.composite_name = name
    call.composite_version = version
    return call


def platform_dependent(*args: Any, default: Optional[Callable] = None,
                       **per_platform: Callable) -> Any:
    """Calls the branch for the platform that runs the computation (``cpu``, ``cuda``/``rocm``
    for GPUs, ...), else ``default``.

    Raises:
      NotImplementedError: when neither the platform has a branch nor a default is given.

    Example:
      >>> lax.platform_dependent(2.0, cpu=lambda x: x + 1, default=lambda x: x)
      3.0
    """
    import plax
    platform = plax.default_backend()
    names = [platform] + (["cuda", "rocm"] if platform == "gpu" else [])
    for n in names:
        if n in per_platform:
            return per_platform[n](*args)
    if default is None:
        raise NotImplementedError(f"platform_dependent: no branch for platform {platform!r} "
                                  f"(branches: {sorted(per_platform)}) and no default")
    return default(*args)


# ------------------------------------------------------------------ structural composites

def tile(operand: ArrayLike, reps: Sequence[int]) -> Array:
    """``operand`` repeated ``reps[i]`` times along axis ``i`` (``len(reps)`` equals the rank).

    Example:
      >>> lax.tile(jnp.arange(3), (2,))
      Array([0, 1, 2, 0, 1, 2], dtype=int32)
    """
    lax = _lax()
    x = _jnp().asarray(operand)
    reps = tuple(int(r) for r in reps)
    if len(reps) != x.ndim:
        raise ValueError(f"tile: len(reps)={len(reps)} must equal the operand rank {x.ndim}")
    # broadcast a new axis before each one, then merge each pair
    expanded = lax.broadcast_in_dim(x, tuple(v for r, d in zip(reps, x.shape) for v in (r, d)),
                                    tuple(range(1, 2 * x.ndim, 2)))
    return lax.reshape(expanded, tuple(r * d for r, d in zip(reps, x.shape)))


def index_take(src: Array, idxs: Sequence[Array], axes: Sequence[int]) -> Array:
    """``src`` gathered at the index arrays ``idxs`` (one per axis in ``axes``, broadcast
    together), the other axes kept whole: ``src[idxs[0], idxs[1], ...]`` over ``axes``.

    Example:
      >>> lax.index_take(jnp.arange(12).reshape(3, 4), (jnp.array([0, 2]), jnp.array([1, 3])), (0, 1))
      Array([ 1, 11], dtype=int32)
    """
    jnp = _jnp()
    src = jnp.asarray(src)
    axes = tuple(int(a) for a in axes)
    if len(idxs) != len(axes):
        raise ValueError(f"index_take: {len(idxs)} index arrays for {len(axes)} axes")
    index = [slice(None)] * src.ndim
    for a, i in zip(axes, idxs):
        index[a] = jnp.asarray(i)
    # the indexed axes first (they broadcast to one batch axis group), then the rest in order
    moved = jnp.moveaxis(src, axes, tuple(range(len(axes))))
    return moved[tuple(jnp.asarray(i) for i in idxs)]


def scatter_sub(operand: ArrayLike, scatter_indices: ArrayLike, updates: ArrayLike,
                dimension_numbers, *, indices_are_sorted: bool = False,
                unique_indices: bool = False, mode=None) -> Array:
    """Scatter that subtracts: ``scatter_add`` of ``-updates`` (same arguments as
    :func:`plax.lax.scatter_add`).

    Example:
      >>> dn = lax.ScatterDimensionNumbers(update_window_dims=(), inserted_window_dims=(0,),
      ...                                  scatter_dims_to_operand_dims=(0,))
      >>> lax.scatter_sub(jnp.zeros(3), jnp.array([[1]]), jnp.array([2.0]), dn)
      Array([ 0., -2.,  0.], dtype=float32)
    """
    lax = _lax()
    return lax.scatter_add(operand, scatter_indices, lax.neg(_jnp().asarray(updates)),
                           dimension_numbers, indices_are_sorted=indices_are_sorted,
                           unique_indices=unique_indices, mode=mode)


def scatter_apply(operand: Array, scatter_indices: Array, func: Callable[[Array], Array],
                  dimension_numbers, *, update_shape: Sequence[int] = (),
                  indices_are_sorted: bool = False, unique_indices: bool = False,
                  mode=None) -> Array:
    """Applies the elementwise ``func`` to ``operand`` at the scattered positions, once per
    update that lands there (as in JAX: an index listed twice gets ``func`` twice).

    Args:
      operand: the array.
      scatter_indices, dimension_numbers, mode: as in :func:`plax.lax.scatter`.
      func: an elementwise function of one array.
      update_shape: the shape the updates of an ordinary scatter would have.

    Returns:
      ``operand`` with ``func`` applied where the scatter lands.

    Example:
      >>> dn = lax.ScatterDimensionNumbers(update_window_dims=(), inserted_window_dims=(0,),
      ...                                  scatter_dims_to_operand_dims=(0,))
      >>> lax.scatter_apply(jnp.zeros(3), jnp.array([[0], [0], [2]]), lambda v: v + 1, dn,
      ...                   update_shape=(3,))
      Array([2., 0., 1.], dtype=float32)
    """
    lax, jnp = _lax(), _jnp()
    operand = jnp.asarray(operand)
    ones = jnp.ones(tuple(update_shape), dtype=np.int32)
    counts = lax.scatter_add(jnp.zeros(operand.shape, np.int32), scatter_indices, ones,
                             dimension_numbers, indices_are_sorted=indices_are_sorted,
                             unique_indices=unique_indices, mode=mode)
    times = jnp.max(counts) if counts.size else 0

    def body(k, x):
        return jnp.where(counts > k, func(x), x)

    return lax.fori_loop(0, times, body, operand)


# ------------------------------------------------------------------ reductions and top-k

def _monoid(computation, init, dtype):
    """The reduce_* function equivalent to a known ``computation`` with its identity ``init``."""
    lax = _lax()
    try:
        value = np.asarray(init)
    except Exception:
        return None
    if value.ndim != 0:
        return None
    v = value.item()
    table = [(lax.add, 0, lax.reduce_sum), (lax.mul, 1, lax.reduce_prod),
             (lax.bitwise_or, False, lax.reduce_or), (lax.bitwise_and, True, lax.reduce_and)]
    for fn, ident, red in table:
        if computation is fn and v == ident and (np.dtype(dtype) == bool or fn in (lax.add, lax.mul)):
            return red
    if computation is lax.max and (v == -np.inf or (np.dtype(dtype).kind in "iu"
                                                     and v == np.iinfo(dtype).min)):
        return lax.reduce_max
    if computation is lax.min and (v == np.inf or (np.dtype(dtype).kind in "iu"
                                                    and v == np.iinfo(dtype).max)):
        return lax.reduce_min
    return None


def reduce(operands: Any, init_values: Any, computation: Callable[[Any, Any], Any],
           dimensions: Sequence[int], out_sharding=None) -> Any:
    """Reduces ``operands`` (an array or a pytree of arrays of one shape) over ``dimensions``
    with ``computation``, starting from ``init_values`` (the same structure, scalars).

    ``computation`` should be associative and commutative, and ``init_values`` its identity,
    as XLA requires (the combination order is unspecified). The standard monoids (``lax.add``
    with 0, ``lax.mul`` with 1, ``lax.max``/``lax.min`` with the extreme values, ``and``/``or``
    on booleans) become the matching ``reduce_*`` primitive; any other computation is applied
    to whole halves of the data, pairwise, ``ceil(log2(n))`` times.

    Args:
      operands: an array or a pytree of arrays.
      init_values: scalars with the structure of ``operands``.
      computation: ``(a, b) -> c`` on structures like ``operands``; it receives arrays.
      dimensions: the axes reduced.

    Returns:
      The reduced structure (the ``dimensions`` removed).

    Example:
      >>> lax.reduce(jnp.arange(6.).reshape(2, 3), 0., lax.add, (1,))
      Array([ 3., 12.], dtype=float32)
    """
    lax, jnp = _lax(), _jnp()
    flat, tree = tree_util.tree_flatten(operands)
    inits, init_tree = tree_util.tree_flatten(init_values)
    if tree != init_tree:
        raise ValueError(f"reduce: operands and init_values must have the same structure, got "
                         f"{tree} and {init_tree}")
    flat = [jnp.asarray(v) for v in flat]
    if len({v.shape for v in flat}) > 1:
        raise ValueError(f"reduce: operands must have one shape, got {[v.shape for v in flat]}")
    ndim = flat[0].ndim
    from plax.lax.base import canonicalize_axis
    dims = tuple(sorted({canonicalize_axis(d, ndim, "dimensions") for d in dimensions}))
    if len(flat) == 1:
        red = _monoid(computation, inits[0], flat[0].dtype)
        if red is not None:
            return tree_util.tree_unflatten(tree, [red(flat[0], dims)])
    kept = [d for d in range(ndim) if d not in dims]
    out_shape = tuple(flat[0].shape[d] for d in kept)
    n = int(np.prod([flat[0].shape[d] for d in dims], dtype=np.int64))
    # the reduced axes moved last and merged into one of length n
    xs = [lax.reshape(lax.transpose(v, tuple(kept) + dims), out_shape + (n,)) for v in flat]
    inits = [lax.convert_element_type(jnp.asarray(i), v.dtype) for i, v in zip(inits, flat)]

    def combine(a, b):
        out = computation(tree_util.tree_unflatten(tree, a), tree_util.tree_unflatten(tree, b))
        return [jnp.asarray(o) for o in tree_util.tree_leaves(out)]

    if n == 0:
        return tree_util.tree_unflatten(tree, [jnp.broadcast_to(i, out_shape) for i in inits])
    while n > 1:
        if n % 2:
            xs = [lax.concatenate([x, jnp.broadcast_to(i, out_shape + (1,)).astype(x.dtype)],
                                  len(out_shape)) for x, i in zip(xs, inits)]
            n += 1
        half = n // 2
        left = [lax.slice_in_dim(x, 0, half, axis=-1) for x in xs]
        right = [lax.slice_in_dim(x, half, n, axis=-1) for x in xs]
        xs = combine(left, right)
        n = half
    xs = [lax.index_in_dim(x, 0, -1, keepdims=False) for x in xs]
    result = combine([jnp.broadcast_to(i, out_shape) for i in inits], xs)
    return tree_util.tree_unflatten(tree, result)


def approx_max_k(operand: Array, k: int, reduction_dimension: int = -1,
                 recall_target: float = 0.95, reduction_input_size_override: int = -1,
                 aggregate_to_topk: bool = True) -> tuple:
    """The ``k`` largest values along ``reduction_dimension`` and their indices.

    JAX's TPU algorithm is approximate (recall at least ``recall_target``); plax returns the
    exact top ``k`` (recall 1), which satisfies every recall target.

    Example:
      >>> vals, idx = lax.approx_max_k(jnp.array([3., 1., 4., 1., 5., 9.]), 2)
      >>> vals, idx
      (Array([9., 5.], dtype=float32), Array([5, 4], dtype=int32))
    """
    lax, jnp = _lax(), _jnp()
    x = jnp.asarray(operand)
    from plax.lax.base import canonicalize_axis
    axis = canonicalize_axis(reduction_dimension, x.ndim, "reduction_dimension")
    moved = jnp.moveaxis(x, axis, -1)
    vals, idx = lax.top_k(moved, int(k))
    return [jnp.moveaxis(vals, -1, axis), jnp.moveaxis(idx, -1, axis)]


def approx_min_k(operand: Array, k: int, reduction_dimension: int = -1,
                 recall_target: float = 0.95, reduction_input_size_override: int = -1,
                 aggregate_to_topk: bool = True) -> tuple:
    """The ``k`` smallest values along ``reduction_dimension`` and their indices (exact, as
    :func:`approx_max_k` is).

    Example:
      >>> lax.approx_min_k(jnp.array([3., 1., 4., 1., 5.]), 2)[1]
      Array([1, 3], dtype=int32)
    """
    jnp = _jnp()
    x = jnp.asarray(operand)
    if x.dtype == np.bool_ or np.dtype(x.dtype).kind == "u":
        raise TypeError(f"approx_min_k: operand dtype {x.dtype} is not supported (negation "
                        "would not order it)")
    vals, idx = approx_max_k(-x, k, reduction_dimension, recall_target,
                             reduction_input_size_override, aggregate_to_topk)
    return [-vals, idx]


# ------------------------------------------------------------------ convolution helpers

def conv_general_permutations(dimension_numbers) -> tuple:
    """The ``(lhs, rhs, out)`` axis permutations of a string dimension-number triple, e.g.
    ``("NHWC", "HWIO", "NHWC")``: each lists batch/feature then spatial axes.

    Example:
      >>> lax.conv_general_permutations(("NHWC", "HWIO", "NHWC"))
      ((0, 3, 1, 2), (3, 2, 0, 1), (0, 3, 1, 2))
    """
    lhs_spec, rhs_spec, out_spec = dimension_numbers
    lhs_char, rhs_char, out_char = ("N", "C"), ("O", "I"), ("N", "C")
    for i, (a, b) in enumerate([(lhs_spec, lhs_char), (rhs_spec, rhs_char),
                                (out_spec, out_char)]):
        if not all(c in a for c in b) or len(set(a)) != len(a):
            raise TypeError(f"conv_general_permutations: dimension_numbers[{i}] must contain "
                            f"{b} once each, got {a!r}")
    if len({len(lhs_spec), len(rhs_spec), len(out_spec)}) != 1:
        raise TypeError(f"conv_general_permutations: specs of unequal length {dimension_numbers}")
    lhs_perm = (lhs_spec.index("N"), lhs_spec.index("C"))
    rhs_perm = (rhs_spec.index("O"), rhs_spec.index("I"))
    out_perm = (out_spec.index("N"), out_spec.index("C"))
    # spatial axes ordered as the kernel lists them; lhs/out follow that order by letter
    spatial = [c for c in rhs_spec if c not in rhs_char]
    lhs_perm += tuple(sorted((i for i, c in enumerate(lhs_spec) if c not in lhs_char),
                             key=lambda i: spatial.index(lhs_spec[i])))
    rhs_perm += tuple(i for i, c in enumerate(rhs_spec) if c not in rhs_char)
    out_perm += tuple(sorted((i for i, c in enumerate(out_spec) if c not in out_char),
                             key=lambda i: spatial.index(out_spec[i])))
    return lhs_perm, rhs_perm, out_perm


def _pads(in_spatial, window, strides, padding):
    from plax.lax.convolution import padtype_to_pads
    if isinstance(padding, str):
        return padtype_to_pads(in_spatial, window, strides, padding)
    return [tuple(int(v) for v in p) for p in padding]


def conv_shape_tuple(lhs_shape, rhs_shape, strides, pads, batch_group_count: int = 1) -> tuple:
    """The output shape of a convolution in the default ``NC...``/``OI...`` layouts.

    Example:
      >>> lax.conv_shape_tuple((1, 3, 8, 8), (4, 3, 3, 3), (1, 1), "SAME")
      (1, 4, 8, 8)
    """
    lhs_shape, rhs_shape = tuple(lhs_shape), tuple(rhs_shape)
    pads = _pads(lhs_shape[2:], rhs_shape[2:], strides, pads)
    spatial = []
    for n, w, s, (lo, hi) in zip(lhs_shape[2:], rhs_shape[2:], strides, pads):
        span = n + lo + hi - w
        spatial.append(max(span // s + 1, 0) if n else 0)
    return (lhs_shape[0] // batch_group_count, rhs_shape[0], *spatial)


def conv_general_shape_tuple(lhs_shape, rhs_shape, window_strides, padding,
                             dimension_numbers) -> tuple:
    """The output shape of :func:`plax.lax.conv_general_dilated` (no dilation).

    Example:
      >>> lax.conv_general_shape_tuple((1, 8, 8, 3), (3, 3, 3, 4), (1, 1), "VALID",
      ...                              ("NHWC", "HWIO", "NHWC"))
      (1, 6, 6, 4)
    """
    from plax.lax.convolution import conv_dimension_numbers
    dn = conv_dimension_numbers(lhs_shape, rhs_shape, dimension_numbers)
    lhs_t = tuple(lhs_shape[i] for i in dn.lhs_spec)
    rhs_t = tuple(rhs_shape[i] for i in dn.rhs_spec)
    out_t = conv_shape_tuple(lhs_t, rhs_t, window_strides, padding)
    out = [0] * len(out_t)
    for j, axis in enumerate(dn.out_spec):
        out[axis] = out_t[j]
    return tuple(out)


def conv_transpose_shape_tuple(lhs_shape, rhs_shape, window_strides, padding,
                               dimension_numbers) -> tuple:
    """The output shape of :func:`plax.lax.conv_transpose` with these arguments.

    Example:
      >>> lax.conv_transpose_shape_tuple((1, 4, 4, 3), (3, 3, 3, 5), (2, 2), "SAME",
      ...                                ("NHWC", "HWIO", "NHWC"))
      (1, 8, 8, 5)
    """
    from plax.lax.convolution import conv_dimension_numbers
    dn = conv_dimension_numbers(lhs_shape, rhs_shape, dimension_numbers)
    lhs_t = tuple(lhs_shape[i] for i in dn.lhs_spec)
    rhs_t = tuple(rhs_shape[i] for i in dn.rhs_spec)
    if isinstance(padding, str):
        pads = [(0, 0)] * len(window_strides) if padding == "VALID" else None
    else:
        pads = [tuple(p) for p in padding]
    spatial = []
    for k, (n, w, s) in enumerate(zip(lhs_t[2:], rhs_t[2:], window_strides)):
        if pads is None:   # SAME: the input size times the stride
            spatial.append(n * s)
        else:
            lo, hi = pads[k]
            spatial.append(max((n - 1) * s + w - lo - hi, 0) if padding == "VALID"
                           else max((n - 1) * s + 1 + lo + hi - w + 1, 0))
    out_t = (lhs_t[0], rhs_t[0], *spatial)
    out = [0] * len(out_t)
    for j, axis in enumerate(dn.out_spec):
        out[axis] = out_t[j]
    return tuple(out)


def reduce_window_shape_tuple(operand_shape, window_dimensions, window_strides, padding,
                              base_dilation=None, window_dilation=None) -> tuple:
    """The output shape of :func:`plax.lax.reduce_window` (``padding`` as ``(lo, hi)`` pairs).

    Example:
      >>> lax.reduce_window_shape_tuple((4, 6), (2, 2), (2, 2), ((0, 0), (0, 0)))
      (2, 3)
    """
    from plax.lax.windows import window_output_shape
    nd = len(operand_shape)
    base_dilation = tuple(base_dilation) if base_dilation is not None else (1,) * nd
    window_dilation = tuple(window_dilation) if window_dilation is not None else (1,) * nd
    return tuple(int(d) for d in window_output_shape(
        tuple(operand_shape), tuple(window_dimensions), tuple(window_strides),
        tuple(tuple(p) for p in padding), base_dilation, window_dilation))


def conv_general_dilated_patches(lhs: ArrayLike, filter_shape: Sequence[int],
                                 window_strides: Sequence[int], padding,
                                 lhs_dilation: Optional[Sequence[int]] = None,
                                 rhs_dilation: Optional[Sequence[int]] = None,
                                 dimension_numbers=None, precision=None,
                                 preferred_element_type=None) -> Array:
    """The receptive-field patches of a convolution: for each output position, the
    ``C * prod(filter_shape)`` input values a kernel of ``filter_shape`` would see, in the
    output's feature axis ordered channel-major (index ``c * prod(filter_shape) + s``).

    Computed as a grouped convolution with one-hot kernels, so it has the convolution's rules.

    Example:
      >>> x = jnp.arange(16.).reshape(1, 1, 4, 4)
      >>> lax.conv_general_dilated_patches(x, (2, 2), (2, 2), "VALID").shape
      (1, 4, 2, 2)
    """
    lax, jnp = _lax(), _jnp()
    x = jnp.asarray(lhs)
    filter_shape = tuple(int(f) for f in filter_shape)
    from plax.lax.convolution import conv_dimension_numbers
    dn = conv_dimension_numbers(x.shape, (1, 1) + filter_shape, dimension_numbers)
    size = math.prod(filter_shape)
    channels = x.shape[dn.lhs_spec[1]]
    # kernel in OI... layout: output feature c * size + s picks spatial offset s of channel c
    eye = np.eye(size, dtype=np.float64).reshape((size, 1) + filter_shape)
    kernel = np.tile(eye, (channels,) + (1,) * (eye.ndim - 1))
    kernel = np.moveaxis(kernel, (0, 1), (dn.rhs_spec[0], dn.rhs_spec[1]))
    kernel = jnp.asarray(kernel, dtype=x.dtype)
    return lax.conv_general_dilated(x, kernel, window_strides, padding, lhs_dilation,
                                    rhs_dilation, dn, feature_group_count=channels,
                                    precision=precision,
                                    preferred_element_type=preferred_element_type)


def conv_general_dilated_local(lhs: ArrayLike, rhs: ArrayLike, window_strides: Sequence[int],
                               padding, filter_shape: Sequence[int],
                               lhs_dilation: Optional[Sequence[int]] = None,
                               rhs_dilation: Optional[Sequence[int]] = None,
                               dimension_numbers=None, precision=None) -> Array:
    """An unshared (locally connected) convolution: every output position has its own kernel.

    ``rhs`` holds, in the kernel layout of ``dimension_numbers``, an input-feature axis of
    size ``C * prod(filter_shape)`` (ordered as :func:`conv_general_dilated_patches` orders
    patches), an output-feature axis, and spatial axes of the output's spatial size.

    Example:
      >>> x = jnp.ones((1, 2, 4, 4))
      >>> w = jnp.ones((3, 2 * 2 * 2, 3, 3))     # OIHW: O=3, I=C*2*2, one kernel per output pixel
      >>> lax.conv_general_dilated_local(x, w, (1, 1), "VALID", (2, 2)).shape
      (1, 3, 3, 3)
    """
    lax, jnp = _lax(), _jnp()
    x = jnp.asarray(lhs)
    w = jnp.asarray(rhs)
    prec = precision[0] if isinstance(precision, tuple) else precision
    patches = conv_general_dilated_patches(x, filter_shape, window_strides, padding,
                                           lhs_dilation, rhs_dilation, dimension_numbers,
                                           precision=prec)
    from plax.lax.convolution import conv_dimension_numbers
    dn = conv_dimension_numbers(x.shape, (1, 1) + tuple(filter_shape), dimension_numbers)
    out_spatial = list(dn.out_spec[2:])
    rhs_spatial = list(dn.rhs_spec[2:])
    # contract the patch features with the kernel's input features; pair spatial axes as batch
    # dims, sorted by the output's axis order
    order = sorted(range(len(out_spatial)), key=lambda k: out_spatial[k])
    dnums = (((dn.out_spec[1],), (dn.rhs_spec[1],)),
             (tuple(out_spatial[k] for k in order), tuple(rhs_spatial[k] for k in order)))
    out = lax.dot_general(patches, w, dnums, precision=precision)
    # out: spatial (in sorted order), batch, output feature -> the output layout
    return jnp.moveaxis(out, (-2, -1), (dn.out_spec[0], dn.out_spec[1]))


# ------------------------------------------------------------------ implicit solves

def _closure_convert(fun: Callable, example: Any):
    """``fun`` (a function of one pytree like ``example``) as ``(g, consts)`` with
    ``g(consts, x) == fun(x)``: the values ``fun`` closes over (tracers of enclosing transforms
    included) become the explicit ``consts``, so a custom VJP can differentiate them."""
    from plax.core.interpret import eval_jaxpr
    from plax.core.trace import get_aval
    from plax.transforms.staging import trace_to_jaxpr
    leaves, tree = tree_util.tree_flatten(example)
    avals = [get_aval(_jnp().asarray(v)) for v in leaves]
    out_tree = []

    def flat_fun(*flat):
        out = fun(tree_util.tree_unflatten(tree, list(flat)))
        out_leaves, ot = tree_util.tree_flatten(out)
        out_tree.append(ot)
        return out_leaves

    closed, _ = trace_to_jaxpr(flat_fun, avals, where="the function")

    def converted(consts, x):
        out = eval_jaxpr(closed.jaxpr, list(consts), *tree_util.tree_leaves(x))
        return tree_util.tree_unflatten(out_tree[-1], out)

    return converted, list(closed.consts)


def _float_consts(consts):
    """The positions of the differentiable (inexact) consts."""
    jnp = _jnp()
    return [i for i, c in enumerate(consts) if jnp.issubdtype(jnp.asarray(c).dtype, jnp.inexact)]


def custom_linear_solve(matvec: Callable, b: Any, solve: Callable,
                        transpose_solve: Optional[Callable] = None, symmetric: bool = False,
                        has_aux: bool = False) -> Any:
    """Solves ``matvec(x) = b`` with ``solve(matvec, b)``, differentiated implicitly: the
    iterations of ``solve`` are never differentiated. The cotangent of ``b`` is
    ``transpose_solve(vecmat, g)`` (``solve(matvec, g)`` when ``symmetric``), and values
    ``matvec`` closes over receive ``-(d matvec/d value)^T`` of it at the solution.

    Args:
      matvec: the linear map (a function of a pytree like ``b``).
      b: the right-hand side (a pytree of arrays).
      solve: ``solve(matvec, b) -> x`` (with ``has_aux``: ``(x, aux)``).
      transpose_solve: ``transpose_solve(vecmat, b) -> x`` for the transposed map; needed for
        reverse-mode derivatives unless ``symmetric``.
      symmetric: ``matvec`` is symmetric (self-adjoint), so ``solve`` serves for both.
      has_aux: ``solve`` returns ``(x, aux)``; ``aux`` is returned undifferentiated.

    Returns:
      ``x`` (and ``aux`` with ``has_aux``).

    Example:
      >>> a = jnp.array([[2.0, 1.0], [1.0, 3.0]])
      >>> def f(b):
      ...     return lax.custom_linear_solve(lambda x: a @ x, b,
      ...                                    lambda mv, r: jnp.linalg.solve(a, r),
      ...                                    symmetric=True)
      >>> plax.grad(lambda b: f(b).sum())(jnp.array([1.0, 1.0]))
      Array([0.4, 0.2], dtype=float32)
    """
    import plax
    jnp = _jnp()
    b = tree_util.tree_map(jnp.asarray, b)
    mv, consts = _closure_convert(matvec, b)
    diff = _float_consts(consts)
    fixed = {i: c for i, c in enumerate(consts) if i not in diff}

    def assemble(dconsts):
        out, it = [], iter(dconsts)
        for i in range(len(consts)):
            out.append(fixed[i] if i in fixed else next(it))
        return out

    def run_solve(cs, rhs):
        res = solve(lambda x: mv(cs, x), rhs)
        return res if has_aux else (res, None)

    aux_box = []

    @plax.custom_vjp
    def solved(dconsts, rhs):
        x, aux = run_solve(assemble(dconsts), rhs)
        aux_box.append(aux)
        return x

    def fwd(dconsts, rhs):
        x = solved(dconsts, rhs)
        return x, (dconsts, x)

    def bwd(res, g):
        dconsts, x = res
        cs = assemble(dconsts)
        if symmetric:
            b_bar, _ = run_solve(cs, g)
        else:
            if transpose_solve is None:
                raise TypeError("custom_linear_solve: reverse-mode differentiation needs "
                                "transpose_solve (or symmetric=True)")
            vjp_x = plax.vjp(lambda v: mv(cs, v), x)[1]
            vecmat = lambda v: vjp_x(v)[0]  # noqa: E731
            b_bar = transpose_solve(vecmat, g)
            if has_aux:
                b_bar = b_bar[0]
        # matvec's differentiable consts: -(d/dc matvec(c, x))^T b_bar
        _, vjp_c = plax.vjp(lambda *dc: mv(assemble(list(dc)), x), *dconsts)
        c_bar = [tree_util.tree_map(lambda t: -t, v) for v in vjp_c(b_bar)]
        return c_bar, b_bar

    solved.defvjp(fwd, bwd)
    x = solved([consts[i] for i in diff], b)
    if has_aux:
        return x, (aux_box[-1] if aux_box else None)
    return x


def custom_root(f: Callable, initial_guess: Any, solve: Callable, tangent_solve: Callable,
                has_aux: bool = False) -> Any:
    """Finds a root of ``f`` with ``solve(f, initial_guess)``, differentiated implicitly
    (implicit function theorem): the iterations of ``solve`` are never differentiated. For a
    cotangent ``g`` of the root ``x``, ``lam = tangent_solve(J_x^T, g)`` solves the transposed
    linearised system and the values ``f`` closes over receive ``-(df/dvalue)^T lam``.

    Args:
      f: the function whose root is sought (pytree to pytree of the same structure).
      initial_guess: the starting point.
      solve: ``solve(f, initial_guess) -> root`` (with ``has_aux``: ``(root, aux)``).
      tangent_solve: ``tangent_solve(g, y) -> x`` solving the linear ``g(x) = y`` (e.g.
        ``lambda g, y: y / g(1.0)`` for scalars); here it receives the transposed map.
      has_aux: ``solve`` returns ``(root, aux)``.

    Returns:
      The root (and ``aux`` with ``has_aux``).

    Example:
      >>> def sqrt(a):
      ...     newton = lambda f, x0: lax.fori_loop(
      ...         0, 30, lambda i, x: x - f(x) / plax.grad(f)(x), x0)
      ...     return lax.custom_root(lambda x: x ** 2 - a, 1.0, newton,
      ...                            lambda g, y: y / g(1.0))
      >>> plax.grad(sqrt)(4.0)
      Array(0.25, dtype=float32, weak_type=True)
    """
    import plax
    jnp = _jnp()
    x0 = tree_util.tree_map(jnp.asarray, initial_guess)
    fc, consts = _closure_convert(f, x0)
    diff = _float_consts(consts)
    fixed = {i: c for i, c in enumerate(consts) if i not in diff}

    def assemble(dconsts):
        out, it = [], iter(dconsts)
        for i in range(len(consts)):
            out.append(fixed[i] if i in fixed else next(it))
        return out

    aux_box = []

    def run(cs, guess):
        res = solve(lambda x: fc(cs, x), guess)
        return res if has_aux else (res, None)

    @plax.custom_vjp
    def root(dconsts, guess):
        x, aux = run(assemble(dconsts), lax_stop(guess))
        aux_box.append(aux)
        return x

    def lax_stop(v):
        return tree_util.tree_map(_lax().stop_gradient, v)

    def fwd(dconsts, guess):
        x = root(dconsts, guess)
        return x, (dconsts, x, guess)

    def bwd(res, g):
        dconsts, x, guess = res
        cs = assemble(dconsts)
        _, vjp_x = plax.vjp(lambda v: fc(cs, v), x)
        lam = tangent_solve(lambda v: vjp_x(v)[0], g)
        _, vjp_c = plax.vjp(lambda *dc: fc(assemble(list(dc)), x), *dconsts)
        c_bar = [tree_util.tree_map(lambda t: -t, v) for v in vjp_c(lam)]
        # the root does not depend on the initial guess
        return c_bar, tree_util.tree_map(jnp.zeros_like, guess)

    root.defvjp(fwd, bwd)
    x = root([consts[i] for i in diff], x0)
    if has_aux:
        return x, (aux_box[-1] if aux_box else None)
    return x
