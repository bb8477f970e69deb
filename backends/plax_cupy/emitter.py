"""The CuPy backend's :class:`plax.lowering.Emitter`: clusters become generated CUDA kernels,
lone equations one kernel or CuPy/cuBLAS call each.

* a cluster (the shared fusion pass's grouping, ``iota``, ``threefry2x32`` and
  ``argmax``/``argmin`` included) -> one :class:`plax_cupy.backend.Launcher` (one kernel, a
  split reduction included); a cluster with an ``argmax``/``argmin`` the generator declines
  (:class:`plax_cupy.codegen.UnfusedArgReduction`: read uncoalesced, a middle axis before a
  few kept elements; or beside a reduction of other axes), or with a complex max/min
  reduction (JAX's rule is not associative: no block tree) -> the rest of the cluster's
  kernel, then each of those as its kernel-table kernel (:mod:`plax_cupy.kernels_rows`;
  complex max/min's in-order fold), as before they fused;
  a cluster the generator declines
  (:class:`plax_cupy.codegen.Unsupported`: reductions over different axes, a dtype outside
  the generator's map) is split by the driver into its equations;
* a horizontal group (independent small elementwise clusters ready at one point, as
  :func:`plax.lowering.horizontal_groups` forms them) -> one multi-tensor kernel
  (:func:`plax_cupy.codegen.plan_group`, a :class:`~plax_cupy.backend.GroupLauncher`);
* a lone fusible equation -> its own generated kernel, or, where the generator declines it, the
  backend's eager kernel (the kernel table's; one
  :class:`~plax_cupy.backend.PlaxCupyFallbackWarning` per primitive and dtype);
* a ``scan`` whose body is small -> one persistent kernel for all its steps
  (:mod:`plax_cupy.scan_kernel`); one it declines, like ``cond`` and ``while`` -> the host
  loop, the reason in ``as_text``;
* a primitive with a program kernel (``fft``: cuFFT plans of its own) -> that kernel, made
  for the equation and held by the program (:meth:`~plax_cupy.backend.CupyBackend.program_impl`);
* everything else -> the backend's eager kernel (see :mod:`plax_cupy.backend`): the kernel
  table (cuBLAS, cuSOLVER, cuFFT, CuPy), control flow as host loops over compiled bodies, and
  the host reference kernels only for a primitive with no GPU path (counted and warned);
* a ``jit`` call equation is declined, so the driver splices its body into the caller (one
  program, clusters fused across the call).

This module imports CuPy only through :mod:`plax_cupy.backend`; the kernel sources come from
:mod:`plax_cupy.codegen`, which CI checks without a GPU.
"""
from __future__ import annotations

import numpy as np

from plax.lowering import ARG_REDUCTION, REDUCTION, Emitter, call_body, fusion_kind, \
    inserts_unit_axes, sub_cluster

from plax_cupy import codegen, codegen_rows_local


class _CodegenBound:
    """A :class:`CupyEmitter` bound that reads the ``codegen`` constant ``name`` whenever it is
    read (``horizontal_max_elements``: ``codegen.HORIZONTAL_MAX_ELEMENTS``), so that setting
    the constant takes effect on the next program while a subclass's own ``... = N``
    replaces it as any class attribute does."""

    def __init__(self, name: str):
        self.name = name

    def __get__(self, instance, owner) -> int:
        return getattr(codegen, self.name)


def _folds_in_order(eqn) -> bool:
    """Whether ``eqn`` is a reduction only a fold in order computes (complex max/min,
    :attr:`plax_cupy.codegen.Reduction.folds_in_order`): the kernel table's kernel by design."""
    if fusion_kind(eqn.primitive) != REDUCTION:
        return False
    try:
        return codegen.reduction_of(eqn).folds_in_order
    except codegen.Unsupported:
        return False


def _runs_apart(eqn) -> bool:
    """Whether a cluster the generator declines may still run without ``eqn`` as one kernel,
    ``eqn`` after it as its own step: an ``argmax``/``argmin``, or a reduction only a fold in
    order computes (:func:`_folds_in_order`)."""
    return fusion_kind(eqn.primitive, arg_reductions=True) == ARG_REDUCTION or \
        _folds_in_order(eqn)


class CupyEmitter(Emitter):
    """Generates one program for :func:`plax.lowering.lower`.

    Args:
      backend: the :class:`~plax_cupy.backend.CupyBackend`.
      device: the device the program runs on.

    Attributes:
      kernel_sources: the :class:`~plax_cupy.codegen.ClusterKernel` (or
        :class:`~plax_cupy.scan_kernel.ScanKernel`) of each generated kernel, in program order
        (``as_text`` shows their source).
      notes: why each ``scan`` that kept its host loop did (``as_text`` shows them).
      program_kernels: the kernels the program holds (:meth:`CupyBackend.program_impl`'s
        ``program_kernel``), whose ``describe()``, where they have one, ``as_text`` shows at
        each call (their state changes as the program runs).
    """

    fuses = True
    #: threefry2x32 joins clusters: the kernel hashes both words of a counter pair in one pass
    #: (``plax_threefry_elem``), so random bits and the sampler after them are one kernel
    fuses_multiple_results = True
    #: iota joins clusters as an expression of the kernel's element index: the counter
    #: random.normal hashes is never written to memory
    fuses_index = True
    #: rank-0 producers (random.uniform's bounds) fold into the cluster that reads them: the
    #: kernel recomputes them per element from its scalar inputs instead of a launch of their own
    fuses_scalar_producers = True
    #: argmax/argmin join clusters: the kernel keeps each output's best (value, index) pair
    #: (``codegen.ArgReduction``), so random.categorical's noise, logits and argmax are one kernel
    fuses_arg_reductions = True
    #: slice/concatenate/reshape/squeeze fuse with what feeds them and what reads them: each
    #: value is computed at the index its reader needs (``codegen_structural``), so the
    #: original threefry layout's halves, concatenation and pad are one kernel with its sampler
    fuses_structural = True
    #: elementwise work on a reduction's results (a mean's division, softmax's log of the
    #: sum, an accuracy's count divided) joins the reduction's kernel as its epilogue,
    #: computed where each result is final (``codegen.plan_cluster``'s ``plax_epilogue``)
    fuses_epilogues = True
    #: a reduction over trailing axes of rows of at most this many elements and the later work
    #: on those rows and results (softmax's exp(x - max) and division by the sum, layer norm)
    #: are one kernel computing a row per block (``codegen_rows_local``), read when a program
    #: is lowered (``codegen.ROW_LOCAL_MAX_ELEMENTS``)
    row_local_max_elements = _CodegenBound("ROW_LOCAL_MAX_ELEMENTS")
    #: a reader of at most this many elements computes per element what it reads through a
    #: structural equation, however costly (``codegen.RECOMPUTE_MAX_ELEMENTS``, read when a
    #: program is lowered): a key split before a small sampler is part of its kernel
    recompute_max_elements = _CodegenBound("RECOMPUTE_MAX_ELEMENTS")

    #: independent elementwise clusters ready at the same point, each of at most this many
    #: elements, are one multi-tensor kernel (``codegen.plan_group``): the SGD update of every
    #: parameter in one launch. Read when a program is lowered (:meth:`fusion_options`): here
    #: ``codegen.HORIZONTAL_MAX_ELEMENTS`` at that moment (tuned as every CuPy threshold is),
    #: unless a subclass sets its own bound.
    horizontal_max_elements = _CodegenBound("HORIZONTAL_MAX_ELEMENTS")

    def __init__(self, backend, device):
        self.backend, self.device = backend, device
        self.kernel_sources: list = []
        self.notes: list[str] = []   # why a scan kept its host loop (shown by as_text)
        self.program_kernels: list = []

    def emit_cluster(self, cluster):
        if cluster.row_axes:   # (a block per row; declined: its parts as they were)
            try:
                plan = codegen_rows_local.plan_rows(cluster)
            except codegen.Unsupported:
                return None
            from plax_cupy.launch_rows import RowsLauncher
            self.kernel_sources.append(plan)
            return RowsLauncher(plan, self.backend)
        try:
            plan = codegen.plan_cluster(cluster)
        except codegen.Unsupported:   # (an argmax read uncoalesced, reducing other axes, ...)
            if cluster.epilogue:   # (its parts as they were: the reducing unit, then each
                return None        # epilogue unit, the former free to run apart its argmax)
            return self._arg_reductions_apart(cluster)
        return self._launch(plan)

    def _arg_reductions_apart(self, cluster):
        """A step running ``cluster`` without its ``argmax``/``argmin`` and complex max/min
        reductions (:func:`_runs_apart`) as one kernel, then each of those on its operand as
        the equation's own step (the coalesced kernel-table kernel; complex max/min's in-order
        fold), as before they joined clusters; None (the driver splits the cluster) where
        it has none, or the rest is declined too."""
        apart = [e for e in cluster.eqns if _runs_apart(e)]
        rest = [e for e in cluster.eqns if all(e is not a for a in apart)]
        if not apart or not rest:
            return None
        needed = {id(v) for v in cluster.outputs} | {id(e.invars[0]) for e in apart}
        part = sub_cluster(rest, cluster.shape, needed)
        try:
            launcher = self._launch(codegen.plan_cluster(part))
        except codegen.Unsupported:
            return None
        where = {id(v): k for k, v in enumerate(cluster.inputs)}
        part_inputs = [where[id(v)] for v in part.inputs]
        steps = [(self.emit_equation(e), id(e.invars[0]), id(e.outvars[0])) for e in apart]

        def run(*buffers):
            env = {id(v): b for v, b in zip(cluster.inputs, buffers)}
            env.update(zip((id(v) for v in part.outputs),
                           launcher(*[buffers[k] for k in part_inputs])))
            for step, operand, out in steps:
                env[out] = step(env[operand])
            return [env[id(v)] for v in cluster.outputs]
        return run

    def emit_group(self, group):
        try:
            plan = codegen.plan_group(group.members)
        except codegen.Unsupported:
            return None
        from plax_cupy.backend import GroupLauncher
        where = {id(v): k for k, v in enumerate(group.inputs)}
        self.kernel_sources.append(plan)
        return GroupLauncher(plan, self.backend, [[where[id(v)] for v in m.inputs]
                                                  for m in group.members])

    def _launch(self, plan):
        from plax_cupy.backend import Launcher
        self.kernel_sources.append(plan)
        return Launcher(plan, self.backend)

    def emit_equation(self, eqn):
        if call_body(eqn) is not None:
            return None  # spliced into this program by the driver
        prim = eqn.primitive
        # (a lone broadcast_in_dim that only inserts size-1 axes is a view: the table's kernel)
        if fusion_kind(prim) is not None and not prim.multiple_results and not \
                inserts_unit_axes(prim, eqn.invars[0].aval.shape, eqn.params):
            try:
                launcher = self._launch(codegen.plan_equation(eqn))
            except codegen.Unsupported as why:
                from plax_cupy.backend import warn_once
                if not _folds_in_order(eqn):   # (not a gap: the in-order fold by design)
                    warn_once(("jit", prim.name, tuple(str(v.aval.dtype) for v in eqn.invars)),
                              f"plax_cupy: {why}; {prim.name} runs as its kernel-table kernel "
                              "instead of a generated kernel.")
            else:
                return lambda *bufs: launcher(*bufs)[0]
        if prim.name == "scan":  # the whole scan as one kernel where its body allows it
            launcher = self.backend.scan_launcher(eqn.params)
            if not isinstance(launcher, str):
                self.kernel_sources.append(launcher.plan)
                return launcher
            self.notes.append(f"// scan of {eqn.params['length']} steps kept as a host loop: {launcher}")
        own = self.backend.program_impl(prim, eqn.params)   # (state the program holds)
        if own is not None:
            self.program_kernels.append(own.program_kernel)
            return own
        kernel = self.backend.eager_impl(prim)
        params = eqn.params
        if not params:
            return kernel
        return lambda *bufs: kernel(*bufs, **params)

    def constant(self, host_value):
        return self.backend.put(np.asarray(host_value), self.device)
