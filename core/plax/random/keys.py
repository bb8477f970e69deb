"""PRNG keys: seeding, splitting, folding in data, and drawing raw bits (Threefry-2x32).

A key is two ``uint32`` words. It appears either *raw* (a ``uint32`` array of
shape ``(..., 2)``, what :func:`PRNGKey` returns) or *typed* (a
:class:`PRNGKeyArray`, what :func:`key` returns, whose shape leaves out the
trailing 2). Every function here is written with ``plax.lax`` on the key's
data, so keys work under ``jit``, ``vmap`` and ``grad`` like any other array.

Both of JAX's bit layouts are implemented, chosen by the flag
``jax_threefry_partitionable`` at call time:

* partitionable (True, JAX's current default): element ``i`` of an output of
  shape ``s`` hashes the 64-bit counter ``i`` (as its two 32-bit halves), so
  every element is computed independently of the output's size.
* original (False, older JAX and its tutorials): ``n`` words come from hashing
  the counters ``0 .. n-1`` split into two halves that form the hash's two
  input words; outputs depend on the total size.
"""
from __future__ import annotations

import math
import operator
from typing import Any, Sequence

import numpy as np

from plax import dtypes, lax
from plax.array import Array
from plax.config import config
from plax.core.trace import Tracer, get_aval
from plax.random._util import staged
from plax.sharding_types import with_out_sharding

KEY_SHAPE = (2,)
UINT_DTYPES = {8: np.dtype(np.uint8), 16: np.dtype(np.uint16), 32: np.dtype(np.uint32),
               64: np.dtype(np.uint64)}
_U32 = np.dtype(np.uint32)


# ------------------------------------------------------------------ implementation descriptor

class PRNGImpl:
    """Describes a PRNG implementation. plax implements one: ``threefry2x32``.

    Example:
      >>> random.key_impl(random.key(0))
      'threefry2x32'
    """

    __slots__ = ("name", "tag", "key_shape")

    def __init__(self, name: str, tag: str, key_shape: tuple[int, ...]):
        self.name, self.tag, self.key_shape = name, tag, key_shape

    def __repr__(self) -> str:
        return f"PRNGImpl({self.name!r})"

    def __eq__(self, other) -> bool:
        return isinstance(other, PRNGImpl) and other.name == self.name

    def __hash__(self) -> int:
        return hash(("PRNGImpl", self.name))


threefry_prng_impl = PRNGImpl("threefry2x32", "fry", KEY_SHAPE)
_IMPLS = {threefry_prng_impl.name: threefry_prng_impl}


def resolve_impl(impl: Any, ctor: str = "key") -> PRNGImpl:
    """The :class:`PRNGImpl` named by ``impl`` (None, a name, a PRNGImpl or a key dtype).

    Raises:
      ValueError: for an implementation plax does not provide.
    """
    if impl is None:
        default = config.read("default_prng_impl")  # jax_default_prng_impl
        if default == "threefry2x32":
            return threefry_prng_impl
        impl = default  # another of JAX's names: refused below, not silently replaced
    if isinstance(impl, PRNGImpl):
        return impl
    if isinstance(impl, KeyDType):
        return impl.impl
    if isinstance(impl, str):
        name = impl[4:-1] if impl.startswith("key<") and impl.endswith(">") else impl
        for known in _IMPLS.values():
            if name in (known.name, known.tag):
                return known
        raise ValueError(f'{ctor}: unrecognized PRNG implementation "{impl}". plax implements '
                         f'"threefry2x32" only.')
    raise TypeError(f"{ctor}: unrecognized type {type(impl).__name__} for specifying a PRNG "
                    "implementation; pass a name such as 'threefry2x32'.")


class KeyDType:
    """The dtype of typed key arrays, printed ``key<fry>`` as in JAX."""

    __slots__ = ("impl",)
    #: the abstract scalar type ``jnp.issubdtype`` reads: a typed key is a ``prng_key``
    type = dtypes.prng_key

    def __init__(self, impl: PRNGImpl):
        self.impl = impl

    @property
    def name(self) -> str:
        return f"key<{self.impl.tag}>"

    itemsize = property(lambda self: 4 * math.prod(self.impl.key_shape))

    def __repr__(self) -> str:
        return self.name

    __str__ = __repr__

    def __eq__(self, other) -> bool:
        if isinstance(other, str):
            return str.__eq__(self.name, other)  # not other's __eq__: a str subclass may raise
        return isinstance(other, KeyDType) and other.impl == self.impl

    def __hash__(self) -> int:
        return hash(("KeyDType", self.impl))


def key_dtype(impl_spec: Any = None) -> KeyDType:
    """The dtype of typed keys of a PRNG implementation ``impl_spec`` (a name or
    implementation, JAX's parameter name; default ``threefry2x32``).

    Example:
      >>> random.key_dtype("threefry2x32")
      key<fry>
    """
    return KeyDType(resolve_impl(impl_spec, "key_dtype"))


# ------------------------------------------------------------------ typed key arrays

class PRNGKeyArray:
    """An array of typed PRNG keys: what :func:`plax.random.key` returns.

    Its shape leaves out the key's own words (a single key has shape ``()``),
    its dtype is ``key<fry>``, and its raw ``uint32`` words are
    ``random.key_data(keys)``. It is a pytree whose one leaf is that data, so
    it passes through ``jit``, ``vmap`` (a batch of keys maps over its leading
    axis) and ``grad`` unchanged.

    Example:
      >>> k = random.key(0)
      >>> k
      Array((), dtype=key<fry>) overlaying:
      [0 0]
    """

    __slots__ = ("_data", "_impl")
    __array_priority__ = 200

    def __init__(self, impl: PRNGImpl, data: Any):
        self._impl = impl
        self._data = data

    # ---- abstract value
    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(get_aval(self._data).shape[:-len(self._impl.key_shape)])

    ndim = property(lambda self: len(self.shape))
    size = property(lambda self: math.prod(self.shape))
    dtype = property(lambda self: KeyDType(self._impl))
    itemsize = property(lambda self: self.dtype.itemsize)
    nbytes = property(lambda self: self.size * self.itemsize)

    # ---- array protocol
    def __len__(self) -> int:
        if not self.shape:
            raise TypeError("len() of unsized object")
        return self.shape[0]

    def __iter__(self):
        if not self.shape:
            raise TypeError("iteration over a 0-d key array")
        return (self[i] for i in range(self.shape[0]))

    def __getitem__(self, idx) -> "PRNGKeyArray":
        if not isinstance(idx, tuple):
            idx = (idx,)
        # The key words form the last axis; indexing only ever applies to the axes before it.
        return PRNGKeyArray(self._impl, self._data[idx + (slice(None),)])

    def _map_data(self, fn) -> "PRNGKeyArray":
        return PRNGKeyArray(self._impl, fn(self._data))

    def reshape(self, *shape, order: str = "C") -> "PRNGKeyArray":
        """The same keys arranged in a new shape."""
        from plax import numpy as jnp
        if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
            shape = tuple(shape[0])
        target = _reshape_target(self.size, shape)
        return self._map_data(lambda d: jnp.reshape(d, target + self._impl.key_shape))

    def ravel(self) -> "PRNGKeyArray":
        """The keys as a 1-D key array."""
        return self.reshape(-1)

    flatten = ravel

    def squeeze(self, axis=None) -> "PRNGKeyArray":
        """Removes axes of length one (all of them, or those in ``axis``)."""
        from plax import numpy as jnp
        if axis is None:
            axis = tuple(i for i, d in enumerate(self.shape) if d == 1)
        axes = (axis,) if isinstance(axis, int) else tuple(axis)
        axes = tuple(a % self.ndim for a in axes)
        return self._map_data(lambda d: jnp.squeeze(d, axes))

    def transpose(self, *axes) -> "PRNGKeyArray":
        """Permutes the key array's axes (the key words stay last)."""
        from plax import numpy as jnp
        if len(axes) == 1 and isinstance(axes[0], (tuple, list)):
            axes = tuple(axes[0])
        perm = tuple(axes) if axes else tuple(reversed(range(self.ndim)))
        return self._map_data(lambda d: jnp.transpose(d, perm + (self.ndim,)))

    T = property(lambda self: self.transpose())

    def block_until_ready(self) -> "PRNGKeyArray":
        if isinstance(self._data, Array):
            self._data.block_until_ready()
        return self

    @property
    def device(self):
        return self._data.device

    def devices(self) -> set:
        return self._data.devices()

    @property
    def sharding(self):
        """Where the keys lie: their data's sharding without the key words' dimension (a
        key made under a set mesh: ``NamedSharding(mesh, P())``, as in JAX).

        Example:
          >>> random.key(0).sharding.device_set == {plax.devices()[0]}
          True
        """
        return key_sharding(self._data.sharding, self.ndim)

    @property
    def committed(self) -> bool:
        """Whether the keys' data is committed to its devices (as an Array's ``committed``)."""
        return self._data.committed

    def copy(self) -> "PRNGKeyArray":
        return self

    def __array__(self, dtype=None, copy=None):
        raise TypeError("PRNG key arrays have no NumPy equivalent; use "
                        "np.asarray(plax.random.key_data(keys)) for their uint32 words.")

    def __eq__(self, other):
        if not isinstance(other, PRNGKeyArray):
            return NotImplemented
        from plax import numpy as jnp
        return jnp.all(jnp.equal(self._data, other._data), axis=-1)

    def __ne__(self, other):
        if not isinstance(other, PRNGKeyArray):
            return NotImplemented
        from plax import numpy as jnp
        return jnp.any(jnp.not_equal(self._data, other._data), axis=-1)

    __hash__ = None  # like arrays, key arrays are not hashable

    def __bool__(self):
        raise TypeError("The truth value of a PRNG key array is ambiguous; compare key_data "
                        "instead.")

    def __repr__(self) -> str:
        head = f"Array({self.shape}, dtype={self.dtype.name})"
        if isinstance(self._data, Tracer):
            return f"{head} overlaying a traced value {self._data!r}"
        return f"{head} overlaying:\n{np.asarray(self._data)}"

    __str__ = __repr__


def key_sharding(sharding: Any, ndim: int) -> Any:
    """The sharding of typed keys of rank ``ndim`` whose data lies as ``sharding`` says: a
    NamedSharding without the key words' (last) dimension; any other sharding as it is.

    Example:
      >>> mesh = plax.make_mesh((1,), ("x",))
      >>> key_sharding(plax.sharding.NamedSharding(mesh, plax.P(None, None)), 1).spec
      P(None,)
    """
    from plax.sharding import NamedSharding, PartitionSpec
    if not isinstance(sharding, NamedSharding):
        return sharding
    # the data's spec written out to its rank first, as JAX's key rules do: data placed P()
    # (over a mesh of Auto axes) gives keys P(None, ...), one entry per key dimension
    kept = sharding.spec.partitions[:ndim]
    return NamedSharding(sharding.mesh, PartitionSpec(*kept, *(None,) * (ndim - len(kept))))


def _reshape_target(size: int, shape: Sequence) -> tuple[int, ...]:
    shape = tuple(operator.index(d) for d in shape)
    if shape.count(-1) > 1:
        raise ValueError("can only specify one unknown dimension (-1) in a reshape")
    if -1 in shape:
        known = math.prod(d for d in shape if d != -1)
        if known == 0 or size % known:
            raise ValueError(f"cannot reshape a key array of size {size} into shape {shape}")
        shape = tuple(size // known if d == -1 else d for d in shape)
    if math.prod(shape) != size:
        raise ValueError(f"cannot reshape a key array of size {size} into shape {shape}")
    return shape


def _flatten_keys(keys: PRNGKeyArray):
    return (keys._data,), keys._impl


def _unflatten_keys(impl, children):
    return PRNGKeyArray(impl, children[0])


def _register_pytree() -> None:
    from plax import tree_util
    tree_util.register_pytree_node(PRNGKeyArray, _flatten_keys, _unflatten_keys)


_register_pytree()


# ------------------------------------------------------------------ validating keys

_KEY_HELP = ("A PRNG key is either a typed key from plax.random.key(seed) or a raw key: a "
             "uint32 array whose last axis has length 2, as returned by "
             "plax.random.PRNGKey(seed) or plax.random.split(key).")


def _describe(x: Any) -> str:
    try:
        aval = get_aval(x)
        return f"an array of shape {aval.shape} and dtype {aval.dtype.name}"
    except Exception:
        if isinstance(x, np.ndarray):
            return f"a NumPy array of shape {x.shape} and dtype {x.dtype.name}"
        return f"{type(x).__name__} {x!r}"


def check_key(name: str, key: Any, allow_batched: bool = False) -> tuple[Any, bool]:
    """Validates ``key`` for the random function ``name``.

    Returns:
      ``(data, typed)``: the key's ``uint32`` words (shape ``(..., 2)``, an array or
      tracer) and whether it came as a typed key (so results can be wrapped alike).

    Raises:
      TypeError: when ``key`` is not a key (an int, a float array, a wrong shape).
      ValueError: when a batch of keys is given to a function that takes one key.
    """
    if isinstance(key, PRNGKeyArray):
        data, typed, shape = key._data, True, key.shape
    else:
        if not isinstance(key, (Array, Tracer, np.ndarray)):
            raise TypeError(f"{name} expects a PRNG key, got {_describe(key)}. {_KEY_HELP}")
        aval = get_aval(key) if not isinstance(key, np.ndarray) else key
        if aval.dtype != _U32:
            raise TypeError(f"{name} expects a PRNG key, got {_describe(key)}: raw key data must "
                            f"have dtype uint32, not {aval.dtype.name}. {_KEY_HELP}")
        if len(aval.shape) < 1 or tuple(aval.shape[-1:]) != KEY_SHAPE:
            raise TypeError(f"{name} expects a PRNG key, got {_describe(key)}: raw key data must "
                            f"have shape (2,) (or (..., 2) for a batch of keys). {_KEY_HELP}")
        if isinstance(key, np.ndarray):
            from plax.array import from_host
            key = from_host(key)
        data, typed, shape = key, False, tuple(aval.shape[:-1])
    if not allow_batched and shape:
        raise ValueError(f"{name} accepts a single key, but was given a key array of shape "
                         f"{shape} != (). Use plax.vmap for batching.")
    return data, typed


def wrap_like(typed: bool, data: Any, impl: PRNGImpl = threefry_prng_impl):
    """``data`` as a typed key array if the input key was typed, else raw."""
    return PRNGKeyArray(impl, data) if typed else data


# ------------------------------------------------------------------ the Threefry hash on keys

def _u32_const(value: int):
    return lax.full((), value, _U32)


def key_words(data) -> tuple[Any, Any]:
    """The two ``uint32`` words of a single key (shape ``(2,)``) as rank-0 arrays."""
    return (lax.index_in_dim(data, 0, 0, keepdims=False),
            lax.index_in_dim(data, 1, 0, keepdims=False))


def threefry_2x32(data, count):
    """Hashes the ``uint32`` array ``count`` under a single key, JAX's ``threefry_2x32``.

    The flattened counts (padded with one zero if their number is odd) are cut
    into two halves, which become the two input words of the hash; the two
    output words are concatenated back and reshaped like ``count``.
    """
    k1, k2 = key_words(data)
    shape = get_aval(count).shape
    size = math.prod(shape)
    flat = lax.reshape(count, (size,))
    odd = size % 2
    if odd:
        flat = lax.concatenate([flat, lax.full((1,), 0, _U32)], 0)
    half = (size + odd) // 2
    x1 = lax.slice(flat, (0,), (half,))
    x2 = lax.slice(flat, (half,), (2 * half,))
    y1, y2 = lax.threefry2x32(k1, k2, x1, x2)
    out = lax.concatenate([y1, y2], 0)
    if odd:
        out = lax.slice(out, (0,), (size,))
    return lax.reshape(out, shape)


def iota_2x32_shape(shape: tuple[int, ...]):
    """The counters ``0 .. prod(shape)-1`` laid out in ``shape``, as (high, low) uint32 words."""
    if not shape:
        zero = _u32_const(0)
        return zero, zero
    size = math.prod(shape)
    if size > 2 ** 32:
        raise NotImplementedError(f"random arrays of more than 2**32 elements (shape {shape}) "
                                  "are not supported")
    low = lax.reshape(lax.iota(_U32, size), shape) if size else lax.full(shape, 0, _U32)
    return lax.full(shape, 0, _U32), low


def partitionable() -> bool:
    """Whether the ``jax_threefry_partitionable`` layout is active."""
    return bool(config.read("threefry_partitionable"))


# ------------------------------------------------------------------ seed / split / fold_in / bits

def seed_data(seed: Any, ctor: str = "PRNGKey"):
    """The two ``uint32`` words of the key made from an integer ``seed``.

    A 64-bit seed gives ``[seed >> 32, seed & 0xFFFFFFFF]``; narrower seeds (all
    seeds unless x64 is enabled) give ``[0, seed mod 2**32]``.
    """
    if isinstance(seed, PRNGKeyArray):
        raise TypeError(f"{ctor} accepts a scalar seed, but was given a PRNG key.")
    if isinstance(seed, (bool, int, np.integer, np.bool_)) or (
            isinstance(seed, np.ndarray) and seed.dtype.kind in "biu"):
        return _seed_from_host(seed, ctor)
    if isinstance(seed, (Array, Tracer)):
        return _seed_from_array(seed, ctor)
    if isinstance(seed, (float, complex, np.ndarray, np.generic)):
        raise TypeError(f"{ctor}: PRNG key seed must be an integer; got {_describe(seed)}.")
    raise TypeError(f"{ctor}: PRNG key seed must be an integer; got {type(seed).__name__} "
                    f"{seed!r}.")


def _seed_from_host(seed: Any, ctor: str):
    from plax import numpy as jnp
    arr = np.asarray(seed)
    if arr.ndim:
        raise TypeError(f"{ctor} accepts a scalar seed, but was given an array of shape "
                        f"{arr.shape} != (). Use plax.vmap for batching.")
    if isinstance(seed, (bool, np.bool_)):
        value, wide = int(seed), False
    elif isinstance(seed, int):
        value = int(seed)
        if not -2 ** 63 <= value < 2 ** 63:
            raise OverflowError(f"{ctor}: seed {value} does not fit in a 64-bit integer.")
        wide = config.x64_enabled
    else:
        value = int(arr)
        wide = arr.dtype.itemsize == 8 and config.x64_enabled
    bits = value & 0xFFFFFFFFFFFFFFFF
    hi = (bits >> 32) if wide else 0
    data = jnp.asarray(np.array([hi, bits & 0xFFFFFFFF], dtype=np.uint32))
    from plax.sharding import mesh_maybe_set
    if mesh_maybe_set[0]:  # JAX computes the key: under a set mesh it is placed as results are
        from plax.sharding_eager import placed_results
        return placed_results([Array._new(data._buf, data.aval, data._device, False)])[0]
    return data


def _seed_from_array(seed: Any, ctor: str):
    aval = get_aval(seed)
    if aval.shape:
        raise TypeError(f"{ctor} accepts a scalar seed, but was given an array of shape "
                        f"{aval.shape} != (). Use plax.vmap for batching.")
    if aval.dtype.kind not in "biu":
        raise TypeError(f"{ctor}: PRNG key seed must be an integer; got {_describe(seed)}.")
    low = lax.convert_element_type(seed, _U32)
    if aval.dtype.itemsize == 8:
        shift = lax.full((), 32, aval.dtype)
        high = lax.convert_element_type(lax.shift_right_logical(seed, shift), _U32)
    else:
        high = _u32_const(0)
    return lax.concatenate([lax.expand_dims(high, (0,)), lax.expand_dims(low, (0,))], 0)


@staged("shape")
def split_data(data, shape: tuple[int, ...]):
    """Splits one key (``uint32[2]``) into keys of ``shape``: ``uint32[*shape, 2]``."""
    if partitionable():
        k1, k2 = key_words(data)
        hi, lo = iota_2x32_shape(shape)
        bits1, bits2 = lax.threefry2x32(k1, k2, hi, lo)
        nd = len(shape)
        return lax.concatenate([lax.expand_dims(bits1, (nd,)), lax.expand_dims(bits2, (nd,))], nd)
    num = math.prod(shape)
    counts = lax.iota(_U32, num * 2)
    return lax.reshape(threefry_2x32(data, counts), tuple(shape) + KEY_SHAPE)


@staged()
def fold_in_data(data, message):
    """Folds the ``uint32`` scalar ``message`` into one key (the same in both layouts)."""
    counts = lax.concatenate([lax.full((1,), 0, _U32), lax.expand_dims(message, (0,))], 0)
    return threefry_2x32(data, counts)


@staged("bit_width", "shape")
def bits_data(data, bit_width: int, shape: tuple[int, ...]):
    """``bit_width``-bit unsigned random integers of ``shape`` from one key."""
    if bit_width not in UINT_DTYPES:
        raise TypeError(f"random bits need a width of 8, 16, 32 or 64, got {bit_width}")
    if partitionable():
        return _bits_partitionable(data, bit_width, shape)
    return _bits_original(data, bit_width, shape)


def _bits_partitionable(data, bit_width: int, shape: tuple[int, ...]):
    k1, k2 = key_words(data)
    hi, lo = iota_2x32_shape(shape)
    bits1, bits2 = lax.threefry2x32(k1, k2, hi, lo)
    dtype = UINT_DTYPES[bit_width]
    if bit_width == 64:
        high = lax.convert_element_type(bits1, dtype)
        low = lax.convert_element_type(bits2, dtype)
        return lax.bitwise_or(lax.shift_left(high, lax.full((), 32, dtype)), low)
    mixed = lax.bitwise_xor(bits1, bits2)
    return mixed if bit_width == 32 else lax.convert_element_type(mixed, dtype)


def _bits_original(data, bit_width: int, shape: tuple[int, ...]):
    size = math.prod(shape)
    words = -(-bit_width * size // 32)  # ceil
    if words >= 2 ** 32 - 1:
        raise NotImplementedError(f"random arrays needing {words} >= 2**32-1 words of random bits "
                                  "are not supported with jax_threefry_partitionable=False")
    bits = threefry_2x32(data, lax.iota(_U32, words))
    dtype = UINT_DTYPES[bit_width]
    if bit_width == 64:
        half = words // 2
        high = lax.convert_element_type(lax.slice(bits, (0,), (half,)), dtype)
        low = lax.convert_element_type(lax.slice(bits, (half,), (words,)), dtype)
        bits = lax.bitwise_or(lax.shift_left(high, lax.full((), 32, dtype)), low)
    elif bit_width in (8, 16):
        bits = _unpack_words_little_endian(bits, bit_width, words, size)
    return lax.reshape(bits, shape)


def _unpack_words_little_endian(words_arr, bit_width: int, words: int, size: int):
    """Each uint32 word split into its ``32 // bit_width`` fields, lowest bits first."""
    per_word = 32 // bit_width
    shifts = lax.mul(lax.iota(_U32, per_word), lax.full((per_word,), bit_width, _U32))
    expanded = lax.broadcast_in_dim(words_arr, (words, per_word), (0,))
    shifts = lax.broadcast_in_dim(shifts, (words, per_word), (1,))
    shifted = lax.shift_right_logical(expanded, shifts)
    mask = lax.full((words, per_word), (1 << bit_width) - 1, _U32)
    fields = lax.reshape(lax.bitwise_and(shifted, mask), (words * per_word,))
    fields = lax.convert_element_type(fields, UINT_DTYPES[bit_width])
    return lax.slice(fields, (0,), (size,))


# ------------------------------------------------------------------ public key functions

def _shape_tuple(num: Any, name: str) -> tuple[int, ...]:
    if isinstance(num, (tuple, list)):
        dims = num
    else:
        dims = (num,)
    try:
        shape = tuple(operator.index(d) for d in dims)
    except TypeError:
        raise TypeError(f"{name}: the number of keys must be a concrete non-negative integer or "
                        f"a tuple of them, got {num!r}. Under jit, mark it static "
                        "(static_argnums).") from None
    if any(d < 0 for d in shape):
        raise ValueError(f"{name}: the number of keys must be non-negative, got {num!r}")
    return shape


def PRNGKey(seed: Any, *, impl: Any = None):
    """A raw PRNG key (a ``uint32`` array of shape ``(2,)``) from an integer seed.

    Args:
      seed: a 32- or 64-bit integer (a Python int, NumPy integer or integer array scalar).
        A 64-bit seed uses both words; otherwise the first word is 0.
      impl: optional implementation name; only ``'threefry2x32'`` exists.

    Returns:
      ``Array([hi, lo], dtype=uint32)``, usable by every ``plax.random`` function.

    Raises:
      TypeError: for a non-integer or non-scalar seed.

    Example:
      >>> random.PRNGKey(0)
      Array([0, 0], dtype=uint32)
    """
    resolve_impl(impl, "PRNGKey")
    return seed_data(seed, "PRNGKey")


def key(seed: Any, *, impl: Any = None, dtype: Any = None) -> PRNGKeyArray:
    """A typed PRNG key (shape ``()``, dtype ``key<fry>``) from an integer seed.

    Args:
      seed: a 32- or 64-bit integer, as for :func:`PRNGKey`.
      impl: optional implementation name (``'threefry2x32'``).
      dtype: optional key dtype (``random.key_dtype()``), an alternative to ``impl``.

    Returns:
      A :class:`PRNGKeyArray` holding the same words :func:`PRNGKey` returns.

    Example:
      >>> random.key_data(random.key(42))
      Array([ 0, 42], dtype=uint32)
    """
    if dtype is not None and impl is not None:
        raise ValueError("Cannot specify both `impl` and `dtype` arguments to random.key")
    impl_obj = resolve_impl(dtype if dtype is not None else impl, "key")
    return PRNGKeyArray(impl_obj, seed_data(seed, "key"))


def split(key: Any, num: int | tuple[int, ...] = 2):
    """Splits a key into ``num`` new keys (a new leading axis, or axes for a tuple).

    Splitting is how to get fresh randomness: the new keys are statistically
    independent of each other and of the old key's own draws. Never reuse a
    key after splitting it.

    Args:
      key: a single key (raw or typed).
      num: the number of keys, or a tuple giving their shape. Default 2.

    Returns:
      Keys of shape ``(num, 2)`` (raw) or ``(num,)`` (typed), like the input.

    Example:
      >>> key, subkey = random.split(random.PRNGKey(0))
    """
    data, typed = check_key("split", key)
    shape = _shape_tuple(num, "split")
    return wrap_like(typed, split_data(data, shape))


def fold_in(key: Any, data: Any):
    """A new key derived deterministically from ``key`` and the 32-bit integer ``data``.

    Args:
      key: a single key (raw or typed).
      data: an integer scalar (e.g. a step or device index), taken modulo 2**32.

    Returns:
      A key of the same kind as ``key``.

    Example:
      >>> step_key = random.fold_in(random.PRNGKey(0), 7)
    """
    key_data_, typed = check_key("fold_in", key)
    message = _as_uint32_message(data)
    return wrap_like(typed, fold_in_data(key_data_, message))


def _as_uint32_message(data: Any):
    if isinstance(data, (Array, Tracer)):
        aval = get_aval(data)
        if aval.shape:
            raise TypeError(f"fold_in accepts a scalar, but was given an array of shape "
                            f"{aval.shape} != (). Use plax.vmap for batching.")
        if aval.dtype.kind not in "biu":
            raise TypeError(f"fold_in data must be an integer, got dtype {aval.dtype.name}")
        return lax.convert_element_type(data, _U32)
    arr = np.asarray(data)
    if arr.ndim:
        raise TypeError(f"fold_in accepts a scalar, but was given an array of shape "
                        f"{arr.shape} != (). Use plax.vmap for batching.")
    if arr.dtype.kind not in "biu":
        raise TypeError(f"fold_in data must be an integer, got {data!r}")
    return lax.full((), int(arr) & 0xFFFFFFFF, _U32)


def bits(key: Any, shape: Sequence[int] = (), dtype: Any = None, *, out_sharding=None):
    """Uniformly random unsigned integers (every bit independent and fair).

    Args:
      key: a single key.
      shape: the result's shape. Default ``()``.
      dtype: an unsigned integer dtype (default ``uint32``, ``uint64`` with x64).

    Returns:
      An array of ``shape`` and ``dtype``.

    Raises:
      ValueError: for a dtype that is not an unsigned integer type.

    Example:
      >>> random.bits(random.PRNGKey(0), (2,))
      Array([4070199207, 4202968722], dtype=uint32)
    """
    if out_sharding is not None:
        return with_out_sharding(lambda: bits(key, shape, dtype), out_sharding)
    data, _ = check_key("bits", key)
    if dtype is None:
        dtype = np.uint64 if config.x64_enabled else np.uint32
    dt = dtypes.canonicalize_dtype(dtype)
    if dt.kind != "u":
        raise ValueError(f"dtype argument to `bits` must be an unsigned int dtype, got {dt.name}")
    from plax.random._util import canonical_shape
    return bits_data(data, dt.itemsize * 8, canonical_shape(shape, "bits"))


def key_data(keys: Any):
    """The raw ``uint32`` words of a key array (shape ``keys.shape + (2,)``).

    Example:
      >>> random.key_data(random.key(0))
      Array([0, 0], dtype=uint32)
    """
    data, _ = check_key("key_data", keys, allow_batched=True)
    return data


def wrap_key_data(key_bits_array: Any, *, impl: Any = None, dtype: Any = None) -> PRNGKeyArray:
    """A typed key array over raw ``uint32`` key words (last axis of length 2).

    Args:
      key_bits_array: a ``uint32`` array of shape ``(..., 2)``.
      impl / dtype: optional implementation (``'threefry2x32'``).

    Returns:
      A :class:`PRNGKeyArray` of shape ``key_bits_array.shape[:-1]``.

    Raises:
      TypeError: for data of another dtype or shape.

    Example:
      >>> k = random.wrap_key_data(random.PRNGKey(0))
      >>> k.shape
      ()
    """
    if dtype is not None and impl is not None:
        raise ValueError("Cannot specify both `impl` and `dtype` arguments to "
                         "random.wrap_key_data")
    impl_obj = resolve_impl(dtype if dtype is not None else impl, "wrap_key_data")
    if isinstance(key_bits_array, PRNGKeyArray):
        raise TypeError("wrap_key_data expects raw uint32 key data, but was given a typed key "
                        "array; it is already wrapped.")
    data, _ = check_key("wrap_key_data", key_bits_array, allow_batched=True)
    return PRNGKeyArray(impl_obj, data)


def key_impl(keys: Any) -> str:
    """The name of the PRNG implementation of a key (``'threefry2x32'``)."""
    if isinstance(keys, PRNGKeyArray):
        return keys._impl.name
    check_key("key_impl", keys, allow_batched=True)
    return threefry_prng_impl.name


def default_prng_impl() -> PRNGImpl:
    """The PRNG implementation new keys use (always Threefry-2x32 in plax)."""
    return threefry_prng_impl


def clone(key: Any):
    """Returns ``key`` unchanged (plax keys are immutable values; JAX-compatible no-op)."""
    check_key("clone", key, allow_batched=True)
    return key
