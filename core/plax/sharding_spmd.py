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

A program with an effect (a callback, a ref), values on two meshes, or nothing computed on
split blocks runs on one device as before, its results placed as their types say.
"""
from __future__ import annotations

import contextlib
import weakref
from typing import Any

import numpy as np

from plax.sharding import NamedSharding, PartitionSpec
from plax.sharding_exchange import Exchange
from plax.sharding_partition import Loop, Program, Segment, build
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
    hit = _plans.get(closed, _NOT_PLANNED)
    if hit is not _NOT_PLANNED:
        return hit
    result = _plans[closed] = build(closed)
    return result


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


def _phases(program: Program) -> list:
    """The steps cut before each exchange that moves data and around each loop: within a
    phase every device runs on its own; the devices meet between phases."""
    phases: list = [[]]
    for k, step in enumerate(program.steps):
        meets = isinstance(step, Loop) or (isinstance(step, Exchange) and step.moves_data())
        if meets and phases[-1]:
            phases.append([])
        phases[-1].append(k)
        if isinstance(step, Loop):
            phases.append([])
    return [ph for ph in phases if ph]


def _const_buffers(program: Program, device) -> list:
    place = "cpu" if device.platform == "cpu" else device
    bufs = program.const_bufs.get(place)
    if bufs is None:
        from plax.transforms.call import to_buffer
        bufs = program.const_bufs[place] = [to_buffer(c, device) for c in program.consts]
    return bufs


def _execute(program: Program, devices: list, backends: dict, envs: dict, share) -> None:
    """Runs ``program``'s steps on every device; ``envs[device]`` holds its arguments'
    blocks on entry (by local variable) and every value it computes on exit."""
    from plax.sharding_threads import on_each_device
    if program.constvars:
        for d in devices:
            envs[d].update(zip(program.constvars, _const_buffers(program, d)))
    compiled = _compiled(program, devices, backends)
    steps = program.steps
    for phase in _phases(program):
        if isinstance(steps[phase[0]], Loop):
            _run_loop(steps[phase[0]], devices, backends, envs, share)
            continue

        def work(i, phase=phase):
            d = devices[i]
            env = envs[d]
            with (backends[d].threads_limited(share) if share and d.platform == "cpu"
                  else contextlib.nullcontext()):
                for k in phase:
                    step = steps[k]
                    if isinstance(step, Segment):
                        exe = compiled[k][d]
                        outs = exe.executable(*exe.const_bufs, *[env[v] for v in step.ins])
                        env.update(zip(step.outs, outs))
                    else:
                        env[step.dst] = step.run(d, envs, backends)
        on_each_device(devices, work)


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


def _run_body(program: Program, args: dict, devices, backends, share) -> dict:
    """``{device: [result buffers]}`` of one iteration's program on ``{device: [args]}``."""
    envs = {d: dict(zip(program.invars, args[d])) for d in devices}
    _execute(program, devices, backends, envs, share)
    return {d: [_value(envs[d], v, d, backends) for v in program.outvars] for d in devices}


def _run_loop(step: Loop, devices, backends, envs: dict, share) -> None:
    """A scan or while loop whose body holds exchanges, its iterations driven from here (or
    a cond whose branches hold exchanges, the branch picked here)."""
    ins = {d: [_value(envs[d], v, d, backends) for v in step.ins] for d in devices}
    p = step.params
    if step.kind == "cond":  # the index is replicated: every device picks the same branch
        index = int(_host(ins[devices[0]][0], devices[0], backends))
        branch = step.body[min(max(index, 0), len(step.body) - 1)]
        outs = _run_body(branch, {d: ins[d][1:] for d in devices}, devices, backends, share)
        for d in devices:
            envs[d].update(zip(step.outs, outs[d]))
        return
    if step.kind == "while":
        nc, nb = p["cond_nconsts"], p["body_nconsts"]
        carry = {d: ins[d][nc + nb:] for d in devices}
        while True:
            pred = _run_body(step.cond, {d: ins[d][:nc] + carry[d] for d in devices},
                             devices, backends, share)
            if not bool(_host(pred[devices[0]][0], devices[0], backends)):
                break
            carry = _run_body(step.body, {d: ins[d][nc:nc + nb] + carry[d] for d in devices},
                              devices, backends, share)
        for d in devices:
            envs[d].update(zip(step.outs, carry[d]))
        return
    nc, nk, length = p["num_consts"], p["num_carry"], p["length"]
    consts = {d: ins[d][:nc] for d in devices}
    carry = {d: ins[d][nc:nc + nk] for d in devices}
    xs = {d: [_host(x, d, backends) for x in ins[d][nc + nk:]] for d in devices}
    ys: dict = {d: [None] * length for d in devices}
    order = range(length - 1, -1, -1) if p["reverse"] else range(length)
    for i in order:
        outs = _run_body(step.body, {d: consts[d] + carry[d] +
                                     [_put(np.ascontiguousarray(x[i]), d, backends)
                                      for x in xs[d]] for d in devices},
                         devices, backends, share)
        for d in devices:
            carry[d] = outs[d][:nk]
            ys[d][i] = [_host(y, d, backends) for y in outs[d][nk:]]
    for d in devices:
        stacked = [_put(np.stack([ys[d][i][k] for i in range(length)]), d, backends)
                   for k in range(len(step.outs) - nk)] if length else \
            [_put(np.zeros(v.aval.shape, v.aval.dtype), d, backends) for v in step.outs[nk:]]
        envs[d].update(zip(step.outs, carry[d] + stacked))


def _argument_buffer(x, aval, dims, device, index, mesh):
    """``device``'s block of argument ``x`` (None: the argument does not allow it)."""
    from plax.array import Array
    from plax.sharding_types import _block
    from plax.transforms.call import to_buffer
    if not isinstance(x, Array):
        return to_buffer(np.asarray(x, aval.dtype), device)
    s = explicit_sharding(x)
    if s is not None:
        if s.mesh != mesh or type_dims(x.aval) != dims or \
                spec_dims(s.spec, x.ndim) != dims:
            return None
    elif any(dims):
        return None
    return _block(x, device, index)


def run_partitioned(closed, leaves: list, backend) -> list | None:
    """Runs ``closed`` on every device of its mesh on each device's blocks of ``leaves``, or
    returns None when the program (or an argument) does not allow it (see the module)."""
    if not any(explicit_sharding(x) is not None for x in leaves):
        return None
    program = plan(closed)
    if program is None:
        return None
    from plax import blas_threads
    mesh = program.mesh
    devices = list(mesh.devices.flat)
    backends = {d: backend if backend.platform == d.platform else d.backend for d in devices}
    envs: dict = {d: {} for d in devices}
    jaxpr = closed.jaxpr
    for x, v, lv, dims in zip(leaves, jaxpr.invars, program.invars, program.in_dims):
        shape = tuple(v.aval.shape)
        index = NamedSharding(mesh, dims_spec(dims)).devices_indices_map(shape)
        for d in devices:
            buf = _argument_buffer(x, v.aval, dims, d, index[d], mesh)
            if buf is None:
                return None
            envs[d][lv] = buf
    # CPU devices share the cores: each device's kernels (and BLAS) get its share of them
    n_cpu = sum(d.platform == "cpu" for d in devices)
    share = max(1, blas_threads.cores() // n_cpu) if n_cpu > 1 else None
    with blas_threads.limited(n_cpu):
        _execute(program, devices, backends, envs, share)
    return [_assembled(v, lv, dims, devices, envs, mesh)
            for v, lv, dims in zip(jaxpr.outvars, program.outvars, program.out_dims)]


def _assembled(v, lv, dims, devices, envs, mesh):
    """The result ``v`` of the program from every device's block of it."""
    from plax.array import from_device_buffers
    from plax.core.jaxpr import Literal
    from plax.transforms.call import to_buffer
    aval = v.aval
    s = explicit_sharding(aval)
    sharding = NamedSharding(mesh, s.spec if s is not None else PartitionSpec())
    if isinstance(lv, Literal):
        host = np.asarray(lv.val, aval.dtype)
        bufs = {d: to_buffer(host, d) for d in devices}
    else:
        bufs = {d: envs[d][lv] for d in devices}
    return from_device_buffers(aval.shape, aval.dtype, sharding, bufs,
                               weak_type=aval.weak_type)
