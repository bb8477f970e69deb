"""The multi-process transport over MPI (``pip install -e "plugins/plax_pmap[mpi]"``).

``plax.distributed.initialize()`` calls :func:`backend_initialize` when the program was
started by ``mpiexec`` with several processes. Within a process the devices' threads still
exchange through shared memory; at each collective one thread per process then exchanges the
process's operands with the other processes (``MPI_Iallgather``, polled so that the
collective timeout applies), after which every device computes its result from all the
devices' operands, as in one process. ``plax.experimental.multihost_utils`` uses the same
``allgather``, and ``bcast`` (``MPI_Ibcast``, polled likewise) for ``broadcast_one_to_all``.
"""
from __future__ import annotations

import time

import numpy as np

from plax.device import cpu_device_count


class MpiTransport:
    """The world communicator of the run and what each process contributes."""

    def __init__(self):
        try:
            from mpi4py import MPI
        except ImportError as err:
            raise RuntimeError("plax.distributed over MPI needs mpi4py and an MPI library: "
                               "`pip install -e \"plugins/plax_pmap[mpi]\"` (mpi4py and the "
                               f"mpich wheel). ({err})") from None
        self.MPI = MPI
        self.comm = MPI.COMM_WORLD.Dup()  # plax's own messages never meet the user's
        self.rank = self.comm.Get_rank()
        self.size = self.comm.Get_size()
        # parsed as the devices are, so that this count is the number of devices listed
        n = cpu_device_count()
        self.local_counts = self.comm.allgather(n)
        if len(set(self.local_counts)) != 1:
            raise RuntimeError(f"plax.distributed: every process must have the same number of "
                               f"devices (PLAX_NUM_CPU_DEVICES); got {self.local_counts}")

    def allgather(self, local: np.ndarray, timeout: float) -> np.ndarray:
        """``local`` (this process's operands stacked, shape ``(n_local, ...)``) from every
        process, stacked in process order: shape ``(size * n_local, ...)``.

        Raises:
          TimeoutError: another process did not arrive within ``timeout`` seconds.
        """
        local = np.ascontiguousarray(local)
        out = np.empty((self.size,) + local.shape, local.dtype)
        self._wait(self.comm.Iallgather(local, out), timeout)
        return out.reshape((self.size * local.shape[0],) + local.shape[1:])  # not -1: empty

    def bcast(self, x: np.ndarray, root: int, timeout: float) -> np.ndarray:
        """Process ``root``'s ``x`` on every process (``MPI_Ibcast``, polled as
        :meth:`allgather` is). Every process passes an array of the same shape and dtype; the
        others' values are not sent (``x`` itself is left unchanged: the result is a new
        array).

        Raises:
          TimeoutError: another process did not arrive within ``timeout`` seconds.
        """
        out = np.array(x, order="C", copy=True)  # root's values are received into it
        if out.nbytes:
            # as bytes: any dtype (bool, bfloat16, structured) travels unchanged
            self._wait(self.comm.Ibcast(out.reshape(-1).view(np.uint8), root=int(root)),
                       timeout)
        return out

    def _wait(self, req, timeout: float) -> None:
        """Polls the non-blocking request ``req`` until it completes (a blocking MPI call
        could not be given up on).

        Raises:
          TimeoutError: it did not complete within ``timeout`` seconds.
        """
        deadline = time.monotonic() + timeout
        pause = 0.0
        while not req.Test():
            if time.monotonic() > deadline:
                raise TimeoutError(f"an MPI collective timed out after {timeout:g} s: a process "
                                   "did not arrive")
            time.sleep(pause)
            pause = min(1e-3, pause + 1e-5)

    def abort(self, code: int = 1) -> None:
        """Ends every process of the run (a process that failed cannot leave the others
        waiting in a collective)."""
        self.comm.Abort(code)


def backend_initialize() -> MpiTransport:
    """The transport for :func:`plax.distributed.initialize` (exported to the core as
    ``plax.distributed.backend_initialize``)."""
    return MpiTransport()
