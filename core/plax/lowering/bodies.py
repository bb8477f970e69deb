"""Sub-jaxprs run with the backend and on the device of the program that holds them.

``cond``, ``while`` and ``scan`` (and any plugin primitive registered here) hold bodies:
ClosedJaxprs that run once or many times per equation. Those bodies must be compiled by the
backend that runs the enclosing program, for the device it runs on: ``jit(f,
backend="numba")`` compiles its loop bodies with Numba, ``jit(f, backend="numpy")`` with
NumPy even when a GPU is the default platform, and a program on ``cpu:3`` runs its bodies on
``cpu:3``. The core carries that pair to the kernels in one place:

* a *body kernel* ``kernel(runner, *buffers, **params)`` is registered per primitive with
  :func:`register_body_kernel`; ``runner`` is the :class:`BodyRunner` of the backend and
  device running the equation, which compiles each body once (cached weakly on the body)
  and runs it;
* compiled code: the lowering driver (:func:`plax.lowering.lower`) binds the program's
  runner into a step for every equation of such a primitive that the backend's emitter
  declines (:func:`body_step`); an emitter that wants the host loop wrapped in something
  of its own calls :func:`body_step` itself;
* eager: dispatch binds the runner of the array's device and that device's backend
  (:func:`eager_body_kernel`) when the backend hands out no kernel of its own.

A backend may still run these primitives itself (a device-side loop, a captured graph): its
emitter's step or its ``eager_impl`` is used first, and must then use its own backend.
Kernel tables such as ``plax_numpy.impls()`` do not hold these primitives, so a backend
built on the reference kernels never compiles a body with the reference backend by mistake.
"""
from __future__ import annotations

import functools
import threading
import weakref
from typing import Any, Callable

import numpy as np

# primitive -> kernel(runner, *buffers, **params)
_body_kernels: dict = {}
# (backend, device) -> BodyRunner; backends and devices live as long as the process
_runners: dict = {}
_lock = threading.Lock()


def register_body_kernel(primitive, kernel: Callable[..., Any]) -> None:
    """Declares how ``primitive``'s equations run their sub-jaxprs on any backend.

    Args:
      primitive: a primitive whose parameters hold ClosedJaxprs (bodies).
      kernel: ``kernel(runner, *buffers, **params)`` returning the output buffer(s) (a list
        for multi-result primitives); ``runner`` is a :class:`BodyRunner` of the backend and
        device running the equation; run bodies with ``runner.run(body, *buffers)``.

    Example:
      >>> def run_twice(runner, x, *, jaxpr):
      ...     return runner.run(jaxpr, *runner.run(jaxpr, x))
      >>> register_body_kernel(twice_p, run_twice)  # doctest: +SKIP
    """
    if not callable(kernel):
        raise TypeError(f"register_body_kernel expects a callable kernel for {primitive}, "
                        f"got {kernel!r}")
    _body_kernels[primitive] = kernel


def body_kernel(primitive) -> Callable[..., Any] | None:
    """The body kernel registered for ``primitive`` (see :func:`register_body_kernel`), or None."""
    return _body_kernels.get(primitive)


class BodyRunner:
    """Compiles and runs sub-jaxprs with one backend on one device.

    Each body (a ClosedJaxpr) is compiled once per runner, through
    :func:`plax.transforms.call.compile_closed`, and cached weakly on the body. The helpers
    :meth:`read_scalar`, :meth:`row` and :meth:`stack` handle the backend's buffers: NumPy
    arrays on a CPU device, any other backend's buffers through its own kernels (so a GPU's
    rows and stacks stay on the GPU) and ``to_host`` (for a decision read to the host).

    Args:
      backend: the backend whose ``compile`` builds the bodies.
      device: the device they run on.
    """

    def __init__(self, backend, device):
        self.backend, self.device = backend, device
        self.on_host = device.platform == "cpu"
        self._compiled: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()

    def __repr__(self) -> str:
        return f"BodyRunner(backend={self.backend.name!r}, device={self.device!r})"

    def run(self, closed, *buffers) -> list:
        """Runs the ClosedJaxpr ``closed`` on ``buffers``; returns its output buffers."""
        entry = self._compiled.get(closed)
        if entry is None:
            from plax.transforms.call import compile_closed
            entry = self._compiled[closed] = compile_closed(closed, self.backend, self.device)
        outs = entry.executable(*entry.const_bufs, *buffers)
        if self.on_host:  # host executables may return NumPy scalars of another type
            return [o if type(o) is np.ndarray and o.dtype == a.dtype else np.asarray(o, a.dtype)
                    for o, a in zip(outs, entry.out_avals)]
        return list(outs)

    def read_scalar(self, buffer) -> Any:
        """The value of a rank-0 buffer as a Python scalar (a device read for a device buffer)."""
        host = buffer if self.on_host else self.backend.to_host(buffer)
        return np.asarray(host)[()].item()

    def row(self, buffer, i: int, row_aval) -> Any:
        """``buffer[i]``: row ``i`` (of type ``row_aval``) of the leading axis of ``buffer``
        (a view on the host)."""
        if self.on_host:
            return buffer[i]
        from plax import lax
        shape = tuple(row_aval.shape)
        piece = self._kernel(lax.slice_p)(buffer, start_indices=(i,) + (0,) * len(shape),
                                          limit_indices=(i + 1,) + shape, strides=None)
        return self._kernel(lax.reshape_p)(piece, new_sizes=shape)

    def stack(self, buffers: list, aval) -> Any:
        """The buffers (each of type ``aval``) stacked along a new leading axis."""
        shape = (len(buffers),) + tuple(aval.shape)
        if self.on_host:
            if not buffers:
                return np.zeros(shape, aval.dtype)
            return np.stack(buffers)
        if not buffers:
            return self.backend.put(np.zeros(shape, aval.dtype), self.device)
        from plax import lax
        reshape = self._kernel(lax.reshape_p)
        rows = [reshape(b, new_sizes=(1,) + shape[1:]) for b in buffers]
        return self._kernel(lax.concatenate_p)(*rows, dimension=0)

    def _kernel(self, primitive) -> Callable[..., Any]:
        backend = self.backend
        return backend.eager_impl(primitive) or functools.partial(backend.execute, primitive)


def runner_for(backend, device) -> BodyRunner:
    """The :class:`BodyRunner` of ``backend`` on ``device`` (one per pair, so each body is
    compiled once per backend and device)."""
    key = (backend, device)
    runner = _runners.get(key)
    if runner is None:
        with _lock:
            runner = _runners.get(key)
            if runner is None:
                runner = _runners[key] = BodyRunner(backend, device)
    return runner


def body_step(eqn, backend, device) -> Callable[..., Any] | None:
    """A step ``fn(*buffers)`` running ``eqn`` with its bodies compiled by ``backend`` for
    ``device``, or None if ``eqn``'s primitive has no body kernel."""
    kernel = _body_kernels.get(eqn.primitive)
    if kernel is None:
        return None
    runner, params = runner_for(backend, device), eqn.params
    return lambda *buffers: kernel(runner, *buffers, **params)


def eager_body_kernel(backend, device, primitive) -> Callable[..., Any] | None:
    """The eager kernel ``fn(*buffers, **params)`` of ``primitive`` on ``device`` with
    ``backend`` (the runner bound), or None if the primitive has no body kernel."""
    kernel = _body_kernels.get(primitive)
    if kernel is None:
        return None
    return functools.partial(kernel, runner_for(backend, device))


def host_kernel(primitive) -> Callable[..., Any]:
    """``primitive``'s kernel over host NumPy buffers, for kernel tables (``plax_numpy.impls()``):
    its bodies run on the reference backend on the first CPU device.

    Such a kernel serves ``Backend.execute`` and backends that reuse the table on host arrays.
    Eager dispatch replaces it with the runner of the device's backend (it is marked
    ``host_body_kernel``); an emitter that wants its program's bodies compiled by its own
    backend declines the primitive, and the lowering driver binds that backend's runner.
    """
    kernel = _body_kernels[primitive]

    def run(*buffers, **params):
        from plax.device import cpu_devices
        from plax.lowering.fallback import reference_backend
        return kernel(runner_for(reference_backend(), cpu_devices()[0]), *buffers, **params)

    run.host_body_kernel = True
    run.__name__ = f"{primitive.name}_on_host"
    return run


# ------------------------------------------------------------------ cond, while, scan

def run_cond(runner: BodyRunner, index, *operands, branches) -> list:
    """``cond``: reads the branch index (clamped into range, as XLA does) and runs that branch."""
    i = min(max(int(runner.read_scalar(index)), 0), len(branches) - 1)
    return runner.run(branches[i], *operands)


def run_while(runner: BodyRunner, *args, cond_jaxpr, body_jaxpr, cond_nconsts: int,
              body_nconsts: int) -> list:
    """``while``: the condition, read to the host, then the body, until the condition is false."""
    cconsts = args[:cond_nconsts]
    bconsts = args[cond_nconsts:cond_nconsts + body_nconsts]
    carry = list(args[cond_nconsts + body_nconsts:])
    run, read = runner.run, runner.read_scalar
    while bool(read(run(cond_jaxpr, *cconsts, *carry)[0])):
        carry = run(body_jaxpr, *bconsts, *carry)
    return carry


def run_scan(runner: BodyRunner, *args, jaxpr, length: int, reverse: bool, num_consts: int,
             num_carry: int, **_ignored) -> list:
    """``scan``: ``length`` calls of the body over rows of ``xs``; each ``ys`` is stacked once
    at the end."""
    consts = args[:num_consts]
    carry = list(args[num_consts:num_consts + num_carry])
    xs = args[num_consts + num_carry:]
    x_avals = jaxpr.in_avals[num_consts + num_carry:]
    y_avals = jaxpr.out_avals[num_carry:]
    columns: list[list] = [[None] * length for _ in y_avals]
    run, row, on_host = runner.run, runner.row, runner.on_host
    for i in (range(length - 1, -1, -1) if reverse else range(length)):
        rows = [x[i] for x in xs] if on_host else [row(x, i, a) for x, a in zip(xs, x_avals)]
        outs = run(jaxpr, *consts, *carry, *rows)
        carry = outs[:num_carry]
        for column, o in zip(columns, outs[num_carry:]):
            column[i] = o
    return carry + [runner.stack(c, a) for c, a in zip(columns, y_avals)]
