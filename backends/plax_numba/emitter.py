"""The Numba backend's :class:`plax.lowering.Emitter`: clusters become compiled kernels,
lone equations per-equation kernels (see :mod:`plax_numba.kernels`; ``threefry2x32`` runs
its native kernel, :mod:`plax_numba.threefry`).

What it declines (returns None for) the lowering driver handles: a declined cluster is split
into its equations, a declined ``jit`` call is spliced into its caller, and an equation of a
primitive this backend does not know (one a plugin registered only with the NumPy backend)
runs on the reference kernel with one ``PlaxFallbackWarning``.
"""
from __future__ import annotations

import contextvars
import functools
import math
import os
import threading

import numpy as np

from plax.config import env_number
from plax import lax
from plax.lowering import (ARG_REDUCTION, CUMULATIVE, Emitter, Step, body_step, call_body,
                           returns_fresh, takes_out)

from plax_numba import cache, codegen, codegen_rows, codegen_split, kernels, llvm_tier, tiered


class NumbaEmitter(Emitter):
    """Generates one program for :func:`plax.lowering.lower`.

    Args:
      backend: the :class:`~plax_numba.backend.NumbaBackend`.
      device: the device the program runs on.

    Attributes:
      kernel_sources: ``(module path, module text)`` of each cluster kernel, in program order
        (``as_text`` shows them).
    """

    fuses = True
    #: threefry2x32 joins clusters: the kernel hashes both words in one pass
    #: (codegen.multi_result), so iota -> threefry2x32 -> xor -> sampler is one loop
    fuses_multiple_results = codegen.FUSES.multiple_results
    #: iota joins clusters as an expression of the loop index (codegen._iota): the counter
    #: random.normal hashes is never written to memory
    fuses_index = codegen.FUSES.index
    #: argmax/argmin and the cumulative ops join clusters after their producers
    #: (codegen_scan.fused_arg / fused_cumulative): argmax(abs(x - y), axis=1) is one loop
    fuses_arg_reductions = codegen.FUSES.arg_reductions
    fuses_cumulative = codegen.FUSES.cumulative
    #: a reduction over trailing axes and the work on its rows and results (softmax, layer
    #: norm, a cross-entropy's gradient) form one cluster (codegen_rows): each row read once
    row_local_max_elements = codegen_rows.ROW_LOCAL_MAX_ELEMENTS

    def __init__(self, backend, device, compile_kernels: bool = True,
                 parallel: bool | None = None):
        self.backend, self.device = backend, device
        #: None: clusters' loops run on numba's threads by size (codegen.PARALLEL_MIN);
        #: False: always serial (the program's BLAS threads would hold the cores)
        self.parallel = parallel
        self.sync = tiered.sync_mode()
        #: False: every step runs the reference path (the tier below a whole-program kernel,
        #: which is compiled instead of the program's clusters, or a native loop's bodies)
        self.compile_kernels = compile_kernels and not in_reference_tier()
        self.kernel_sources: list[tuple[str, str]] = []
        self.native: list[str] = []   # the control-flow primitives compiled as native loops

    # ------------------------------------------------------------ clusters
    def emit_cluster(self, cluster):
        if cluster.row_axes:   # (declined: the driver lowers its parts as they were)
            return self._emit_rows(cluster)
        if any(codegen.reference_only(e) for e in cluster.eqns):
            return self._emit_split(cluster)
        step = self._emit_kernel(cluster)
        if step is None:  # (a scan the kernel cannot express: its producers still fuse)
            if any(_scans(e) for e in cluster.eqns):
                return self._emit_split(cluster, _scans)
        return step

    def _emit_rows(self, cluster):
        """A row-local cluster's kernel (:mod:`plax_numba.codegen_rows`), tiered as any
        cluster's; None where the generator declines it."""
        if any(codegen.reference_only(e) for e in cluster.eqns):
            return None
        try:
            plan = codegen_rows.plan_rows(cluster, self.parallel)
        except codegen.Unsupported:
            return None
        return self._emit_kernel(cluster, plan)

    def _emit_split(self, cluster, cut=codegen.reference_only):
        """The cluster as kernels of the runs between the equations ``cut`` selects (by
        default the reference-only ones, :func:`codegen.reference_only`), which run on their
        reference kernels in between. Split at reference-only equations from
        :data:`CHUNK_MIN` elements on, one kernel taking chunks through all of them
        (:mod:`plax_numba.codegen_split`), tiered like any cluster's kernel (the reference
        kernels until it is compiled); the segments one after the other on whole arrays
        where it does not apply."""
        if (cut is codegen.reference_only and self.compile_kernels
                and math.prod(cluster.shape) >= CHUNK_MIN and not llvm_tier.only()):
            try:
                plan = codegen_split.plan_split(cluster, self.parallel)
            except codegen.Unsupported:
                plan = None
            step = plan and self._emit_kernel(cluster, plan)
            if step is not None:
                return Step(step.fn, guarded=True, fresh_result=True)
        parts = []
        for seg, sub in codegen_split.split_cluster(cluster, cut):
            step = self._emit_kernel(sub) if len(seg) > 1 else None
            fn = step.fn if step is not None else self._interpreter(sub)
            parts.append((fn, [id(v) for v in sub.inputs], [id(v) for v in sub.outputs]))
        in_keys = [id(v) for v in cluster.inputs]
        out_keys = [id(v) for v in cluster.outputs]
        dead = _with_dead(parts, out_keys)

        def run(*args):
            env = dict(zip(in_keys, args))
            for fn, ins, outs, gone in dead:
                env.update(zip(outs, fn(*[env[k] for k in ins])))
                for k in gone:  # a value is freed after its last use, as in the program
                    del env[k]
            return [env[k] for k in out_keys]

        # (each part's results are fresh of its operands: a kernel's, or the interpreter's)
        return Step(run, guarded=True, fresh_result=True)

    def _emit_kernel(self, cluster, plan=None):
        """``cluster``'s kernel, tiered (the reference kernels until it is compiled); its plan
        :func:`codegen.plan_cluster`'s unless ``plan`` is given (a split cluster's chunked
        kernel, :mod:`plax_numba.codegen_split`: no first tier). None where the generator
        declines the cluster, or a synchronous compilation failed."""
        # Planning (codegen.plan_cluster, the first tier's llvm_tier.plan, the wrapper's
        # compile) is milliseconds of pure Python per cluster on the program's thread: while
        # a compile window is open its other threads wait on the GIL behind it, so it is
        # handed over at short intervals (one switch for the whole step, not one per plan)
        with tiered.yielding_while_compiling():
            return self._plan_kernel(cluster, plan)

    def _plan_kernel(self, cluster, plan):
        """:meth:`_emit_kernel`'s work."""
        if not self.compile_kernels:
            return Step(self._interpreter(cluster), fresh_result=True)
        own_plan = plan is None
        try:
            plan = plan or codegen.plan_cluster(cluster, preallocate=True,
                                                parallel=self.parallel)
        except codegen.Unsupported:
            return None  # the driver runs the equations one by one
        text = cache.module_source(plan.source, plan.primitives)
        path = cache.source_path(text)
        interp = self._interpreter(cluster)
        ns = dict(plan.wrapper_globals, _ready=False, _kernel=None, _interp=interp,
                  _asc=np.ascontiguousarray)
        exec(compile(plan.wrapper, f"<plax_numba step {path}>", "exec"), ns)
        step = ns["step"]

        # The step calls the compiled entry point for exactly the plan's argument types,
        # not the dispatcher: the dispatcher would compile a second, read-only/any-layout
        # version synchronously at the first call (plax's buffers are read-only), and its
        # type lookup costs ~0.3 us per call. The wrapper passes C-contiguous arrays.
        parallel = "prange(" in plan.source

        def entry(kernel):
            fn = cache.entry_point(kernel, plan.arg_types)
            return kernels.yielding_to_blas(fn) if parallel else fn

        serial_text = cache.serial_variant(text)  # None: the kernel is serial
        serial = {}  # the serial form's entry point, once tiering loaded it

        def serial_first(kernel):  # (tiering: a parallel kernel's serial form, meanwhile)
            serial["fn"] = ns["_kernel"] = cache.entry_point(kernel, plan.arg_types)
            ns["_ready"] = True

        swap = threading.Lock()
        final = [False]  # numba's kernel is in use: the first tier must not replace it

        def install(kernel):
            # a parallel kernel and its serial form, where that is at hand, run in turn,
            # timed, until the faster is kept (tiered.faster_of): on a host whose cores are
            # busy the serial loop wins. The serial form is never compiled for this alone
            # (under PLAX_NUMBA_SYNC=1 that would double every parallel kernel's compile).
            fn = entry(kernel)
            if serial_text is not None:
                other = serial.get("fn") or _serial_entry(serial_text, plan.arg_types)
                if other is not None:
                    fn = tiered.faster_of({"serial": other, "parallel": fn},
                                          lambda name, chosen: ns.update(_kernel=chosen))
            with swap:
                final[0] = True
                ns["_kernel"], ns["_ready"] = fn, True

        def build():
            install(cache.compile_kernel(text, plan.arg_types))

        def job():
            try:
                build()
            except Exception as err:  # noqa: BLE001 - reported; the step keeps what it runs
                tiered.compile_failed(plan.primitives, path, err,
                                      serial_form_runs=ns["_ready"])

        ready = cache.compiled_kernel(text, plan.arg_types)
        only = own_plan and llvm_tier.only() and llvm_tier.plan(cluster, plan)
        if only:  # (a testing mode: the first tier alone, built now, no numba)
            ns["_kernel"] = llvm_tier.build(only, plan.primitives, path)
            ns["_ready"] = ns["_kernel"] is not None
        elif ready is not None:  # compiled earlier in this process: no tiering needed
            install(ready)
        elif self.sync:
            try:
                build()
            except Exception as err:  # noqa: BLE001 - reported, and the equations still run
                tiered.compile_failed(plan.primitives, path, err)
                return None
        elif not _loaded_now(text, plan.arg_types, install):
            at_once = cache.on_disk(text, plan.arg_types)
            # the first tier: the loop as LLVM IR, built here in milliseconds while numba
            # compiles the final kernel in the worker (no serial numba form then)
            first = (llvm_tier.plan(cluster, plan)
                     if own_plan and llvm_tier.enabled() and not at_once else None)
            if first is not None:
                llvm_tier.prestart()

            def first_job():
                fn = llvm_tier.build(first, plan.primitives, path)
                if fn is not None:
                    with swap:
                        if not final[0]:
                            ns["_kernel"], ns["_ready"] = fn, True

            def request():
                if first is not None:
                    tiered.submit(first_job, lane="first tier")
                cache.request(text, plan.arg_types, serial_first if first is None else None)
            ns["_interp"] = tiered.counting(interp, job, tiered.compile_after(),
                                            request=request, at_once=at_once)
        self.kernel_sources.append((path, text))
        # fresh: the kernels (numba's, the first tier's) write into outputs allocated per
        # call, and the interpreter copies a result that could share an operand's memory
        return Step(step, fresh_result=True)

    def _interpreter(self, cluster):
        """The cluster on the reference kernels: what runs until its kernel is compiled."""
        plan = []
        fresh = set()   # the values a kernel marked fresh_result makes
        for eqn in cluster.eqns:
            fn = self.backend.eager_impl(eqn.primitive)
            if returns_fresh(fn):
                fresh.update(id(v) for v in eqn.outvars)
            if eqn.params:
                fn = functools.partial(fn, **eqn.params)
            plan.append((fn, [id(v) for v in eqn.invars], [id(v) for v in eqn.outvars]))
        in_keys = [id(v) for v in cluster.inputs]
        out_keys = [id(v) for v in cluster.outputs]
        # the results that could be an operand's memory (a broadcast_in_dim, an
        # integer_pow with y=1): copied where they are, so that the step is fresh_result
        # on every tier as the kernels are
        check = tuple(j for j, k in enumerate(out_keys) if k not in fresh)
        # (a multi-result equation's kernel returns a sequence: out is then a tuple of keys)
        plan = [(fn, ins, outs[0] if len(outs) == 1 else tuple(outs), dead)
                for fn, ins, outs, dead in _with_dead(plan, out_keys)]

        def interp(*args):
            env = dict(zip(in_keys, args))
            for fn, ins, out, dead in plan:
                if type(out) is tuple:
                    env.update(zip(out, fn(*[env[k] for k in ins])))
                else:
                    env[out] = fn(*[env[k] for k in ins])
                for k in dead:  # freed after its last use: a cluster of a long elementwise
                    del env[k]  # chain would otherwise hold every intermediate at once
            results = [env[k] for k in out_keys]
            return _fresh_of(args, results, check) if check else results

        return interp

    # ------------------------------------------------------------ lone equations
    def emit_equation(self, eqn):
        prim = eqn.primitive
        if call_body(eqn) is not None:
            return None  # a jit call: spliced into this program
        constant = constant_step(eqn)
        if constant is not None:
            return constant
        backend = self.backend
        own = backend.kernels.get(prim)
        if own is not None:
            return _kernel_step(own, eqn.params)
        if prim is lax.threefry2x32_p:  # native (plax_numba.threefry), bit-identical
            # (both the native kernel and the reference one allocate their two results)
            return Step(threefry_step(eqn, backend, self.sync), fresh_result=True)
        if prim is lax.dot_general_p:
            # (plain_dot's steps note the products they leave on BLAS's threads themselves)
            dot = kernels.plain_dot(eqn)
            fresh = True  # (np.dot makes a new array)
            if dot is None:
                dot = backend.eager_impl(prim)
                fresh = dot is not None and returns_fresh(dot)
                dot = dot and _bind(dot, eqn.params)
                if dot is not None and kernels.product_madds(eqn) > kernels.BLAS_THREADED_MIN:
                    dot = kernels.noting_threaded_product(dot)
            if dot is not None:
                return Step(dot, guarded=True, fresh_result=fresh)
        scan = self._scan_kernel(eqn)
        if scan is not None:
            return scan
        ufunc = kernels.direct_ufunc(eqn)
        if ufunc is not None:
            return Step(ufunc, accepts_out=True, guarded=True)
        lone = self._lone_kernel(eqn)
        if lone is not None:
            return lone
        # cond/while/scan: the core's host loop over bodies compiled by this backend for this
        # device, as a native loop once that is compiled
        # (the reference tier runs its bodies on the reference kernels too: compiling them
        # would only delay the kernel that replaces it)
        step = body_step(eqn, backend if self.compile_kernels else reference_bodies(backend),
                         self.device)
        if step is not None:
            from plax_numba.wholegen import CONTROL_FLOW
            native = (self._native_loop(eqn, step)
                      if self.compile_kernels and eqn.primitive in CONTROL_FLOW else None)
            return native if native is not None else step
        if backend.is_core(prim):
            fn = backend.eager_impl(prim)
            if fn is not None:
                return _kernel_step(fn, eqn.params)
        return None  # the lowering layer's fallback: the reference kernel, with a warning

    def _lone_kernel(self, eqn):
        """A large elementwise equation without a NumPy ufunc of its own (``logistic``,
        ``integer_pow``, ``clamp``, ``sign``, integer ``div``...) as a one-equation kernel:
        its reference kernel makes several NumPy passes over the array (10M float32
        ``logistic``: 37.6 ms, 4.6 ms as a kernel). None where the equation is small
        (:data:`LONE_KERNEL_MIN` elements), not elementwise (nor a :func:`strided_extreme`
        max/min), or not expressible by
        :func:`plax_numba.codegen.elementwise` (float64 ``erf_inv``, for one, keeps its
        reference kernel)."""
        from plax.lowering import ELEMENTWISE, Cluster, fusion_kind
        extreme = strided_extreme(eqn)
        if (not self.compile_kernels or (fusion_kind(eqn.primitive) != ELEMENTWISE
                                         and not extreme)
                or eqn.primitive.multiple_results or len(eqn.outvars) != 1):
            return None
        # (a reduction's loop: its operand's shape)
        shape = tuple((eqn.invars[0] if extreme else eqn.outvars[0]).aval.shape)
        if math.prod(shape) < LONE_KERNEL_MIN or codegen.reference_only(eqn):
            return None
        if len({id(v) for v in eqn.invars}) != len(eqn.invars):
            return None  # an operand repeated: the program passes it twice, a cluster once
        step = self._emit_kernel(Cluster([eqn], shape, list(eqn.invars), list(eqn.outvars)))
        if step is None:
            return None
        cluster_step = step.fn  # returns the cluster's outputs: a list of one
        return Step(lambda *args: cluster_step(*args)[0], guarded=step.guarded,
                    fresh_result=step.fresh_result)

    def _scan_kernel(self, eqn):
        """An ``argmax``/``argmin``/cumulative equation on float16/bfloat16 as one kernel
        (:mod:`plax_numba.codegen_scan`), and a cumulative equation of another dtype of at
        least :data:`LONE_KERNEL_MIN` elements as the one-equation form of a fused scan
        (its reference kernel makes a NumPy pass per step of XLA's blocked order, or
        ``np.maximum.accumulate`` along strided lines: 1000x1000 float32 ``cummax`` along
        axis 0 ~4.5 ms); tiered like a cluster's; None for any other."""
        from plax_numba import codegen_scan
        if not self.compile_kernels:
            return None
        if not codegen_scan.takes(eqn) and not (
                codegen.kind_of(eqn.primitive) == CUMULATIVE
                and math.prod(eqn.invars[0].aval.shape) >= LONE_KERNEL_MIN):
            return None
        from plax.lowering import Cluster
        operand = eqn.invars[0]
        step = self._emit_kernel(Cluster([eqn], tuple(operand.aval.shape), [operand],
                                         list(eqn.outvars)))
        if step is None:
            return None
        cluster_step = step.fn  # returns the cluster's outputs: a list of one
        return Step(lambda x: cluster_step(x)[0], guarded=step.guarded,
                    fresh_result=step.fresh_result)

    def _native_loop(self, eqn, compiled_bodies):
        """``cond``/``while``/``scan`` as one njit function (:mod:`plax_numba.wholegen`);
        None (with one warning naming what is missing) where the generator cannot express
        the bodies, and None without a warning where a body holds a value above
        :func:`native_loop_max` elements (where a limit is set); the caller then runs
        ``compiled_bodies`` (the Python loop around bodies compiled by this backend).

        Until the native kernel is compiled (tiering) the Python loop runs its bodies on the
        reference kernels: compiling the bodies too would put their kernels ahead of the
        native one in the compile queue (a scan's body is hot within its first call), to be
        thrown away when the native loop arrives. If the native compilation fails, the loop
        switches to ``compiled_bodies``."""
        from plax_numba import wholegen
        limit = native_loop_max()
        if limit is not None and wholegen.body_largest(eqn) > limit:
            return None  # bodies above the limit set: the per-equation path (no warning)
        try:
            plan = wholegen.plan_program(wholegen.equation_jaxpr(eqn))
        except codegen.Unsupported as err:
            if str(err) not in wholegen.HOST_CALLBACKS:
                tiered.not_native(eqn.primitive.name, str(err))
            return None
        if self.sync:
            step = native_step(plan, compiled_bodies, True, self.kernel_sources)
        else:
            reference = body_step(eqn, reference_bodies(self.backend), self.device)
            step = native_step(plan, reference, False, self.kernel_sources)
            if step is None:  # a load from the disk cache failed (warned)
                return None
            state = step.__plax_native__
            counted = state["_interp"]

            def until_native(*args):
                if not state.get("_failed"):
                    return counted(*args)
                state["_interp"] = compiled_bodies  # (warned by the failed job)
                return compiled_bodies(*args)
            state["_interp"] = until_native
        if step is not None:
            self.native.append(eqn.primitive.name)
        return step

    def guard(self):
        return kernels.quiet_enter, kernels.quiet_leave


_reference_tier = contextvars.ContextVar("plax_numba_reference_tier", default=False)


def in_reference_tier() -> bool:
    """Whether the program being compiled is a body of a loop whose native kernel is not
    compiled yet (:class:`_ReferenceBodies`): it runs on the reference kernels, compiling
    no kernel and no whole-program kernel of its own."""
    return _reference_tier.get()


class _ReferenceBodies:
    """The Numba backend as a :class:`plax.lowering.BodyRunner` sees it for the bodies of a
    loop whose native kernel is not compiled yet: its ``compile`` is the backend's, in the
    reference tier (:func:`in_reference_tier`); everything else is the backend's."""

    def __init__(self, backend):
        self._backend = backend

    def __getattr__(self, name):
        return getattr(self._backend, name)

    def compile(self, jaxpr, device):
        token = _reference_tier.set(True)
        try:
            return self._backend.compile(jaxpr, device)
        finally:
            _reference_tier.reset(token)


_reference_bodies: dict = {}


def reference_bodies(backend) -> _ReferenceBodies:
    """The one :class:`_ReferenceBodies` of ``backend`` (so its bodies' runner is shared)."""
    view = _reference_bodies.get(backend)
    if view is None:
        view = _reference_bodies.setdefault(backend, _ReferenceBodies(backend))
    return view


#: lone elementwise equations without a ufunc of at least this many elements are compiled
#: (:meth:`NumbaEmitter._lone_kernel`); smaller ones run their reference kernel
LONE_KERNEL_MIN = env_number("PLAX_NUMBA_LONE_MIN", 1 << 14)

#: split clusters (:meth:`NumbaEmitter._emit_split`) of at least this many elements run as
#: one kernel over chunks (:mod:`plax_numba.codegen_split`): where its loop may be threaded
#: (smaller ones: the segments one after the other on whole arrays)
CHUNK_MIN = env_number("PLAX_NUMBA_CHUNK_MIN", codegen.PARALLEL_MIN)

#: ``cond``/``while``/``scan`` equations whose bodies hold a value of more than this many
#: elements keep the per-equation path (the Python loop around bodies compiled as clusters)
#: instead of a native loop; None (the default): no limit. ``PLAX_NUMBA_NATIVE_LOOP_MAX``
#: sets one (read at each compile). The limit was 2**18 while the native loop lost on large
#: bodies: a key split's threefry over its ``(n, k)`` grid was a serial loop nest, its
#: ``(n, k, 2)`` concatenate and slices were copies, allocated every step. With that grid a
#: flat threaded loop (codegen's *indexed* loops), the slices copied straight from the
#: concatenate's parts and slices' buffers reused across iterations (wholegen._slice),
#: ``random.gamma(key, 2.0, (10**6,))`` (a rejection ``while_loop`` whose largest value is
#: the ``(n, 3, 2)`` key grid), native loop against per-equation path, alternating, best
#: of 5 on the loaded 2-core host: 2232 / 2616 ms (before: 3208 / 2849 ms); ``beta``
#: 5656 / 6220 ms (``python benchmarks/random_samplers.py``).
NATIVE_LOOP_MAX: int | None = None


def native_loop_max() -> int | None:
    """:data:`NATIVE_LOOP_MAX`, or ``$PLAX_NUMBA_NATIVE_LOOP_MAX`` where set (None: no
    limit)."""
    value = os.environ.get("PLAX_NUMBA_NATIVE_LOOP_MAX")
    try:
        return NATIVE_LOOP_MAX if value is None else int(value)
    except ValueError:
        return NATIVE_LOOP_MAX

#: NumPy reduces along the innermost axis its reduced and kept axes leave contiguous; when
#: that run has fewer elements than this its loop overhead dominates (see strided_extreme)
NUMPY_INNER_RUN_MIN = 64


def strided_extreme(eqn) -> bool:
    """Whether ``eqn`` is a real ``reduce_max``/``reduce_min`` that NumPy runs slowly: its
    reduced and kept axes alternate, the innermost run of either kind is short (a 2x2
    max-pool, ``max(x.reshape(500, 2, 500, 2), (1, 3))``: 14 ms in ``np.max``, 15x JAX).
    A compiled nested loop (:meth:`NumbaEmitter._lone_kernel`; threaded over the outermost
    axis when that is kept, :func:`plax_numba.codegen.plan_cluster`) takes it instead; max
    and min are exact, so the order of the loop changes no result."""
    if eqn.primitive not in (lax.reduce_max_p, lax.reduce_min_p):
        return False
    shape = tuple(eqn.invars[0].aval.shape)
    if np.dtype(eqn.invars[0].aval.dtype).kind not in "fiu" or 0 in shape:
        return False
    axes = set(eqn.params["axes"])
    runs: list = []  # (reduced?, elements) of each run of axes of one kind, in order
    for d, n in enumerate(shape):
        if n == 1:
            continue
        if runs and runs[-1][0] == (d in axes):
            runs[-1][1] *= n
        else:
            runs.append([d in axes, n])
    return len(runs) >= 2 and runs[-1][1] < NUMPY_INNER_RUN_MIN


def _scans(eqn) -> bool:
    """Whether ``eqn`` is an arg-reduction or cumulative op (a cluster whose kernel the
    generator declines is split at them)."""
    return codegen.kind_of(eqn.primitive) in (ARG_REDUCTION, CUMULATIVE)


def _fresh_of(operands, results: list, check) -> list:
    """``results`` (of a cluster run on the reference kernels) with each of those at the
    positions ``check`` copied where it shares memory with an operand or is read-only."""
    for j in check:
        r = results[j]
        if type(r) is np.ndarray and r.ndim and (not r.flags.writeable or any(
                type(a) is np.ndarray and np.may_share_memory(r, a) for a in operands)):
            results[j] = r.copy()
    return results


def _with_dead(plan, out_keys):
    """``(fn, ins, outs, dead)`` for each ``(fn, ins, outs)`` of ``plan``: ``dead`` the keys
    whose last use is that step (operands, and outputs nothing reads) and that are not
    among ``out_keys``, so a step-by-step interpreter drops them there."""
    keep, last = set(out_keys), {}
    for i, (_, ins, outs) in enumerate(plan):
        for k in outs:
            last[k] = i
        for k in ins:
            last[k] = i
    return [(fn, ins, outs, tuple(k for k in dict.fromkeys(list(ins) + list(outs))
                                  if last[k] == i and k not in keep))
            for i, (fn, ins, outs) in enumerate(plan)]


#: a ``broadcast_in_dim`` of a literal to at most this many elements is made once, when the
#: program is built (:func:`constant_step`)
CONSTANT_MAX = 1 << 14


def constant_step(eqn):
    """A step returning the value of ``eqn`` made once when the program is built, where
    ``eqn`` is a ``broadcast_in_dim`` of a literal to at most :data:`CONSTANT_MAX` elements
    (``zeros(64)``, a loop's carry initialised by ``full``): one Python call instead of a
    NumPy ``full`` per call (~4.4 us before ``scan(..., zeros(64), xs)``'s native loop).
    The array is read-only, and no later step writes into it: the program reuses only the
    buffers of steps that accept ``out=``, and native loops take their operands read-only.
    None for any other equation."""
    from plax.core.jaxpr import Literal
    from plax.lowering import literal_value
    if eqn.primitive is not lax.broadcast_in_dim_p or not isinstance(eqn.invars[0], Literal):
        return None
    aval = eqn.outvars[0].aval
    if math.prod(aval.shape) > CONSTANT_MAX or eqn.params.get("sharding") is not None:
        return None
    value = np.full(tuple(aval.shape), literal_value(eqn.invars[0]), np.dtype(aval.dtype))
    value.setflags(write=False)
    return lambda _operand: value


def _bind(fn, params):
    return functools.partial(fn, **params) if params else fn


def _kernel_step(kernel, params) -> Step:
    """The step calling a kernel-table ``kernel`` with ``params`` bound: fresh where the
    kernel is marked so (:func:`plax.lowering.returns_fresh`)."""
    if takes_out(kernel):  # (an update: the driver may hand over its dead operand as out=)
        return Step(_bind(kernel, params), accepts_out=True)
    return Step(_bind(kernel, params), fresh_result=returns_fresh(kernel))


def threefry_step(eqn, backend, sync: bool):
    """The step running a ``threefry2x32`` equation in a compiled program: the native kernel
    of :mod:`plax_numba.threefry`.

    With synchronous compilation (or a kernel already compiled in this process) it is the
    native kernel itself. Otherwise it is tiered like a fusion cluster: the reference kernel
    runs until the equation is hot, the native kernel compiles (or loads from the disk
    cache) in the background thread, and later calls use it. :mod:`plax_numba.threefry`
    (and numba with it) is imported by the compilation, not when the program is built. A
    failed compilation warns once and the reference kernel keeps running.
    """
    from plax_numba import threefry  # (not numba)
    if _threefry_ready:  # (loaded or compiled in this process)
        return threefry.threefry2x32
    if sync:
        kernel = _threefry_compile()
        return kernel if kernel is not None else backend.eager_impl(eqn.primitive)
    on_disk = threefry.on_disk()
    if on_disk and _threefry_load_now():
        return threefry.threefry2x32
    return tiered.switching(backend.eager_impl(eqn.primitive), _threefry_compile,
                            tiered.compile_after(), at_once=on_disk)


def _threefry_load_now() -> bool:
    """Loads both threefry kernels from the disk cache on this thread if that can be done at
    once (:func:`cache.try_load`: never a compilation, never a wait on numba's compiler
    lock)."""
    global _threefry_ready
    from plax_numba import threefry
    try:
        if threefry.load_native():  # (the worker's native artifacts: no numba)
            _threefry_ready = True
            return True
        if not cache.prepare_numba_now():
            cache.load_stats["missed here"] += 1
            return False
        from plax_numba import threefry_kernels as k
        sig = threefry.signature()
        if not all(cache.try_load(kernel, sig, parallel)
                   for kernel, parallel in ((k.hash_serial, False), (k.hash_parallel, True))):
            cache.load_stats["missed here"] += 1
            return False
    except Exception:  # noqa: BLE001 - the background thread's attempt reports its error
        return False
    _threefry_ready = True
    return True


#: whether the threefry kernels (one pair for every operand mix) are compiled or loaded in
#: this process
_threefry_ready = False


def _threefry_compile():
    """:func:`plax_numba.threefry.threefry2x32` once both its kernels are compiled (or loaded
    from numba's disk cache); None (warned about) on failure."""
    global _threefry_ready
    try:
        from plax_numba import threefry
        threefry.precompile()
    except Exception as err:  # noqa: BLE001 - reported; the reference kernel runs it
        import os
        tiered.compile_failed(["threefry2x32"],
                              os.path.join(os.path.dirname(__file__), "threefry.py"), err)
        return None
    _threefry_ready = True
    return threefry.threefry2x32


def _loaded_now(text: str, arg_types: list, use) -> bool:
    """For a kernel :func:`cache.on_disk` says is cached: loads it on this thread (the
    program's, building it) if that can be done at once (:func:`cache.load_now`: never a
    compilation, never a wait on numba's compiler lock) and hands it to ``use``. False if it
    is not on disk or the load missed: the caller tiers it (a kernel on disk is loaded by
    the background thread at once, ``at_once``, which sends a cache miss back to the
    worker)."""
    if not cache.on_disk(text, arg_types):
        return False
    try:
        kernel = cache.load_now(text, arg_types)
    except Exception:  # noqa: BLE001 - the background thread's attempt reports its error
        return False
    if kernel is None:
        return False
    use(kernel)
    return True


def _serial_entry(serial_text: str, arg_types: list):
    """The entry point of a parallel kernel's serial form (:func:`cache.serial_variant`) if
    it is at hand: compiled earlier in this process, or loaded at once from the disk cache
    (:func:`cache.load_now`: no compilation, no wait on numba's compiler lock). None
    otherwise: the parallel kernel then runs alone, untimed."""
    kernel = cache.compiled_kernel(serial_text, arg_types)
    if kernel is None and cache.on_disk(serial_text, arg_types):
        try:
            kernel = cache.load_now(serial_text, arg_types)
        except Exception:  # noqa: BLE001 - only a shortcut: the parallel kernel is enough
            return None
    return None if kernel is None else cache.entry_point(kernel, arg_types)


def native_step(plan, interp, sync: bool, sources: list | None = None):
    """The step of a :class:`plax_numba.wholegen.WholePlan`: its compiled entry point once
    ready, ``interp`` until then (tiered like a cluster's kernel; at once when ``sync``),
    with the first tier of :mod:`plax_numba.llvm_tier_loops` in between where it takes the
    program.
    None if a synchronous compilation failed (warned about). Appends ``(path, module text)``
    to ``sources``."""
    text = cache.module_source(plan.source, plan.primitives)
    path = cache.source_path(text)
    ns = dict(plan.wrapper_globals, _ready=False, _entry=None, _interp=interp,
              _asc=np.ascontiguousarray)
    exec(compile(plan.wrapper, f"<plax_numba step {path}>", "exec"), ns)

    swap = threading.Lock()
    final = [False]  # numba's kernel is in use: the first tier must not replace it

    def build():
        kernel = cache.compile_kernel(text, plan.arg_types)
        with swap:
            final[0] = True
            ns["_entry"] = cache.entry_point(kernel, plan.arg_types)
            ns["_ready"] = True

    def first_loop():  # the loop as LLVM IR (plax_numba.llvm_tier_loops), or None
        from plax_numba import llvm_tier_loops
        jaxpr = getattr(plan, "jaxpr", None)
        return None if jaxpr is None else llvm_tier_loops.plan(jaxpr, plan)

    ready = cache.compiled_kernel(text, plan.arg_types)
    only = llvm_tier.only() and first_loop()
    if only:  # (a testing mode: the first tier alone, built now, no numba)
        ns["_entry"] = llvm_tier.build(only, plan.primitives, path)
        ns["_ready"] = ns["_entry"] is not None
    elif ready is not None:
        ns["_entry"], ns["_ready"] = cache.entry_point(ready, plan.arg_types), True
    elif sync:
        try:
            build()
        except Exception as err:  # noqa: BLE001 - reported; the reference path still runs
            tiered.compile_failed(plan.primitives, path, err)
            return None
    elif not _loaded_now(text, plan.arg_types, lambda kernel: ns.update(
            _entry=cache.entry_point(kernel, plan.arg_types), _ready=True)):
        def job():
            try:
                build()
            except Exception as err:  # noqa: BLE001
                ns["_failed"] = True
                tiered.compile_failed(plan.primitives, path, err)
        at_once = cache.on_disk(text, plan.arg_types)
        # the first tier: the whole program as LLVM IR, built in this process (tens of
        # milliseconds of LLVM, GIL released) while numba compiles the final kernel in the
        # worker. Planned now (milliseconds), built when the step is hot, as a cluster's is:
        # a program called once spends nothing on it, and a loop's reference run (the time
        # the build starts later by) is short beside the build (RNN scan 1000x64: 15 ms
        # against ~90 ms of LLVM); the loader's set-up starts now
        first = first_loop() if llvm_tier.enabled() and not at_once else None
        linked_now = first is not None and llvm_tier.on_disk(first)
        if first is not None and not linked_now:
            # the loader's set-up queued first, as a cluster's is: tiered.counting below
            # spawns the compile worker (a fork and exec, ~0.1 s of wall time on a loaded
            # host), which the set-up then overlaps instead of following
            llvm_tier.prestart()

        def first_job():
            fn = llvm_tier.build(first, plan.primitives, path)
            if fn is not None:
                with swap:
                    if not final[0]:
                        ns["_entry"], ns["_ready"] = fn, True

        def request():
            if first is not None:
                tiered.submit(first_job, lane="first tier")
            cache.request(text, plan.arg_types)
        ns["_interp"] = tiered.counting(interp, job, tiered.compile_after(),
                                        request=request, at_once=at_once)
        if linked_now:
            # its machine code is cached (an earlier process built it): linked now, in
            # milliseconds once the loader is set up, so the program is fast from its first
            # call; numba's kernel is still requested when the step gets hot
            fn = llvm_tier.build(first, plan.primitives, path)
            if fn is not None:
                def hot():  # numba's kernel requested; the tier then runs without counting
                    with swap:
                        if ns["_entry"] is counted:
                            ns["_entry"] = fn
                    cache.request(text, plan.arg_types)
                counted = tiered.counting(fn, job, tiered.compile_after(), request=hot)
                ns["_entry"], ns["_ready"] = counted, True
    if sources is not None:
        sources.append((path, text))
    step = ns["step"]
    step.__plax_native__ = ns  # tests and as_text: whether the native kernel is in use
    return step
