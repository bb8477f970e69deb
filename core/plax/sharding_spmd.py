"""``jit`` of an explicitly sharded program, run on every device on that device's blocks.

Given arguments of explicit-sharded types, :func:`plax.jit` partitions its program
(:mod:`plax.sharding_partition`): each equation is rewritten for the blocks the devices
hold, and where the types call for communication -- a contracting dimension split over a
mesh axis, a reduction over a split dimension, a ``reshard``, a reshape that regroups split
data, an operation computed whole -- an exchange between the devices' blocks goes between
(:mod:`plax.sharding_exchange`). The program then runs on every device of the mesh at once,
one thread each (:mod:`plax.sharding_threads`): the equations between two exchanges that
move data run as one compiled program per device, the devices meeting only at those
exchanges. Nothing is gathered onto one device: the results are assembled from the
per-device buffers with the shardings of their types.

A program with refs runs discharged (each ref a value threaded through the program, so
it holds a block per device as its type says); a ref from outside (closed over or passed in)
enters as its value, laid out as that value is, and its final value, assembled from the
devices' blocks, is written back into it (:class:`OutsideRefs`); a ``debug.print`` or
``debug.callback`` in it is called once per execution, by the first device, on the whole
operands (gathered there, as JAX gathers them), and an ``io_callback``'s results are given
whole to every device, while a ``debug.callback(partitioned=True)`` is called by every
device on its own blocks. A program with another effect, values on two
meshes, or nothing computed on split blocks runs on one device as before, its results
placed as their types say. Partial
sums (unreduced types, ``{U:Y}``) stay on their devices: the exchanges sum them only where
a type stops being unreduced, and never mix one device's terms into another's.

Arguments split over a mesh of ``Auto`` axes run the same way, with the layouts JAX's
partitioner gives every value (:mod:`plax.sharding_auto`) in place of the types'.
"""
from __future__ import annotations

import contextlib
import threading
import weakref
from typing import Any, Callable

import numpy as np

from plax.sharding import NamedSharding, PartitionSpec
from plax.sharding_exchange import Exchange
from plax.sharding_partition import HostCall, Loop, Program, Segment, build
from plax.sharding_types import dims_spec, explicit_sharding, spec_dims, type_dims

# closed jaxpr -> Program or None; weak, so a program nobody holds frees its plan
_plans: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()
_NOT_PLANNED = object()


def plan(closed) -> Program | None:
    """The partitioned program of ``closed`` (cached per jaxpr), or None when it runs on
    one device (see the module).

    Example:
      >>> with plax.set_mesh(plax.make_mesh((1,), ("X",))):
      ...     x = plax.device_put(np.ones((8, 4), np.float32), plax.P("X"))
      ...     closed = plax.make_jaxpr(lambda u: jnp.sum(u, axis=0))(x)
      >>> [type(s).__name__ for s in plan(closed).steps]   # partial sums, then added
      ['Segment', 'Exchange']
    """
    return _planned(closed)[0]


def _planned(closed) -> tuple:
    """``(program or None, the jaxpr it partitions, OutsideRefs or None)``, cached per jaxpr:
    ``closed`` itself, or its discharged form when it has refs (:func:`_without_refs`)."""
    hit = _plans.get(closed, _NOT_PLANNED)
    if hit is not _NOT_PLANNED:
        return hit
    found = _without_refs(closed)
    if found is None:
        result = (None, None, None)
    else:
        pure, refs = found
        result = (build(pure), pure, refs)
    _plans[closed] = result
    return result


class OutsideRefs:
    """How a program's refs from outside reach its discharged form: ``consts`` are the Ref
    objects it closed over (its leading inputs once hoisted), ``ref_in`` the positions (over
    those inputs, then the call's arguments) of every ref input, whose final values follow
    the ``n_out`` results in that order."""

    __slots__ = ("consts", "ref_in", "n_out")

    def __init__(self, consts: list, ref_in: list, n_out: int):
        self.consts, self.ref_in, self.n_out = consts, ref_in, n_out

    def arguments(self, leaves: list) -> list:
        """The discharged program's arguments: each ref's current value in its place."""
        from plax.state.types import Ref
        return [r._value for r in self.consts] + \
            [x._value if type(x) is Ref else x for x in leaves]

    def write_back(self, leaves: list, outs: list) -> list:
        """Writes the refs' final values (the results after the first ``n_out``) into the
        Ref objects, each placed as its value was; returns the program's own results."""
        from plax.state.types import Ref
        owners = list(self.consts) + list(leaves)
        for i, final in zip(self.ref_in, outs[self.n_out:]):
            ref = owners[i]
            if type(ref) is Ref:
                ref._value = _placed_like(final, ref._value)
        return outs[:self.n_out]


def _placed_like(new, old):
    """``new`` (a result assembled from the devices' blocks) laid out as ``old`` was: a ref
    keeps its type, so a value that was on one device goes back there (the block that device
    holds when it has the whole value: nothing is gathered)."""
    from plax.array import Array
    if new.sharding == old.sharding:
        return new
    devices = old.sharding.device_set if hasattr(old.sharding, "device_set") else None
    if devices is not None and len(devices) == 1 and hasattr(new, "_pieces"):
        d = next(iter(devices))
        whole = [p for p in new._pieces if p.device == d and
                 all(s == slice(None) or s.indices(n) == (0, n, 1)
                     for s, n in zip(p.index, new.shape))]
        if whole:
            p = whole[0]
            return Array._new(p.buffer, old.aval, d, old._committed)
    import plax
    return plax.device_put(new, old.sharding)


def _without_refs(closed):
    """``(pure, refs)``: ``closed`` with its refs discharged (each ``new_ref`` and each ref
    from outside a value threaded through the program, :mod:`plax.state.discharge`), and an
    :class:`OutsideRefs` when refs come from outside (None when they are all made inside
    it); ``(closed, None)`` when it has no refs. The program is then pure, and its refs,
    like JAX's, hold a block per device as their types say (a replicated ref a copy on
    each). None when a ref is returned or the discharged program does not type (it then
    runs on one device)."""
    from plax.state.discharge import discharge_closed, hoist_ref_consts, jaxpr_has_refs
    from plax.state.types import is_ref_aval
    if not jaxpr_has_refs(closed) and not any(is_ref_aval(v.aval) for v in closed.jaxpr.invars):
        return closed, None
    if any(is_ref_aval(v.aval) for v in closed.jaxpr.outvars):
        return None
    try:
        hoisted, consts = hoist_ref_consts(closed)
        pure, ref_in = discharge_closed(hoisted)
    except Exception:  # noqa: BLE001 -- e.g. a sharding error the refs' types hid
        return None
    if not ref_in:
        return pure, None
    return pure, OutsideRefs(consts, ref_in, len(closed.jaxpr.outvars))


def _executable(closed, backend, device):
    """A segment compiled for ``device`` (once per platform for CPU devices, which share
    host buffers; once per device otherwise)."""
    from plax.transforms.call import compile_closed
    return compile_closed(closed, backend, device)


def _compiled(program: Program, devices: list, backends: dict) -> list:
    """``[{device: executable}]`` per step (None for exchanges and loops), compiled in the
    caller's thread (compiling is not thread-safe; running is)."""
    out = []
    for step in program.steps:
        if not isinstance(step, Segment):
            out.append(None)
            continue
        per = {}
        for d in devices:
            key = (id(step), backends[d].name, "cpu" if d.platform == "cpu" else d)
            exe = program.executables.get(key)
            if exe is None:
                exe = program.executables[key] = _executable(step.closed, backends[d], d)
            per[d] = exe
        out.append(per)
    return out


def _const_buffers(program: Program, device) -> list:
    place = "cpu" if device.platform == "cpu" else device
    bufs = program.const_bufs.get(place)
    if bufs is None:
        from plax.transforms.call import to_buffer
        bufs = program.const_bufs[place] = [to_buffer(c, device) for c in program.consts]
    return bufs


class _Meeting:
    """Where the device threads of one call meet: before and after each exchange that moves
    data (every source block written; every read of it done before anyone overwrites it),
    and where a loop or branch decides (every device follows the first one's decision, so
    no device can leave a loop the others stay in). A device that fails breaks the meeting,
    so the others stop waiting and its error is the one raised."""

    def __init__(self, devices: list):
        self.first = devices[0]
        self._barrier = threading.Barrier(len(devices)) if len(devices) > 1 else None
        self._decision: Any = None
        self.error: BaseException | None = None

    def wait(self) -> None:
        if self._barrier is not None:
            self._barrier.wait()

    def agree(self, device, value):
        """The first device's ``value``, on every device."""
        if self._barrier is None:
            return value
        if device is self.first:
            self._decision = value
        self.wait()
        value = self._decision
        self.wait()  # read by all before the first device may decide again
        return value

    def guarded(self, work: Callable[[], Any]) -> Any:
        """``work()`` on one device's thread: an error breaks the meeting (the others stop
        waiting); a device released that way raises the failing device's error."""
        try:
            return work()
        except threading.BrokenBarrierError:
            raise self.error or RuntimeError("a device thread stopped") from None
        except BaseException as err:  # noqa: BLE001 -- the others are released, then raised
            self.fail(err)
            raise

    def fail(self, err: BaseException) -> None:
        if self.error is None:
            self.error = err
        if self._barrier is not None:
            self._barrier.abort()


class _Run:
    """What every device thread of one call shares: the devices, their backends and
    environments, each (nested) program's compiled segments and constants, the meeting."""

    def __init__(self, devices: list, backends: dict, envs: dict):
        self.devices, self.backends, self.envs = devices, backends, envs
        self.meeting = _Meeting(devices)
        self.compiled: dict = {}  # id(program) -> [{device: executable} or None] per step
        self.consts: dict = {}  # id(program) -> {device: [constant buffers]}

    def prepare(self, program: Program) -> None:
        """Compiles ``program`` and the bodies of its loops (in the caller's thread)."""
        if id(program) in self.compiled:
            return
        self.compiled[id(program)] = _compiled(program, self.devices, self.backends)
        self.consts[id(program)] = {d: _const_buffers(program, d) for d in self.devices}
        for step in program.steps:
            if isinstance(step, Loop):
                for body in (step.body if step.kind == "cond" else [step.body, step.cond]):
                    if body is not None:
                        self.prepare(body)


#: a loop-free program whose blocks hold at most this many elements per device runs its
#: devices one after another in the caller's thread: waking a thread per device and meeting
#: at barriers costs more than such blocks take to compute
LOCKSTEP_ELEMENTS = 1 << 15


def _lockstep(program: Program) -> bool:
    """Whether ``program`` runs step by step over the devices in the caller's thread (small
    blocks, no loop), decided once per program."""
    found = getattr(program, "lockstep", None)
    if found is None:
        import math
        from plax.core.jaxpr import Var
        size = sum(math.prod(v.aval.shape) for v in list(program.invars) +
                   list(program.outvars) if isinstance(v, Var))
        found = program.lockstep = size <= LOCKSTEP_ELEMENTS and \
            not any(isinstance(s, Loop) for s in program.steps)
    return found


def _execute_in_lockstep(program: Program, run: "_Run") -> None:
    """``program``'s steps in order, each on every device before the next (one thread: an
    exchange then finds every device's source block written)."""
    devices, envs = run.devices, run.envs
    if program.constvars:
        for d in devices:
            envs[d].update(zip(program.constvars, run.consts[id(program)][d]))
    compiled = run.compiled[id(program)]
    for k, step in enumerate(program.steps):
        if isinstance(step, Segment):
            for d in devices:
                env = envs[d]
                exe = compiled[k][d]
                env.update(zip(step.outs, exe.executable(*exe.const_bufs,
                                                         *[env[v] for v in step.ins])))
        elif isinstance(step, HostCall) and step.per_device:
            for d in devices:  # each device on its own blocks
                _host_call(step, d, envs[d], run.backends)
        elif isinstance(step, HostCall):
            results = _host_call(step, devices[0], envs[devices[0]], run.backends)
            for d in devices:
                _give_results(step, results, d, envs[d], run.backends)
        else:
            bufs = {d: step.run(d, envs, run.backends) for d in devices}
            for d in devices:
                envs[d][step.dst] = bufs[d]


def _execute(program: Program, devices: list, backends: dict, envs: dict, share) -> None:
    """Runs ``program`` on every device at once, one thread each; ``envs[device]`` holds its
    arguments' blocks on entry (by local variable) and every value it computes on exit.
    Loops and branches whose bodies hold exchanges run on every device too, the devices
    meeting at those exchanges inside the body. A small loop-free program runs its devices
    in turn in the caller's thread instead (:func:`_lockstep`)."""
    from plax.sharding import internal_eager_work
    with internal_eager_work():  # its host calls work on one device's blocks each
        _execute_steps(program, devices, backends, envs, share)


def _execute_steps(program: Program, devices: list, backends: dict, envs: dict,
                   share) -> None:
    from plax.sharding_threads import on_each_device
    run = _Run(devices, backends, envs)
    run.prepare(program)
    if _lockstep(program):
        _execute_in_lockstep(program, run)
        return

    def work(i):
        d = devices[i]

        def steps():
            with (backends[d].threads_limited(share) if share and d.platform == "cpu"
                  else contextlib.nullcontext()):
                _run_steps(program, d, run)
        run.meeting.guarded(steps)
    try:
        on_each_device(devices, work, together=_meets(program))
    except BaseException as err:
        if run.meeting.error is not None and run.meeting.error is not err:
            raise run.meeting.error from None
        raise


def _meets(program: Program) -> bool:
    """Whether the device threads running ``program`` wait for each other somewhere."""
    return any(isinstance(s, Loop) or (isinstance(s, Exchange) and s.moves_data()) or
               (isinstance(s, HostCall) and s.outs) for s in program.steps)


def _run_steps(program: Program, d, run: _Run) -> None:
    """``program``'s steps on device ``d`` (its arguments already in its environment)."""
    env = run.envs[d]
    if program.constvars:
        env.update(zip(program.constvars, run.consts[id(program)][d]))
    compiled = run.compiled[id(program)]
    for k, step in enumerate(program.steps):
        if isinstance(step, Segment):
            exe = compiled[k][d]
            outs = exe.executable(*exe.const_bufs, *[env[v] for v in step.ins])
            env.update(zip(step.outs, outs))
        elif isinstance(step, Loop):
            _run_loop(step, d, run)
        elif isinstance(step, HostCall) and step.per_device:
            with _one_callback_at_a_time:  # each device on its own blocks, in turn
                _host_call(step, d, env, run.backends)
        elif isinstance(step, HostCall):
            # once, as JAX calls it; its results (if any) are the first device's, shared
            results = _host_call(step, d, env, run.backends) if d is run.devices[0] else None
            if step.outs:
                _give_results(step, run.meeting.agree(d, results), d, env, run.backends)
        elif step.moves_data():
            run.meeting.wait()  # every device's source block is written
            buf = step.run(d, run.envs, run.backends)
            run.meeting.wait()  # every device has read the source blocks it needs
            env[step.dst] = buf
        else:
            env[step.dst] = step.run(d, run.envs, run.backends)


#: device threads call a partitioned callback one at a time (the user's function need not
#: be thread-safe)
_one_callback_at_a_time = threading.Lock()


def _host_call(step: HostCall, d, env: dict, backends) -> list:
    """Calls ``step``'s callback with device ``d``'s (whole) copies of its operands; its
    results on the host."""
    from plax.array import Array
    e = step.eqn
    args = [Array._new(_value(env, v, d, backends), v.aval, d, True) for v in e.invars]
    outs = e.primitive.bind(*args, **e.params)
    if not e.primitive.multiple_results:
        outs = [outs]
    return [np.asarray(o) for o in outs or ()]


def _give_results(step: HostCall, results: list, d, env: dict, backends) -> None:
    """``step``'s results (host values) as device ``d``'s whole copies."""
    for v, host in zip(step.eqn.outvars, results):
        if v in step.outs:
            # a copy per device: no two devices' programs share a buffer
            env[v] = _put(np.array(host, v.aval.dtype, copy=True), d, backends)


def _value(env: dict, v, device, backends):
    """The buffer of ``v`` (a local variable, or a literal) on ``device``."""
    from plax.core.jaxpr import Literal
    if isinstance(v, Literal):
        from plax.transforms.call import to_buffer
        return to_buffer(np.asarray(v.val, v.aval.dtype), device)
    return env[v]


def _host(buf, device, backends) -> np.ndarray:
    return np.asarray(buf) if device.platform == "cpu" else backends[device].to_host(buf)


def _put(host, device, backends):
    return host if device.platform == "cpu" else backends[device].put(host, device)


def _call(program: Program, args: list, d, run: _Run) -> list:
    """Device ``d``'s results of one run of a loop body or branch on its ``args``."""
    env = run.envs[d]
    env.update(zip(program.invars, args))
    _run_steps(program, d, run)
    return [_value(env, v, d, run.backends) for v in program.outvars]


def _run_loop(step: Loop, d, run: _Run) -> None:
    """A scan or while loop whose body holds exchanges, or a cond whose branches do, run on
    device ``d`` over its blocks (every device runs it at once, meeting at the exchanges)."""
    backends, env = run.backends, run.envs[d]
    ins = [_value(env, v, d, backends) for v in step.ins]
    p = step.params
    if step.kind == "cond":  # the index is replicated; the first device's copy decides
        index = run.meeting.agree(d, int(_host(ins[0], d, backends)))
        branch = step.body[min(max(index, 0), len(step.body) - 1)]
        env.update(zip(step.outs, _call(branch, ins[1:], d, run)))
        return
    if step.kind == "while":
        nc, nb = p["cond_nconsts"], p["body_nconsts"]
        carry = ins[nc + nb:]
        while True:
            [pred] = _call(step.cond, ins[:nc] + carry, d, run)
            if not run.meeting.agree(d, bool(_host(pred, d, backends))):
                break
            carry = _call(step.body, ins[nc:nc + nb] + carry, d, run)
        env.update(zip(step.outs, carry))
        return
    nc, nk, length = p["num_consts"], p["num_carry"], p["length"]
    consts, carry = ins[:nc], ins[nc:nc + nk]
    xs = [_host(x, d, backends) for x in ins[nc + nk:]]
    ys: list = [None] * length
    for i in (range(length - 1, -1, -1) if p["reverse"] else range(length)):
        outs = _call(step.body, consts + carry +
                     [_put(np.ascontiguousarray(x[i]), d, backends) for x in xs], d, run)
        carry = outs[:nk]
        ys[i] = [_host(y, d, backends) for y in outs[nk:]]
    stacked = [_put(np.stack([ys[i][k] for i in range(length)]), d, backends)
               for k in range(len(step.outs) - nk)] if length else \
        [_put(np.zeros(v.aval.shape, v.aval.dtype), d, backends)
         for v in step.outs[nk:]]
    env.update(zip(step.outs, carry + stacked))


def _argument_buffer(x, aval, dims, device, index, mesh, sharding_of=explicit_sharding):
    """``device``'s block of argument ``x`` (None: the argument does not allow it).
    ``sharding_of(x)`` is the sharding ``x`` is laid out with on the mesh (its type's, or
    for a mesh of ``Auto`` axes its array's)."""
    from plax.array import Array
    from plax.sharding_types import _block
    from plax.transforms.call import to_buffer
    if not isinstance(x, Array):
        return to_buffer(np.asarray(x, aval.dtype), device)
    s = sharding_of(x)
    if s is not None:
        if s.mesh != mesh or spec_dims(s.spec, x.ndim) != dims or \
                (sharding_of is explicit_sharding and type_dims(x.aval) != dims):
            return None
    elif any(dims):
        return None
    return _block(x, device, index)


def run_partitioned(closed, leaves: list, backend) -> list | None:
    """Runs ``closed`` on every device of its mesh on each device's blocks of ``leaves``, or
    returns None when the program (or an argument) does not allow it (see the module).

    Arguments of explicitly sharded types give the program's mesh and layouts; else
    arguments split over a mesh of ``Auto`` axes do, every value laid out as JAX's
    partitioner lays it out (:func:`plax.sharding_auto.auto_program`)."""
    from plax.state.types import Ref
    refs_closed_over = [c for c in closed.consts if type(c) is Ref]
    if any(explicit_sharding(x._value if type(x) is Ref else x) is not None
           for x in (*refs_closed_over, *leaves)):
        program, pure, refs = _planned(closed)
        if program is None:
            return None
        if refs is None:
            return run_program(program, pure.jaxpr, leaves, backend)
        outs = run_program(program, pure.jaxpr, refs.arguments(leaves), backend)
        return None if outs is None else refs.write_back(leaves, outs)
    from plax.sharding_auto import auto_program, auto_sharding
    found = auto_program(closed, leaves)
    if found is None:
        return None
    program, out_specs = found
    return run_program(program, closed.jaxpr, leaves, backend, sharding_of=auto_sharding,
                       out_specs=out_specs)


def run_program(program: Program, jaxpr, leaves: list, backend,
                sharding_of=explicit_sharding, out_specs=None) -> list | None:
    """``program`` (``jaxpr`` partitioned) run on every device of its mesh on each device's
    blocks of ``leaves``; the results assembled from the devices' blocks with the shardings
    of their types, or the specs ``out_specs`` says. None when an argument is laid out
    otherwise than the program takes it (the caller then runs it on one device)."""
    from plax import blas_threads
    mesh = program.mesh
    devices = list(mesh.devices.flat)
    backends = {d: backend if backend.platform == d.platform else d.backend for d in devices}
    envs: dict = {d: {} for d in devices}
    for x, v, lv, dims in zip(leaves, jaxpr.invars, program.invars, program.in_dims):
        shape = tuple(v.aval.shape)
        index = NamedSharding(mesh, dims_spec(dims)).devices_indices_map(shape)
        for d in devices:
            buf = _argument_buffer(x, v.aval, dims, d, index[d], mesh, sharding_of)
            if buf is None:
                return None
            envs[d][lv] = buf
    # CPU devices share the cores: each device's kernels (and BLAS) get its share of them
    n_cpu = sum(d.platform == "cpu" for d in devices)
    share = max(1, blas_threads.cores() // n_cpu) if n_cpu > 1 else None
    with blas_threads.limited(n_cpu):
        _execute(program, devices, backends, envs, share)
    specs = out_specs or [None] * len(program.outvars)
    return [_assembled(v, lv, dims, devices, envs, mesh, spec)
            for v, lv, dims, spec in zip(jaxpr.outvars, program.outvars, program.out_dims,
                                         specs)]


def _assembled(v, lv, dims, devices, envs, mesh, spec=None):
    """The result ``v`` of the program from every device's block of it (laid out as its
    type says, or as ``spec``)."""
    from plax.array import from_device_buffers
    from plax.core.jaxpr import Literal
    from plax.transforms.call import to_buffer
    aval = v.aval
    if spec is None:
        s = explicit_sharding(aval)
        spec = s.spec if s is not None else PartitionSpec()
    sharding = NamedSharding(mesh, spec)
    if isinstance(lv, Literal):
        host = np.asarray(lv.val, aval.dtype)
        bufs = {d: to_buffer(host, d) for d in devices}
    else:
        bufs = {d: envs[d][lv] for d in devices}
    return from_device_buffers(aval.shape, aval.dtype, sharding, bufs,
                               weak_type=aval.weak_type)


# ------------------------------------------------------------------ eager operations

#: (primitive, params, operand types, layouts, mesh) -> (program, its jaxpr) or None
_equations: dict = {}
_UNCACHED = object()


def run_equation(prim, args: list, params: dict, out_avals: list, mesh, layout=None,
                 out_specs=None) -> list | None:
    """One eager operation on sharded operands run as a partitioned one-equation program
    on every device of ``mesh`` (each device computes its block; partial results are
    combined and blocks exchanged where the layouts call for it), or None when it does not
    partition (the caller then computes it on one device).

    Args:
      prim, args, params: the operation, its operands (Arrays) and parameters.
      out_avals: the results' types (with their explicit shardings, when the mesh has
        Explicit axes).
      mesh: the mesh the operands are laid out on.
      layout: for a mesh of Auto axes, ``(operand dims, result dims)``: how the values are
        held, as types say otherwise.
      out_specs: the results' specs where the types do not say them.

    Returns:
      One ``{device: buffer}`` per result, or None.
    """
    from plax.core.jaxpr import ClosedJaxpr, Jaxpr, JaxprEqn, Var
    from plax.sharding_partition import build_with_layout
    key = _equation_key(prim, args, params, out_avals, layout, mesh)
    found = _equations.get(key, _UNCACHED) if key is not None else _UNCACHED
    if found is _UNCACHED:
        invars = [Var(a.aval) for a in args]
        outvars = [Var(a) for a in out_avals]
        closed = ClosedJaxpr(Jaxpr([], invars, outvars,
                                   [JaxprEqn(prim, invars, outvars, params)]), [])
        if layout is None:
            program = build(closed) if _mesh_of_closed(closed) == mesh else None
        else:
            held = dict(zip(invars, layout[0])) | dict(zip(outvars, layout[1]))
            program = build_with_layout(closed, mesh, list(layout[0]),
                                        lambda j, dims: held)
        found = None if program is None else (program, closed)
        if key is not None:
            if len(_equations) >= 256:  # bounded: eager shapes vary
                _equations.pop(next(iter(_equations)))
            _equations[key] = found
    if found is None:
        return None
    program, closed = found
    sharding_of = explicit_sharding
    if layout is not None:
        from plax.sharding_auto import auto_sharding as sharding_of
    outs = run_program(program, closed.jaxpr, args, _backend_of(mesh), sharding_of=sharding_of,
                       out_specs=out_specs)
    if outs is None:
        return None
    return [{p.device: p.buffer for p in o._pieces} for o in outs]


def _equation_key(prim, args, params, out_avals, layout, mesh):
    """The cache key of an eager one-equation program (operand types with their shardings
    and weak types, the results' shardings, layouts), or None when a parameter cannot be
    hashed (the program is then built for the call)."""
    try:
        key = (prim, tuple(sorted(params.items())),
               tuple((a.aval, a.aval.weak_type, getattr(a.aval, "sharding", None))
                     for a in args),
               tuple(getattr(a, "sharding", None) for a in out_avals),
               None if layout is None else (tuple(layout[0]), tuple(layout[1])), mesh)
        hash(key)
    except TypeError:
        return None
    return key


def _mesh_of_closed(closed):
    from plax.sharding_partition import _mesh_of
    return _mesh_of(closed)


def _backend_of(mesh):
    """The backend an eager program runs with: the first device's (each device's own where
    platforms differ, as :func:`run_program` picks)."""
    return mesh.devices.flat[0].backend
