"""Running a per-device program on several devices, one thread per device.

The program (a ClosedJaxpr traced once, in the caller's thread) is cut at its collectives:
each run of ordinary equations between two collectives is compiled by the devices' backend
(Numba kernels release the GIL, so the threads run in parallel), and each collective is
carried out here on the host buffers, every device writing its operand into a shared slot,
meeting the others at a barrier, reading the slots of its group and meeting them again
before the slots are reused.

Failure: a device that raises aborts the barrier, so the others, waiting in a collective or
arriving at one later, stop there; the call raises the first device's exception once, with a
note naming the device. Every barrier wait has a timeout (``PLAX_COLLECTIVE_TIMEOUT``
seconds, default 300): a device that never arrives makes the others raise ``TimeoutError``
instead of hanging.
"""
from __future__ import annotations

import contextlib
import heapq
import threading
from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait
from typing import Any, Sequence

import numpy as np

from plax.config import env_flag
from plax.core.jaxpr import ClosedJaxpr, Jaxpr, JaxprEqn, Literal, Var, sub_jaxprs
from plax.core.passes import dependency_graph
from plax.distributed import collective_timeout
from plax.lax.control_flow.cond import cond_p
from plax.lax.control_flow.loops import while_p
from plax.lax.control_flow.scan import scan_p
from plax.transforms.call import compile_closed, jit_p, to_buffer
from plax.transforms.checkpoint import checkpoint_p
from plax import blas_threads as blas
from plax_pmap.collectives import (COLLECTIVES, all_gather_p, all_to_all_p, axis_index_p,
                                   pmax_p, pmin_p, ppermute_p, psum_p, psum_scatter_p)

def _contig(a) -> np.ndarray:
    # (np.ascontiguousarray turns a 0-d array into a 1-d one)
    return np.array(a, copy=True, order="C")


_COLLECTIVE_SET = frozenset(COLLECTIVES)
# calls inlined into the per-device program when they hold a collective (their "jaxpr"
# takes the equation's operands as they are)
_CALLS = (jit_p, checkpoint_p)
# control flow whose bodies hold collectives: run by the device threads, body by body
_CONTROL = (cond_p, scan_p, while_p)
_SPLIT_PSUM = 1 << 16  # elements from which a psum is computed block-wise by the members
_pool: ThreadPoolExecutor | None = None
_pool_lock = threading.Lock()


def _executor(n: int) -> ThreadPoolExecutor:
    global _pool
    with _pool_lock:
        if _pool is None or _pool._max_workers < n:
            _pool = ThreadPoolExecutor(max_workers=max(2 * n, 16), thread_name_prefix="plax-device")
        return _pool


# ------------------------------------------------------------------ program analysis

def has_collective(jaxpr: Jaxpr) -> bool:
    """Whether ``jaxpr`` or any sub-jaxpr of it contains a collective."""
    for eqn in jaxpr.eqns:
        if eqn.primitive in _COLLECTIVE_SET:
            return True
        if any(has_collective(j) for j in sub_jaxprs(eqn.params)):
            return True
    return False


def threaded_control_flow(across_processes: bool) -> bool:
    """Whether the device threads run control flow whose bodies hold collectives
    (:class:`_Control`). Across processes they must (nothing else can run it); within one
    process the one-thread ``vmap`` formulation compiles the whole loop into one kernel and
    was as fast or faster on a 2-core host (a 50-step ``fori_loop`` with a ``pmean``: 9.3 ms
    against 12.0 ms, the threads' barriers costing ~50 us a step), so the threads run it
    only with ``PLAX_PMAP_THREADED_CONTROL_FLOW=1``."""
    return across_processes or env_flag("PLAX_PMAP_THREADED_CONTROL_FLOW", False)


def flatten_calls(closed: ClosedJaxpr, control_flow: bool = True) -> ClosedJaxpr | None:
    """``closed`` with every ``jit``/``checkpoint`` call that contains a collective inlined,
    so that all collectives are top-level equations or (with ``control_flow``) inside the
    bodies of ``cond``, ``scan`` and ``while`` equations, which the device threads run body
    by body (see :class:`_Control`); None when a collective sits inside another kind of
    sub-program (or inside control flow, without ``control_flow``)."""
    consts_vars = list(closed.jaxpr.constvars)
    consts = list(closed.consts)
    eqns: list = []

    def inline(jaxpr: Jaxpr, sub_consts, env: dict) -> bool:
        for v, c in zip(jaxpr.constvars, sub_consts):
            nv = Var(v.aval)
            consts_vars.append(nv)
            consts.append(c)
            env[v] = nv
        for eqn in jaxpr.eqns:
            ins = [x if isinstance(x, Literal) else env[x] for x in eqn.invars]
            if eqn.primitive in _CALLS and has_collective(eqn.params["jaxpr"].jaxpr):
                sub = eqn.params["jaxpr"]
                sub_env = dict(zip(sub.jaxpr.invars, ins))
                if not inline(sub.jaxpr, sub.consts, sub_env):
                    return False
                for o, so in zip(eqn.outvars, sub.jaxpr.outvars):
                    env[o] = so if isinstance(so, Literal) else sub_env[so]
                continue
            if eqn.primitive not in _COLLECTIVE_SET and any(
                    has_collective(j) for j in sub_jaxprs(eqn.params)):
                if not control_flow or eqn.primitive not in _CONTROL or any(
                        flatten_calls(b) is None for b in _bodies(eqn)):
                    return False
            outs = []
            for o in eqn.outvars:
                nv = Var(o.aval)
                env[o] = nv
                outs.append(nv)
            eqns.append(JaxprEqn(eqn.primitive, ins, outs, eqn.params))
        return True

    top = closed.jaxpr
    env = {v: v for v in top.constvars}
    new_in = [Var(v.aval) for v in top.invars]
    env.update(zip(top.invars, new_in))
    if not inline(Jaxpr([], top.invars, [], top.eqns), [], env):
        return None
    outs = [v if isinstance(v, Literal) else env[v] for v in top.outvars]
    return ClosedJaxpr(Jaxpr(consts_vars, new_in, outs, eqns), consts)


def _bodies(eqn: JaxprEqn) -> list[ClosedJaxpr]:
    """The programs of a control-flow equation: cond's branches, scan's body, while's cond
    and body."""
    p, params = eqn.primitive, eqn.params
    if p is cond_p:
        return list(params["branches"])
    if p is scan_p:
        return [params["jaxpr"]]
    return [params["cond_jaxpr"], params["body_jaxpr"]]


class _Control:
    """A ``cond``/``scan``/``while`` equation whose bodies hold collectives: each device
    thread evaluates the control flow itself and runs the bodies as programs of their own
    (segments and collectives, sharing the run's exchange), so that every device passes the
    same collectives in the same order. A ``cond`` whose index differs between devices, or a
    ``while`` whose trip count does, leaves some devices waiting at a collective the others
    never reach: the run then ends with ``TimeoutError`` after ``PLAX_COLLECTIVE_TIMEOUT``."""

    __slots__ = ("eqn", "programs")

    def __init__(self, eqn: JaxprEqn, axis_names, grid_shape):
        self.eqn = eqn
        self.programs = [SpmdProgram(flatten_calls(b), axis_names, grid_shape)
                         for b in _bodies(eqn)]

    def run(self, rank, device, backend, ins: list, comm) -> list:
        p, params = self.eqn.primitive, self.eqn.params
        host = device.platform == "cpu"
        to_host = (lambda v: np.asarray(v)) if host else (lambda v: np.asarray(backend.to_host(v)))
        put = (lambda v: v) if host else (lambda v: backend.put(v, device))

        def call(prog: "SpmdProgram", args: list) -> list:
            return prog._run_one(rank, device, backend, prog.device_consts(device) + args, comm)

        if p is cond_p:
            idx = int(to_host(ins[0]))
            branch = self.programs[min(max(idx, 0), len(self.programs) - 1)]
            return call(branch, list(ins[1:]))
        if p is while_p:
            cond, body = self.programs
            cn, bn = params["cond_nconsts"], params["body_nconsts"]
            cconsts, bconsts, carry = list(ins[:cn]), list(ins[cn:cn + bn]), list(ins[cn + bn:])
            while bool(to_host(call(cond, cconsts + carry)[0])):
                carry = call(body, bconsts + carry)
            return carry
        body, = self.programs
        nc, nk, length = params["num_consts"], params["num_carry"], params["length"]
        consts, carry = list(ins[:nc]), list(ins[nc:nc + nk])
        xs = [to_host(x) for x in ins[nc + nk:]]
        y_avals = [v.aval for v in self.eqn.outvars[nk:]]
        ys: list = [[None] * length for _ in y_avals]
        order = range(length - 1, -1, -1) if params["reverse"] else range(length)
        for i in order:
            outs = call(body, consts + carry + [put(_contig(x[i])) for x in xs])
            carry = list(outs[:nk])
            for k, y in enumerate(outs[nk:]):
                ys[k][i] = to_host(y)
        stacked = [put(np.stack(col) if length else np.zeros((0,) + a.shape, a.dtype))
                   for col, a in zip(ys, y_avals)]
        return carry + stacked


def _pack(ops: list) -> np.ndarray:
    """The operands' bytes end to end (None, ``axis_index``'s missing operand: nothing)."""
    parts = [np.ascontiguousarray(x).reshape(-1).view(np.uint8) for x in ops if x is not None]
    return np.concatenate(parts) if parts else np.zeros(0, np.uint8)


def _unpack(buf: np.ndarray, like: list) -> tuple:
    """Another device's operands from its :func:`_pack` bytes (every device's operands have
    this device's shapes and dtypes: one program)."""
    out, at = [], 0
    for x in like:
        if x is None:
            out.append(None)
            continue
        n = x.nbytes
        out.append(buf[at:at + n].view(x.dtype).reshape(x.shape))
        at += n
    return tuple(out)


def _schedule(eqns: list, control: set) -> list:
    """The equations in an order that puts collectives that do not depend on each other side
    by side: each unit is an equation, or a list of collectives run with one exchange.

    List scheduling: ordinary equations run as soon as their operands exist (in program
    order among themselves); when only collectives are ready, every ready one forms the next
    group. A control-flow equation holding collectives (``control``: their ids) runs alone,
    and effectful equations keep their order. Every device runs the same program, so every
    device's schedule is the same.
    """
    readers, waiting = dependency_graph(eqns)
    special = [e.primitive in _COLLECTIVE_SET or id(e) in control for e in eqns]
    ready_plain = [i for i in range(len(eqns)) if not waiting[i] and not special[i]]
    ready_special = [i for i in range(len(eqns)) if not waiting[i] and special[i]]
    heapq.heapify(ready_plain)
    units: list = []

    def done(i):
        for r in readers[i]:
            waiting[r] -= 1
            if not waiting[r]:
                if special[r]:
                    ready_special.append(r)
                else:
                    heapq.heappush(ready_plain, r)

    while ready_plain or ready_special:
        if ready_plain:
            i = heapq.heappop(ready_plain)
            units.append(eqns[i])
            done(i)
            continue
        ready_special.sort()
        first = ready_special[0]
        if id(eqns[first]) in control:
            ready_special.pop(0)
            units.append(eqns[first])
            done(first)
            continue
        group = [i for i in ready_special if id(eqns[i]) not in control]
        ready_special[:] = [i for i in ready_special if id(eqns[i]) in control]
        units.append([eqns[i] for i in group])
        for i in group:
            done(i)
    return units


class _Segment:
    __slots__ = ("invars", "outvars", "closed", "executables")

    def __init__(self, invars, outvars, closed):
        self.invars = invars
        self.outvars = outvars
        self.closed = closed
        self.executables: dict = {}


class SpmdProgram:
    """A flattened per-device program cut into compiled segments and collectives.

    Args:
      closed: the per-device program with every collective at top level (see
        :func:`flatten_calls`).
      axis_names: the names of the device grid's axes (pmap: one; shard_map: the mesh's).
      grid_shape: the sizes of those axes; device ``r`` sits at ``np.unravel_index(r, grid)``.
    """

    def __init__(self, closed: ClosedJaxpr, axis_names: Sequence, grid_shape: Sequence[int]):
        self.closed = closed
        self.axis_names = tuple(axis_names)
        self.grid_shape = tuple(grid_shape)
        self.n = int(np.prod(grid_shape)) if grid_shape else 1
        self.coords = [np.unravel_index(r, self.grid_shape) for r in range(self.n)]
        self._groups: dict = {}
        jaxpr = closed.jaxpr
        control = {id(e) for e in jaxpr.eqns if e.primitive in _CONTROL
                   and any(has_collective(b.jaxpr) for b in _bodies(e))}
        units = _schedule(jaxpr.eqns, control)
        # which variables are read after each unit, to give segments their outputs
        later_reads: list[set] = [set() for _ in range(len(units) + 1)]
        live = {v for v in jaxpr.outvars if isinstance(v, Var)}
        later_reads[len(units)] = set(live)
        for i in range(len(units) - 1, -1, -1):
            unit = units[i] if isinstance(units[i], list) else [units[i]]
            live = live | {v for e in unit for v in e.invars if isinstance(v, Var)}
            later_reads[i] = set(live)
        self.steps: list = []
        self._consts: dict = {}
        run: list = []
        for i, unit in enumerate(units):
            if isinstance(unit, list) or id(unit) in control:
                if run:
                    self.steps.append(self._segment(run, later_reads[i]))
                    run = []
                self.steps.append(unit if isinstance(unit, list)
                                  else _Control(unit, axis_names, grid_shape))
            else:
                run.append(unit)
        if run:
            self.steps.append(self._segment(run, later_reads[len(units)]))

    @staticmethod
    def _segment(eqns, needed_after: set) -> _Segment:
        defined, used = set(), []
        for e in eqns:
            for v in e.invars:
                if isinstance(v, Var) and v not in defined and v not in used:
                    used.append(v)
            defined.update(e.outvars)
        outs = [v for e in eqns for v in e.outvars if v in needed_after]
        ins = [Var(v.aval) for v in used]
        ren = dict(zip(used, ins))
        body = [JaxprEqn(e.primitive, [ren.get(v, v) if isinstance(v, Var) else v
                                       for v in e.invars], e.outvars, e.params) for e in eqns]
        seg = Jaxpr([], ins, outs, body)
        s = _Segment(used, outs, ClosedJaxpr(seg, []))
        return s

    def compile(self, devices, backend_for) -> None:
        """Compiles every segment for ``devices`` (in the caller's thread: tracing and
        compiling are not thread-safe; running is). CPU devices share host memory and so
        share one executable per segment and backend."""
        for step in self.steps:
            if isinstance(step, _Control):
                for prog in step.programs:
                    prog.compile(devices, backend_for)
                    for d in devices:
                        prog.device_consts(d)
                continue
            if not isinstance(step, _Segment):
                continue
            for d in devices:
                backend = backend_for(d)
                key = (backend.name, "host" if d.platform == "cpu" else d)
                if key not in step.executables:
                    step.executables[key] = compile_closed(step.closed, backend, d)

    def device_consts(self, device) -> list:
        """The program's constants as buffers on ``device`` (for a body run by
        :class:`_Control`; the top-level program gets them from its caller)."""
        key = "host" if device.platform == "cpu" else device
        hit = self._consts.get(key)
        if hit is None:
            hit = self._consts[key] = [to_buffer(c, device) for c in self.closed.consts]
        return hit  # (filled by compile, in the caller's thread)

    def group(self, axes: tuple, rank: int) -> tuple[list[int], int]:
        """The ranks that share ``rank``'s coordinates off ``axes`` (ordered by their
        coordinates on ``axes``, the first name major), and ``rank``'s position among them."""
        key = (axes, rank)
        hit = self._groups.get(key)
        if hit is None:
            idx = [self.axis_names.index(a) for a in axes]
            mine = self.coords[rank]
            members = [r for r in range(self.n)
                       if all(self.coords[r][k] == mine[k] for k in range(len(mine))
                              if k not in idx)]
            members.sort(key=lambda r: tuple(self.coords[r][k] for k in idx))
            hit = self._groups[key] = (members, members.index(rank))
        return hit

    # ------------------------------------------------------------------ running

    def run(self, devices, backend_for, inputs: list[list[Any]], *, offset: int = 0,
            transport=None) -> list[list[Any]]:
        """Runs the program, local device ``r`` on ``inputs[r]`` (its buffers: the
        constants first, then the arguments); returns each device's output buffers.

        Args:
          devices: this process's devices taking part, in grid order.
          offset: the grid position of ``devices[0]`` (in a multi-process run, the devices of
            the processes before this one come first).
          transport: the multi-process transport (:mod:`plax_pmap.mpi`), or None.
        """
        n = len(devices)
        comm = _Comm(n, collective_timeout(), transport,
                     host=all(d.platform == "cpu" for d in devices))
        results: list = [None] * n
        errors: list = [None] * n

        # each CPU device's kernels get its share of the cores (their own threads would
        # otherwise oversubscribe them, as BLAS's do: see plax.blas_threads)
        share = max(1, blas.cores() // n) if devices[0].platform == "cpu" and n > 1 else None

        def work(r):
            try:
                backend = backend_for(devices[r])
                limit = (backend.threads_limited(share) if share is not None
                         else contextlib.nullcontext())
                with limit:
                    results[r] = self._run_one(offset + r, devices[r], backend, inputs[r],
                                               comm)
            except _Cancelled:
                pass
            except BaseException as err:  # noqa: BLE001 -- surfaced below, once
                errors[r] = err
                comm.fail(r)

        if n == 1:
            work(0)
        else:
            with blas.limited(n if devices[0].platform == "cpu" else 1):
                # Device 0 runs on the calling thread (one thread hand-off less per call), the
                # others on pool threads; the caller stops waiting for a device stuck in a long
                # kernel once the others have failed or timed out.
                pool = _executor(n)
                futures = [pool.submit(work, r) for r in range(1, n)]
                try:
                    work(0)
                    pending = futures
                    while pending:
                        _, pending = wait(pending, timeout=0.5 if comm.broken else None,
                                          return_when=FIRST_COMPLETED)
                        if pending and comm.broken:
                            break  # the healthy devices are out; a stuck one finishes alone
                except BaseException:  # KeyboardInterrupt in the caller: release the others
                    comm.fail(0)
                    raise
        failed = [r for r in range(n) if errors[r] is not None]
        if failed:
            r = failed[0]
            err = errors[r]
            note = (f"plax pmap/shard_map: raised on device {devices[r]!r} (position {r} of "
                    f"{n}); the other devices were cancelled")
            if hasattr(err, "add_note"):
                err.add_note(note)
            if transport is not None:
                # the other processes wait in a collective that this one will never reach
                import sys
                import traceback
                traceback.print_exception(err, file=sys.stderr)
                print(f"plax: process {offset // max(n, 1)} failed ({note}); aborting every "
                      "process of the MPI run", file=sys.stderr, flush=True)
                transport.abort(1)
            raise err
        if comm.timed_out:
            err = TimeoutError(comm.timeout_message(devices))
            if transport is not None:
                import sys
                print(f"plax: {err}; aborting every process of the MPI run", file=sys.stderr,
                      flush=True)
                transport.abort(1)
            raise err
        return results

    def _run_one(self, rank, device, backend, inputs, comm) -> list:
        jaxpr = self.closed.jaxpr
        env: dict = {}
        env.update(zip(jaxpr.constvars, inputs[:len(jaxpr.constvars)]))
        env.update(zip(jaxpr.invars, inputs[len(jaxpr.constvars):]))

        def read(v):
            if isinstance(v, Literal):
                return np.asarray(v.val, v.aval.dtype)
            return env[v]

        host = device.platform == "cpu"
        for step in self.steps:
            if isinstance(step, _Segment):
                exe = step.executables[(backend.name, "host" if host else device)]
                outs = exe.executable(*exe.const_bufs, *[read(v) for v in step.invars])
                env.update(zip(step.outvars, outs))
            elif isinstance(step, _Control):
                outs = step.run(rank, device, backend, [read(v) for v in step.eqn.invars], comm)
                env.update(zip(step.eqn.outvars, outs))
            else:  # collectives exchanged together
                ops = [np.asarray(backend.to_host(read(e.invars[0]))) if e.invars else None
                       for e in step]
                outs = self._collectives(step, rank, ops, comm)
                for e, out in zip(step, outs):
                    env[e.outvars[0]] = out if host else backend.put(out, device)
        return [read(v) for v in jaxpr.outvars]

    def _collectives(self, eqns: list, rank: int, ops: list, comm: "_Comm") -> list:
        """The results of collectives that do not depend on each other, for this device
        (``ops``: their operands, None for ``axis_index``), with one exchange of every
        operand and one barrier after it (two thread hand-offs per group instead of two per
        collective, and across processes one message: a data-parallel step's ``pmean`` of
        the gradients is one group)."""
        what = ", ".join(dict.fromkeys(e.primitive.name for e in eqns))
        plans = [self.group(e.params["axes"], rank) for e in eqns]
        if all(e.primitive is axis_index_p for e in eqns):  # nothing to exchange
            comm.check(what)
            return [np.asarray(pos, np.int32) for _, pos in plans]
        split = [self._split(e, members, x, comm) for e, x, (members, _) in zip(eqns, ops, plans)]
        for j, (e, x, (members, pos)) in enumerate(zip(eqns, ops, plans)):
            if split[j] and pos == 0:
                comm.outputs[(j, e.params["axes"], members[0])] = np.empty(
                    x.shape, e.outvars[0].aval.dtype)
        local = rank - comm.offset_of(rank)
        if comm.transport is None:
            slots = comm.exchange(local, tuple(ops), what)
        elif len(ops) == 1:
            slots = [(v,) for v in comm.exchange(local, ops[0], what)]
        else:  # one message per group: the operands' bytes, end to end
            slots = [_unpack(b, ops) for b in comm.exchange(local, _pack(ops), what)]
        try:
            outs = []
            for j, (e, x, (members, pos)) in enumerate(zip(eqns, ops, plans)):
                if e.primitive is axis_index_p:
                    outs.append(np.asarray(pos, np.int32))
                    continue
                shared = comm.outputs[(j, e.params["axes"], members[0])] if split[j] else None
                outs.append(self._combine(e, pos, [slots[m][j] for m in members], x, shared))
        finally:
            comm.done(what, shared_output=any(split))
        return outs

    @staticmethod
    def _split(eqn: JaxprEqn, members: list, x, comm: "_Comm") -> bool:
        """Whether this psum is computed block-wise into one shared output (large, several
        members, one process, host memory)."""
        return (eqn.primitive is psum_p and len(members) > 1 and comm.transport is None
                and comm.host and x.size >= _SPLIT_PSUM)

    @staticmethod
    def _combine(eqn: JaxprEqn, pos: int, vals: list, x, shared_out) -> np.ndarray:
        """The collective's result at position ``pos`` of its group, from the group's
        operands ``vals`` (in group order). ``shared_out``: a large psum's output buffer, shared
        by the group, of which this member sums its block (the group reads its operands once
        instead of once per member; read-only afterwards, like every buffer here)."""
        p, params = eqn.primitive, eqn.params
        dtype = eqn.outvars[0].aval.dtype
        if shared_out is not None:
            flat_out = shared_out.reshape(-1)
            size = flat_out.size
            lo, hi = size * pos // len(vals), size * (pos + 1) // len(vals)
            flats = [v.reshape(-1)[lo:hi] for v in vals]
            np.add(flats[0], flats[1], out=flat_out[lo:hi], dtype=dtype)
            for v in flats[2:]:
                flat_out[lo:hi] += v
            out = shared_out
        elif len(vals) == 1 and p in (psum_p, pmax_p, pmin_p):
            out = vals[0]  # buffers are immutable: a group of one shares its operand's
        elif p is psum_p:
            # in member order on every device: bit-identical results everywhere
            out = np.add(vals[0], vals[1], dtype=dtype)
            for v in vals[2:]:
                out += v
        elif p is pmax_p:
            out = np.maximum.reduce(vals)
        elif p is pmin_p:
            out = np.minimum.reduce(vals)
        elif p is all_gather_p:
            out = np.stack(vals, axis=params["axis"])
        elif p is psum_scatter_p:
            sd = params["scatter_dimension"]
            out = np.array(np.take(vals[0], pos, axis=sd), dtype=dtype, copy=True)
            for v in vals[1:]:
                out += np.take(v, pos, axis=sd)
        elif p is all_to_all_p:
            parts = [np.take(v, pos, axis=params["split_axis"]) for v in vals]
            out = np.stack(parts, axis=params["concat_axis"])
        elif p is ppermute_p:
            src = next((s for s, d in params["perm"] if d == pos), None)
            out = np.zeros_like(x) if src is None else vals[src]
        else:  # pragma: no cover -- every collective is listed above
            raise NotImplementedError(p.name)
        out = np.asarray(out, dtype=dtype)
        return out if out.flags.c_contiguous else _contig(out)


class _Cancelled(Exception):
    """Raised in a device thread when another device failed or timed out."""


class _Comm:
    """The shared memory of one run: a slot per device and a barrier with a timeout."""

    def __init__(self, n: int, timeout: float, transport=None, host: bool = True):
        self.n = n
        self.host = host  # the devices keep their buffers in host memory (CPU devices)
        self.outputs: dict = {}  # (place in its group, axes, first member) -> shared psum
        self.timeout = timeout
        self.transport = transport
        self.slots: list = [None] * n
        self.shared: list = self.slots  # every device's operand (all processes')
        # within a process, exchanges alternate between two slot lists, so a device may
        # write its next operand before the others have read this one: by the time it
        # writes into a list again, every device has met it at the exchange in between
        # (and so has finished reading). That saves the barrier after each exchange.
        self.buffers: tuple = ([None] * n, [None] * n)
        self.turn: list = [0] * n
        self.barrier = threading.Barrier(n, timeout=timeout)
        self.failed: set = set()
        self.timed_out = False
        self.where = ""

    def offset_of(self, rank: int) -> int:
        """The grid position of this process's first device (fixed by the first call:
        ranks of one process are contiguous)."""
        return 0 if self.transport is None else rank - rank % self.n

    @property
    def broken(self) -> bool:
        return bool(self.failed) or self.timed_out

    def fail(self, rank: int) -> None:
        self.failed.add(rank)
        self.barrier.abort()

    def _wait(self, what: str) -> None:
        try:
            self.barrier.wait()
        except threading.BrokenBarrierError:
            if not self.failed:
                self.timed_out = True
                self.where = what
            raise _Cancelled() from None

    def check(self, what: str) -> None:
        if self.failed or self.timed_out:
            raise _Cancelled()

    def exchange(self, local: int, value, what: str) -> list:
        """Every device's ``value`` (this process's, then, in a multi-process run, the
        others' through the transport), indexed by grid position."""
        if self.transport is None:
            slots = self.buffers[self.turn[local]]
            self.turn[local] ^= 1
            slots[local] = value
            self._wait(what)
            return slots
        self.slots[local] = value
        self._wait(what)
        if local == 0:
            try:
                stacked = self.transport.allgather(np.stack(self.slots), self.timeout)
                self.shared = list(stacked)
            except TimeoutError:
                self.timed_out, self.where = True, what
                self.barrier.abort()
                raise _Cancelled() from None
        self._wait(what)
        return self.shared

    def done(self, what: str, shared_output: bool = False) -> None:
        """The end of an exchange. Across processes (one slot list) and after a psum whose
        members wrote blocks of one shared output, the devices meet again; otherwise the
        alternating slot lists make that unnecessary (see ``buffers``)."""
        if self.transport is not None or shared_output:
            self._wait(what)  # nobody reads the output or overwrites a slot too early
        else:
            self.check(what)

    def timeout_message(self, devices) -> str:
        return (f"plax pmap/shard_map: collective {self.where!r} timed out after "
                f"{self.timeout:g} s waiting for the other devices of {list(devices)} (a "
                "device did not arrive: it may be stuck in a long computation). Raise "
                "PLAX_COLLECTIVE_TIMEOUT (seconds) if the work between collectives is "
                "expected to take longer.")
