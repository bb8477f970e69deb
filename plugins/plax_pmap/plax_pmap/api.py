"""``pmap`` and ``shard_map``: one program, run once per device.

Both have two ways to run, with the same results:

* **Op by op** (``shard_map`` called with concrete arrays outside every transform, in one
  process): the body runs eagerly on every device's blocks, as JAX's does
  (:mod:`plax_pmap.eager_shard_map`), so ``print`` inside it shows the blocks.
* **On the devices** (``pmap`` called with concrete arrays outside every transform, and
  ``shard_map`` over a mesh spanning processes): the
  per-device function is traced once per signature with its axis names bound, its
  collectives brought to the top level (``jit`` calls holding collectives are inlined), and
  :mod:`plax_pmap.runtime` runs it on one thread per device. The results stay sharded:
  output ``i`` of pmap lives on device ``i`` (an :class:`~plax.sharding.IndexMapSharding`),
  shard_map's outputs carry a :class:`~plax.sharding.NamedSharding` of ``out_specs``.
* **As a vmap** (the call is made under ``grad``, ``jit``, ``vmap`` or inside another pmap,
  or a collective sits inside ``lax.cond``/``scan``/``while_loop``): the function is
  vectorised with ``vmap(axis_name=...)`` -- the collectives' batching rules give them
  their meaning -- on one device, so every transform composes with it. Eager results are
  then placed on the devices as above.
"""
from __future__ import annotations

import functools
import math
import warnings
from typing import Any, Callable, Hashable, Sequence

import numpy as np

import plax
from plax import float_checks, tree_util
from plax.array import Array, from_buffer, from_device_buffers
from plax.core import trace as _trace
from plax.core import varying as _varying
from plax.core.axis_env import axis_env
from plax.core.shaped_array import ShapedArray
from plax.core.trace import Tracer, get_aval
from plax.distributed import collective_timeout
from plax.lowering.fallback import PlaxFallbackWarning
from plax.sharding import IndexMapSharding, Mesh, NamedSharding, PartitionSpec
from plax.sharding_types import (cast, check_in_specs, inferred_in_specs,
                                 shard_map_checks_types, untyped)
from plax.transforms.call import to_buffer
from plax.transforms.staging import trace_to_jaxpr
from plax_pmap import axes as _axes
from plax_pmap import unreduced_specs
from plax_pmap import vma as _vma
from plax_pmap.per_device_callbacks import per_device_debug_callbacks
from plax_pmap.unreduced_specs import mentions_unreduced
from plax_pmap.runtime import SpmdProgram, _contig, flatten_calls, threaded_control_flow


__all__ = ["pmap", "shard_map"]


def _int_tuple(x, what) -> tuple:
    if x is None:
        return ()
    if isinstance(x, int):
        return (x,)
    try:
        return tuple(int(i) for i in x)
    except TypeError:
        raise TypeError(f"pmap {what} must be an int or a sequence of ints, got {x!r}") from None


def _leaf_axes(prefix, tree, what: str) -> list:
    out: list = []
    try:
        tree_util.tree_map(lambda ax, sub: out.extend(
            [ax] * len(tree_util.tree_leaves(sub))), prefix, tree,
            is_leaf=lambda x: x is None or isinstance(x, PartitionSpec))
    except ValueError as err:
        raise ValueError(f"{what} must be a tree prefix of the arguments: got {prefix!r} for "
                         f"{tree_util.tree_structure(tree)}. {err}") from None
    return out


def _backend_for(backend: str | None):
    if backend is None:
        return lambda d: d.backend
    b = plax.plugins.registry().get_backend(backend)
    return lambda d: b


def _eager(leaves) -> bool:
    return _trace.state.depth == 0 and not any(isinstance(x, Tracer) for x in leaves)


def _processes() -> tuple[int, int, Any]:
    """(process index, process count, transport) of the run; raises if the program was
    started by a launcher with several processes but did not join them."""
    from plax import distributed
    st = distributed._state
    if not st["initialized"]:
        size, var = distributed.launched_process_count()
        if size > 1:
            raise RuntimeError(f"{var}={size}: this program was started as {size} processes "
                               "(mpiexec), but plax.distributed.initialize() was not called; "
                               "call it at the start of the program so that the processes "
                               "compute together")
    return st["process_index"], st["process_count"], st["transport"]


class _Cache:
    """Per-signature traced programs of one pmap/shard_map wrapper."""

    def __init__(self):
        self.table: dict = {}

    def warn_once(self, message: str) -> None:
        """A :class:`PlaxFallbackWarning`, the first time only for this wrapper."""
        if ("warned",) not in self.table:
            self.table[("warned",)] = True
            warnings.warn(message, PlaxFallbackWarning, stacklevel=3)


# ------------------------------------------------------------------ pmap

def pmap(fun: Callable | None = None, axis_name: Hashable | None = None, *, in_axes: Any = 0,
         out_axes: Any = 0, static_broadcasted_argnums: int | Sequence[int] = (),
         devices: Sequence | None = None, backend: str | None = None,
         axis_size: int | None = None, donate_argnums: int | Sequence[int] = (),
         global_arg_shapes=None) -> Callable:
    """Runs ``fun`` once per device, on slices of its arguments along ``in_axes``.

    Args:
      fun: the per-device function (``pmap(axis_name="i")`` without it returns a decorator).
      axis_name: a name for the mapped axis, for collectives (``lax.psum(x, "i")``).
      in_axes: an int, None, or a tuple prefix of the positional arguments: the mapped axis
        of each (None: the same value on every device).
      out_axes: where the mapped axis goes in each output (an int, None or a prefix tree;
        None: the output must be equal on every device, device 0's is returned).
      static_broadcasted_argnums: positional arguments passed as they are (hashable Python
        values, part of the cache key).
      devices: the devices to run on (default: the default platform's, in order).
      backend: the backend that compiles and runs the per-device program.
      axis_size: the mapped size when no argument is mapped.
      donate_argnums: arguments given up to the call, as in JAX: a donated array already
        sharded as a result is (a pmap result passed back in) is deleted; plax does not
        reuse its memory.
      global_arg_shapes: accepted and ignored (as in recent JAX).

    Returns:
      The mapped function. Its outputs have the mapped axis at ``out_axes`` and, when called
      with arrays outside any transform, stay sharded (output slice ``i`` on device ``i``).

    Raises:
      ValueError: the mapped axes of the arguments have different sizes, or there are more
        of them than devices.
      NameError: a collective names an axis that is not bound.

    Example:
      >>> f = plax.pmap(lambda x: plax.lax.psum(x, "i"), axis_name="i")
      >>> f(jnp.ones(plax.device_count()))        # doctest: +SKIP
      Array([4., 4., 4., 4.], dtype=float32)
    """
    if fun is None:
        return functools.partial(pmap, axis_name=axis_name, in_axes=in_axes, out_axes=out_axes,
                                 static_broadcasted_argnums=static_broadcasted_argnums,
                                 devices=devices, backend=backend, axis_size=axis_size,
                                 donate_argnums=donate_argnums)
    if not callable(fun):
        raise TypeError(f"pmap requires a callable as its first argument, got {fun!r}")
    if isinstance(in_axes, list):
        in_axes = tuple(in_axes)
    static = _int_tuple(static_broadcasted_argnums, "static_broadcasted_argnums")
    donated_nums = _int_tuple(donate_argnums, "donate_argnums")
    name = axis_name if axis_name is not None else object()  # anonymous axes never match
    cache = _Cache()

    @functools.wraps(fun)
    def mapped(*args, **kwargs):
        nargs = len(args)
        static_idx = sorted(i % nargs for i in static if -nargs <= i < nargs)
        dyn = [a for i, a in enumerate(args) if i not in static_idx]
        static_vals = tuple((i, args[i]) for i in static_idx)
        if isinstance(in_axes, tuple):
            if len(in_axes) != nargs:
                raise ValueError(f"pmap in_axes must be an int, None, or a tuple with one entry "
                                 f"per positional argument, got len(in_axes)={len(in_axes)}, "
                                 f"len(args)={nargs}")
            dyn_axes = tuple(ax for i, ax in enumerate(in_axes) if i not in static_idx)
        else:
            dyn_axes = (in_axes,) * len(dyn)

        def call(*dyn_args, **kw):
            full, it = [], iter(dyn_args)
            for i in range(nargs):
                full.append(args[i] if i in static_idx else next(it))
            return fun(*full, **kw)

        tree = (tuple(dyn), kwargs)
        leaves, treedef = tree_util.tree_flatten(tree)
        axes = _leaf_axes((dyn_axes, {k: 0 for k in kwargs}), tree, "pmap in_axes")
        leaves = [x if ax is None else plax.numpy.asarray(x) if not isinstance(x, (Array, Tracer))
                  else x for x, ax in zip(leaves, axes)]
        size = _mapped_size(leaves, axes, axis_size, treedef)
        pindex, pcount, transport = _processes()
        devs = _devices(devices, backend, size)

        def flat_fun(*flat):
            a, kw = tree_util.tree_unflatten(treedef, flat)
            return call(*a, **kw)

        if not _eager(leaves):
            if pcount > 1 and not _axes.bound_frames():
                cache.warn_once(
                    "pmap under a transform (jit, grad or vmap of a pmap) in a multi-process "
                    "run: each process gathers every process's slices and computes every "
                    "device's share itself (one vmap), which gives the right result but does "
                    "not spread the work over the devices. Apply the transform inside the pmap "
                    "(pmap(grad(f))) to run each slice on its own device.")
                return _as_vmap_across_processes(flat_fun, leaves, axes, out_axes, name, size)
            return _as_vmap(flat_fun, leaves, axes, out_axes, name, size)
        key = (treedef, static_vals, tuple(axes),
               tuple((get_aval(x).shape, get_aval(x).dtype, get_aval(x).weak_type)
                     if ax is not None else _static_key(x) for x, ax in zip(leaves, axes)),
               tuple(devs), backend)
        try:
            entry = cache.table.get(key)
        except TypeError:
            entry, key = None, None
        if entry is None:
            entry = _prepare_pmap(flat_fun, leaves, axes, name, size, devs, backend, pcount)
            if key is not None:
                cache.table[key] = entry
        if entry == "vmap":
            if pcount > 1:
                out = _as_vmap_across_processes(flat_fun, leaves, axes, out_axes, name, size)
            else:
                out = _as_vmap(flat_fun, leaves, axes, out_axes, name, size)
            return _place_pmap_outputs(out, out_axes, devs)
        program, out_tree = entry
        out = _run_pmap(program, out_tree, leaves, axes, out_axes, devs, backend,
                        offset=pindex * size, transport=transport)
        if float_checks.active():  # jax_debug_nans / jax_debug_infs
            _check_sharded_outputs(out)
        if donated_nums:
            _donate(args, static_idx, kwargs, donated_nums, leaves, out)
        return out

    return mapped


def _donate(args, static_idx, kwargs, donated_nums, leaves, out) -> None:
    """Deletes the donated arguments a result took over, as JAX's pmap does: only arrays
    already sharded over the devices as a result is (a pmap result passed back in); others
    were copied to the devices and stay."""
    from plax.transforms.donation import donate
    nargs = len(args)
    nums = {i % nargs for i in donated_nums if -nargs <= i < nargs}
    flags = (tuple(tree_util.tree_map(lambda _, d=(i in nums): d, args[i])
                   for i in range(nargs) if i not in static_idx),
             tree_util.tree_map(lambda _: False, kwargs))
    donate(leaves, tree_util.tree_leaves(flags), out, sharded_only=True)


def _check_sharded_outputs(out) -> None:
    """JAX's FloatingPointError for a NaN (or infinity) in a pmap's outputs under
    ``jax_debug_nans`` (``jax_debug_infs``); JAX names no primitive for a sharded computation,
    so neither does plax."""
    kind = float_checks.invalid_kind(tree_util.tree_leaves(out))
    if kind is None:
        return
    print("Invalid nan value encountered in the output of a jax.jit function. Calling the "
          "de-optimized version.")
    raise FloatingPointError(f"Invalid value ({kind}) encountered in sharded computation.")


def _static_key(x):
    # an unmapped leaf is traced abstractly too (it is an input of the program)
    aval = get_aval(plax.numpy.asarray(x)) if not isinstance(x, (Array, Tracer)) else get_aval(x)
    return ("unmapped", aval.shape, aval.dtype, aval.weak_type)


def _mapped_size(leaves, axes, axis_size, treedef) -> int:
    sizes: dict = {}
    for i, (x, ax) in enumerate(zip(leaves, axes)):
        if ax is None:
            continue
        shape = get_aval(x).shape
        if not -len(shape) <= ax < len(shape):
            raise ValueError(f"pmap in_axes={ax} is out of bounds for argument leaf {i} of "
                             f"shape {shape}")
        sizes.setdefault(shape[ax], []).append((i, ax, shape))
    if axis_size is not None:
        sizes.setdefault(int(axis_size), [])
    if not sizes:
        raise ValueError("pmap needs at least one argument with a mapped axis (an in_axes "
                         "entry that is not None), or axis_size")
    if len(sizes) > 1:
        names = _leaf_names(treedef)
        lines = [f"  * {len(e) or 'axis_size'} {'axis' if len(e) == 1 else 'axes'} had size "
                 f"{s}" + (f": e.g. axis {e[0][1]} of argument {names[e[0][0]]} of shape "
                           f"{e[0][2]}" if e else "") for s, e in sorted(sizes.items())]
        raise ValueError("pmap got inconsistent sizes for array axes to be mapped:\n"
                         + "\n".join(lines) + "\nAll mapped axes must have the same size "
                         "(one slice per device).")
    return next(iter(sizes))


def _leaf_names(treedef) -> list[str]:
    tree = tree_util.tree_unflatten(treedef, list(range(treedef.num_leaves)))
    names = [""] * treedef.num_leaves
    for path, i in tree_util.tree_flatten_with_path(tree)[0]:
        group, rest = path[0].idx, tree_util.keystr(tuple(path[1:]))
        names[i] = f"args{rest}" if group == 0 else f"kwargs{rest}"
    return names


def _devices(devices, backend, size: int) -> list:
    nested = bool(_axes.bound_frames())
    if devices is not None:
        devs = list(devices)
    elif backend is not None:
        devs = plax.devices(backend=backend)
    else:
        devs = plax.local_devices()  # (in a multi-process run each process maps its own)
    if size > len(devs) and not nested:
        raise ValueError(f"pmap: the mapped axis has size {size}, which requires {size} devices, "
                         f"but only {len(devs)} are available: {devs}. Map over at most "
                         f"{len(devs)} slices (reshape the batch), or start Python with "
                         f"PLAX_NUM_CPU_DEVICES={size} for {size} CPU devices.")
    return devs[:size]


def _as_vmap(flat_fun, leaves, axes, out_axes, name, size):
    """The pmap computed as ``vmap(axis_name=name)`` (under transforms; as a fallback)."""
    def body(*flat):
        return flat_fun(*flat)
    return plax.vmap(body, in_axes=tuple(axes), out_axes=out_axes, axis_name=name,
                     axis_size=size)(*leaves)


def _as_vmap_across_processes(flat_fun, leaves, axes, out_axes, name, size):
    """The pmap of a multi-process run computed as one vmap over every process's slices
    (gathered from the processes: :mod:`plax_pmap.processes`), of whose results this process
    keeps its own part: under transforms, and for sub-programs the device runtime does not
    run. Every process repeats the whole computation."""
    from plax_pmap.processes import gather_processes, own_block
    pcount = plax.process_count()
    every = [x if ax is None else gather_processes(x, ax) for x, ax in zip(leaves, axes)]
    out = _as_vmap(flat_fun, every, axes, out_axes, name, size * pcount)
    flat, tree = tree_util.tree_flatten(out)
    oaxes = _leaf_axes(out_axes, out, "pmap out_axes")
    return tree_util.tree_unflatten(tree, [o if ax is None else own_block(o, ax % o.ndim, size)
                                           for o, ax in zip(flat, oaxes)])


def _prepare_pmap(flat_fun, leaves, axes, name, size, devs, backend, pcount=1):
    in_avals = []
    for x, ax in zip(leaves, axes):
        aval = get_aval(x if isinstance(x, (Array, Tracer)) else plax.numpy.asarray(x))
        if ax is not None:
            shape = list(aval.shape)
            del shape[ax % len(shape)]
            aval = ShapedArray(tuple(shape), aval.dtype, aval.weak_type)
        in_avals.append(aval)
    out_store: list = []

    def traced(*flat):
        out = flat_fun(*flat)
        out_leaves, out_tree = tree_util.tree_flatten(out)
        out_store.append(out_tree)
        return out_leaves

    total = size * pcount  # every process maps the same number of slices
    with axis_env({name: total}), _varying.typing(None):  # pmap's values are untyped
        closed, _ = trace_to_jaxpr(traced, in_avals, "the function passed to pmap")
    flat = flatten_calls(closed, threaded_control_flow(pcount > 1))
    if flat is None:
        return "vmap"
    program = SpmdProgram(flat, (name,), (total,))
    program.compile(devs, _backend_for(backend))
    return program, out_store[0]


def _const_inputs(program: SpmdProgram, devs) -> list[list]:
    return [[to_buffer(c, d) for c in program.closed.consts] for d in devs]


def _per_device_leaf(x, ax, devs, sharding_ok) -> list:
    """The buffers of leaf ``x`` for each device: slice ``i`` along ``ax`` for device ``i``
    (taken as they are from an array already laid out so), or ``x`` itself if unmapped."""
    if ax is None:
        return [to_buffer(x, d) for d in devs]
    if isinstance(x, Array) and ax == 0 and sharding_ok(x):
        shards = {s.device: s.data for s in x.addressable_shards}
        return [to_buffer(shards[d], d) for d in devs]
    host = np.asarray(x)
    return [to_buffer(_contig(np.take(host, i, axis=ax)), d)
            for i, d in enumerate(devs)]


def _pmap_sharding(devs) -> IndexMapSharding:
    return IndexMapSharding({d: (i,) for i, d in enumerate(devs)})


def _run_pmap(program, out_tree, leaves, axes, out_axes, devs, backend, offset=0,
              transport=None):
    sharding = _pmap_sharding(devs)
    ok = lambda x: x.sharding == sharding  # noqa: E731
    per_leaf = [_per_device_leaf(x, ax, devs, ok) for x, ax in zip(leaves, axes)]
    consts = _const_inputs(program, devs)
    inputs = [consts[r] + [pl[r] for pl in per_leaf] for r in range(len(devs))]
    results = program.run(devs, _backend_for(backend), inputs, offset=offset,
                          transport=transport)
    out_avals = program.closed.out_avals
    outs = []
    n = len(devs)
    for k, aval in enumerate(out_avals):
        bufs = [results[r][k] for r in range(n)]
        outs.append(from_device_buffers((n,) + tuple(aval.shape), aval.dtype, sharding, bufs,
                                        weak_type=aval.weak_type))
    out = tree_util.tree_unflatten(out_tree, outs)
    return _apply_out_axes(out, out_axes)


def _apply_out_axes(out, out_axes):
    o_axes = _leaf_axes(out_axes, out, "pmap out_axes")
    leaves, tree = tree_util.tree_flatten(out)
    fixed = []
    for x, ax in zip(leaves, o_axes):
        if ax is None:
            fixed.append(x.addressable_shards[0].data)
        elif ax % x.ndim == 0:
            fixed.append(x)
        else:
            fixed.append(plax.numpy.moveaxis(x, 0, ax))
    return tree_util.tree_unflatten(tree, fixed)


def _place_pmap_outputs(out, out_axes, devs):
    """Eager results of the vmap fallback, placed as the device runtime places them."""
    o_axes = _leaf_axes(out_axes, out, "pmap out_axes")
    leaves, tree = tree_util.tree_flatten(out)
    sharding = _pmap_sharding(devs)
    placed = [plax.device_put(x, sharding) if ax == 0 and isinstance(x, Array) and
              x.ndim and x.shape[0] == len(devs) else x for x, ax in zip(leaves, o_axes)]
    return tree_util.tree_unflatten(tree, placed)


# ------------------------------------------------------------------ shard_map

def _current_mesh():
    from plax.sharding import get_mesh
    return get_mesh()


def shard_map(f: Callable | None = None, /, *, out_specs: Any, in_specs: Any = None,
              mesh: Mesh | None = None, axis_names: Any = None, check_vma: bool = True,
              check_rep: bool | None = None, auto: Any = None) -> Callable:
    """Runs ``f`` once per device of ``mesh`` on the blocks of its arguments that
    ``in_specs`` assigns to that device, and assembles the outputs as ``out_specs`` say.

    Args:
      f: the per-device function (omit it to use ``shard_map(...)`` as a decorator).
      out_specs: a PartitionSpec per output (a prefix tree): mesh axes named in it
        concatenate the devices' blocks along that dimension; mesh axes not named must hold
        equal values on every device along them (device 0's block is returned).
      in_specs: a PartitionSpec per positional argument (a prefix tree; one spec applies to
        all): which mesh axes split each dimension. On a mesh whose axes are all Explicit
        (``make_mesh``'s default) it may be left out (each argument's type says it), and
        one given must match each argument's type (JAX's ValueError otherwise: ``reshard``
        the argument, or use a mesh of Auto axes).
      mesh: the :class:`~plax.sharding.Mesh` (default: the one set with
        ``plax.sharding.use_mesh``/``set_mesh``).
      axis_names: the mesh axes whose replication is checked (default: all of them).
      check_vma: type the body's values by the mesh axes they vary over, so that autodiff
        inside it follows JAX's typed rules (:mod:`plax.core.varying`), and check, when the
        function is traced, that every output may vary only over the mesh axes its out_spec
        names (see :mod:`plax_pmap.vma`). False: untyped (pmap's autodiff rules), unchecked.
      check_rep: the older name of ``check_vma`` (False also turns it off).
      auto: accepted and ignored.

    Returns:
      The mapped function.

    Raises:
      ValueError: a spec names an axis the mesh does not have, or splits a dimension that
        the mesh axes do not divide; no mesh is given or set; with ``check_vma``, an output
        may vary over a mesh axis its out_spec leaves out (``lax.psum`` it over the axis,
        or name the axis in its out_spec).
      NameError: a collective names an axis that is not bound.
      NotImplementedError: in a multi-process run over a mesh that spans processes: the
        processes' devices are not contiguous blocks of the mesh, or its collectives are
        inside sub-programs other than calls and control flow.

    Warns:
      PlaxFallbackWarning: under a transform over a mesh that spans processes (each process
        then computes every block itself).

    Example:
      >>> mesh = plax.make_mesh((1,), ("x",))
      >>> f = plax.shard_map(lambda b: plax.lax.psum(b.sum(), "x"), mesh=mesh,
      ...                    in_specs=PartitionSpec("x"), out_specs=PartitionSpec())
      >>> f(plax.device_put(jnp.arange(4.0), NamedSharding(mesh, PartitionSpec("x"))))
      Array(6., dtype=float32)
    """
    if f is None:
        return functools.partial(shard_map, out_specs=out_specs, in_specs=in_specs, mesh=mesh,
                                 axis_names=axis_names, check_vma=check_vma,
                                 check_rep=check_rep, auto=auto)
    if not callable(f):
        raise TypeError(f"shard_map requires a callable as its first argument, got {f!r}")
    checking = bool(check_vma) and (check_rep is None or bool(check_rep))
    cache = _Cache()

    @functools.wraps(f)
    def mapped(*args):
        m = mesh if mesh is not None else _current_mesh()
        if m is None:
            raise ValueError("shard_map needs a mesh: pass mesh=..., or set one with "
                             "plax.sharding.use_mesh(mesh) / set_mesh(mesh)")
        if not isinstance(m, Mesh):
            raise TypeError(f"shard_map mesh must be a plax.sharding.Mesh, got {m!r}")
        if mesh is not None:
            _check_context_mesh(m)
        spread = _process_block(m)
        typed_mesh = shard_map_checks_types(m, axis_names)
        specs_in = in_specs if in_specs is not None else \
            PartitionSpec() if not typed_mesh else tuple(
                tree_util.tree_unflatten(tree_util.tree_structure(a), inferred_in_specs(
                    tree_util.tree_leaves(a))) for a in args)
        if isinstance(specs_in, list):
            specs_in = tuple(specs_in)
        if isinstance(specs_in, tuple) and not isinstance(specs_in, PartitionSpec):
            if len(specs_in) != len(args):
                raise ValueError(f"shard_map in_specs has {len(specs_in)} entries but the "
                                 f"function got {len(args)} positional arguments")
        leaves, treedef = tree_util.tree_flatten(tuple(args))
        prefix = specs_in if (isinstance(specs_in, tuple) and
                              not isinstance(specs_in, PartitionSpec)) else (specs_in,) * len(args)
        specs = [_spec(s) for s in _leaf_axes(prefix, tuple(args), "shard_map in_specs")]
        leaves = [x if isinstance(x, (Array, Tracer)) else plax.numpy.asarray(x) for x in leaves]
        if typed_mesh:  # on an Explicit mesh the arguments' types must say what in_specs do
            check_in_specs(leaves, specs)
        if mentions_unreduced(specs, out_specs):  # partial sums in or out: stacked parts
            return unreduced_specs.call(
                shard_map, f, tree_util.tree_unflatten(treedef, leaves), specs, out_specs, m,
                dict(axis_names=axis_names, check_vma=check_vma, check_rep=check_rep))
        names = _leaf_names_plain(treedef)
        blocks = []
        for x, s, nm in zip(leaves, specs, names):
            blocks.append(_block_aval(get_aval(x), s, m, f"shard_map in_specs for argument {nm}"))

        def flat_fun(*flat):
            return f(*tree_util.tree_unflatten(treedef, flat))

        key = (treedef, tuple(specs), m, tuple(blocks))
        if not _eager(leaves):
            if spread is not None:
                # every process passes the global arguments, so computing all the blocks
                # here is right -- only not spread over the processes
                cache.warn_once(
                    "shard_map under a transform (jit, grad or vmap of a shard_map) over a mesh "
                    "that spans processes: each process computes every device's block itself "
                    "(as nested vmaps, with no communication), which gives the right result "
                    "from the global arguments but does not spread the work over the "
                    "processes. Call the shard_map outside the transform and apply jit/grad "
                    "inside it to run each block on its own device.")
            if spread is None and _traced_by_make_jaxpr(leaves):
                return _staged(flat_fun, leaves, specs, blocks, m, out_specs, checking,
                               axis_names, mesh is not None)
            if checking and ("checked",) + key not in cache.table:
                # at trace time, as JAX does (the vmap formulation builds no jaxpr to check)
                _ReplicationCheck(specs, out_specs, m, axis_names).trace_and_check(
                    flat_fun, blocks)
                cache.table[("checked",) + key] = True
            return _shard_map_vmap(flat_fun, leaves, specs, m, out_specs, checking)
        if spread is None:  # op by op, as JAX runs it (print shows the devices' blocks)
            check = _ReplicationCheck(specs, out_specs, m, axis_names) if checking else None
            return run_eagerly(flat_fun, leaves, specs, blocks, m, out_specs, check, checking)
        entry = cache.table.get(key)
        if entry is None:
            check = _ReplicationCheck(specs, out_specs, m, axis_names) if checking else None
            entry = _prepare_shard_map(flat_fun, blocks, m, check, spread is not None)
            cache.table[key] = entry
        if entry == "vmap":
            if spread is not None:
                raise NotImplementedError(
                    "over a mesh that spans processes, plax-pmap runs collectives only at the "
                    "top level of the shard_mapped function, inside jit/checkpoint calls and "
                    "inside lax.cond/scan/while_loop (not inside other sub-programs)")
            out = _shard_map_vmap(flat_fun, leaves, specs, m, out_specs, checking)
            return _place_shard_map_outputs(out, m, out_specs)
        program, out_tree = entry
        return _run_shard_map(program, out_tree, leaves, specs, m, out_specs, spread)

    return mapped


def _check_context_mesh(mesh: Mesh) -> None:
    """JAX's ValueError for a ``mesh=`` other than the mesh set with ``set_mesh`` (outside
    a shard_map body, whose context mesh is its own)."""
    from plax.sharding import get_abstract_mesh
    context = get_abstract_mesh()
    if context.empty or context == mesh.abstract_mesh or _varying.active():
        return
    raise ValueError(f"The context mesh {context!r} should match the mesh passed to shard_map "
                     f"{mesh}")


def _traced_by_make_jaxpr(leaves) -> bool:
    """Whether the arguments' innermost transform is ``make_jaxpr``'s trace, or jit traces
    nested in it (which then show the shard_map as one equation, as JAX does)."""
    top = _trace.find_top_trace(leaves).main
    # through jit calls staged inside make_jaxpr (make_jaxpr(jit(shard_map(...))) shows the
    # equation inside the jit's jaxpr, as JAX does)
    for main in reversed(_trace.state.stack[:top.level + 1]):
        debug = main.debug
        if debug is None or debug.transform not in ("make_jaxpr", "jit"):
            return False
        if debug.transform == "make_jaxpr":
            return True
    return False


def _staged(flat_fun, leaves, specs, blocks, mesh: Mesh, out_specs, checking: bool,
            axis_names, mesh_given: bool):
    """The shard_map as one ``shard_map`` equation (:mod:`plax_pmap.shard_map_primitive`)."""
    from plax_pmap.shard_map_primitive import bind_shard_map
    closed, out_tree = _trace_body(flat_fun, blocks, mesh, specs if checking else None)
    if checking:
        _ReplicationCheck(specs, out_specs, mesh, axis_names)(closed, out_tree)
    placeholder = tree_util.tree_unflatten(out_tree, list(closed.out_avals))
    o_specs = _out_specs_leaves(out_specs, placeholder)
    outs = bind_shard_map(closed, leaves, specs, o_specs, mesh, checking, axis_names,
                          mesh_given)
    return tree_util.tree_unflatten(out_tree, outs)


def _process_block(mesh: Mesh):
    """None when the mesh's devices are all this process's (or the run has one process);
    else ``(offset, count, transport)``: the flat mesh position of this process's first
    device, its number of devices and the multi-process transport.

    Raises:
      NotImplementedError: the processes' devices do not each form one contiguous block of
        the mesh's flat order, of equal size (as ``make_mesh`` over ``plax.devices()`` gives).
    """
    pindex, pcount, transport = _processes()
    if pcount == 1:
        return None
    flat = list(mesh.devices.flat)
    local = set(plax.local_devices())
    mine = [i for i, d in enumerate(flat) if d in local]
    if len(mine) == len(flat):
        return None
    n = len(mine)
    if not mine or mine != list(range(mine[0], mine[0] + n)) or mine[0] % n or \
            len(flat) != n * pcount:
        raise NotImplementedError(
            f"shard_map over a mesh that spans processes needs each process's devices to form "
            f"one contiguous block of the mesh's devices, in process order (as "
            f"plax.make_mesh over plax.devices() gives); this process ({pindex}) holds mesh "
            f"positions {mine} of {len(flat)}")
    return mine[0], n, transport


def _leaf_names_plain(treedef) -> list[str]:
    tree = tree_util.tree_unflatten(treedef, list(range(treedef.num_leaves)))
    names = [""] * treedef.num_leaves
    for path, i in tree_util.tree_flatten_with_path(tree)[0]:
        names[i] = f"args{tree_util.keystr(tuple(path))}"
    return names


def _spec(s) -> PartitionSpec:
    if s is None:
        return PartitionSpec()
    if not isinstance(s, PartitionSpec):
        raise TypeError(f"shard_map specs must be PartitionSpecs (plax.sharding.P), got {s!r}")
    return s


def _spec_axes(spec: PartitionSpec, dim: int) -> tuple:
    e = spec[dim] if dim < len(spec) else None
    return () if e is None else e if isinstance(e, tuple) else (e,)


def _block_aval(aval: ShapedArray, spec: PartitionSpec, mesh: Mesh, what: str) -> ShapedArray:
    if len(spec) > aval.ndim:
        raise ValueError(f"{what}: {spec!r} has {len(spec)} entries but the argument has rank "
                         f"{aval.ndim} (shape {aval.shape})")
    sizes = mesh.shape
    used = []
    shape = list(aval.shape)
    for d in range(aval.ndim):
        k = 1
        for a in _spec_axes(spec, d):
            if a not in sizes:
                raise ValueError(f"{what}: {spec!r} names axis {a!r}, which the mesh {mesh} "
                                 f"does not have (its axes: {mesh.axis_names})")
            if a in used:
                raise ValueError(f"{what}: {spec!r} uses mesh axis {a!r} twice")
            used.append(a)
            k *= sizes[a]
        if shape[d] % k:
            raise ValueError(f"{what}: {spec!r} splits dimension {d} (size {shape[d]}, shape "
                             f"{aval.shape}) into {k} blocks, but {shape[d]} is not divisible "
                             f"by {k}")
        shape[d] //= k
    return ShapedArray(tuple(shape), aval.dtype, aval.weak_type)


def _trace_body(flat_fun, blocks, mesh: Mesh, specs=None):
    """``(closed, out_tree)``: the per-device function traced on its blocks, the mesh's
    axis names bound. With ``specs`` (``check_vma=True``) the values are typed by the mesh
    axes they vary over (:mod:`plax.core.varying`), each argument by those its spec names,
    and autodiff inside the body follows those types, as in JAX."""
    out_store: list = []
    if specs is not None:
        blocks = [b.update(vma=_vma.spec_axes(s) & frozenset(mesh.axis_names))
                  for b, s in zip(blocks, specs)]

    def traced(*flat):
        out = flat_fun(*flat)
        out_leaves, out_tree = tree_util.tree_flatten(out)
        out_store.append(out_tree)
        return out_leaves

    with axis_env(mesh.shape), _varying.typing(mesh.axis_names if specs is not None else None):
        closed, _ = trace_to_jaxpr(traced, blocks, "the function passed to shard_map")
    return closed, out_store[0]


class _ReplicationCheck:
    """``check_vma``: the outputs of the traced body may vary only over the mesh axes their
    out_specs name (see :mod:`plax_pmap.vma`)."""

    def __init__(self, in_specs, out_specs, mesh: Mesh, axis_names):
        self.in_specs = in_specs
        self.out_specs = out_specs
        self.mesh = mesh
        names = set(axis_names) if axis_names is not None else None
        self.mesh_axes = [a for a in mesh.axis_names if names is None or a in names]

    def __call__(self, closed, out_tree) -> None:
        self.check_avals(list(closed.out_avals), out_tree)

    def check_avals(self, out_avals, out_tree) -> None:
        """Checks outputs of these types (their ``vma``), the leaves of ``out_tree``."""
        placeholder = tree_util.tree_unflatten(out_tree, list(out_avals))
        o_specs = _out_specs_leaves(self.out_specs, placeholder)
        paths = [tree_util.keystr(tuple(p))
                 for p, _ in tree_util.tree_flatten_with_path(placeholder)[0]]
        n = len(paths)
        names = [f"out{p}" + (f" (output {i} of {n})" if n > 1 else "")
                 for i, p in enumerate(paths)]
        # partial sums ({U:Y}) differ between the devices along Y as varying values do
        _vma.check_out_vmas([_varying.axes_of(a) | _varying.unreduced_of(a) for a in out_avals],
                            o_specs, names, self.mesh_axes)

    def trace_and_check(self, flat_fun, blocks) -> None:
        """Traces the body on its blocks and checks it (for the vmap path, which builds
        no jaxpr; values the body closes over from outer transforms are constants to it)."""
        self(*_trace_body(flat_fun, blocks, self.mesh, self.in_specs))


def _prepare_shard_map(flat_fun, blocks, mesh: Mesh, check: _ReplicationCheck | None = None,
                       across_processes: bool = False):
    closed, out_tree = _trace_body(flat_fun, blocks, mesh,
                                   check.in_specs if check is not None else None)
    if check is not None:
        check(closed, out_tree)
    flat = flatten_calls(closed, threaded_control_flow(across_processes))
    if flat is None:
        return "vmap"
    program = SpmdProgram(flat, mesh.axis_names, mesh.axis_sizes)
    program.compile(list(mesh.devices.flat), _backend_for(None))
    return program, out_tree


def _out_global_shape(aval, spec, k: int, mesh) -> list:
    """The global shape of shard_map output ``k``: its per-device ``aval`` with each dimension
    multiplied by the sizes of the mesh axes ``spec`` splits it over; JAX's ``ValueError`` for
    a spec longer than the output's rank or naming an axis the mesh lacks."""
    if len(spec) > aval.ndim:
        raise ValueError(f"shard_map out_specs: {spec!r} has {len(spec)} entries but output "
                         f"{k} has rank {aval.ndim} (shape {aval.shape})")
    shape = list(aval.shape)
    for d in range(len(shape)):
        for a in _spec_axes(spec, d):
            if a not in mesh.shape:
                raise ValueError(f"shard_map out_specs: {spec!r} names axis {a!r}, which "
                                 f"the mesh {mesh} does not have")
            shape[d] *= mesh.shape[a]
    return shape


def _out_specs_leaves(out_specs, out) -> list:
    return [_spec(s) for s in _leaf_axes(out_specs, out, "shard_map out_specs")]


def _run_shard_map(program, out_tree, leaves, specs, mesh, out_specs, spread=None):
    """Runs the program on this process's devices of ``mesh`` and assembles the outputs.
    ``spread``: ``(offset, count, transport)`` when the mesh spans processes (see
    :func:`_process_block`); every process then receives every device's output blocks, so
    each holds the whole result (JAX keeps only the addressable shards)."""
    all_devs = list(mesh.devices.flat)
    offset, count, transport = spread if spread is not None else (0, len(all_devs), None)
    devs = all_devs[offset:offset + count]
    per_leaf = [device_blocks(x, s, mesh, devs) for x, s in zip(leaves, specs)]
    consts = _const_inputs(program, devs)
    inputs = [consts[r] + [pl[r] for pl in per_leaf] for r in range(len(devs))]
    results = program.run(devs, _backend_for(None), inputs, offset=offset, transport=transport)
    if spread is not None:
        results = _gather_processes(results, all_devs, transport)
        devs = all_devs
    out_placeholder = tree_util.tree_unflatten(out_tree, list(program.closed.out_avals))
    o_specs = _out_specs_leaves(out_specs, out_placeholder)
    outs = []
    for k, (aval, spec) in enumerate(zip(program.closed.out_avals, o_specs)):
        shape = _out_global_shape(aval, spec, k, mesh)
        sh = NamedSharding(mesh, spec)
        outs.append(from_device_buffers(tuple(shape), aval.dtype, sh,
                                        [results[r][k] for r in range(len(devs))],
                                        weak_type=aval.weak_type))
    return tree_util.tree_unflatten(out_tree, outs)


def device_blocks(x, spec: PartitionSpec, mesh: Mesh, devs) -> list:
    """The buffer of ``x``'s block that ``spec`` gives each device of ``devs`` (mesh
    devices), on that device: an Array already laid out so gives its shards as they are."""
    sh = NamedSharding(mesh, spec)
    if isinstance(x, Array) and x.sharding == sh:
        shards = {q.device: q.data for q in x.addressable_shards}
        return [to_buffer(shards[d], d) for d in devs]
    if spec == PartitionSpec() or sh.is_fully_replicated:
        return [to_buffer(x, d) for d in devs]  # whole on every device: no copy
    host = np.asarray(x)
    idx = sh.devices_indices_map(host.shape)
    return [to_buffer(_contig(host[idx[d]]), d) for d in devs]


def run_eagerly(flat_fun, leaves, specs, blocks, mesh: Mesh, out_specs,
                check: "_ReplicationCheck | None", typed: bool):
    """Runs the body op by op on every device's blocks (:mod:`plax_pmap.eager_shard_map`)
    and assembles its outputs as ``out_specs`` say; ``check`` checks their varying axes."""
    from plax_pmap.eager_shard_map import ShardMapTrace, ShardMapTracer, _Context
    devs = list(mesh.devices.flat)
    with _trace.new_main(ShardMapTrace, dynamic=True, payload=_Context(mesh, typed)) as main:
        trace = ShardMapTrace(main)
        tracers = []
        for x, s, b in zip(leaves, specs, blocks):
            bufs = device_blocks(x, s, mesh, devs)
            arrays = [from_buffer(buf, b, d, committed=True) for buf, d in zip(bufs, devs)]
            vma = _vma.spec_axes(s) & frozenset(mesh.axis_names) if typed else frozenset()
            tracers.append(ShardMapTracer(trace, arrays, b.update(vma=vma) if vma else b))
        with axis_env(mesh.shape), _varying.typing(mesh.axis_names if typed else None):
            out = flat_fun(*tracers)
            out_leaves, out_tree = tree_util.tree_flatten(out)
            outs = [trace.full_raise(y) for y in out_leaves]
    if check is not None:
        check.check_avals([t.aval for t in outs], out_tree)
    o_specs = _out_specs_leaves(out_specs, tree_util.tree_unflatten(out_tree, outs))
    results = []
    for k, (t, spec) in enumerate(zip(outs, o_specs)):
        aval = t.aval
        shape = _out_global_shape(aval, spec, k, mesh)
        results.append(from_device_buffers(
            tuple(shape), aval.dtype, NamedSharding(mesh, spec),
            [to_buffer(blk, d) for blk, d in zip(t.blocks, devs)], weak_type=aval.weak_type))
    return tree_util.tree_unflatten(out_tree, results)


def _gather_processes(results, all_devs, transport) -> list[list]:
    """Every mesh device's output buffers (``results`` holds this process's), exchanged
    output by output through the transport: the processes call it in the same order."""
    n_out = len(results[0]) if results else 0
    gathered = [[None] * n_out for _ in all_devs]
    for k in range(n_out):
        stacked = transport.allgather(np.stack([np.asarray(r[k]) for r in results]),
                                      collective_timeout())
        for i, d in enumerate(all_devs):
            gathered[i][k] = to_buffer(_contig(stacked[i]), d)
    return gathered


def _to_grid(x, spec: PartitionSpec, mesh: Mesh):
    """``x`` reshaped to (blocks along each mesh axis the spec uses, in mesh order) + block
    shape; returns it and the mesh axes it has a leading dimension for."""
    jnp = plax.numpy
    sizes = mesh.shape
    shape = list(x.shape)
    new_shape, axis_dims = [], {}
    for d, n in enumerate(shape):
        names = _spec_axes(spec, d)
        k = math.prod(sizes[a] for a in names)
        for a in names:
            axis_dims[a] = len(new_shape)
            new_shape.append(sizes[a])
        new_shape.append(n // k)
    y = jnp.reshape(x, tuple(new_shape))
    used = [a for a in mesh.axis_names if a in axis_dims]
    front = [axis_dims[a] for a in used]
    rest = [i for i in range(len(new_shape)) if i not in front]
    return jnp.transpose(y, front + rest), used


def _shard_map_vmap(flat_fun, leaves, specs, mesh: Mesh, out_specs, typed: bool = False):
    """shard_map as nested ``vmap``s, one per mesh axis (outermost: the mesh's first).
    ``typed`` (``check_vma``): a value batched along a mesh axis is typed as varying over it
    (:mod:`plax.core.varying`), so autodiff inside the body follows JAX's typed rules.

    The mesh axes are manual inside the body, as in JAX: no value there has an explicit
    sharding over them, so the whole formulation computes untyped (an argument split over
    an axis and a value made in the body would otherwise meet as differently typed
    operands); on an all-Explicit mesh each output is then typed as its out_spec says."""
    with untyped():
        outs = _shard_map_vmap_untyped(flat_fun, leaves, specs, mesh, out_specs, typed)
    if not shard_map_checks_types(mesh, None):
        return outs
    leaves_out, tree = tree_util.tree_flatten(outs)
    o_specs = _out_specs_leaves(out_specs, outs)
    return tree_util.tree_unflatten(tree, [
        cast(y, NamedSharding(mesh, s)) if isinstance(y, Tracer) else y
        for y, s in zip(leaves_out, o_specs)])


def _shard_map_vmap_untyped(flat_fun, leaves, specs, mesh: Mesh, out_specs, typed: bool):
    jnp = plax.numpy
    grids, useds = zip(*[_to_grid(x, s, mesh) for x, s in zip(leaves, specs)]) if leaves else ((), ())
    names = mesh.axis_names
    out_tree_box: list = []

    def innermost(*blocks):
        with per_device_debug_callbacks(names, [mesh.shape[a] for a in names]):
            out = flat_fun(*blocks)
        o, t = tree_util.tree_flatten(out)
        out_tree_box.append(t)
        return [jnp.asarray(v) for v in o]

    fn = innermost
    for level in range(len(names) - 1, -1, -1):
        a = names[level]
        axes = tuple(0 if a in u else None for u in useds)
        fn = _vmapped(fn, axes, a, mesh.shape[a])
    with _varying.typing(names if typed else None):
        outs = fn(*grids)  # each: (mesh shape...) + block shape
    out_tree = out_tree_box[-1]
    placeholder = tree_util.tree_unflatten(out_tree, list(outs))
    o_specs = _out_specs_leaves(out_specs, placeholder)
    k = len(names)
    results = []
    for y, spec in zip(outs, o_specs):
        block_nd = y.ndim - k
        # drop the mesh axes the spec does not name (their values are equal: take the first)
        named = [a for d in range(block_nd) for a in _spec_axes(spec, d)]
        for a in named:
            if a not in mesh.shape:
                raise ValueError(f"shard_map out_specs: {spec!r} names axis {a!r}, which the "
                                 f"mesh {mesh} does not have")
        idx = tuple(slice(None) if a in named else 0 for a in names)
        y = y[idx]
        kept = [a for a in names if a in named]
        perm, out_shape = [], []
        for d in range(block_nd):
            group = _spec_axes(spec, d)
            perm.extend(kept.index(a) for a in group)
            perm.append(len(kept) + d)
            out_shape.append(math.prod(mesh.shape[a] for a in group) * y.shape[len(kept) + d])
        y = jnp.transpose(y, perm)
        results.append(jnp.reshape(y, tuple(out_shape)))
    return tree_util.tree_unflatten(out_tree, results)


def _vmapped(fn, in_axes, name, size):
    def call(*xs):
        return fn(*xs)
    return plax.vmap(call, in_axes=in_axes, out_axes=0, axis_name=name, axis_size=size)


def _place_shard_map_outputs(out, mesh, out_specs):
    o_specs = _out_specs_leaves(out_specs, out)
    leaves, tree = tree_util.tree_flatten(out)
    placed = [plax.device_put(x, NamedSharding(mesh, s)) for x, s in zip(leaves, o_specs)]
    return tree_util.tree_unflatten(tree, placed)
