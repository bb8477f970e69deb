"""Launching a row-local kernel (:class:`plax_cupy.codegen_rows_local.RowsKernel`): blocks of
``plan.threads`` threads, each taking ``plan.rows_per_block`` rows at a time (one row, or
several short rows sharing warps), the rows beyond the grid covered by the blocks' loop."""
from __future__ import annotations

import numpy as np

import cupy

from plax_cupy import codegen_rows_local, runtime
from plax_cupy.backend import Launcher, _bits, _device_empty, _kernel_args


class RowsLauncher(Launcher):
    """Called with a row-local cluster's input buffers, returns its output buffers (the
    row-shaped and the kept-shaped ones alike) from one launch.

    Args:
      plan: the cluster's :class:`~plax_cupy.codegen_rows_local.RowsKernel`.
      backend: the :class:`~plax_cupy.backend.CupyBackend`.
    """

    def __call__(self, *buffers):
        plan = self.plan
        device = cupy.cuda.Device()
        args = _kernel_args(plan, buffers)
        outs = [_device_empty(s, d) for s, d in zip(plan.out_shapes, plan.out_dtypes)]
        if plan.n_rows:
            grid = codegen_rows_local.rows_launch(plan.n_rows, self.backend.sm_count(device.id),
                                                  plan.rows_per_block)
            self._functions(device.id)[0]((grid,), (plan.threads,), tuple(
                args + [_bits(o) for o in outs] + [np.int64(plan.n_rows)]))
            runtime.THIS_THREAD.counts[runtime.LAUNCHES] += 1
        return outs
