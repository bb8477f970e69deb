"""The emitter interface: what a compiling backend implements for :func:`plax.lowering.lower`.

The lowering driver walks the jaxpr's clusters and equations and asks the emitter for one
*step* each: a callable over buffers. Whatever the emitter declines (returns None for) the
driver handles itself: a declined cluster is split into its equations, a declined call
equation (``jit``) has its body's equations lowered in its place, and any other declined
equation runs on the reference backend's kernel (see :mod:`plax.lowering.fallback`).
"""
from __future__ import annotations

from typing import Any, Callable

import numpy as np

from plax.lowering.fusion import FusionOptions


class Step:
    """A callable the generated program calls, with what the driver may do around it.

    Args:
      fn: ``fn(*buffers) -> buffer`` (a list for multi-result equations and clusters).
      accepts_out: ``fn`` also takes ``out=``, a dead temporary buffer of the result's shape
        and dtype to write into (the driver passes one when liveness allows).
      guarded: ``fn`` must run between the emitter's :meth:`Emitter.guard` pair.
      fresh_result: ``fn``'s results are writeable arrays it allocated on this call, sharing
        no memory with its operands (a product, a reduction, a sort, a fused kernel's
        outputs); never a cached or read-only array. The driver then lets an operand's
        buffer take a later result in place while the results live, and lets a single
        result take one itself (the results of one multi-result step may share memory
        with each other: the driver writes into none of those). False (the default, safe
        for any step): a result may be a view of an operand (a slice, a reshape,
        ``real``, a host fallback), so the driver keeps the operands' buffers from
        in-place reuse while the result lives. A step that ``accepts_out`` (a ufunc) is
        fresh whatever this says.
    """

    __slots__ = ("fn", "accepts_out", "guarded", "fresh_result")

    def __init__(self, fn: Callable, accepts_out: bool = False, guarded: bool = False,
                 fresh_result: bool = False):
        self.fn, self.accepts_out, self.guarded = fn, accepts_out, guarded
        self.fresh_result = fresh_result


def fresh_result(kernel: Callable) -> Callable:
    """Marks ``kernel`` (a backend's host kernel) as one whose results never share memory with
    its operands, so a backend can build its steps with :class:`Step`'s ``fresh_result``
    from its kernel table (see :func:`returns_fresh`). Mark only a kernel that allocates its
    results on every path: one that returns an operand, or a view of one, on a shortcut (a
    no-op cast, an empty axis list), or a read-only array (``np.broadcast_to``), must stay
    unmarked.

    Args:
      kernel: the kernel function.

    Returns:
      ``kernel`` itself, marked.

    Example:
      >>> import numpy as np
      >>> total = fresh_result(lambda x, *, axes: np.sum(x, axis=axes).astype(x.dtype))
      >>> returns_fresh(total), returns_fresh(np.reshape)
      (True, False)
    """
    kernel.__plax_fresh_result__ = True
    return kernel


def returns_fresh(kernel: Callable) -> bool:
    """Whether ``kernel`` was marked by :func:`fresh_result` (False for any other callable,
    a kernel a plugin registered among them).

    Args:
      kernel: a kernel function.

    Returns:
      True if its results never share memory with its operands.

    Example:
      >>> returns_fresh(fresh_result(lambda x: x + 1))
      True
    """
    return getattr(kernel, "__plax_fresh_result__", False) is True


def updates_in_place(kernel: Callable) -> Callable:
    """Marks ``kernel`` (a host kernel of an update: ``dynamic_update_slice``, a ``scatter``)
    as one that takes ``out=``, a dead buffer the lowering driver hands over, and writes its
    result into its first operand when that buffer is the operand itself (see
    :func:`update_target`): a backend then builds its step with :class:`Step`'s
    ``accepts_out`` (:func:`takes_out`), and a program updating an array it computed and
    reads no more (``(x * 2).at[i].set(v)``, ``y.at[a].set(p).at[b].set(q)``) copies
    nothing. The kernel must also work without ``out``.

    Args:
      kernel: the kernel function, ``kernel(operand, *rest, out=None, **params)``.

    Returns:
      ``kernel`` itself, marked.

    Example:
      >>> @updates_in_place
      ... def put(x, v, *, at, out=None):
      ...     y = update_target(x, out, v)
      ...     y[at] = v
      ...     return y
      >>> x = np.zeros(3)
      >>> takes_out(put), put(x, 1.0, at=0, out=x) is x, put(x, 2.0, at=1) is x
      (True, True, False)
    """
    kernel.__plax_updates_in_place__ = True
    return kernel


def takes_out(kernel: Callable) -> bool:
    """Whether ``kernel`` was marked by :func:`updates_in_place` (it takes ``out=``).

    Example:
      >>> takes_out(lambda x: x), takes_out(updates_in_place(lambda x, out=None: x))
      (False, True)
    """
    return getattr(kernel, "__plax_updates_in_place__", False) is True


def update_target(operand: np.ndarray, out: Any = None, *others: Any) -> np.ndarray:
    """The array a host update kernel writes its result into: ``operand`` itself when the
    driver handed it over as ``out`` (dead after the update, allocated by the program), it
    is writeable and C-contiguous, and no other operand of the update (``others``: the
    update values, the indices) may share its memory; otherwise a C-contiguous copy of it.

    Args:
      operand: the array the update starts from.
      out: the ``out=`` the kernel was given (None, the operand, or another dead buffer,
        which is not used: an update has no use for a buffer other than its operand).
      *others: the update's other operands.

    Returns:
      ``operand`` or a copy of it, to be written.

    Example:
      >>> x = np.zeros(4)
      >>> update_target(x, x) is x, update_target(x, x, x[1:]) is x, update_target(x) is x
      (True, False, False)
    """
    if (out is operand and isinstance(operand, np.ndarray) and operand.flags.writeable
            and operand.flags.c_contiguous
            and not any(isinstance(o, np.ndarray) and np.may_share_memory(operand, o)
                        for o in others)):
        return operand
    return np.array(operand, copy=True, order="C")


class Emitter:
    """Base class of a backend's code generator. Override what the backend compiles.

    Every method may return None to decline; see the module docstring for what follows.
    """

    #: whether the driver should hand clusters to :meth:`emit_cluster` at all
    fuses: bool = False
    #: whether clusters may hold elementwise equations with several results
    #: (``threefry2x32``): the generator computes them all in one pass
    #: (see :func:`plax.lowering.find_clusters`)
    fuses_multiple_results: bool = False
    #: whether clusters may hold ``INDEX`` equations (``iota``): the generator computes
    #: their values from the loop's index (see :func:`plax.lowering.find_clusters`)
    fuses_index: bool = False
    #: whether rank-0 elementwise producers fold into the one cluster that reads them: the
    #: generator computes a cluster's rank-0 equations per element from its scalar inputs
    #: (see :func:`plax.lowering.find_clusters`)
    fuses_scalar_producers: bool = False
    #: whether ``argmax``/``argmin`` join clusters (``ARG_REDUCTION``): the generator keeps
    #: the best value and its index (see :func:`plax.lowering.find_clusters`)
    fuses_arg_reductions: bool = False
    #: whether the cumulative ops join clusters after their producers (``CUMULATIVE``): the
    #: generator walks the scan axis in order (see :func:`plax.lowering.find_clusters`)
    fuses_cumulative: bool = False
    #: the largest member (elements) of a horizontal group: independent elementwise clusters
    #: ready at the same point that :meth:`emit_group` computes in one launch; 0: no groups
    #: (see :func:`plax.lowering.horizontal_groups`)
    horizontal_max_elements: int = 0
    #: whether ``slice``/``concatenate``/``reshape``/``squeeze``/``pad``/``rev``/``transpose``
    #: (``STRUCTURAL``) fuse: a unit
    #: reading values through them absorbs the units feeding it, and the generator computes
    #: each value at the index its reader needs (see :func:`plax.lowering.find_clusters`)
    fuses_structural: bool = False
    #: with ``fuses_structural``, the largest reader (elements) that computes per element a
    #: value fed through a structural equation however costly it is (see
    #: :class:`plax.lowering.FusionOptions`); 0: only cheap or large enough values
    recompute_max_elements: int = 0
    #: whether elementwise units reading a reduction's (or arg-reduction's) results join its
    #: cluster as an *epilogue* (:attr:`plax.lowering.Cluster.epilogue`): the generator
    #: computes them where each result is final (see :func:`plax.lowering.find_clusters`)
    fuses_epilogues: bool = False
    #: the longest row (elements) of a *row-local* cluster: a reduction over trailing axes and
    #: the later units computing on its rows and results (softmax, layer norm), which the
    #: generator computes a row at a time (:attr:`plax.lowering.Cluster.row_axes`; see
    #: :func:`plax.lowering.find_clusters`); 0: none
    row_local_max_elements: int = 0

    @classmethod
    def fusion_options(cls) -> FusionOptions:
        """The class's ``fuses_*`` flags as one :class:`~plax.lowering.fusion.FusionOptions`:
        what :func:`plax.lowering.order_for_fusion` and :func:`plax.lowering.find_clusters`
        may fuse for this generator (the lowering driver asks once per program).

        Returns:
          A frozen :class:`~plax.lowering.fusion.FusionOptions`.

        Example:
          >>> class Mine(Emitter):
          ...     fuses, fuses_index = True, True
          >>> Mine.fusion_options().index, Emitter.fusion_options().index
          (True, False)
        """
        return FusionOptions(multiple_results=cls.fuses_multiple_results,
                             index=cls.fuses_index, scalars=cls.fuses_scalar_producers,
                             arg_reductions=cls.fuses_arg_reductions,
                             cumulative=cls.fuses_cumulative,
                             horizontal=cls.horizontal_max_elements,
                             structural=cls.fuses_structural,
                             recompute_max_elements=cls.recompute_max_elements,
                             epilogues=cls.fuses_epilogues,
                             row_local=cls.row_local_max_elements)

    def emit_cluster(self, cluster) -> Callable | Step | None:
        """A step computing ``cluster.outputs`` (a list) from ``cluster.inputs``' buffers."""
        return None

    def emit_group(self, group) -> Callable | Step | None:
        """A step computing ``group.outputs`` (a list, member after member) from
        ``group.inputs``' buffers, for a :class:`~plax.lowering.HorizontalGroup` (offered only
        where :attr:`horizontal_max_elements` is set); declined, its units are lowered one by
        one as if never grouped."""
        return None

    def emit_equation(self, eqn) -> Callable | Step | None:
        """A step computing ``eqn.outvars`` from ``eqn.invars``' buffers (a list if the
        primitive has multiple results)."""
        return None

    def constant(self, host_value: np.ndarray) -> Any:
        """The buffer of a literal or constant, made once at compile time (default: the host
        value itself, which suits backends whose buffers are host arrays)."""
        return host_value

    def guard(self) -> tuple[Callable[[], Any], Callable[[Any], None]] | None:
        """``(enter, leave)`` run around the program if any step is ``guarded`` (e.g. to switch
        floating-point warnings off); ``leave`` receives what ``enter`` returned."""
        return None
