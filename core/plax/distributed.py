"""``plax.distributed``: one program over several processes.

``mpiexec -n 2 python prog.py`` starts two processes; ``plax.distributed.initialize()`` at
the top of the program joins them. Then ``plax.devices()`` lists every process's devices
(global ids: process ``p`` holds ``p*N`` ... ``p*N + N-1`` with ``PLAX_NUM_CPU_DEVICES=N``),
``plax.local_devices()`` this process's, and ``plax.process_index()`` /
``plax.process_count()`` say which process this is. ``pmap`` maps over the local devices
(each process passes its own slices) and its collectives span every process's devices.

The transport comes from a plugin: the core looks up ``plax.distributed.backend_initialize``
among the plugins' exports (plax-pmap provides it over MPI, with
``pip install -e "plugins/plax_pmap[mpi]"``: mpi4py and the mpich wheel). Called without a
multi-process launcher, :func:`initialize` is a no-op (one process), so the same program runs
on one machine unchanged. See docs/multi_device.md.
"""
from __future__ import annotations

import os
from typing import Any, Sequence

from plax.config import env_number

__all__ = ["initialize", "shutdown", "is_initialized", "launched_process_count",
           "collective_timeout"]

# The run's processes. ``remote_devices`` are the other processes' devices (placeholders
# that hold no buffers); ``transport`` is what the plugin's initializer returned.
_state: dict = {"initialized": False, "process_index": 0, "process_count": 1,
                "remote_devices": (), "transport": None}

# environment variables through which common launchers give the number of processes
_SIZE_VARS = ("PMI_SIZE", "OMPI_COMM_WORLD_SIZE", "PMIX_SIZE", "SLURM_NTASKS")


def launched_process_count() -> tuple[int, str]:
    """How many processes the launcher (mpiexec, srun) started, and the variable that says
    so (``(1, "")`` without a launcher)."""
    for var in _SIZE_VARS:
        raw = os.environ.get(var)
        if raw and raw.isdigit():
            return int(raw), var
    return 1, ""


def initialize(coordinator_address: str | None = None, num_processes: int | None = None,
               process_id: int | None = None, local_device_ids: Sequence[int] | None = None,
               **kwargs: Any) -> None:
    """Joins the processes of a multi-process run (JAX's ``jax.distributed.initialize``).

    Call it once, at the start of the program, before using any device. Under a launcher
    (``mpiexec -n 2``) the processes discover their rank and count from it; without one the
    call is a no-op and the program runs as one process.

    Args:
      coordinator_address, local_device_ids: accepted for JAX compatibility (MPI needs
        neither).
      num_processes, process_id: if given, must agree with the launcher's.

    Raises:
      RuntimeError: the plugin providing the transport (plax-pmap with its ``mpi`` extra)
        is missing, the launcher's process count disagrees with ``num_processes``, or
        ``initialize`` was already called.

    Example:
      >>> plax.distributed.initialize()   # no launcher: a single process
      >>> plax.process_count()
      1
      >>> plax.distributed.shutdown()
    """
    if _state["initialized"]:
        raise RuntimeError("plax.distributed.initialize should only be called once "
                           "(call plax.distributed.shutdown() first)")
    size, var = launched_process_count()
    if num_processes is not None and num_processes != size:
        raise RuntimeError(f"plax.distributed.initialize(num_processes={num_processes}) but the "
                           f"launcher started {size} process(es) ({var or 'no launcher'}): "
                           "start the program with `mpiexec -n "
                           f"{num_processes} python ...`")
    if size == 1:
        _state["initialized"] = True
        return
    from plax import plugins
    exports = plugins.registry().exports
    start = exports.get("distributed.backend_initialize")
    if start is None:
        raise RuntimeError(
            f"plax.distributed.initialize: {var}={size} says this program was started as {size} "
            "processes, but no installed plugin provides a multi-process transport. Install "
            "plax-pmap with MPI: `pip install -e \"plugins/plax_pmap[mpi]\"` (mpi4py and the "
            "mpich wheel). " + plugins.registry()._failure_summary())
    transport = start()  # -> an object with .rank, .size, .local_counts
    rank, count = int(transport.rank), int(transport.size)
    if process_id is not None and process_id != rank:
        raise RuntimeError(f"plax.distributed.initialize(process_id={process_id}) but the "
                           f"launcher made this process rank {rank}")
    _state.update(initialized=True, process_index=rank, process_count=count,
                  transport=transport)
    # the CPU devices get global ids; the other processes' devices become placeholders
    from plax.device import CpuDevice, cpu_devices
    cpu_devices.cache_clear()
    plugins.reset()
    remote = []
    counts = list(transport.local_counts)
    for p, n in enumerate(counts):
        if p == rank:
            continue
        for i in range(n):
            d = CpuDevice(p * n + i, device_kind="cpu")
            d.process_index = d.host_id = p
            remote.append(d)
    _state["remote_devices"] = tuple(remote)


def shutdown() -> None:
    """Leaves the multi-process run: this process is again the only one."""
    if _state["process_count"] > 1:
        from plax import plugins
        from plax.device import cpu_devices
        _state.update(process_index=0, process_count=1, remote_devices=(), transport=None)
        cpu_devices.cache_clear()
        plugins.reset()
    _state["initialized"] = False


def is_initialized() -> bool:
    """Whether :func:`initialize` has been called (and not :func:`shutdown`)."""
    return _state["initialized"]


def collective_timeout() -> float:
    """Seconds a device or process waits for the others at a collective
    (``PLAX_COLLECTIVE_TIMEOUT``, default 300): past it the collective raises ``TimeoutError``
    instead of hanging.

    Raises:
      ValueError: the variable is not a positive number, naming it and the value.
    """
    return env_number("PLAX_COLLECTIVE_TIMEOUT", 300.0, kind=float, above=0)


def transport() -> Any:
    """The multi-process transport of the run (None with one process), from the plugin that
    provides ``distributed.backend_initialize``.

    It is an object with:

    * ``rank``, ``size``: this process's index and the number of processes;
    * ``local_counts``: each process's number of devices, in process order;
    * ``allgather(local, timeout)``: every process passes a NumPy array of the same shape
      ``(n, ...)`` and dtype; returns all of them concatenated in process order, shape
      ``(size * n, ...)``; raises ``TimeoutError`` if a process does not arrive within
      ``timeout`` seconds;
    * optionally ``bcast(x, root, timeout)``: every process passes a NumPy array of the same
      shape and dtype; returns process ``root``'s (a new array; ``x`` is left unchanged),
      with the same timeout. ``multihost_utils.broadcast_one_to_all`` uses it when present,
      else ``allgather`` (which moves ``size`` times as much data);
    * ``abort(code)``: ends every process of the run (plax-pmap calls it when a device fails
      or a collective times out, so that the others do not wait in a collective).

    Example:
      >>> plax.distributed.transport() is None   # one process
      True
    """
    return _state["transport"]
