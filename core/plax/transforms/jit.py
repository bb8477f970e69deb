"""``jit``, ``make_jaxpr`` and ``eval_shape``: trace a function once per signature, hand the
jaxpr to a backend's ``compile``, and call the cached executable on raw buffers.

The cache key is the argument tree structure, each leaf's abstract value
(shape, dtype, weak type), the static arguments, and the target device and
backend. The caches belong to the Python function and the jit options (held weakly, so
they go with the function), not to the wrapper: ``jit(f)(x)`` with a fresh wrapper each
time traces and compiles once. Inside another transform (or another jit) a jitted
function binds the call primitive ``jit`` (:mod:`plax.transforms.call`) with its cached
jaxpr: one equation that the transforms rewrite and a backend compiles as a whole.
"""
from __future__ import annotations

import contextlib
import functools
import inspect
import operator
import threading
import time
import weakref
from typing import Any, Callable, Iterable, Sequence

import numpy as np

from plax import dtypes, trace_events, tree_util
from plax.array import ARRAYLIKE_TYPES, _PY_SCALARS, Array, from_host
from plax.backend import executable_text
from plax.config import config
from plax.core.jaxpr import ClosedJaxpr
from plax.sharding import in_internal_eager_work as _in_internal_eager_work
from plax.sharding import mesh_maybe_set as _mesh_maybe_set
from plax.sharding_context import context_mesh_params
from plax.state.types import Ref
from plax.core.trace import (DebugInfo, Tracer, fun_name, shared as _trace_shared,
                             state as trace_state, trace_context)
from plax.device import default_device as _default_device
from plax.dtypes import NUMERIC_DTYPE_TYPES as _NUMERIC
from plax.transforms.call import (call_target, check_pinned, compile_closed, jit_p,
                                  lend_buffers as _lend_buffers, pinned_device,
                                  wrap_outputs as _wrap_outputs,
                                  unlent_outputs as _unlent_outputs)
from plax.transforms.staging import abstractify, convert_tracer_consts, trace_to_jaxpr

_tree_flatten = tree_util.tree_flatten
_tree_unflatten = tree_util.tree_unflatten
_flags = config._values
#: the running plax.profiler session (or None), read before timing anything
_profile = trace_events.session


def _execute(name: str, entry, bufs: list):
    """Runs a compiled program (a cache entry) on ``bufs``; timed when a trace runs. (The
    fast path of ``JitFunction.__call__`` inlines this test, saving a call per jit call.)"""
    if _profile[0] is None:
        return entry.executable(*entry.const_bufs, *bufs)
    return _profile[0].run(name, entry, bufs)


# Flags that change what tracing produces (dtypes, PRNG layout, promotion checks, the
# default matmul precision recorded in dot_general) are part of every cache key.
_trace_flags = [(False, True, "allow", "standard", "threefry2x32", None)]


# Options that send every call down the general path: disable_jit, and the NaN/Inf checks of
# outputs (one read on the fast path, as before)
_general_only = [False]
_checks = [False]

_LOOK_UP = object()  # JitFunction._call_general: the caller did not work out the mesh
_ON_MESH = "on mesh"  # marks a fast-cache key of the mesh fast path (JitFunction._call_on_mesh)
# marks a fast-cache key of a call with host arguments (JitFunction._call_host_leaves)
_HOST_LEAVES = "host leaves"


def _host_kinds(leaves, device) -> tuple | None:
    """``(kinds, committed)`` of a call's argument leaves for the fast path of calls with
    host arguments: an Array on ``device`` by its aval, a NumPy array of a numeric dtype
    (bfloat16 too) by its shape and dtype, a Python or NumPy scalar by its type (with the
    x64 flag in the key, each determines the argument's canonical type and weak type);
    ``committed``: whether an Array among them is. None when some leaf is of another kind
    (an Array elsewhere, a ref, a string, ...): the call takes the general path."""
    kinds = []
    committed = False
    for x in leaves:
        t = type(x)
        if t is np.ndarray:
            if type(x.dtype) not in _NUMERIC:
                return None
            kinds.append((x.shape, x.dtype))
        elif t is Array:
            if x._device is not device:
                return None
            committed = committed or x._committed
            kinds.append(x.aval)
        elif t in _PY_SCALARS or (isinstance(x, np.generic) and type(x.dtype) in _NUMERIC):
            kinds.append(t)
        else:
            return None
    return tuple(kinds), committed


def _current_trace_flags() -> tuple:
    return (_flags["enable_x64"], _flags["threefry_partitionable"],
            _flags["numpy_rank_promotion"], _flags["numpy_dtype_promotion"],
            _flags["default_prng_impl"], _flags["default_matmul_precision"])


def _refresh_trace_flags(name=None, value=None) -> None:
    # While a thread has an option set by a context manager (thread-local, as in JAX), the
    # flags differ between threads: every call takes the general path, which reads them
    # for its own thread (_trace_flags[0] is None), and checks outputs for NaNs only where
    # its thread asks (float_checks reads the thread's options).
    threaded = config.has_thread_contexts()
    _trace_flags[0] = None if threaded else _current_trace_flags()
    _checks[0] = threaded or bool(_flags["debug_nans"] or _flags["debug_infs"])
    _general_only[0] = threaded or bool(_flags["disable_jit"]) or _checks[0]


config.on_change(_refresh_trace_flags)
_refresh_trace_flags()


def _as_tuple(x) -> tuple:
    if x is None:
        return ()
    if isinstance(x, (int, str, np.integer)):
        return (x,)
    return tuple(x)


class _Signature:
    """Resolves static_argnums/static_argnames against the function's signature."""

    def __init__(self, fun, static_argnums, static_argnames):
        self.static_argnums = tuple(int(i) for i in _as_tuple(static_argnums))
        self.static_argnames = tuple(_as_tuple(static_argnames))
        try:
            sig = inspect.signature(fun)
        except (TypeError, ValueError):
            sig = None
        self.sig = sig
        if sig is not None:
            params = list(sig.parameters.values())
            positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
            has_varargs = any(p.kind == p.VAR_POSITIONAL for p in params)
            names = [p.name for p in positional]
            # static_argnums and static_argnames name the same parameters both ways
            for i in self.static_argnums:
                if -len(positional) <= i < len(positional) and names[i] not in self.static_argnames:
                    self.static_argnames += (names[i],)
                elif not has_varargs and not -len(positional) <= i < len(positional):
                    raise ValueError(f"jitted function has static_argnums={self.static_argnums}, "
                                     f"but only accepts {len(positional)} positional arguments.")
            accepts_any_kw = any(p.kind == p.VAR_KEYWORD for p in params)
            known = {p.name for p in params if p.kind != p.VAR_POSITIONAL}
            invalid = {n for n in self.static_argnames if n not in known}
            if invalid and not accepts_any_kw:
                raise ValueError(f"Jitted function has invalid argnames {sorted(invalid)} in "
                                 f"static_argnames. Function does not take these args; its "
                                 f"parameters are {[p.name for p in params]}.")
            for name in self.static_argnames:
                if name in names and names.index(name) not in self.static_argnums:
                    self.static_argnums += (names.index(name),)
        self.any_static = bool(self.static_argnums or self.static_argnames)

    def split(self, args, kwargs):
        """(dynamic args, dynamic kwargs, hashable static part)."""
        n = len(args)
        nums = {i % n for i in self.static_argnums if -n <= i < n}
        static = []
        dyn_args = []
        for i, a in enumerate(args):
            if i in nums:
                static.append((i, _hashable(a, i)))
            else:
                dyn_args.append(a)
        dyn_kwargs = {}
        for k, v in kwargs.items():
            if k in self.static_argnames:
                static.append((k, _hashable(v, k)))
            else:
                dyn_kwargs[k] = v
        return tuple(dyn_args), dyn_kwargs, tuple(static)

    def merge(self, nargs, dyn_args, dyn_kwargs, static):
        args, it = [], iter(dyn_args)
        static_pos = {k: v.value for k, v in static if isinstance(k, int)}
        for i in range(nargs):
            args.append(static_pos[i] if i in static_pos else next(it))
        kwargs = dict(dyn_kwargs)
        kwargs.update({k: v.value for k, v in static if isinstance(k, str)})
        return args, kwargs


class _Static:
    """A static argument in a cache key: compared with ``==``, hashed with ``hash``."""

    __slots__ = ("value", "_hash")

    def __init__(self, value, h):
        self.value = value
        self._hash = h

    def __eq__(self, other):
        if type(other) is not _Static:
            return False
        a, b = self.value, other.value
        if a is b:  # the same object passed again: a hit even if its __eq__ misbehaves
            return True
        if type(a) is not type(b):
            return False
        try:
            return bool(a == b)
        except Exception as err:
            # Two static arguments of one type whose == raises or returns an array: the
            # cache cannot tell whether they are the same, so say what to fix (as JAX does)
            # rather than pass on a bare error from inside the cache lookup.
            raise ValueError(
                f"Static arguments must compare with ==, but comparing two objects of type "
                f"{type(a).__name__} raised {type(err).__name__}: {err}. Give the type an "
                "__eq__ that returns a bool, or make the argument dynamic.") from err

    def __hash__(self):
        return self._hash


def _hashable(value, where):
    try:
        h = hash(value)
    except TypeError as err:
        raise ValueError(f"Non-hashable static arguments are not supported. An error occurred "
                         f"while trying to hash an object of type {type(value)}, {value!r} (static "
                         f"argument {where!r}). The error was:\nTypeError: {err}\nPass a hashable "
                         "value (a tuple instead of a list), or make the argument dynamic.") from None
    return _Static(value, h)


class _CacheEntry:
    __slots__ = ("executable", "const_bufs", "out_tree", "out_avals", "closed", "device",
                 "backend", "single_output", "float0_outputs", "pinned", "ref_consts",
                 "unread")

    def __init__(self, executable, const_bufs, out_tree, out_avals, closed, device, backend,
                 pinned=None):
        self.executable = executable
        self.const_bufs = const_bufs
        self.out_tree = out_tree
        self.out_avals = out_avals
        self.closed = closed
        self.device = device
        self.backend = backend
        self.pinned = pinned  # the device a call inside pinned the program to (None: none)
        # the function returns one array (not a container): skip unflattening
        self.single_output = tree_util.treedef_is_leaf(out_tree) and out_tree.num_leaves == 1
        # float0 results are NumPy arrays, not Arrays (the fast path does not handle them)
        self.float0_outputs = any(a.dtype == dtypes.float0 for a in out_avals)
        # the refs the function closed over: one holding a sharded value makes the program
        # run per device even when no argument is sharded (read per call: a ref's value moves)
        self.ref_consts = tuple(c for c in closed.consts if type(c) is Ref)
        # the argument leaves the program does not read: their devices and committedness do
        # not count (JAX 0.10, keep_unused=False; set by _compile_now)
        self.unread = frozenset()


def _reads_committed(leaves, unread: frozenset) -> bool:
    """Whether an argument leaf the program reads (not in ``unread``) is committed (an
    Array, or a ref holding one): JAX 0.10 commits a call's results by those alone."""
    for i, x in enumerate(leaves):
        if i not in unread:
            value = x._value if type(x) is Ref else x
            if isinstance(value, Array) and value._committed:
                return True
    return False


def _incompatible_devices(first: tuple, other) -> ValueError:
    """JAX's error for a call whose committed arguments and the refs it closes over lie on
    two devices: ``first`` (``(what, aval, device)``: the argument that committed the call,
    or ``("ARG_SHARDING", None, device)``, a ref closed over) and a ref on ``other``, which
    JAX names ``ARG_SHARDING`` (:func:`plax.sharding_eager.incompatible_arguments`); plax adds
    what that is and what to do."""
    from plax.sharding_eager import incompatible_arguments
    err = incompatible_arguments(first, ("ARG_SHARDING", None, other))
    return ValueError(f"{err}\n(ARG_SHARDING: a ref the function closes over, committed to the "
                      "device its value lies on. Move values with plax.device_put first.)")


def _closed_ref_device(refs: tuple, device, committed: bool, first=None):
    """The device the one-device refs a program closes over (``refs``) are committed to
    (JAX 0.10 commits a ref made off any mesh); None when none is. A ref committed to
    another device than the call's committed arguments' (``device``, when ``committed``;
    ``first()``: ``(what, aval, device)`` of the argument that committed it) or another
    ref's is JAX's ValueError."""
    found = None
    for r in refs:
        v = r._value
        if type(v) is Array and v._committed:
            if found is None:
                found = v._device
                if committed and found != device:
                    raise _incompatible_devices(
                        first() if first else ("ARG_SHARDING", None, device), found)
            elif v._device != found:
                raise _incompatible_devices(("ARG_SHARDING", None, found), v._device)
    return found


def _sharded_ref(refs: tuple) -> bool:
    """Whether one of ``refs`` holds a value of another Array kind than a one-device one (a
    sharded value: the program may run per device on its blocks)."""
    return any(type(r._value) is not Array for r in refs)


def _leaf_paths(transform: str, fun, treedef, static, nargs: int, count: int) -> list:
    """The paths (``x['b'][0]``, ``args[1]``) of a call's dynamic argument leaves, as JAX's
    argument errors name them; ``args[i]`` for each when they cannot be worked out (an error
    message must not fail itself)."""
    static_pos = {k for k, _ in static if isinstance(k, int)}
    debug = DebugInfo(transform, fun, treedef, kwargs=True,
                      argnums=[i for i in range(nargs) if i not in static_pos])
    try:
        names = list(debug.arg_names())
    except Exception:
        names = []
    return names + [f"args[{i}]" for i in range(len(names), count)]


def _not_abstractable(x) -> bool:
    try:
        abstractify(x)
    except TypeError:
        return True
    return False


def _leaf_aval(x):
    if type(x) is Array:
        return x.aval
    return abstractify(x)


def _check_jit_args(fun, static_argnums, static_argnames, donate_argnums,
                    donate_argnames=None, fun_given: bool = True,
                    transform: str = "jit") -> None:
    """The TypeErrors JAX raises when jit is applied: a non-callable, argnums that are not
    ints, argnames that are not strings (range and name checks follow in _Signature).
    ``fun_given=False``: ``jit(static_argnums=...)`` without the function yet; ``transform``:
    the API being applied (``make_jaxpr`` and ``eval_shape`` check their function here too)."""
    if fun_given and not callable(fun):
        what = "compile" if transform == "jit" else "trace"
        raise TypeError(f"{transform} requires a callable as its first argument (the function "
                        f"to {what}), got {fun!r} of type {type(fun).__name__}. Pass the "
                        f"function itself, e.g. {transform}(f), not its name or the result of "
                        "calling it.")
    for what, nums in (("static_argnums", static_argnums), ("donate_argnums", donate_argnums)):
        if nums is None:
            continue
        try:
            operator.index(nums)
            continue
        except TypeError:
            pass
        try:
            [operator.index(i) for i in nums]
        except TypeError:
            raise TypeError(f"jit {what} must be an int or a sequence of ints (argument "
                            f"positions), got {nums!r}. To refer to arguments by name, use "
                            f"{what.replace('nums', 'names')}.") from None
    for what, names in (("static_argnames", static_argnames),
                        ("donate_argnames", donate_argnames)):
        if names is None or isinstance(names, str):
            continue
        try:
            bad = [n for n in names if not isinstance(n, str)]
        except TypeError:
            bad = [names]
        if bad:
            raise TypeError(f"jit {what} must be a string or a sequence of strings (parameter "
                            f"names), got {names!r}. To refer to arguments by position, use "
                            f"{what.replace('names', 'nums')}.")


class _Shared:
    """What every wrapper of one function under one set of jit options shares: the resolved
    signature, the traced jaxprs, the compiled executables (general and fast-path keys)."""

    __slots__ = ("sig", "compiled", "fast", "jaxprs", "lock", "compiling")

    def __init__(self, sig: _Signature):
        self.sig = sig
        self.compiled: dict = {}
        self.fast: dict = {}
        self.jaxprs: dict = {}
        self.lock = threading.Lock()
        # key -> (Event, thread id): a compile in progress, which other threads wait for
        # (one compile per signature however many threads call at once, as in JAX)
        self.compiling: dict = {}


# function -> {options: _Shared}. Weak: the caches of a function go when the function goes
# (a lambda made afresh per call is a new function and traces again, as in JAX).
_shared_caches: "weakref.WeakKeyDictionary[Callable, dict]" = weakref.WeakKeyDictionary()


def _shared_for(fun, options: tuple, make_sig: Callable[[], _Signature]) -> _Shared:
    """The caches of ``fun`` under ``options`` (made on first use); a callable that cannot be
    a weak dictionary key gets caches of its own wrapper, as before."""
    try:
        per_fun = _shared_caches.get(fun)
        if per_fun is None:
            per_fun = _shared_caches.setdefault(fun, {})
        shared = per_fun.get(options)
    except Exception:  # noqa: BLE001 -- not weakly referenceable, unhashable, odd __eq__
        return _Shared(make_sig())  # caches of this wrapper alone
    if shared is None:
        shared = per_fun.setdefault(options, _Shared(make_sig()))
    return shared


def clear_caches() -> None:
    """Forgets every ``jit``-compiled function's traces and executables (``jax.clear_caches``):
    the next call of each traces and compiles again.

    Example:
      >>> f = jax.jit(lambda x: x + 1)
      >>> _ = f(1.0)
      >>> jax.clear_caches()   # f traces again on its next call
    """
    for per_fun in list(_shared_caches.values()):
        for shared in list(per_fun.values()):
            with shared.lock:
                shared.compiled.clear()
                shared.fast.clear()
                shared.jaxprs.clear()


class JitFunction:
    """A jit-compiled function. Call it like the original; see :func:`jit`."""

    #: names of donated arguments (reported by ``Lowered.args_info``; set by :func:`jit`)
    donate_argnames: tuple = ()

    def __init__(self, fun, static_argnums, static_argnames, donate_argnums, device, backend,
                 inline, keep_unused, transform: str = "jit"):
        _check_jit_args(fun, static_argnums, static_argnames, donate_argnums,
                        transform=transform)
        self.fun = fun
        self._transform = transform
        self.donate_argnums = _as_tuple(donate_argnums)
        options = (_as_tuple(static_argnums), _as_tuple(static_argnames), self.donate_argnums,
                   device, backend, bool(inline), bool(keep_unused))
        shared = _shared_for(fun, options,
                             lambda: _Signature(fun, static_argnums, static_argnames))
        self.sig = shared.sig
        self._device = device
        self._backend_name = backend
        self._inline = inline
        self._keep_unused = bool(keep_unused)
        # Positions of static arguments for the fast path (None: no static arguments;
        # empty: only negative argnums or static_argnames, resolved per call instead).
        nums = self.sig.static_argnums
        self._static_nums = (tuple(sorted(i for i in nums if i >= 0)) if nums and all(
            i >= 0 for i in nums) else (() if self.sig.any_static else None))
        self._name = fun_name(fun)  # the ``name`` of its call equations
        self._cache: dict = shared.compiled
        self._fast_cache: dict = shared.fast
        self._jaxpr_cache: dict = shared.jaxprs
        self._lock = shared.lock
        self._compiling: dict = shared.compiling
        functools.update_wrapper(self, fun, updated=())

    # ---- the call path
    #: whether donate_argnums/donate_argnames name any argument (such calls take
    #: _call_donating; set by :func:`jit`)
    _donates: bool = False

    #: the ``in_shardings``/``out_shardings`` given (a JitShardings), or None: calls then
    #: take _call_sharded (set by :func:`jit`)
    _shardings = None

    def _call_donating(self, args, kwargs):
        """A call that donates arguments: refuse a donated buffer the call also reads (JAX's
        runtime error), run, then delete what JAX would have aliased."""
        from plax.transforms.donation import check_no_donated_reuse, donate
        dyn_args, dyn_kwargs, static = self.sig.split(args, kwargs)
        leaves, treedef = _tree_flatten((dyn_args, dyn_kwargs))
        donated = _donated_leaves(self, len(args), static, treedef)
        check_no_donated_reuse(leaves, donated,
                               lambda: self.lower(*args, **kwargs).jaxpr.out_avals)
        out = self._call_general(args, kwargs)
        if self._shardings is not None:
            # donation is decided against the outputs as out_shardings places them
            out = self._shardings.place_outputs(out)
        donate(leaves, donated, out)
        return out

    def _call_sharded(self, args, kwargs):
        """A top-level call of a jit given ``in_shardings``/``out_shardings``: arguments
        checked against the first, outputs placed by the second
        (:mod:`plax.transforms.jit_shardings`)."""
        shardings = self._shardings
        if shardings.in_shardings is not None:
            dyn_args, dyn_kwargs, static = self.sig.split(args, kwargs)
            placed = shardings.place_arguments(dyn_args, bool(dyn_kwargs))
            args, kwargs = self.sig.merge(len(args), placed, dyn_kwargs, static)
            args = tuple(args)
        if self._donates:
            return self._call_donating(args, kwargs)
        return shardings.place_outputs(self._call_general(args, kwargs))

    def __call__(self, *args, **kwargs):
        # The fast path: positional Array arguments already on the target device, and a
        # signature seen before; with host values (NumPy arrays, scalars) among them,
        # _call_host_leaves. Everything else (first call, kwargs, unresolved static
        # arguments, device moves, tracing) goes through _call_general, which fills the
        # fast cache when the call qualifies.
        # (_trace_shared.active: some thread traces; only then is the thread-local depth read)
        tracing = _trace_shared.active and trace_state.depth
        # (under a set mesh only plax's own eager work takes it: internal_eager_work)
        if tracing or _general_only[0] or kwargs or self._donates or \
                self._shardings is not None or \
                (_mesh_maybe_set[0] and not _in_internal_eager_work()):
            if tracing:
                return self._call_general(args, kwargs)  # in/out shardings inert (JAX)
            if self._shardings is not None:
                return self._call_sharded(args, kwargs)
            if self._donates:
                return self._call_donating(args, kwargs)
            if not _general_only[0] and not kwargs:  # under a set mesh, the mesh fast path
                mesh = _call_mesh()
                out = self._call_on_mesh(args, mesh) if mesh is not None else None
                return out if out is not None else self._call_general(args, kwargs, mesh)
            return self._call_general(args, kwargs)
        static_nums = self._static_nums
        if static_nums is None:
            static_key = ()
            leaves, treedef = _tree_flatten(args)
        else:
            if not static_nums or static_nums[-1] >= len(args):
                return self._call_general(args, kwargs)
            static_key = tuple([(type(args[i]), args[i]) for i in static_nums])
            leaves, treedef = _tree_flatten(
                tuple([a for i, a in enumerate(args) if i not in static_nums]))
        # Every leaf must be an Array on the target device: the jit's device, else the device
        # of a committed first leaf, else the default device (otherwise: _call_general).
        device = self._device
        committed = device is not None
        if device is None:
            first = leaves[0] if leaves else None
            device = first._device if type(first) is Array and first._committed else \
                _default_device()
        for x in leaves:
            if type(x) is not Array or x._device is not device:
                return self._call_host_leaves(args, leaves, treedef, static_key, device,
                                              committed)
            if x._committed:
                committed = True
        try:
            # id(device): the leaves are on exactly this device object (checked above)
            entry = self._fast_cache.get((treedef, tuple([x.aval for x in leaves]), static_key,
                                          id(device), _trace_flags[0]))
        except TypeError:  # an unhashable static argument: _call_general explains
            entry = None
        if entry is None:
            return self._call_general(args, kwargs)
        if committed and entry.unread and self._device is None:
            committed = _reads_committed(leaves, entry.unread)
        if not committed and entry.ref_consts:  # a committed ref closed over commits the
            # results, as _call_general decides on the first call
            committed = _closed_ref_device(entry.ref_consts, device, False) is not None
        if _profile[0] is None:
            outs = entry.executable(*entry.const_bufs, *[x._buf for x in leaves])
        else:
            outs = _profile[0].run(self._name, entry, [x._buf for x in leaves])
        if entry.single_output:
            return Array._new(outs[0], entry.out_avals[0], device, committed)
        new = Array._new
        return _tree_unflatten(entry.out_tree, [new(b, a, device, committed)
                                                for b, a in zip(outs, entry.out_avals)])

    def _call_host_leaves(self, args, leaves, treedef, static_key, device, committed):
        """The fast path of a positional call (no mesh set) some of whose argument leaves are
        host values -- NumPy arrays, scalars -- and the rest Arrays on ``device``, with a
        signature the general path recorded (keyed by :func:`_host_kinds`): each host value
        copied into its canonical dtype on ``device`` (:func:`plax.transforms.call.lend_buffers`),
        the program run, its outputs wrapped as the general path wraps them."""
        kinds = _host_kinds(leaves, device)
        if kinds is None:
            return self._call_general(args, {})
        try:
            found = self._fast_cache.get((treedef, kinds[0], static_key, _HOST_LEAVES,
                                          id(device), _trace_flags[0]))
        except TypeError:  # an unhashable static argument: _call_general explains
            found = None
        if found is None:
            return self._call_general(args, {})
        entry, avals = found
        committed = committed or kinds[1]
        if committed and entry.unread and self._device is None:
            committed = _reads_committed(leaves, entry.unread)
        if not committed and entry.ref_consts:  # a committed ref closed over commits the
            # results, as _call_general decides on the first call
            committed = _closed_ref_device(entry.ref_consts, device, False) is not None
        bufs, lent = _lend_buffers(leaves, device, avals)
        outs = _unlent_outputs(_execute(self._name, entry, bufs), lent)
        new = Array._new
        if entry.single_output:
            return new(outs[0], entry.out_avals[0], device, committed)
        return _tree_unflatten(entry.out_tree, [new(b, a, device, committed)
                                                for b, a in zip(outs, entry.out_avals)])

    def _call_on_mesh(self, args, mesh):
        """A call under ``mesh`` (the current one), of CPU devices, whose argument leaves
        are all host values or Arrays, with a signature the general path recorded
        (:mod:`plax.transforms.jit_mesh_calls`); None for any other call."""
        split = self._split_static(args)
        if split is None:
            return None
        leaves, treedef, static_key = split
        calls = _mesh_calls[0] or _load_mesh_calls()
        kinds = calls.leaf_kinds(leaves)
        if kinds is None:
            return None
        try:
            found = self._fast_cache.get((treedef, kinds, static_key, _ON_MESH, id(mesh),
                                          _trace_flags[0]))
        except TypeError:  # an unhashable static argument: _call_general explains
            return None
        if found is None or found[0] is not mesh:  # (a mesh since freed had its address)
            return None
        _, entry, parts = found
        device = entry.device
        host_buffer = calls.host_buffer
        outs = _execute(self._name, entry, [host_buffer(x, device) for x in leaves])
        return _tree_unflatten(entry.out_tree, calls.replayed(parts, outs))

    def _record_mesh_call(self, args, raw, mesh, entry, outs, results, flags) -> None:
        """Records how this call under ``mesh`` placed its ``results`` from the program's
        ``outs``, for :meth:`_call_on_mesh` to replay, when its argument leaves ``raw`` (as
        passed) are all of kinds it replays (:func:`plax.transforms.jit_mesh_calls.leaf_kinds`)."""
        calls = _mesh_calls[0] or _load_mesh_calls()
        kinds = calls.leaf_kinds(raw)
        if kinds is not None and entry.device.platform != "cpu" and \
                any(type(x) is Array and x._device is not entry.device for x in raw):
            return  # (a replay hands an uncommitted Array's own buffer to the program)
        parts = calls.recipe(outs, results) if kinds is not None else None
        if parts is None:
            return
        _, fast_tree, static_key = self._split_static(args)
        self._fast_cache[(fast_tree, kinds, static_key, _ON_MESH, id(mesh), flags)] = \
            (mesh, entry, parts)

    def _record_host_call(self, args, leaves, device, avals, entry, flags) -> None:
        """Records ``entry`` for :meth:`_call_host_leaves` when the argument ``leaves`` of
        this call are all host values or Arrays on ``device`` (:func:`_host_kinds`)."""
        kinds = _host_kinds(leaves, device)
        if kinds is not None:
            _, fast_tree, static_key = self._split_static(args)
            self._fast_cache[(fast_tree, kinds[0], static_key, _HOST_LEAVES, id(device),
                              flags)] = (entry, tuple(avals))

    def _split_static(self, args):
        """``(leaves, treedef, static_key)`` of a positional call's dynamic and static
        arguments as the fast caches key them; None when the static positions do not fit
        ``args`` (the general path resolves them)."""
        static_nums = self._static_nums
        if static_nums is None:
            return (*_tree_flatten(args), ())
        if not static_nums or static_nums[-1] >= len(args):
            return None
        return (*_tree_flatten(tuple([a for i, a in enumerate(args) if i not in static_nums])),
                tuple([(type(args[i]), args[i]) for i in static_nums]))

    def _call_general(self, args, kwargs, mesh=_LOOK_UP, unread=frozenset()):
        """Any call: resolves static arguments, devices and scalars; compiles on a miss.
        ``mesh``: the current mesh when the caller worked it out (:func:`_call_mesh`).
        ``unread``: argument leaves whose devices do not count (:meth:`_call_unread`)."""
        if (_trace_shared.active and trace_state.depth) or _flags["disable_jit"]:
            return self._call_traced(args, kwargs)
        if self.sig.any_static or kwargs:
            dyn_args, dyn_kwargs, static = self.sig.split(args, kwargs)
            tree_in = (dyn_args, dyn_kwargs)
        else:
            static = ()
            tree_in = (args, {})
        leaves, treedef = _tree_flatten(tree_in)
        # JAX 0.10 under a set mesh: arguments committed elsewhere refused, host ones
        # placed, results placed on the mesh. The mesh is worked out once per call, and is
        # None in plax's own eager work (internal_eager_work), as on the fast path.
        if mesh is _LOOK_UP:
            mesh = _call_mesh()
        on_mesh = mesh is not None
        if on_mesh:
            # (asked before the run: it writes the refs' final values)
            kept = self._check_context_mesh(leaves, treedef, static, len(args), mesh)
            from plax.sharding_device_typed import typed_with_no_mesh
            host_inputs = typed_with_no_mesh(leaves, mesh)  # (placed P() by JAX)
            from plax.transforms.jit_shardings import placed_on_context_mesh
            raw = leaves
            leaves = placed_on_context_mesh(leaves, mesh) or leaves
        device = self._device
        committed = device is not None
        avals = []
        all_arrays = True
        has_refs = False
        multi = False  # an argument of another Array kind (sharded, pending)
        first = None  # the leaf that committed the call to ``device``
        for i, x in enumerate(leaves):
            if isinstance(x, Array):  # sharded and pending arrays too (not the fast path's)
                if type(x) is not Array:
                    all_arrays = False
                    multi = True
                avals.append(x.aval)
                held = x
            else:
                all_arrays = False
                try:
                    avals.append(abstractify(x))
                except TypeError:
                    raise self._bad_argument(leaves, treedef, static, len(args)) from None
                if type(x) is not Ref:
                    continue
                has_refs = True
                held = x._value
                # a ref of a sharded value: the program may run per device on its blocks
                multi = multi or type(held) is not Array
                # JAX 0.10 commits a ref made off any mesh to its device: the call runs
                # there, its results committed, as a committed Array's would
                if type(held) is not Array or self._device is not None:
                    continue
            if held._committed and i not in unread:
                if committed and held._device != device:
                    if self._device is None:
                        return self._call_unread(args, kwargs, mesh, leaves, treedef, static,
                                                 unread, first, i)
                    leaves[i] = held = _moved(x, device)  # (an Array: refs stay as above)
                if first is None:
                    first = i
                device, committed = held._device, True
        if device is None:
            device = _default_device()
        flags = _trace_flags[0] or _current_trace_flags()
        # avals that differ only in their sharding are unequal (sharding in types), so the
        # key tells a body typed f32[8@x] from one typed f32[8]
        key = (treedef, tuple(avals), static, device, len(args), flags)
        entry = self._cache.get(key)
        if committed and not unread and self._device is None and not self._keep_unused:
            # only leaves the program does not read are committed: JAX 0.10 ignores them
            # (asked of the cached trace before compiling for their device)
            if entry is not None:
                skip = entry.unread
            else:
                from plax.transforms.jit_unread import unread_inputs
                skip = unread_inputs(self._trace(len(args), static, treedef, avals)[0])
            if skip and not _reads_committed(leaves, skip):
                return self._call_general(args, kwargs, mesh, skip)
        if entry is None:
            entry = self._compile(key, args, kwargs, leaves, treedef, avals, static, device)
        if has_refs:
            self._check_ref_aliasing(leaves, treedef, static, len(args), entry.closed)
        if entry.pinned is not None:  # per call: the cache key does not say committed
            check_pinned(entry.pinned, device, committed, "arguments committed")
            committed = True
        device = entry.device  # backend= may have picked a device of another platform
        if entry.ref_consts and not multi:
            multi = _sharded_ref(entry.ref_consts)
            if not multi and self._device is None:
                # closed-over refs are committed to their device as arguments are (above):
                # the call runs there (compiled for it once) and its results are committed
                ref_device = _closed_ref_device(
                    entry.ref_consts, device, committed,
                    None if first is None else lambda: self._described_leaf(
                        leaves, treedef, static, len(args), first))
                if ref_device is not None:
                    if ref_device is not device:
                        device = ref_device
                        key = (treedef, tuple(avals), static, device, len(args), flags)
                        entry = self._cache.get(key) or self._compile(
                            key, args, kwargs, leaves, treedef, avals, static, device)
                        device = entry.device
                    committed = True
        if all_arrays and not kwargs and entry.device is device and \
                not entry.float0_outputs and entry.pinned is None and not multi and \
                all(x._device is device for x in leaves) and self._fast_eligible(args):
            _, fast_tree, static_key = self._split_static(args)
            self._fast_cache[(fast_tree, tuple(avals), static_key, id(device), flags)] = entry
        elif not all_arrays and not on_mesh and not kwargs and entry.device is device and \
                not entry.float0_outputs and entry.pinned is None and not multi and \
                self._fast_eligible(args) and \
                all(a.sharding is None for a in entry.out_avals):  # (else _placed_as_typed)
            self._record_host_call(args, leaves, device, avals, entry, flags)
        if multi and not entry.float0_outputs:
            # explicit sharding: a blockwise program runs on every device on its own blocks
            from plax.sharding_spmd import run_partitioned
            parts = run_partitioned(entry.closed, leaves, entry.backend)
            if parts is not None:
                if on_mesh:  # host arguments' short type kept as JAX's rules keep it
                    from plax.sharding_eager import with_short_specs
                    parts = with_short_specs(parts, entry.closed.jaxpr, host_inputs)
                return _tree_unflatten(entry.out_tree, parts)
        bufs, lent = _lend_buffers(leaves, device, avals)
        outs = _unlent_outputs(_execute(self._name, entry, bufs), lent)
        if entry.float0_outputs:
            return _tree_unflatten(entry.out_tree,
                                   _wrap_outputs(outs, entry.out_avals, device, committed))
        new = Array._new
        out_arrays = [new(b, a, device, committed) for b, a in zip(outs, entry.out_avals)]
        if not all_arrays:
            out_arrays = _placed_as_typed(out_arrays)
            if multi:  # arguments over a mesh of Auto axes: the partitioner's layouts
                from plax.sharding_auto import place_jit_outputs
                out_arrays = place_jit_outputs(entry.closed, leaves, out_arrays)
        if on_mesh:  # results of a program with no argument on the mesh: placed on it
            from plax.sharding_eager import placed_results
            stay = None
            consts = entry.closed.consts
            const_marks = typed_with_no_mesh(consts, mesh) if consts else ()
            if not kept:  # an Explicit axis: some may stay on a committed argument's device
                from plax.sharding_device_typed import device_typed_outputs
                stay = device_typed_outputs(entry.closed.jaxpr, raw, mesh,
                                            unread | entry.unread, const_marks, host_inputs)
            if stay is not None and any(stay):
                from plax.sharding_device_typed import kept_on_device
                # (those staying are not placed on the mesh first: None is placed as None)
                placed = placed_results([None if s else o for o, s in zip(out_arrays, stay)],
                                        entry.closed.jaxpr, host_inputs, kept, mesh)
                out_arrays = kept_on_device(out_arrays, placed, stay, device, mesh)
            else:
                out_arrays = placed_results(out_arrays, entry.closed.jaxpr, host_inputs, kept,
                                            mesh, const_marks)
            # (any platform: what can be replayed -- each result holding the program's own
            # output buffer, as on a CPU mesh or a mesh of one device -- recipe decides)
            if not has_refs and not kwargs and \
                    entry.pinned is None and not entry.ref_consts and not lent and \
                    self._device is None and not self._donates and \
                    self._shardings is None and self._fast_eligible(args):
                self._record_mesh_call(args, raw, mesh, entry, outs, out_arrays, flags)
        if _checks[0]:  # jax_debug_nans / jax_debug_infs
            from plax.float_checks import check_jit_outputs
            check_jit_outputs(out_arrays, self._name, lambda: self._deoptimized(args, kwargs))
        return _tree_unflatten(entry.out_tree, out_arrays)

    def _deoptimized(self, args, kwargs):
        """The function run op by op, as if ``jit`` were removed (to find a NaN's source)."""
        with config.override("disable_jit", True):
            return self.fun(*args, **kwargs)

    def _bad_argument(self, leaves, treedef, static, nargs) -> Exception:
        """JAX's TypeError for the first argument leaf that is not an array (a string, an
        object of an unregistered class): it names the function and the argument's path.
        (An object with ``__jax_array__``: JAX 0.10's ValueError.)"""
        bad = next(i for i, x in enumerate(leaves)
                   if not isinstance(x, (Array, Tracer)) and _not_abstractable(x))
        from plax.errors import jax_array_operand
        refused = jax_array_operand(leaves[bad])
        if refused is not None:
            return refused
        path = _leaf_paths(self._transform, self.fun, treedef, static, nargs, len(leaves))[bad]
        return TypeError(
            f"Error interpreting argument to {self.fun!r} as an abstract array. The "
            f"problematic value is of type {type(leaves[bad])!r} and was passed to the function "
            f"at path {path}.\nThis typically means that a jit-wrapped function was called "
            "with a non-array argument, and this argument was not marked as static using the "
            "static_argnums or static_argnames parameters of jax.jit.")

    def _call_unread(self, args, kwargs, mesh, leaves, treedef, static, unread, i, j):
        """A call whose argument leaves ``i`` and ``j`` are committed to two devices: JAX's
        ValueError, unless (``keep_unused=False``) the program does not read one of them --
        JAX 0.10 then ignores the devices of the leaves it does not read
        (:mod:`plax.transforms.jit_unread`): the call again, with those ignored."""
        if not unread and not self._keep_unused:
            from plax.transforms.jit_unread import unread_inputs
            try:
                avals = [x.aval if isinstance(x, Array) else abstractify(x) for x in leaves]
            except TypeError:  # a bad argument: the loop reports it once past this
                avals = None
            if avals is not None:
                unread = unread_inputs(self._trace(len(args), static, treedef, avals)[0])
                if i in unread or j in unread:
                    return self._call_general(args, kwargs, mesh, unread)
        raise self._incompatible(leaves, treedef, static, len(args), i, j)

    def _incompatible(self, leaves, treedef, static, nargs, i, j) -> ValueError:
        """JAX's ValueError for argument leaves ``i`` and ``j`` (Arrays or refs) committed to
        two devices, naming each by its path as JAX does (``argument x['p'] of f``)."""
        from plax.sharding_eager import incompatible_arguments
        return incompatible_arguments(self._described_leaf(leaves, treedef, static, nargs, i),
                                      self._described_leaf(leaves, treedef, static, nargs, j))

    def _described_leaf(self, leaves, treedef, static, nargs, i) -> tuple:
        """``(what, aval, device)`` of argument leaf ``i`` (an Array or a ref committed to one
        device), ``what`` naming it by its path as JAX's errors do (``argument x['p'] of f``)."""
        qualname = getattr(self.fun, "__qualname__", None) or fun_name(self.fun)
        path = _leaf_paths(self._transform, self.fun, treedef, static, nargs, len(leaves))[i]
        x = leaves[i]
        device = x._value._device if type(x) is Ref else x._device
        return f"argument {path} of {qualname}", x.aval, device

    def _check_context_mesh(self, leaves, treedef, static, nargs, mesh) -> bool:
        """JAX's ValueError for an argument committed to one device other than the devices
        of ``mesh``, the current one (:func:`plax.sharding_eager.check_committed_devices`);
        returns whether the results stay on that device."""
        from plax.sharding_eager import check_committed_devices
        qualname = getattr(self.fun, "__qualname__", None) or fun_name(self.fun)

        def name_of(i):
            path = _leaf_paths(self._transform, self.fun, treedef, static, nargs,
                               len(leaves))[i]
            return f"argument {path} of {qualname}"

        return check_committed_devices(leaves, mesh, name_of)

    def _check_ref_aliasing(self, leaves, treedef, static, nargs, closed) -> None:
        """JAX's ValueErrors for one ref passed twice, or passed and also closed over: the
        program would read and write two copies of one ref."""
        static_pos = {k for k, _ in static if isinstance(k, int)}
        debug = DebugInfo(self._transform, self.fun, treedef, kwargs=True,
                          argnums=[i for i in range(nargs) if i not in static_pos])
        code = getattr(self.fun, "__code__", None)
        where = (f"{debug.func_name} at {code.co_filename}:{code.co_firstlineno}"
                 if code is not None else debug.func_name)
        first: dict = {}
        closed_over = {id(c) for c in closed.consts if type(c) is Ref}
        for i, x in enumerate(leaves):
            if type(x) is not Ref:
                continue
            if id(x) in closed_over:
                raise ValueError(f"when tracing {where} for jit, a mutable array reference of "
                                 f"type {x.aval} was both closed over and passed as the "
                                 f"argument {debug.arg_names()[i]}")
            if id(x) in first:
                names = debug.arg_names()
                raise ValueError(f"only one reference to a mutable array may be passed as an "
                                 f"argument to a function, but when tracing {where} for jit "
                                 f"the mutable array reference of type {x.aval} appeared at "
                                 f"both {names[first[id(x)]]} and {names[i]}.")
            first[id(x)] = i

    def _fast_eligible(self, args) -> bool:
        """Whether calls like this one (positional, no kwargs) can take the fast path."""
        nums = self._static_nums
        return nums is None or (bool(nums) and nums[-1] < len(args))

    def _trace(self, nargs, static, treedef, avals):
        """``(closed, out_tree, captured)`` for the function on abstract inputs (cached).

        ``closed`` takes the ``captured`` values first: the tracers of enclosing transforms
        the function closed over (a jaxpr never holds a tracer as a constant). A trace that
        captured some belongs to this call alone and is not cached.
        """
        # trace_context(): e.g. the sizes of the axis names bound around this trace, which a
        # collective in the function bakes into its jaxpr (not needed on the compiled paths:
        # with no transform active nothing is bound)
        key = (treedef, tuple(avals), static, nargs, _trace_flags[0] or _current_trace_flags(),
               trace_context())
        hit = self._jaxpr_cache.get(key)
        if hit is not None:
            return hit
        if _flags["explain_cache_misses"]:
            from plax.transforms.jit_logging import explain_miss
            explain_miss(self.fun, DebugInfo(self._transform, self.fun, treedef, kwargs=True),
                         key, list(self._jaxpr_cache))
        start = time.perf_counter()
        out_box = []

        def flat_fun(*leaves):
            dyn_args, dyn_kwargs = _tree_unflatten(treedef, leaves)
            full_args, full_kwargs = self.sig.merge(nargs, dyn_args, dyn_kwargs, static)
            out = self.fun(*full_args, **full_kwargs)
            out_leaves, out_tree = _tree_flatten(out)
            out_box.append(out_tree)
            return out_leaves

        static_pos = {k for k, _ in static if isinstance(k, int)}
        debug = DebugInfo(self._transform, self.fun, treedef, kwargs=True,
                          argnums=[i for i in range(nargs) if i not in static_pos])
        where = f"jitted function {getattr(self.fun, '__name__', 'the jitted function')!r}"
        traced, _ = trace_to_jaxpr(flat_fun, avals, where=where, debug=debug)
        if self._transform == "jit":
            _check_no_ref_outputs(traced, debug)
        # Refs the function closed over stay constants here (a compiled program reads and
        # writes them); a call equation takes them as operands (see _bind_call).
        closed, captured = convert_tracer_consts(traced.jaxpr, traced.consts, move_refs=False)
        if _flags["enable_checks"]:
            from plax.core.typecheck import check_jaxpr
            check_jaxpr(closed.jaxpr)
        if _flags["log_compiles"]:
            from plax.transforms.jit_logging import log_trace
            log_trace(self._name, time.perf_counter() - start)
        if _profile[0] is not None:
            _profile[0].add(f"trace {self._name}", "trace", int(start * 1e9),
                            time.perf_counter_ns())
        result = (closed, out_box[0], captured)
        if not captured:
            self._jaxpr_cache[key] = result
        return result

    def _compile(self, key, args, kwargs, leaves, treedef, avals, static, device):
        """The cache entry of ``key``, compiled now, or by another thread compiling it
        already (this one waits for it). An entry enters the cache only when complete."""
        me = threading.get_ident()
        while True:
            with self._lock:
                entry = self._cache.get(key)
                if entry is not None:
                    return entry
                claim = self._compiling.get(key)
                if claim is None:
                    claim = self._compiling[key] = (threading.Event(), me)
                    break
                if claim[1] == me:  # re-entered from its own compile: no claim to wait for
                    claim = None
                    break
            claim[0].wait()  # then its entry is cached, or it failed: this thread tries
        try:
            return self._compile_now(key, args, leaves, treedef, avals, static, device)
        finally:
            if claim is not None:
                with self._lock:
                    del self._compiling[key]
                claim[0].set()

    def _compile_now(self, key, args, leaves, treedef, avals, static, device):
        closed, out_tree, _ = self._trace(len(args), static, treedef, avals)
        # a call inside pinned to a device (jit(g, device=d) called by f): as in JAX, the
        # program runs there (arguments committed elsewhere are an error: _call_general)
        pinned = pinned_device(closed)
        check_pinned(pinned, device, self._device is not None, "jit device")
        explicit = pinned if pinned is not None else self._device
        backend, device = call_target(explicit, self._backend_name, device)
        start = time.perf_counter()
        compiled = compile_closed(closed, backend, device)
        if _flags["log_compiles"]:
            from plax.transforms.jit_logging import log_compile
            log_compile(self._name, avals, backend.name, time.perf_counter() - start)
        if _profile[0] is not None:
            _profile[0].add(f"compile jit({self._name})", "compile", int(start * 1e9),
                            time.perf_counter_ns(), {"backend": backend.name, "device": device})
        entry = _CacheEntry(compiled.executable, compiled.const_bufs, out_tree,
                            compiled.out_avals, closed, device, backend, pinned)
        if not self._keep_unused:
            from plax.transforms.jit_unread import unread_inputs
            entry.unread = unread_inputs(closed)
        with self._lock:
            self._cache[key] = entry
        return entry

    def _call_traced(self, args, kwargs):
        """Inside a transform: bind one ``jit`` equation calling the cached jaxpr (with jit
        disabled: call the function itself)."""
        if _flags["disable_jit"]:
            return self.fun(*args, **kwargs)
        dyn_args, dyn_kwargs, static = self.sig.split(args, kwargs)
        leaves, treedef = _tree_flatten((dyn_args, dyn_kwargs))
        return self._bind_call(len(args), leaves, treedef, static)

    def _bind_call(self, nargs, leaves, treedef, static):
        try:
            avals = [_leaf_aval(x) if not isinstance(x, Tracer) else x.aval for x in leaves]
        except TypeError:
            raise self._bad_argument(leaves, treedef, static, nargs) from None
        closed, out_tree, captured = self._trace(nargs, static, treedef, avals)
        leaves = [x if isinstance(x, (Array, Tracer)) else from_host(x) for x in leaves]
        if closed.consts:  # refs it closed over: trailing operands of the call, as in JAX
            from plax.state.discharge import hoist_ref_consts
            closed, refs = hoist_ref_consts(closed, trailing=True)
            leaves += refs
        # jit(f, device=..., backend=...): the call says where it runs, through every
        # transform of it (plax.transforms.call)
        placement = {k: v for k, v in (("device", self._device), ("backend", self._backend_name))
                     if v is not None}
        # JAX's ctx_mesh= (only while a mesh is set: nothing changes otherwise)
        placement.update(context_mesh_params())
        if self._inline:  # jit(inline=True): the body's equations, not a call (as JAX)
            from plax.core.interpret import jaxpr_as_fun
            if _in_reverse_mode(leaves):
                # JAX partially evaluates the call there, then inlines it: the body's
                # equations whose results nothing reads are gone
                from plax.core.passes import dce
                closed = ClosedJaxpr(dce(closed.jaxpr), closed.consts)
            return _tree_unflatten(out_tree, jaxpr_as_fun(closed)(*captured, *leaves))
        if self._shardings is not None:  # in_shardings=/out_shardings=, recorded as JAX does
            placement.update(self._sharding_params(captured, leaves, treedef, out_tree,
                                                   closed))
        if self._donates:  # donated_invars=, as JAX records it
            donated = _donated_leaves(self, nargs, static, treedef)
            if any(donated):
                placement["donated_invars"] = ((False,) * len(captured) + tuple(donated)
                                               + (False,) * (len(leaves) - len(donated)))
        if self._keep_unused:
            placement["keep_unused"] = True
        outs = jit_p.bind(*captured, *leaves, jaxpr=closed, name=self._name, **placement)
        return _tree_unflatten(out_tree, outs)

    def _sharding_params(self, captured, leaves, treedef, out_tree, closed) -> dict:
        """The ``in_shardings``/``out_shardings`` parameters of this call's equation: an
        entry per operand (captured values and trailing refs unspecified) and per result."""
        from plax.transforms.jit_shardings import UNSPECIFIED, call_params
        dyn_args, dyn_kwargs = _tree_unflatten(treedef, leaves[:treedef.num_leaves])
        n_kw = len(_tree_flatten(dyn_kwargs)[0])
        ins = ((UNSPECIFIED,) * len(captured)
               + self._shardings.in_params(tuple(dyn_args), n_kw)
               + (UNSPECIFIED,) * (len(leaves) - treedef.num_leaves))
        outs = self._shardings.out_params(_tree_unflatten(out_tree, list(closed.out_avals)))
        return call_params(ins, outs)

    def _call_or_inline(self, args, kwargs):
        """Under a transform, a call equation if the arguments allow one (arrays and scalars
        where they are traced, hashable values where they are static), else the function
        itself: how a library function jitted for the jaxpr's sake stays as permissive as
        its eager form."""
        if _flags["disable_jit"]:
            return self.fun(*args, **kwargs)
        try:
            dyn_args, dyn_kwargs, static = self.sig.split(args, kwargs)
        except ValueError:  # an unhashable static argument
            return self.fun(*args, **kwargs)
        leaves, treedef = _tree_flatten((dyn_args, dyn_kwargs))
        for x in leaves:
            if not isinstance(x, ARRAYLIKE_TYPES):
                return self.fun(*args, **kwargs)
        return self._bind_call(len(args), leaves, treedef, static)

    # ---- introspection
    def lower(self, *args, **kwargs) -> "Lowered":
        """Traces for these arguments (arrays or ShapeDtypeStructs) without running anything."""
        dyn_args, dyn_kwargs, static = self.sig.split(args, kwargs)
        leaves, treedef = _tree_flatten((dyn_args, dyn_kwargs))
        try:
            avals = [abstractify(x) for x in leaves]
        except TypeError:
            raise self._bad_argument(leaves, treedef, static, len(args)) from None
        closed, out_tree, _ = self._trace(len(args), static, treedef, avals)
        return Lowered(self, closed, out_tree, treedef, static, len(args))

    def trace(self, *args, **kwargs) -> "Lowered":
        """Like :meth:`lower` (plax has one IR): the result has ``.jaxpr`` and ``.lower()``."""
        return self.lower(*args, **kwargs)

    def eval_shape(self, *args, **kwargs):
        """The output shapes and dtypes as ShapeDtypeStructs, without running."""
        return self.lower(*args, **kwargs).out_info

    def _cache_size(self) -> int:
        """The number of compiled signatures (of this function with these options)."""
        return len(self._cache)

    def clear_cache(self) -> None:
        """Forgets all traces and compiled executables of this function (with these options,
        for every wrapper of it)."""
        self._cache.clear()
        self._fast_cache.clear()
        self._jaxpr_cache.clear()

    def __repr__(self) -> str:
        return f"<PjitFunction of {self.fun!r}>"

    def __get__(self, obj, objtype=None):
        if obj is None:
            return self
        return functools.partial(self, obj)


def _in_reverse_mode(leaves) -> bool:
    """Whether an argument carries a tangent staged for transposition (``grad``, ``vjp``)."""
    from plax.transforms.jvp import JVPTracer
    from plax.transforms.staging import is_linearize_tracer
    return any(type(x) is JVPTracer and is_linearize_tracer(x.tangent) for x in leaves)


def jit_when_traced(fun: Callable | None = None, *, name: str | None = None,
                    static_argnames: str | Iterable[str] | None = None) -> Callable:
    """Makes a library function show in jaxprs as one ``jit`` call, as JAX's jitted
    ``jax.numpy`` functions do, at no eager cost.

    With no transform active the wrapper calls ``fun`` directly (one integer test more).
    Under a transform it binds a ``jit`` equation named ``name`` (default: the function's
    name), arguments in ``static_argnames`` static; calls whose arguments cannot be traced
    or hashed run ``fun`` inline instead.

    Example:
      >>> @jit_when_traced(name="_where")
      ... def _where(condition, x, y): ...
    """
    if fun is None:
        return functools.partial(jit_when_traced, name=name, static_argnames=static_argnames)
    jitted = JitFunction(fun, None, static_argnames, None, None, None, False, False)
    if name is not None:
        jitted._name = name
    state, shared = trace_state, _trace_shared

    @functools.wraps(fun)
    def traced_as_jit(*args, **kwargs):
        if shared.active == 0 or state.depth == 0:  # eager: the function, no jit machinery
            return fun(*args, **kwargs)
        return jitted._call_or_inline(args, kwargs)

    traced_as_jit._jitted = jitted
    return traced_as_jit


def _check_no_ref_outputs(closed: ClosedJaxpr, debug: DebugInfo) -> None:
    """JAX's ValueError for a jitted function that returns a mutable array reference."""
    from plax.state.types import is_ref_aval
    jaxpr = closed.jaxpr
    for v in jaxpr.outvars:
        if not is_ref_aval(v.aval):
            continue
        code = getattr(debug.fun, "__code__", None)
        where = f" at {code.co_filename}:{code.co_firstlineno}" if code is not None else ""
        msg = (f"function {debug.func_name}{where} traced for jit returned a mutable array reference "
               f"of type {v.aval}, but mutable array references cannot be returned.")
        if v in jaxpr.invars:
            try:
                name = debug.arg_names()[jaxpr.invars.index(v)]
                msg += f"\n\nThe returned mutable array was passed in as the argument {name}."
            except Exception:  # noqa: BLE001 -- the message must not fail itself
                pass
        elif v in jaxpr.constvars:
            msg += "\n\nThe returned mutable array was closed over by the function."
        else:
            msg += "\n\nThe returned mutable array was created inside the function."
        raise ValueError(msg)


def _moved(x: Array, device) -> Array:
    return Array._new(x._buffer_on(device), x.aval, device, True)


class Lowered:
    """A traced jit function for one signature: ``.as_text()``, ``.compile()``, ``.jaxpr``."""

    def __init__(self, jitted: JitFunction, closed: ClosedJaxpr, out_tree, in_tree, static, nargs):
        self._jitted = jitted
        self.jaxpr = closed
        self.out_tree = out_tree
        self.in_tree = in_tree
        self._static = static
        self._nargs = nargs

    @property
    def out_info(self):
        """The outputs as ShapeDtypeStructs, sharded as ``out_shardings`` or their types say
        (:func:`plax.transforms.jit_shardings.out_info`)."""
        from plax.transforms.jit_shardings import out_info
        return out_info(self._jitted, self.out_tree, self.jaxpr.out_avals)

    @property
    def args_info(self):
        """The dynamic arguments as JAX's ``Lowered.args_info`` gives them: the pytree
        ``(args, kwargs)`` (static arguments left out) of :class:`plax.stages.ArgInfo`, each
        leaf's abstract value and whether it is donated (``donate_argnums``/
        ``donate_argnames``, resolved against the signature as JAX does).

        Example:
          >>> f = jax.jit(lambda x, y: x * y, donate_argnums=0)
          >>> f.lower(jnp.ones(3), 2.0).args_info[0][0].donated
          True
        """
        from plax.stages import ArgInfo
        donated = _donated_leaves(self._jitted, self._nargs, self._static, self.in_tree)
        return _tree_unflatten(self.in_tree, [ArgInfo(a, d) for a, d in
                                              zip(self.jaxpr.in_avals, donated)])

    @property
    def in_avals(self):
        """The dynamic arguments' abstract values, as the pytree ``(args, kwargs)``."""
        return _tree_unflatten(self.in_tree, list(self.jaxpr.in_avals))

    @property
    def out_avals(self):
        """The outputs' abstract values, in the outputs' pytree."""
        return _tree_unflatten(self.out_tree, list(self.jaxpr.out_avals))

    @property
    def fun_name(self) -> str:
        """The traced function's name."""
        return fun_name(self._jitted.fun)

    @property
    def donate_argnums(self) -> tuple[int, ...]:
        """The positions, among the flattened dynamic arguments, of the donated leaves (as
        JAX's ``Lowered.donate_argnums``)."""
        donated = _donated_leaves(self._jitted, self._nargs, self._static, self.in_tree)
        return tuple(i for i, d in enumerate(donated) if d)

    def as_text(self, dialect: str | None = None) -> str:
        """The jaxpr as text (plax's one IR)."""
        return str(self.jaxpr)

    def compiler_ir(self, dialect: str | None = None) -> ClosedJaxpr:
        """The program in the compiler's IR: plax's is the jaxpr (a :class:`ClosedJaxpr`).

        Args:
          dialect: None or ``"jaxpr"``.

        Raises:
          ValueError: another dialect (``"stablehlo"``, ``"hlo"``: plax has no XLA).

        Example:
          >>> jax.jit(jnp.sin).lower(1.0).compiler_ir().eqns[0].primitive.name
          'sin'
        """
        if dialect in (None, "jaxpr"):
            return self.jaxpr
        if dialect in ("stablehlo", "hlo", "mhlo"):
            raise ValueError(f"plax has no {dialect} IR (it does not use XLA): its one IR is "
                             "the jaxpr, compiler_ir() or compiler_ir('jaxpr')")
        raise ValueError(f"unknown dialect: {dialect}")

    def compile(self) -> "Compiled":
        """A callable for exactly this signature."""
        return Compiled(self)

    def lower(self) -> "Lowered":
        return self

    def cost_analysis(self) -> dict:
        """XLA-style costs of this program: ``"flops"``, ``"transcendentals"``, ``"bytes
        accessed"`` and per-operand bytes, summed over the jaxpr's equations.

        Provided by the plugin package ``plax-cost-analysis`` (``plax.experimental.
        cost_analysis``); without it, an AttributeError says how to install it.

        Example:
          >>> jax.jit(jnp.sin).lower(jnp.ones(3)).cost_analysis()["transcendentals"]
          3.0
        """
        from plax import plugins
        return plugins.lookup("experimental.cost_analysis").cost_of(self.jaxpr)


def _donated_leaves(jitted: "JitFunction", nargs: int, static, in_tree) -> list[bool]:
    """Per leaf of the dynamic arguments ``(args, kwargs)``: whether ``donate_argnums`` or
    ``donate_argnames`` names its argument. As in JAX, numbers and names resolve to each
    other through the signature (a positional parameter given by keyword is donated by its
    number too); negative numbers donate nothing."""
    nums = {i for i in jitted.donate_argnums if i >= 0}
    names = set(jitted.donate_argnames)
    if not nums and not names:
        return [False] * in_tree.num_leaves
    sig = jitted.sig.sig
    positional = [] if sig is None else [
        p.name for p in sig.parameters.values()
        if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    static_pos = {k for k, _ in static if isinstance(k, int)}
    # the leaves' own positions, so each argument's leaves are found in its subtree
    args, kwargs = _tree_unflatten(in_tree, list(range(in_tree.num_leaves)))
    flags = [False] * in_tree.num_leaves
    dyn_pos = [i for i in range(nargs) if i not in static_pos]
    for i, arg in zip(dyn_pos, args):
        if i in nums or (i < len(positional) and positional[i] in names):
            for leaf in tree_util.tree_leaves(arg):
                flags[leaf] = True
    for k, arg in kwargs.items():
        if k in names or (k in positional and positional.index(k) in nums):
            for leaf in tree_util.tree_leaves(arg):
                flags[leaf] = True
    return flags


class Compiled:
    """The compiled executable of a :class:`Lowered`; call it with matching arguments."""

    def __init__(self, lowered: Lowered):
        self._lowered = lowered
        self._executable = None

    @property
    def args_info(self):
        """The arguments it was compiled for (:attr:`Lowered.args_info`)."""
        return self._lowered.args_info

    @property
    def out_info(self):
        """Its outputs as ShapeDtypeStructs (:attr:`Lowered.out_info`)."""
        return self._lowered.out_info

    in_tree = property(lambda self: self._lowered.in_tree,
                       doc="The treedef of the dynamic arguments ``(args, kwargs)``.")
    out_tree = property(lambda self: self._lowered.out_tree, doc="The outputs' treedef.")
    in_avals = property(lambda self: self._lowered.in_avals,
                        doc="The dynamic arguments' abstract values (:attr:`Lowered.in_avals`).")
    donate_argnums = property(lambda self: self._lowered.donate_argnums,
                              doc="The donated leaves (:attr:`Lowered.donate_argnums`).")

    @property
    def input_shardings(self):
        """The sharding of each dynamic argument, as the pytree ``(args, kwargs)``: its
        ``in_shardings`` entry where the jit has one, else its type's sharding on a mesh of
        Explicit axes, else a SingleDeviceSharding on the device the program runs on.

        Example:
          >>> args, kwargs = jax.jit(jnp.sin).lower(jnp.ones(2)).compile().input_shardings
          >>> args[0].device_set, kwargs
          ({CpuDevice(id=0)}, {})
        """
        from plax.transforms.jit_shardings import UNSPECIFIED, _type_sharding
        lowered = self._lowered
        avals = list(lowered.jaxpr.in_avals)
        entries = [None] * len(avals)
        shardings = lowered._jitted._shardings
        if shardings is not None and shardings.in_shardings is not None:
            args, kwargs = _tree_unflatten(lowered.in_tree, avals)
            entries = [None if e is UNSPECIFIED else e for e in
                       shardings.in_params(args, len(tree_util.tree_leaves(kwargs)))]
        return _tree_unflatten(lowered.in_tree, [
            self._sharding_of(e if e is not None else _type_sharding(a))
            for a, e in zip(avals, entries)])

    @property
    def output_shardings(self):
        """The sharding of each output, in the outputs' pytree (as :attr:`input_shardings`
        decides: ``out_shardings``, the type's, else the program's device).

        Example:
          >>> jax.jit(jnp.sin).lower(jnp.ones(2)).compile().output_shardings.device_set
          {CpuDevice(id=0)}
        """
        # (out_info already holds each output's out_shardings entry or its type's sharding)
        leaves, tree = _tree_flatten(self._lowered.out_info)
        return _tree_unflatten(tree, [self._sharding_of(s.sharding) for s in leaves])

    def _sharding_of(self, given):
        """A sharding object for ``given`` (a Sharding, a PartitionSpec over the current mesh,
        or None: the device the program runs on)."""
        from plax.sharding import NamedSharding, PartitionSpec, SingleDeviceSharding, get_mesh
        if given is None:
            return SingleDeviceSharding(self._target()[1])
        return NamedSharding(get_mesh(), given) if isinstance(given, PartitionSpec) else given

    def memory_analysis(self):
        """The bytes the program takes: arguments, outputs, donated-and-aliased inputs,
        temporaries (from the jaxpr's value lifetimes: an upper bound), generated code.

        Returns:
          A :class:`plax.stages.CompiledMemoryStats`.

        Example:
          >>> c = jax.jit(lambda x: x * 2).lower(jnp.ones(4)).compile()
          >>> c.memory_analysis().output_size_in_bytes
          16
        """
        from plax.transforms.memory_analysis import analyse
        lowered = self._lowered
        donated = _donated_leaves(lowered._jitted, lowered._nargs, lowered._static,
                                  lowered.in_tree)
        return analyse(lowered.jaxpr, donated, len(self.as_text().encode()))

    def runtime_executable(self):
        """The backend's executable object (what the backend's ``compile`` returned)."""
        return self._compiled_executable()

    @staticmethod
    def call(compiled: "Compiled", *args, **kwargs):
        """``compiled(*args, **kwargs)`` (JAX's ``Compiled.call``)."""
        return compiled(*args, **kwargs)

    def __call__(self, *args, **kwargs):
        """Runs the program on the dynamic arguments only: as in JAX, the static arguments
        were fixed when it was traced and are not passed again."""
        lowered = self._lowered
        leaves, treedef = _tree_flatten((args, kwargs))
        if treedef != lowered.in_tree:
            raise TypeError(f"Function compiled with input pytree does not match the input "
                            f"pytree it was called with: it was compiled for "
                            f"{lowered.in_tree} and called with {treedef}.")
        for i, x in enumerate(leaves):
            if isinstance(x, Array) and x.is_deleted():
                # what XLA says of a deleted (or donated) buffer handed to an executable
                raise ValueError(f"INVALID_ARGUMENT: Invalid buffer passed to Execute() as "
                                 f"argument {i} to replica 0: INVALID_ARGUMENT: Buffer has "
                                 f"been deleted or donated.")
        try:
            got = [abstractify(x) for x in leaves]
        except TypeError:
            raise lowered._jitted._bad_argument(leaves, treedef, lowered._static,
                                                lowered._nargs) from None
        want = lowered.jaxpr.in_avals
        bad = [i for i, (g, w) in enumerate(zip(got, want))
               if (g.shape, g.dtype) != (w.shape, w.dtype)]
        if bad:
            raise TypeError(self._type_mismatch(bad, got, want, treedef))
        if any(g.weak_type != w.weak_type for g, w in zip(got, want)):
            # the program's types are those it was compiled for (a Python scalar passed
            # where a ShapeDtypeStruct traced a strong int32 gives a strong result)
            from plax import lax
            leaves = [lax.convert_element_type(x, w.dtype, w.weak_type)
                      if g.weak_type != w.weak_type else x
                      for x, g, w in zip(leaves, got, want)]
            args, kwargs = _tree_unflatten(treedef, leaves)
        full_args, full_kwargs = lowered._jitted.sig.merge(lowered._nargs, args, kwargs,
                                                           lowered._static)
        return lowered._jitted(*full_args, **full_kwargs)

    def _type_mismatch(self, bad, got, want, treedef) -> str:
        """JAX's message for arguments of other types than compiled for, one line each."""
        from plax.transforms.donation import long_type
        lowered = self._lowered
        names = _leaf_paths("jit", lowered._jitted.fun, treedef, lowered._static,
                            lowered._nargs, len(got))
        lines = [f"Argument '{names[i]}' compiled with {long_type(want[i])} and called with "
                 f"{long_type(got[i])}" for i in bad]
        return ("Argument types differ from the types for which this computation was "
                "compiled. Perhaps you are calling the compiled executable with a different "
                "enable_x64 mode than when it was AOT compiled? The mismatches are:\n"
                + "\n".join(lines))

    def as_text(self) -> str:
        """The executable's generated code, as its backend wrote it for the target device
        (see :func:`plax.backend.executable_text`: the NumPy backend's straight-line Python,
        the Numba backend's program and fused kernels); the jaxpr where the backend's
        executable has no text."""
        text = executable_text(self._compiled_executable())
        return text if text is not None else self._lowered.as_text()

    def cost_analysis(self) -> dict:
        """The costs of :meth:`Lowered.cost_analysis` (plax counts the program as traced, not
        after a backend's optimisations)."""
        return self._lowered.cost_analysis()

    def _target(self):
        """``(backend, device)`` the program runs on: the jit's, else the default."""
        jitted = self._lowered._jitted
        pinned = pinned_device(self._lowered.jaxpr)
        explicit = pinned if pinned is not None else jitted._device
        return call_target(explicit, jitted._backend_name,
                           explicit if explicit is not None else _default_device())

    def _compiled_executable(self):
        """The backend executable for the jit's device and backend (compiled once)."""
        if self._executable is None:
            backend, device = self._target()
            self._executable = compile_closed(self._lowered.jaxpr, backend, device).executable
        return self._executable


class _NotGiven:
    """The default of jit's ``fun``: ``jit(static_argnums=...)`` returns a decorator, while an
    explicit ``jit(None)`` is an error, as in JAX."""

    def __repr__(self) -> str:
        return "<not given>"


_NOT_GIVEN = _NotGiven()


def jit(fun: Callable = _NOT_GIVEN, *, in_shardings=None, out_shardings=None,
        static_argnums: int | Sequence[int] | None = None,
        static_argnames: str | Iterable[str] | None = None,
        donate_argnums: int | Sequence[int] | None = None,
        donate_argnames: str | Iterable[str] | None = None, keep_unused: bool = False,
        device=None, backend: str | None = None, inline: bool = False,
        abstracted_axes=None, compiler_options: dict[str, Any] | None = None) -> Any:
    """Compiles ``fun``: traced once per argument signature, executed by a backend.

    Args:
      fun: the function (arrays and pytrees in and out). Usable as ``@jit`` or
        ``@partial(jit, static_argnums=...)``.
      static_argnums / static_argnames: arguments treated as compile-time constants
        (hashable; each new value retraces).
      donate_argnums: arguments given up to the call, as in JAX: each one an output of its
        shape and dtype could alias is deleted afterwards (using it raises RuntimeError);
        the rest warn "Some donated buffers were not usable". Memory is not reused.
      device: the device to run on (default: where committed arguments live, else the
        default device).
      backend: a backend name such as ``"numpy"`` (see ``plax.plugins.info()`` for those
        installed) or a platform (``"cpu"``, ``"gpu"``).
      compiler_options: JAX's XLA compiler flags (a dict of names to values). plax compiles
        without XLA, so they are checked to be a dict and have no effect.

    ``device`` and ``backend`` hold under every transform of the function (``vmap``,
    ``grad``, ``jvp``, an enclosing ``jit``): its call equation carries them. As in JAX, a
    jitted function that calls one pinned to a device runs on that device.

    Inside another transform the function is not compiled on its own: it becomes one
    ``jit`` equation of the enclosing computation (see :mod:`plax.transforms.call`).

    Returns:
      A :class:`JitFunction` with ``lower``, ``trace``, ``eval_shape`` and ``clear_cache``.

    Example:
      >>> selu = jax.jit(lambda x: 1.05 * jnp.where(x > 0, x, 1.67 * jnp.exp(x) - 1.67))
      >>> selu(jnp.array([-1.0, 1.0]))
      Array([-1.1084235,  1.05     ], dtype=float32)
    """
    _check_jit_args(fun, static_argnums, static_argnames, donate_argnums, donate_argnames,
                    fun_given=fun is not _NOT_GIVEN)
    if compiler_options is not None and not isinstance(compiler_options, dict):
        raise TypeError(f"jit: compiler_options must be a dict of XLA option names to values, "
                        f"got {type(compiler_options).__name__}")
    if fun is _NOT_GIVEN:
        return functools.partial(jit, in_shardings=in_shardings, out_shardings=out_shardings,
                                 static_argnums=static_argnums, static_argnames=static_argnames,
                                 donate_argnums=donate_argnums, donate_argnames=donate_argnames,
                                 keep_unused=keep_unused, device=device, backend=backend,
                                 inline=inline, abstracted_axes=abstracted_axes)
    if device is not None:
        from plax.device import resolve_device
        device = resolve_device(device)
    jitted = JitFunction(fun, static_argnums, static_argnames, donate_argnums, device, backend,
                         inline, keep_unused)
    if donate_argnames is not None:
        jitted.donate_argnames = tuple(_as_tuple(donate_argnames))
    jitted._donates = bool(jitted.donate_argnames or
                           any(i >= 0 for i in jitted.donate_argnums))
    if in_shardings is not None or out_shardings is not None:
        from plax.transforms.jit_shardings import JitShardings
        jitted._shardings = JitShardings(in_shardings, out_shardings)
    return jitted


def make_jaxpr(fun: Callable, static_argnums: int | Sequence[int] = (), axis_env=None,
               return_shape: bool = False, abstracted_axes=None) -> Callable:
    """A function that returns the jaxpr of ``fun`` for given example arguments.

    Args:
      fun: the function to trace.
      static_argnums: positional arguments that are Python values baked into the jaxpr.
      axis_env: ``[(name, size), ...]``: axis names to bind while tracing, so that ``fun``
        may use collectives over them (``lax.psum(x, "i")``) outside pmap/shard_map.
      return_shape: also return the outputs' ``ShapeDtypeStruct`` tree.
      abstracted_axes: accepted and ignored (plax has no dynamic shapes).

    Returns:
      A function taking ``fun``'s arguments and returning a ClosedJaxpr (and the shapes).

    Example:
      >>> print(jax.make_jaxpr(lambda x: jnp.sin(x) * 2.0)(1.0))
      { lambda ; a:f32[]. let b:f32[] = sin a; c:f32[] = mul b 2.0:f32[] in (c,) }
    """
    jitted = JitFunction(fun, static_argnums, None, None, None, None, False, False,
                         transform="make_jaxpr")
    bound = dict(axis_env) if axis_env else None

    @functools.wraps(fun)
    def make(*args, **kwargs):
        from plax.core.axis_env import axis_env as binding
        with binding(bound) if bound else contextlib.nullcontext():
            lowered = jitted.lower(*args, **kwargs)
        if return_shape:
            return lowered.jaxpr, lowered.out_info
        return lowered.jaxpr

    return make


def eval_shape(fun: Callable, *args, **kwargs):
    """The output shapes and dtypes of ``fun(*args, **kwargs)`` without computing anything.

    Arguments may be arrays or ShapeDtypeStructs.

    Example:
      >>> jax.eval_shape(jnp.dot, jax.ShapeDtypeStruct((2, 3), jnp.float32),
      ...                jax.ShapeDtypeStruct((3,), jnp.float32))
      ShapeDtypeStruct(shape=(2,), dtype=float32)
    """
    if isinstance(fun, JitFunction):  # its own in/out shardings apply (JAX traces it)
        return fun.eval_shape(*args, **kwargs)
    return JitFunction(fun, None, None, None, None, None, False, False,
                       transform="eval_shape").eval_shape(*args, **kwargs)


_mesh_calls: list = [None]  # plax.transforms.jit_mesh_calls, loaded by the first call on a mesh


def _load_mesh_calls():
    import plax.transforms.jit_mesh_calls as module
    _mesh_calls[0] = module
    return module


def _call_mesh():
    """The mesh a top-level call is placed on and checked against
    (:func:`plax.sharding_eager.current_mesh`): None when none is set (one flag read) or
    the running thread does plax's own eager work."""
    if not _mesh_maybe_set[0]:
        return None
    import plax.sharding_eager as eager  # (loaded once a mesh is set: a module look-up)
    return eager.current_mesh()


def _placed_as_typed(results: list) -> list:
    """Outputs whose type carries an explicit sharding (computed on one device) placed as
    that sharding says, so ``jit(f)(x).sharding`` is what JAX gives."""
    if not any(r.aval.sharding is not None for r in results):
        return results
    from plax.device import _shard_leaf
    from plax.sharding_eager import replica_on_host
    from plax.transforms.jit_shardings import with_weak_type
    out = []
    for r in results:
        s = r.aval.sharding
        if s is not None:  # (replicated over CPU devices: one buffer they all hold)
            placed = replica_on_host(r, s)
            r = placed if placed is not None else \
                with_weak_type(_shard_leaf(r, s), r.aval.weak_type)
        out.append(r)
    return out
