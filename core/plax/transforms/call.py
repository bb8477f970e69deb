"""The ``jit`` call primitive: one equation that holds a whole jitted function.

Under a transform (``grad``, ``vmap``, ``jvp``, ``make_jaxpr``, an outer ``jit``) a jitted
function binds ``jit_p`` once, with its traced body as the ``jaxpr`` parameter (a
ClosedJaxpr whose constants are concrete) and its ``name``. Each rule transforms the body
and binds ``jit_p`` again, so the structure survives every transform and a backend compiles
each body once:

* eager (``impl``): the body is compiled by the device's backend, cached per body and
  device, and run on the buffers;
* ``jvp``: the JVP of the body is one call; in reverse mode (tangents staged by
  :class:`~plax.transforms.staging.LinearizeTrace`) the JVP body is split into a *known*
  call (primal outputs and residuals) and an *unknown* call (residuals and tangents in,
  tangents out, linear in the tangents), so the linear part can be transposed;
* ``transpose``: the transposed body is one call;
* ``batch``: the batched body is one call, batch axes kept where they are.

A call of ``jit(f, device=d, backend=b)`` carries ``device`` and ``backend`` parameters
(absent when not given), and every rule binds its derived calls with them: ``vmap``,
``grad`` and ``jvp`` of such a function run where it asked to (:func:`call_target`). As in
JAX, a program holding a call pinned to a device runs on that device (:func:`pinned_device`);
a call pinned to another backend runs as a program of its own inside a compiled caller
(:func:`run_pinned_call`).

Derived bodies are cached weakly on the body they come from, so repeated calls under a
transform retrace nothing and recompile nothing. When a derived body cannot be made a
self-contained jaxpr (a custom rule closing over a tracer of an enclosing transform), the
rule falls back to evaluating the body inline under the transform.
"""
from __future__ import annotations

import weakref
from typing import Any, Callable, Sequence

import numpy as np

from plax import dtypes
from plax.array import _PY_SCALARS, Array, _host_numpy, from_host
from plax.core import registry, varying
from plax.core.interpret import jaxpr_as_fun
from plax.core.jaxpr import ClosedJaxpr, Jaxpr
from plax.core.passes import prepare_for_backend, split_known
from plax.core.primitive import Primitive
from plax.core.shaped_array import ShapedArray
from plax.core.trace import Tracer, eager_region, get_aval, new_main
from plax.dtypes import NUMERIC_DTYPE_TYPES as _NUMERIC
from plax.empty_programs import computes_nothing, empty_outputs
from plax.float0 import is_float0_value, program_has_float0, strip_program, with_float0_outputs
from plax.state.types import Ref
from plax.transforms.batching import register_program_primitive
from plax.transforms.jvp import Zero, jvp_flat, tangent_aval
from plax.transforms.staging import JaxprTrace, LinearizeTrace, is_linearize_tracer, trace_to_jaxpr


class CallPrimitive(Primitive):
    """A primitive whose equation calls a sub-jaxpr held in ``params[call_param]``.

    The printer lays such an equation out as JAX lays out ``jit`` (``name`` first, the
    body's binders named after the operands), and the backend passes keep it (see
    :mod:`plax.core.passes`).
    """

    __slots__ = ()
    call_param = "jaxpr"


jit_p = CallPrimitive("jit", multiple_results=True)
varying.register_self_typed(jit_p)  # its results are typed by its traced body
register_program_primitive(jit_p)


@jit_p.def_abstract_eval
def _jit_abstract_eval(*avals, jaxpr: ClosedJaxpr, name: str, device=None, backend=None,
                       ctx_mesh=None, in_shardings=None, out_shardings=None,
                       donated_invars=None, keep_unused=False):
    # The operands must fit the body (check_jaxpr relies on this to type-check calls); weak
    # types may differ, as they do between a value and the argument it is passed to.
    want = jaxpr.in_avals
    if len(avals) != len(want) or any((a.shape, a.dtype) != (w.shape, w.dtype)
                                      for a, w in zip(avals, want)):
        raise TypeError(f"jit call {name!r} takes operands of types "
                        f"{[w.str_short() for w in want]}, got {[a.str_short() for a in avals]}")
    return list(jaxpr.out_avals)


# ------------------------------------------------------------------ compiling

class Executable:
    """A body compiled for one device: the executable, its constant buffers, output types."""

    __slots__ = ("executable", "const_bufs", "out_avals")

    def __init__(self, executable, const_bufs, out_avals):
        self.executable = executable
        self.const_bufs = const_bufs
        self.out_avals = out_avals


def compile_closed(closed: ClosedJaxpr, backend, device) -> Executable:
    """Compiles ``closed`` with ``backend`` for ``device`` (outside every transform)."""
    from plax.host_memory import keep_freed_memory
    from plax.state.discharge import compile_stateful, jaxpr_has_refs
    if jaxpr_has_refs(closed):  # refs never reach a backend: run their discharged program
        run, const_bufs = compile_stateful(
            closed, lambda pure: compile_closed(pure, backend, device), device)
        return Executable(run, const_bufs, list(closed.out_avals))
    keep_freed_memory()  # once per process: the programs' buffers are reused, not re-faulted
    jaxpr, consts = prepare_for_backend(closed)
    float0_outputs = None
    if program_has_float0(jaxpr):  # float0 values carry no data: the backend never sees one
        jaxpr, float0_outputs = strip_program(jaxpr)
    with eager_region():
        if computes_nothing(jaxpr):  # all outputs empty: no kernel to compile or run
            executable = empty_outputs(jaxpr, backend, device)
        else:
            executable = backend.compile(jaxpr, device)
        const_bufs = [to_buffer(c, device) for c in consts]
    if float0_outputs is not None and any(float0_outputs):
        executable = with_float0_outputs(executable, float0_outputs, list(closed.out_avals))
    return Executable(executable, const_bufs, list(closed.out_avals))


def to_buffer(x, device):
    """The buffer of ``x`` (an Array, a host value) on ``device``, moved or uploaded (a float0
    value is its NumPy array, on every device: it carries no data)."""
    if is_float0_value(x):
        return np.zeros(np.shape(x), dtypes.float0)
    if isinstance(x, Array):
        return x._buffer_on(device)
    if isinstance(x, Tracer):
        raise TypeError(f"Unexpected tracer {x} as a jit argument outside its transform")
    if type(x) is Ref:  # read (and written back) by the program's stateful wrapper
        return x
    return from_host(x, device=device)._buf


#: NumPy arguments of at least this many bytes are lent to a jitted call instead of copied
#: (:func:`lend_buffers`); below it a copy costs less than the alias check
LEND_MIN_BYTES = 1 << 16


def lend_buffers(leaves, device, avals) -> tuple[list, list]:
    """``(buffers, lent)``: each leaf's buffer on ``device`` for one call of a compiled
    program, given the leaves' abstract values ``avals``. A NumPy array of a numeric dtype
    is copied into its aval's dtype (the canonical one: float64 -> float32 without x64), as
    :func:`plax.array.from_host` copies it, without making an Array of it; one that is
    C-contiguous, of at least :data:`LEND_MIN_BYTES`, and whose dtype is already its aval's
    is handed to the backend's ``put`` as it is, not copied (a copy of a large argument costs
    a pass over it and, worse, fresh pages for every call: an MLP step called with NumPy
    weights faulted ~2000 pages per call); ``lent`` lists those the backend kept as its
    buffer. The call must pass its outputs through :func:`unlent_outputs`: a program may
    return a lent array or a view of one, and an Array must not change when the caller later
    writes to their NumPy array. A scalar becomes an array of its aval's dtype; other
    leaves go through :func:`to_buffer`.

    Example:
      >>> import plax
      >>> x = np.arange(3.0)
      >>> bufs, lent = lend_buffers([x], plax.devices()[0], [ShapedArray((3,), np.float32)])
      >>> bufs[0].dtype, bufs[0] is x, lent
      (dtype('float32'), False, [])
    """
    bufs, lent = [], []
    backend = None
    for x, aval in zip(leaves, avals):
        t = type(x)
        if t is Array and (x._device is device or x._device == device):
            bufs.append(x._buf)
        elif t is np.ndarray and type(x.dtype) in _NUMERIC:
            backend = backend or device.backend
            if x.nbytes >= LEND_MIN_BYTES and x.dtype == aval.dtype and x.flags.c_contiguous:
                buf = backend.put(x, device)
                if buf is x:
                    lent.append(x)
            else:  # the call's own copy: the caller may write to x afterwards
                buf = backend.put(x.astype(aval.dtype), device)
            bufs.append(buf)
        elif t in _PY_SCALARS or (isinstance(x, np.generic) and type(x.dtype) in _NUMERIC):
            backend = backend or device.backend  # (a Python int's range checked)
            bufs.append(backend.put(_host_numpy(x, aval.dtype)[0], device))
        else:
            bufs.append(to_buffer(x, device))
    return bufs, lent


def unlent_outputs(outs, lent) -> list:
    """``outs`` with every output that may share memory with a lent argument
    (:func:`lend_buffers`) replaced by a copy."""
    if not lent:
        return outs
    return [o.copy() if type(o) is np.ndarray and any(np.may_share_memory(o, x) for x in lent)
            else o for o in outs]


# body -> {(device, backend): Executable}; weak, so a body nobody holds frees its executables
_executables: "weakref.WeakKeyDictionary[ClosedJaxpr, dict]" = weakref.WeakKeyDictionary()


def _placement(args, jaxpr: ClosedJaxpr | None = None) -> tuple[Any, bool]:
    """Where a call on ``args`` runs: the committed arguments' device, else the first
    array's, else the default device; and whether the results are committed. ``jaxpr``
    (``keep_unused=False``): the program, whose arguments it never reads (after dead-code
    elimination) place nothing, as JAX prunes them (:mod:`plax.transforms.jit_unread`;
    asked only once an argument is committed: the JVP of argsort's jit takes a committed
    tangent it does not read)."""
    device, committed = None, False
    for a in args:
        if type(a) is not Array:
            continue
        if a._committed:
            if jaxpr is not None:
                from plax.transforms.jit_unread import unread_inputs
                unread = unread_inputs(jaxpr)
                if unread:
                    return _placement([b for i, b in enumerate(args) if i not in unread])
                jaxpr = None
            if committed and a._device != device:
                raise ValueError(f"Received incompatible devices for jitted computation: "
                                 f"{device!r} and {a._device!r}. Move arguments with "
                                 "plax.device_put first.")
            device, committed = a._device, True
        elif device is None:
            device = a._device
    if device is None:
        from plax.device import default_device
        device = default_device()
    return device, committed


def select_backend(name: str | None, device):
    """The backend ``jit(..., backend=name)`` compiles with for ``device``: ``device``'s own
    backend when ``name`` is None, else the backend (or platform default) of that name.

    Args:
      name: a backend name (``"numpy"``), a platform (``"cpu"``: its default), or None.
      device: the device the call would run on.

    Returns:
      The backend object.

    Raises:
      RuntimeError: no such backend (configuration excluded it, or it is not installed), or
        it has no devices.

    Example:
      >>> import plax
      >>> select_backend("numpy", plax.devices("cpu")[0]).name
      'numpy'
    """
    if name is None:
        return device.backend
    from plax import plugins
    backend = plugins.registry().get_backend(name)
    if backend.platform != device.platform and not backend.devices():
        raise RuntimeError(f"Backend {backend.name!r} has no devices")
    return backend


def call_target(device, backend: str | None, where) -> tuple[Any, Any]:
    """``(backend, device)`` a call with placement ``device``/``backend`` (None: not given)
    runs with, when its arguments put it on ``where``: the given device, else ``where``; the
    named backend, else that device's. A backend of another platform than ``where`` runs on
    its first device.

    Args:
      device: the ``device=`` of the call, or None.
      backend: the ``backend=`` of the call (a name), or None.
      where: the device its arguments (or the enclosing program) are on.

    Returns:
      ``(backend object, device)``.

    Example:
      >>> import plax
      >>> backend, device = call_target(None, "numpy", plax.devices("cpu")[0])
      >>> backend.name, device
      ('numpy', CpuDevice(id=0))
    """
    target = device if device is not None else where
    chosen = select_backend(backend, target)
    if device is None and chosen.platform != target.platform:
        target = chosen.devices()[0]
    return chosen, target


# body -> the device its pinned calls name (None: none); weak, as the executables
_pinned: "weakref.WeakKeyDictionary[ClosedJaxpr, Any]" = weakref.WeakKeyDictionary()


def pinned_device(closed: ClosedJaxpr):
    """The device a call inside ``closed`` (at any depth) was pinned to with ``jit(f,
    device=d)``, or None. As in JAX, a program holding such a call runs on that device.

    Args:
      closed: a program (a jitted function's jaxpr, a call's body).

    Returns:
      The device, or None when no call inside is pinned to one.

    Raises:
      ValueError: two calls pinned to different devices.

    Example:
      >>> import plax
      >>> from plax import numpy as jnp
      >>> from plax.transforms.call import pinned_device
      >>> f = plax.jit(jnp.sin, device=plax.devices("cpu")[0])
      >>> pinned_device(plax.make_jaxpr(lambda x: f(x) * 2.0)(1.0))
      CpuDevice(id=0)
    """
    try:
        return _pinned[closed]
    except KeyError:
        pass
    except TypeError:  # not weakly referenceable: not cached
        return _find_pinned(closed.jaxpr, {})
    found = _pinned[closed] = _find_pinned(closed.jaxpr, {})
    return found


def _find_pinned(jaxpr: Jaxpr, memo: dict):
    from plax.core.jaxpr import sub_jaxprs
    found = None
    for e in jaxpr.eqns:
        here = ([e.params["device"]] if e.primitive is jit_p
                and e.params.get("device") is not None else [])
        for sub in sub_jaxprs(e.params):  # a body shared by many equations is walked once
            if id(sub) not in memo:
                memo[id(sub)] = _find_pinned(sub, memo)
            if memo[id(sub)] is not None:
                here.append(memo[id(sub)])
        for d in here:
            if found is not None and d != found:
                raise ValueError(f"Received incompatible devices for jitted computation: jit "
                                 f"inside jit pinned to {found!r} and to {d!r}. Pin the calls "
                                 "to one device, or call them outside one jitted function.")
            found = d
    return found


def check_pinned(pinned, device, committed: bool, what: str) -> None:
    """Raises JAX's ValueError when a program holding a call pinned to ``pinned`` is asked
    to run on another ``device`` (given to its jit, or where its arguments are committed).

    Args:
      pinned: the device of :func:`pinned_device` (None: nothing to check).
      device: where the program is asked to run.
      committed: whether it must run there (an explicit device, committed arguments).
      what: what asked for ``device``, for the message.

    Example:
      >>> import plax
      >>> cpu = plax.devices("cpu")[0]
      >>> check_pinned(cpu, cpu, True, "arguments committed")  # the same device: no error
    """
    if pinned is not None and committed and device != pinned:
        raise ValueError(f"Received incompatible devices for jitted computation: {what} on "
                         f"{device!r} and jit inside jit pinned to {pinned!r}. Move the "
                         "arguments with plax.device_put, or pin the calls to one device.")


def _jit_impl(*args, jaxpr: ClosedJaxpr, name: str, device=None, backend=None,
              ctx_mesh=None, in_shardings=None, out_shardings=None, donated_invars=None,
              keep_unused=False):
    # A call evaluated eagerly (an outer jaxpr run by eval_jaxpr, the known half of a
    # linearized call, a transposed call in a backward pass): compile the body once per
    # device and run it on raw buffers.
    where, committed = _placement(args, None if keep_unused else jaxpr)
    pinned = pinned_device(jaxpr)
    if device is not None:  # jit(f, device=d): committed arguments move there, as in jit
        check_pinned(pinned, device, True, f"jit {name!r} pinned")
        committed = True
    elif pinned is not None:
        check_pinned(pinned, where, committed, "arguments committed")
        device, committed = pinned, True
    backend, device = call_target(device, backend, where)
    per_device = _executables.get(jaxpr)
    if per_device is None:
        per_device = _executables.setdefault(jaxpr, {})
    entry = per_device.get((device, backend))
    if entry is None:
        entry = per_device[device, backend] = compile_closed(jaxpr, backend, device)
    bufs = [a._buf if type(a) is Array and a._device is device else to_buffer(a, device)
            for a in args]
    outs = entry.executable(*entry.const_bufs, *bufs)
    return wrap_outputs(outs, entry.out_avals, device, committed)


def run_pinned_call(runner, *buffers, jaxpr: ClosedJaxpr, name: str, device=None,
                    backend=None, **_recorded) -> list:
    """A pinned call (``jit(f, backend=b)`` inside a compiled program) run from the program of
    ``runner``: its body compiled by its own backend, on its device, the buffers moved there
    and back (nothing is copied between CPU backends). The lowering driver splices a pinned
    call whose target is the program's own, as any call.

    Args:
      runner: the :class:`~plax.lowering.bodies.BodyRunner` of the calling program.
      *buffers: the call's operands, buffers of that program.
      jaxpr, name, device, backend: the call's parameters (the others it records, such as
        ``ctx_mesh`` or ``donated_invars``, do not change how it runs).

    Returns:
      The output buffers, on the calling program's device.

    Example:
      >>> import plax
      >>> f = plax.jit(lambda x: x * 2.0, backend="numpy")
      >>> plax.jit(lambda x: f(x) + 1.0, backend="numba")(1.0)  # f runs with NumPy
      Array(3., dtype=float32, weak_type=True)
    """
    from plax.device import move_buffer
    from plax.lowering.bodies import runner_for
    chosen, target = call_target(device, backend, runner.device)
    if chosen is runner.backend and target == runner.device:
        return runner.run(jaxpr, *buffers)
    here, there = (runner.device, runner.backend), (target, chosen)
    outs = runner_for(chosen, target).run(
        jaxpr, *[move_buffer(b, here[0], there[0], src_backend=here[1], dst_backend=there[1])
                 for b in buffers])
    return [move_buffer(o, there[0], here[0], src_backend=there[1], dst_backend=here[1])
            for o in outs]


def wrap_outputs(buffers, avals, device, committed: bool) -> list:
    """The results of a compiled call: an Array per output buffer, a NumPy array per float0
    output (as JAX returns them)."""
    new = Array._new
    return [b if a.dtype == dtypes.float0 else new(b, a, device, committed)
            for b, a in zip(buffers, avals)]


registry.register_rule("impl", jit_p)(_jit_impl)


# ------------------------------------------------------------------ derived bodies

# body -> {key: derived}; weak so that the derived bodies live as long as their source
_derived: "weakref.WeakKeyDictionary[ClosedJaxpr, dict]" = weakref.WeakKeyDictionary()
_NOT_STAGED = object()  # a cached "could not be staged" (the rule then evaluates inline)


def _memo(closed: ClosedJaxpr, key: tuple, make: Callable[[], Any]):
    table = _derived.get(closed)
    if table is None:
        table = _derived.setdefault(closed, {})
    try:
        hit = table[key]
    except KeyError:
        hit = table[key] = make()
    except TypeError:  # an unhashable key part (an exotic axis name): no caching
        return make()
    return None if hit is _NOT_STAGED else hit


def _stage(fun: Callable, in_avals: Sequence[ShapedArray], trace_type=JaxprTrace):
    """``fun`` traced to a ClosedJaxpr, or ``_NOT_STAGED`` if it closed over a tracer of an
    enclosing transform (such a body is only valid inside that transform)."""
    closed, _ = trace_to_jaxpr(fun, in_avals, trace_type=trace_type)
    if any(isinstance(c, Tracer) for c in closed.consts):
        return _NOT_STAGED
    return closed


def _has_shardings(params: dict) -> bool:
    """Whether a call records per-operand or per-result parameters (``jit``'s
    ``in_shardings``/``out_shardings``, donated operands): the calls derived from it carry
    them as JAX's rules do (:mod:`plax.transforms.jit_shardings`)."""
    return "in_shardings" in params or "out_shardings" in params or \
        "donated_invars" in params


def _is_zero_tangent(t) -> bool:
    if type(t) is Zero:
        return True
    return get_aval(t).dtype == dtypes.float0


def jvp_jaxpr(closed: ClosedJaxpr, nonzeros: tuple, t_avals: tuple, linear: bool):
    """The JVP of ``closed`` as a ClosedJaxpr, with which output tangents are nonzero.

    The result takes the primals, then the tangents of the inputs marked in ``nonzeros``
    (of types ``t_avals``), and returns the primal outputs, then the nonzero output
    tangents. ``linear`` stages the tangents as reverse mode does (a custom_vjp function
    then records its ``custom_lin`` instead of refusing forward mode). Cached; None when
    the JVP cannot be staged on its own.
    """
    def make():
        in_avals = closed.in_avals
        n = len(in_avals)
        out_nz: list = []

        def fun(*args):
            it = iter(args[n:])
            tangents = [next(it) if nz else Zero(tangent_aval(a))
                        for a, nz in zip(in_avals, nonzeros)]
            outs_p, outs_t = jvp_flat(jaxpr_as_fun(closed), list(args[:n]), tangents)
            out_nz[:] = [not _is_zero_tangent(t) for t in outs_t]
            return list(outs_p) + [t for t, nz in zip(outs_t, out_nz) if nz]

        staged = _stage(fun, list(in_avals) + list(t_avals),
                        LinearizeTrace if linear else JaxprTrace)
        return _NOT_STAGED if staged is _NOT_STAGED else (staged, tuple(out_nz))

    return _memo(closed, ("jvp", nonzeros, t_avals, linear), make)


def _jvp_inline(closed, primals, tangents):
    """The JVP of the body evaluated inline under the caller's transforms (the fallback)."""
    from plax.state.primitives import inline_body
    with inline_body([*primals, *(t for t in tangents if type(t) is not Zero)]):
        return jvp_flat(jaxpr_as_fun(closed), list(primals), list(tangents))


def _jit_jvp(primals, tangents, *, jaxpr: ClosedJaxpr, name: str, **placement):
    from plax.state.discharge import jaxpr_has_refs
    if jaxpr_has_refs(jaxpr):
        # a body reading or writing refs is differentiated inline: its tangent refs are
        # written by the body's own equations (a known/unknown split would lose them)
        return _jvp_inline(jaxpr, primals, tangents)
    # float0 tangents (of integer inputs) are zeros, whether symbolic or not
    nonzeros = tuple(not _is_zero_tangent(t) for t in tangents)
    nz_tangents = [t for t, nz in zip(tangents, nonzeros) if nz]
    t_avals = tuple(get_aval(t) for t in nz_tangents)
    if any(is_linearize_tracer(t) for t in nz_tangents):
        return _jit_linearize(primals, nz_tangents, nonzeros, t_avals, jaxpr, name, placement)
    made = jvp_jaxpr(jaxpr, nonzeros, t_avals, linear=False)
    if made is None:
        return _jvp_inline(jaxpr, primals, tangents)
    jvp_closed, out_nz = made
    if _has_shardings(placement):
        from plax.transforms.jit_shardings import jvp_params
        placement = jvp_params(placement, len(primals), len(jaxpr.out_avals), nonzeros, out_nz)
    outs = jit_p.bind(*primals, *nz_tangents, jaxpr=jvp_closed, name=name, **placement)
    n = len(jaxpr.out_avals)
    return outs[:n], _with_zeros(outs[n:], out_nz, jaxpr.out_avals)


def _with_zeros(nz_values, nonzeros, primal_avals) -> list:
    it = iter(nz_values)
    return [next(it) if nz else Zero(tangent_aval(a)) for nz, a in zip(nonzeros, primal_avals)]


def _jit_linearize(primals, nz_tangents, nonzeros, t_avals, closed, name, placement):
    """Reverse mode: a known call computes the primal outputs and the residuals now (or in
    whatever trace lies below); an unknown call, linear in the tangents, is staged into the
    linearize trace for transposition."""
    def make():
        made = jvp_jaxpr(closed, nonzeros, t_avals, linear=True)
        if made is None:
            return _NOT_STAGED
        jvp_closed, out_nz = made
        split = split_known(jvp_closed, len(closed.in_avals), len(closed.out_avals))
        return _NOT_STAGED if split is None else (split, out_nz)

    made = _memo(closed, ("linearize", nonzeros, t_avals), make)
    if made is None:
        tangents = _with_zeros(nz_tangents, nonzeros, closed.in_avals)
        return _jvp_inline(closed, primals, tangents)
    split, out_nz = made
    known_params, unknown_params = _split_call_params(placement, split, closed, nonzeros,
                                                      out_nz)
    known_outs = jit_p.bind(*primals, jaxpr=split.known, name=name, **known_params)
    primal_outs = [primals[i] if where == "in" else known_outs[i]
                   for where, i in split.primal_outs]
    residuals = []
    for where, i in split.residuals:
        if where == "const":  # a constant of the body, passed by value
            residuals.append(i)
        elif where == "in":
            residuals.append(primals[i])
        elif where == "primal_out":
            residuals.append(primal_outs[i])
        else:
            residuals.append(known_outs[i])
    tangent_outs = (jit_p.bind(*residuals, *nz_tangents, jaxpr=split.unknown, name=name,
                               **unknown_params)
                    if split.unknown.jaxpr.outvars else [])
    return primal_outs, _with_zeros(tangent_outs, out_nz, closed.out_avals)


def _split_call_params(placement: dict, split, closed: ClosedJaxpr, nonzeros, out_nz):
    """The parameters of the known and unknown calls (their shardings as JAX's partial
    evaluation of ``jit`` records them: :func:`~plax.transforms.jit_shardings.linearize_params`)."""
    if not _has_shardings(placement):
        return placement, placement
    from plax.transforms.jit_shardings import linearize_params
    n_known = len(split.known.out_avals)
    known_primal_outs = [-1] * n_known
    for k, (where, i) in enumerate(split.primal_outs):
        if where != "in" and i < n_known:
            known_primal_outs[i] = k
    return linearize_params(placement, len(closed.in_avals), len(closed.out_avals),
                            n_known, len(split.residuals), nonzeros, out_nz,
                            known_primal_outs)


registry.register_rule("jvp", jit_p)(_jit_jvp)


# ------------------------------------------------------------------ transpose

def transpose_jaxpr(closed: ClosedJaxpr, undefined: tuple, ct_avals: tuple):
    """The transpose of ``closed``, linear in its inputs marked ``undefined``.

    The result takes the other inputs (residuals), then the nonzero output cotangents (of
    types ``ct_avals``, None for a zero one) and returns the nonzero input cotangents of
    the linear inputs; also returned is which of those are nonzero. Cached.
    """
    def make():
        from plax.transforms.transpose import backward_pass
        j = closed.jaxpr
        known = [v for v, u in zip(j.invars, undefined) if not u]
        linear = [v for v, u in zip(j.invars, undefined) if u]
        as_linear = Jaxpr(list(j.constvars) + known, linear, j.outvars, j.eqns)
        out_nz: list = []
        n_known = len(known)

        def fun(*args):
            it = iter(args[n_known:])
            cts = [Zero(tangent_aval(v.aval)) if a is None else next(it)
                   for v, a in zip(j.outvars, ct_avals)]
            cts_in = backward_pass(as_linear, list(closed.consts) + list(args[:n_known]), cts)
            out_nz[:] = [not _is_zero_tangent(c) for c in cts_in]
            return [c for c, nz in zip(cts_in, out_nz) if nz]

        in_avals = [v.aval for v in known] + [a for a in ct_avals if a is not None]
        staged = _stage(fun, in_avals)
        return _NOT_STAGED if staged is _NOT_STAGED else (staged, tuple(out_nz))

    return _memo(closed, ("transpose", undefined, ct_avals), make)


def _jit_transpose(cts, *args, jaxpr: ClosedJaxpr, name: str, **placement):
    from plax.transforms.transpose import backward_pass, is_undefined_primal
    undefined = tuple(is_undefined_primal(x) for x in args)
    ct_avals = tuple(None if _is_zero_tangent(c) else get_aval(c) for c in cts)
    made = transpose_jaxpr(jaxpr, undefined, ct_avals)
    if made is None:  # transpose inline
        j = jaxpr.jaxpr
        known = [v for v, u in zip(j.invars, undefined) if not u]
        as_linear = Jaxpr(list(j.constvars) + known,
                          [v for v, u in zip(j.invars, undefined) if u], j.outvars, j.eqns)
        cts_in = iter(backward_pass(as_linear, list(jaxpr.consts) +
                                    [x for x, u in zip(args, undefined) if not u], list(cts)))
        return [next(cts_in) if u else None for u in undefined]
    t_closed, out_nz = made
    operands = [x for x, u in zip(args, undefined) if not u]
    operands += [c for c, a in zip(cts, ct_avals) if a is not None]
    if _has_shardings(placement):
        from plax.transforms.jit_shardings import transpose_params
        placement = transpose_params(placement, len(args), len(cts), undefined,
                                     [a is not None for a in ct_avals], out_nz)
    outs = iter(jit_p.bind(*operands, jaxpr=t_closed, name=name, **placement)
                if t_closed.jaxpr.outvars
                else [])
    nz = iter(out_nz)
    return [(next(outs) if next(nz) else None) if u else None for u in undefined]


registry.register_rule("transpose", jit_p)(_jit_transpose)


# ------------------------------------------------------------------ batching

def batch_jaxpr(closed: ClosedJaxpr, dims: tuple, axis_data):
    """``closed`` vectorised: inputs batched along ``dims`` (None: not batched), outputs
    batched wherever the batching rules put them. Returns the ClosedJaxpr and the output
    batch dimensions (None for outputs that do not depend on a batched input). Cached."""
    from plax.transforms.batching import BatchTrace, BatchTracer

    def make():
        out_dims: list = []

        def fun(*vals):
            with new_main(BatchTrace, payload=axis_data) as main:
                trace = BatchTrace(main)
                tracers = [v if d is None else BatchTracer(trace, v, d)
                           for v, d in zip(vals, dims)]
                outs = [trace.full_raise(o) for o in jaxpr_as_fun(closed)(*tracers)]
            out_dims[:] = [o.batch_dim for o in outs]
            return [o.val for o in outs]

        in_avals = [varying.outside(a if d is None else _batched_aval(a, d, axis_data.size),
                                    axis_data.name) for a, d in zip(closed.in_avals, dims)]
        staged = _stage(fun, in_avals)
        return _NOT_STAGED if staged is _NOT_STAGED else (staged, tuple(out_dims))

    return _memo(closed, ("batch", dims, axis_data), make)


def _batched_aval(aval: ShapedArray, dim: int, size: int) -> ShapedArray:
    shape = list(aval.shape)
    shape.insert(dim, size)
    if type(aval) is not ShapedArray:  # a batched ref (plax.state) stays a ref
        return aval.update(shape=tuple(shape))
    return ShapedArray(tuple(shape), aval.dtype, aval.weak_type, aval.vma)


def _jit_batch(vals, dims, *, jaxpr: ClosedJaxpr, name: str, axis_data, **placement):
    made = batch_jaxpr(jaxpr, tuple(dims), axis_data)
    if made is None:
        from plax.transforms.batching import batch_flat_fun
        return batch_flat_fun(jaxpr_as_fun(jaxpr), dims, axis_data)(*vals), 0
    b_closed, out_dims = made
    if _has_shardings(placement):
        from plax.transforms.jit_shardings import batch_params
        placement = batch_params(placement, len(vals), len(out_dims), dims, out_dims)
    return jit_p.bind(*vals, jaxpr=b_closed, name=name, **placement), list(out_dims)


_jit_batch.needs_axis_data = True
registry.register_rule("batch", jit_p)(_jit_batch)


def _register_lowering() -> None:
    from plax.lowering.bodies import register_body_kernel
    from plax.lowering.calls import register_call_primitive
    register_call_primitive(jit_p, "jaxpr")
    register_body_kernel(jit_p, run_pinned_call)  # pinned calls the driver does not splice


_register_lowering()
