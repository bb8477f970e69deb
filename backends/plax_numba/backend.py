"""The Numba backend object: the shared CPU devices and host buffers, eager work on the
reference kernels, ``jit`` through :mod:`plax.lowering` with :class:`NumbaEmitter`."""
from __future__ import annotations

from typing import Any, Callable, Sequence

import sys

import numpy as np

from plax.backend import Backend, UnsupportedPrimitiveError, executable_text
from plax.device import cpu_devices
from plax_numpy.backend import NumpyBackend
from plax_numba import kernels_conv


class NumbaBackend(Backend):
    """Runs plax on the CPU devices, compiling jaxprs' fusion clusters with Numba.

    It shares the CPU devices and NumPy-array buffers with the NumPy backend, so arrays move
    between the two without a copy. Its priority (5) puts it above the NumPy backend (0) as
    the CPU's default; ``jit(f, backend="numpy")`` or ``PLAX_BACKEND=numpy`` still select
    the interpreter.

    Eager operations run the reference kernels (one NumPy call each: compiling a single
    operation would not be faster). Kernels registered with :meth:`register_kernel` take
    precedence, in eager dispatch and in compiled code.
    """

    name = "numba"
    platform = "cpu"
    priority = 5

    def __init__(self) -> None:
        # The reference kernels, through the NumPy backend's public protocol: its table loads
        # a lax family's kernels on first lookup. numba itself is imported by the first
        # compile, so discovering this backend (plax.devices()) costs no numba import.
        self.numpy_reference = NumpyBackend()
        # this backend's own kernels (host kernels faster than the reference's), and plugins'
        from plax_numba import kernels_rows, kernels_select
        self.kernels: dict = {**kernels_select.kernels(), **kernels_rows.kernels()}
        self._core: frozenset = frozenset()

    def devices(self) -> list:
        return list(cpu_devices())

    def put(self, host_array: np.ndarray, device) -> Any:
        return host_array

    def to_host(self, buffer: Any) -> np.ndarray:
        return buffer

    def eager_impl(self, primitive):
        fn = self.kernels.get(primitive)
        if fn is None:  # own kernels of lax families loaded on first use (conv)
            fn = kernels_conv.kernel_for(primitive)
        return fn if fn is not None else self.numpy_reference.eager_impl(primitive)

    def execute(self, primitive, *buffers: Any, **params: Any) -> Any:
        fn = self.eager_impl(primitive)
        if fn is None:
            raise UnsupportedPrimitiveError(self.name, primitive.name)
        return fn(*buffers, **params)

    def register_kernel(self, primitive, kernel: Callable) -> None:
        self.kernels[primitive] = kernel

    def core_primitives(self) -> frozenset:
        """The primitives of plax itself, which compiled code runs on their reference kernels
        without a warning when it does not compile them (a plugin's primitive without a kernel
        of this backend gets the lowering layer's fallback warning instead)."""
        if not self._core:
            self._scan_core()
        return self._core

    def is_core(self, primitive) -> bool:
        """Whether ``primitive`` is one of plax's own (rescanning plax.lax's modules on a
        miss: its families load on first use)."""
        if primitive in self._core:
            return True
        self._scan_core()
        return primitive in self._core

    def _scan_core(self) -> None:
        from plax.core import Primitive
        core = set(self._core)
        for name, module in sys.modules.copy().items():
            if module is not None and (name == "plax.lax" or name.startswith("plax.lax.")
                                       or name == "plax.transforms.checkpoint"):
                # a copy: another thread may be importing this module (its namespace growing)
                core |= {v for v in vars(module).copy().values() if isinstance(v, Primitive)}
        self._core = frozenset(core)

    def info(self) -> dict:
        """Numba's version, threading layer and thread count, the tiering mode and the kernel
        cache directory (``python -m plax info`` prints them)."""
        import numba
        from plax_numba import cache, compile_worker, tiered
        try:
            layer = numba.threading_layer()
        except ValueError:  # no parallel kernel has run yet: start the pool numba would use
            try:
                from numba.np.ufunc.parallel import _launch_threads
                _launch_threads()
                layer = numba.threading_layer()
            except Exception as err:  # noqa: BLE001 - info only
                layer = f"unavailable ({err})"
        return {
            "numba": numba.__version__,
            "threading layer": layer,
            "threads": numba.get_num_threads(),
            "compilation": ("synchronous (PLAX_NUMBA_SYNC)" if tiered.sync_mode() else
                            f"tiered, after {tiered.compile_after()} runs, "
                            + (f"in {compile_worker.workers_wanted()} worker process(es)"
                               if compile_worker.workers_wanted() else
                               "in a background thread (PLAX_NUMBA_WORKERS=0)")),
            "kernel cache": cache.cache_dir(),
        }

    def threads_limited(self, n: int):
        """Numba's thread count for the current thread (``numba.set_num_threads``, which is
        per thread; the native loader's threading layer when numba is not imported) lowered to
        ``n`` inside the context, then restored."""
        import contextlib

        @contextlib.contextmanager
        def limited():
            from plax_numba import native_loader
            # numba's functions when numba is imported, else those of the threading layer the
            # native loader started; None: no parallel kernel exists yet, nothing to limit
            functions = native_loader.thread_count_functions()
            if functions is None:
                yield
                return
            get, set_ = functions
            before = get()
            set_(max(1, min(n, before)))
            try:
                yield
            finally:
                set_(before)
        return limited()

    def compile(self, jaxpr, device) -> Callable[..., Sequence[Any]]:
        from plax.lowering import fold_transposed_products
        # gradients' matrix products written in their final layout (no strided transposes)
        jaxpr = fold_transposed_products(jaxpr, min_elements=FOLD_MIN_ELEMENTS)
        whole = self._compile_whole(jaxpr, device)
        if whole is not None:
            return whole
        return self._per_cluster(jaxpr, device)

    def _per_cluster(self, jaxpr, device):
        """The program as one step per fusion cluster or lone equation, each tiered."""
        from plax.lowering import lower
        from plax_numba.emitter import NumbaEmitter  # not numba: the first compile job does
        emitter = NumbaEmitter(self, device, parallel=None if numba_threads_useful(jaxpr)
                               else False)
        fn = lower(jaxpr, emitter, self, device)
        if emitter.kernel_sources:
            parts = [fn.__plax_source__]
            for path, text in emitter.kernel_sources:
                parts.append(f"\n# ---- fused kernel ({path})\n{text}")
            fn.__plax_source__ = "\n".join(parts)
        source = fn.__plax_source__
        fn.as_text = lambda: source  # the program and its kernels (Compiled.as_text)
        return fn

    def _compile_whole(self, jaxpr, device):
        """The program as one whole-program kernel (:mod:`plax_numba.wholegen`) when it is
        small (:func:`whole_program_worthwhile`) and fully expressible, else None. Until the
        kernel is compiled (tiering) the program runs on the reference kernels; if its
        compilation fails, on the per-cluster program instead.

        Tiered, the kernel is planned only once the program is hot
        (:func:`plax_numba.tiered.planned_when_hot`): until then it runs on the reference
        kernels, as it would while its kernel compiles, and a program called once costs no
        plan. A program the generator cannot express then gets its per-cluster program."""
        from plax.lowering import lower
        from plax_numba import tiered
        from plax_numba.emitter import NumbaEmitter, in_reference_tier
        if not whole_program_worthwhile(jaxpr) or in_reference_tier():
            return None
        if tiered.sync_mode():
            return self._whole_step(jaxpr, device, None)
        interp = lower(jaxpr, NumbaEmitter(self, device, False), self, device)

        def hot():
            step = self._whole_step(jaxpr, device, interp)
            return step if step is not None else self._per_cluster(jaxpr, device)
        step = tiered.planned_when_hot(interp, hot, len(jaxpr.invars))
        step.__plax_source__ = ("# a whole-program kernel (else the per-cluster program), "
                                "planned once the program is hot (as_text() plans it now); "
                                "until then:\n"
                                + interp.__plax_source__)
        # (the planned step's text; the reference tier's where planning failed, warned)
        step.as_text = lambda: executable_text(step.plan_now())
        return step

    def _whole_step(self, jaxpr, device, interp):
        """The whole-program kernel's step (:func:`plax_numba.emitter.native_step`) running
        ``interp`` until its kernel is ready (None: compile synchronously), or None where the
        generator declines the program or a synchronous compilation failed (warned)."""
        from plax.lowering import lower
        from plax_numba import codegen, wholegen
        from plax_numba.emitter import NumbaEmitter, native_step
        try:
            plan = wholegen.plan_program(jaxpr)
        except codegen.Unsupported:
            return None
        sync = interp is None
        sources: list = []
        step = native_step(plan, interp, sync, sources)
        if step is None:
            return None  # a synchronous compilation failed (warned): the per-cluster program
        if not sync:
            state = step.__plax_native__
            plain = state["_interp"]

            def fall_back(*args):  # compilation failed in the background: compile clusters
                if not state.get("_failed"):
                    return plain(*args)
                state["_interp"] = lower(jaxpr, NumbaEmitter(self, device), self, device)
                return state["_interp"](*args)
            state["_interp"] = fall_back
        path, text = sources[0]
        source = (f"# whole-program kernel (values of at most {whole_max()} elements): "
                  f"step -> kernel\n{plan.wrapper}\n# ---- fused kernel ({path}): the whole "
                  f"program\n{text}")
        step.__plax_source__ = source
        step.as_text = lambda: source
        return step


#: whole-program kernels replace per-cluster dispatch for programs whose every value has at
#: most this many elements (``PLAX_NUMBA_WHOLE_MAX``; 0 disables them): there, Python
#: dispatch (~1 us per step) dominates the arithmetic. Larger programs keep per-cluster
#: kernels (parallel loops, BLAS on large operands, NumPy's pairwise sums).
WHOLE_MAX = 1 << 14
#: ... and at least this many dispatch steps (fusion clusters and lone equations, bodies of
#: calls counted in place, control flow always counting enough). Each program's kernel is
#: its own compilation (its shapes are constants of the source), which a few saved
#: dispatches (~1 us each) do not repay in a test suite compiling everything
#: (``PLAX_NUMBA_SYNC``); tiering only compiles hot programs anyway. Two steps suffice
#: when one is a ``dot_general``: numba calls BLAS on transposed views directly, where
#: NumPy's ``dot`` of a transposed operand costs a few microseconds more.
WHOLE_MIN_STEPS = 4
#: a ``transpose`` of a matrix product with at least this many elements is folded into the
#: product (:func:`plax.lowering.fold_transposed_products`): the MLP's weight gradients then
#: leave BLAS in their final layout instead of as strided views every reader copies (MLP
#: 784-512-512-10 step: 4.2 -> 2.9 ms). Below it OpenBLAS can be slower with the swapped
#: operands than the transpose costs (10x150 from 150x100 by 100x10: 11.7 us swapped against
#: 8.4 us for the product and its transposed copy).
FOLD_MIN_ELEMENTS = 1 << 14


def numba_threads_useful(jaxpr) -> bool:
    """Whether the program's clusters may run on numba's threads (``prange``): not when it
    has a matrix product big enough for BLAS to run on its own threads
    (``kernels.BLAS_THREADED_MIN``). OpenBLAS's threads spin for a while after each product,
    and a ``prange`` loop after one waits for the cores they hold: on the 2-core host the MLP
    step went 3.67 -> 2.79 ms with serial clusters. Across programs (pmap's segments, one
    jitted call after another) :func:`plax_numba.kernels.yielding_to_blas` does the same at
    run time."""
    from plax_numba.kernels import BLAS_THREADED_MIN
    from plax_numba.wholegen import largest_product
    return largest_product(jaxpr) <= BLAS_THREADED_MIN


def whole_program_worthwhile(jaxpr) -> bool:
    """Whether ``jaxpr`` is compiled as one whole-program kernel (if it can be): no value
    above :func:`whole_max` elements and at least :data:`WHOLE_MIN_STEPS` dispatch steps
    (two with a ``dot_general``)."""
    from plax_numba.wholegen import dispatch_steps, program_size
    limit = whole_max()
    if limit <= 0:
        return False
    _, largest = program_size(jaxpr)
    if largest > limit:
        return False
    steps, has_dot = dispatch_steps(jaxpr)
    return steps >= (2 if has_dot else WHOLE_MIN_STEPS)


def whole_max() -> int:
    """:data:`WHOLE_MAX`, or ``$PLAX_NUMBA_WHOLE_MAX`` where set (read at each compile; a
    value that is not an integer is named in a warning and gives :data:`WHOLE_MAX`)."""
    from plax.config import env_number
    return env_number("PLAX_NUMBA_WHOLE_MAX", WHOLE_MAX, warn=True)
