"""The CuPy backend object: CUDA devices, CuPy-array buffers, eager kernels and ``compile``.

Work is queued on one CuPy stream per device (non-blocking with respect to the legacy default
stream); nothing synchronises except :meth:`CupyBackend.block_until_ready`, reads to the host
(``to_host``: ``np.asarray``, ``repr``) and host-side decisions of control flow
(:mod:`plax_cupy.control_flow`).

Eager execution, per primitive (:meth:`CupyBackend.eager_impl`, in this order):

* a plugin's kernel (:meth:`CupyBackend.register_kernel`);
* ``cond``/``while``/``scan``: host loops over bodies compiled by this backend, on the
  device's stream like every other operation; a ``scan`` whose body is small is one kernel
  instead (:meth:`CupyBackend.scan_launcher`, :mod:`plax_cupy.scan_kernel`);
* fusible primitives: the generated CUDA kernel of the one equation
  (:func:`plax_cupy.codegen.plan_equation`), the same code ``jit`` fuses, so eager and compiled
  results agree bit for bit; where the generator declines a dtype, the kernel table's kernel;
* the GPU kernel table (:func:`plax_cupy.kernels.impls`, one module per family: CuPy, cuBLAS,
  cuSOLVER, cuFFT and generated kernels); a kernel marked ``bf16 = "bits"`` takes
  :class:`Bf16Buffer` operands as they are, others see bfloat16 widened to float32;
* ``threefry2x32`` (the generated hash kernel), which the table does not hold;
* last resort, for a primitive with no GPU path: the reference kernel on the host, operands
  copied there and results back, counted (``plax_cupy.counters().host_fallbacks``) and warned
  once per primitive. NumPy functions are never called on device arrays.

Host copies and kernel launches are counted in :mod:`plax_cupy.runtime` (``put``, ``to_host``,
each generated-kernel launch, each kernel-table call in :meth:`CupyBackend._wrap`, each CUDA
graph launch and copy of :mod:`plax_cupy.graphs`): :func:`plax_cupy.counters`,
:class:`plax_cupy.count`.
"""
from __future__ import annotations

import functools
import os
import threading
import warnings
import weakref
from typing import Any, Callable, Sequence

import numpy as np

import cupy

from plax.backend import Backend, UnsupportedPrimitiveError
from plax.config import env_flag
from plax.device import CudaDevice

from plax_cupy import codegen, graphs, kernel_modules, nvrtc, runtime
from plax_cupy.runtime import GpuInfo, GpuOutOfMemoryError, memory_fraction, oom_bytes


class PlaxCupyFallbackWarning(UserWarning):
    """An operation the GPU path lacks runs another way (a CuPy operation instead of a fused
    kernel, or the reference kernel on the host)."""


_warned: set = set()
_warn_lock = threading.Lock()


def warn_once(key, message: str) -> None:
    """Warns ``message`` once per ``key`` (a primitive and dtype) for the process."""
    with _warn_lock:
        if key in _warned:
            return
        _warned.add(key)
    warnings.warn(message, PlaxCupyFallbackWarning, stacklevel=3)


# ---------------------------------------------------------------- bfloat16 buffers

import ml_dtypes as _ml_dtypes  # noqa: E402

BF16 = np.dtype(_ml_dtypes.bfloat16)


class Bf16Buffer:
    """bfloat16 values on a GPU, kept as their uint16 bit patterns (CuPy has no bfloat16).

    Operations widen them to float32 (exactly: a shift of the bits), compute in float32 and
    round results whose type is bfloat16 back to nearest-even, which is what NumPy's bfloat16
    (ml_dtypes) does per operation on the CPU.
    """

    __slots__ = ("bits",)

    def __init__(self, bits):
        self.bits = bits

    shape = property(lambda self: self.bits.shape)
    ndim = property(lambda self: self.bits.ndim)
    size = property(lambda self: self.bits.size)
    device = property(lambda self: self.bits.device)
    dtype = BF16

    def __getitem__(self, index):
        return Bf16Buffer(self.bits[index])

    def __repr__(self) -> str:
        return f"Bf16Buffer(shape={self.shape})"


def widen_bf16(buf) -> "cupy.ndarray":
    """The float32 values of a :class:`Bf16Buffer` (exact)."""
    return (buf.bits.astype(np.uint32) << np.uint32(16)).view(np.float32)


def narrow_bf16(x) -> Bf16Buffer:
    """float32 values rounded to the nearest bfloat16 (ties to even; NaN stays NaN)."""
    shape = x.shape
    x = cupy.ascontiguousarray(x.astype(np.float32, copy=False)).reshape(shape)
    bits = x.view(np.uint32)
    rounded = (bits + np.uint32(0x7FFF) + ((bits >> np.uint32(16)) & np.uint32(1))) >> np.uint32(16)
    nan = (bits & np.uint32(0x7FFFFFFF)) > np.uint32(0x7F800000)
    out = cupy.where(nan, (bits >> np.uint32(16)) | np.uint32(0x40), rounded)
    return Bf16Buffer(out.astype(np.uint16).reshape(shape))


def _stack(buffers: list):
    """The per-step buffers of a ``scan`` stacked along a new leading axis (one launch)."""
    runtime.note_launch()
    if buffers and isinstance(buffers[0], Bf16Buffer):
        return Bf16Buffer(cupy.stack([b.bits for b in buffers]))
    return cupy.stack(buffers)


class CupyBackend(Backend):
    """Runs plax on NVIDIA GPUs through CuPy: one :class:`plax.device.CudaDevice` per GPU.

    Args:
      gpus: the GPUs :func:`plax_cupy.runtime.probe` found (at least one).
    """

    name = "cupy"
    platform = "gpu"
    priority = 10

    def __init__(self, gpus: list[GpuInfo]):
        self.gpus = list(gpus)
        self._devices = [CudaDevice(g.id, device_kind=g.name, platform="gpu") for g in self.gpus]
        self._streams: dict = {}
        self._kernels: dict = {}          # plugin kernels (register_kernel)
        self._eager: dict = {}            # primitive -> eager kernel
        self._launchers: dict = {}        # (signature) -> Launcher
        self._scan_plans = weakref.WeakKeyDictionary()  # scan body -> {params: launcher or reason}
        self._limits_set = False
        self.reference = None             # the NumPy backend's table, on first use

    # ------------------------------------------------------------ devices and buffers

    def devices(self) -> list:
        return list(self._devices)

    def info(self) -> dict:
        fraction = os.environ.get("PLAX_GPU_MEMORY_FRACTION") or "unset"
        return {"cupy": cupy.__version__,
                "gpus": "; ".join(f"cuda:{g.id} {g.name} sm_{g.compute_capability[0]}"
                                  f"{g.compute_capability[1]} {g.total_memory >> 20} MiB"
                                  for g in self.gpus),
                "PLAX_GPU_MEMORY_FRACTION": fraction}

    def stream(self, device) -> "cupy.cuda.Stream":
        """The device's stream (created on first use)."""
        s = self._streams.get(device.id)
        if s is None:
            with cupy.cuda.Device(device.id):
                self._set_limits()
                s = self._streams[device.id] = cupy.cuda.Stream(non_blocking=True)
        return s

    def _set_limits(self) -> None:
        if self._limits_set:
            return
        self._limits_set = True
        nvrtc.preload_nvrtc()
        fraction = memory_fraction()
        if fraction is not None:
            # CuPy's pool limit applies per device (the fraction of each device's memory)
            cupy.get_default_memory_pool().set_limit(fraction=fraction)

    def on(self, device):
        """Context manager: CuPy's current device and stream set to ``device``'s."""
        return _On(device.id, self.stream(device))

    def device_of(self, buffer):
        return self._devices[buffer.device.id]

    def owns_buffer(self, buffer: Any) -> bool:
        return isinstance(buffer, (cupy.ndarray, Bf16Buffer))

    def put(self, host_array: np.ndarray, device) -> Any:
        host = np.asarray(host_array)
        runtime.THIS_THREAD.counts[runtime.H2D] += 1
        if host.dtype == BF16:  # CuPy has no bfloat16: its bits
            bits = np.array(host, copy=True).view(np.uint16)  # (ascontiguousarray makes 0-d 1-d)
            with self.on(device):
                return Bf16Buffer(self._alloc(device, lambda: cupy.asarray(bits), bits.nbytes))
        if host.dtype.kind == "V" or host.dtype.name.startswith("float8"):
            raise UnsupportedPrimitiveError(self.name, "device_put",
                                            f"dtype {host.dtype} has no CuPy equivalent")
        with self.on(device):
            return self._alloc(device, lambda: cupy.asarray(host), host.nbytes)

    def to_host(self, buffer: Any) -> np.ndarray:
        if isinstance(buffer, Bf16Buffer):
            return self.to_host(buffer.bits).view(BF16)
        if not isinstance(buffer, cupy.ndarray):
            return np.asarray(buffer)
        runtime.THIS_THREAD.counts[runtime.D2H] += 1
        device = self.device_of(buffer)
        s = self.stream(device)
        # (not while another thread captures a CUDA graph on that stream: CUDA would refuse)
        with graphs.device_lock(device.id), cupy.cuda.Device(device.id):
            out = buffer.get(stream=s)
            s.synchronize()
        return out

    def transfer(self, buffer: Any, src_device, dst_device) -> Any | None:
        """A device-to-device copy (a peer copy where the GPUs allow it, else CuPy stages it)."""
        if dst_device.platform != "gpu":
            return None
        if isinstance(buffer, Bf16Buffer):
            bits = self.transfer(buffer.bits, src_device, dst_device)
            return None if bits is None else Bf16Buffer(bits)
        if not isinstance(buffer, cupy.ndarray):
            return None
        with graphs.device_lock(src_device.id):  # the source's producer may still be running
            self.stream(src_device).synchronize()
        with self.on(dst_device):
            out = self._alloc(dst_device, lambda: cupy.array(buffer, copy=True), buffer.nbytes)
        runtime.note_launch()
        runtime.note_copy()
        return out

    def block_until_ready(self, buffer: Any) -> None:
        if isinstance(buffer, Bf16Buffer):
            buffer = buffer.bits
        if isinstance(buffer, cupy.ndarray):
            device = self.device_of(buffer)
            with graphs.device_lock(device.id):
                self.stream(device).synchronize()

    def _alloc(self, device, make: Callable, nbytes: int | None):
        """``make()`` with CuPy's out-of-memory error turned into :class:`GpuOutOfMemoryError`
        (after freeing the pool's cached blocks and trying once more)."""
        try:
            return make()
        except cupy.cuda.memory.OutOfMemoryError:
            cupy.get_default_memory_pool().free_all_blocks()
            try:
                return make()
            except cupy.cuda.memory.OutOfMemoryError as err:
                raise GpuOutOfMemoryError(device, oom_bytes(err) or nbytes, str(err)) from None

    # ------------------------------------------------------------ DLPack and CUDA array interface

    def dlpack(self, buffer, **kwargs):
        """The buffer's DLPack capsule (zero copy; ``kwargs`` as ``__dlpack__``'s)."""
        return buffer.__dlpack__(**kwargs)

    def from_dlpack(self, obj, device=None):
        """A buffer viewing a DLPack- or ``__cuda_array_interface__``-exporting GPU array (a
        CuPy, PyTorch or JAX array) without a copy."""
        with self.on(device or self._devices[0]):
            return cupy.from_dlpack(obj) if hasattr(obj, "__dlpack__") else cupy.asarray(obj)

    # ------------------------------------------------------------ eager execution

    def _reference(self) -> dict:
        if self.reference is None:
            import plax_numpy
            self.reference = plax_numpy.impls()
        return self.reference

    def register_kernel(self, primitive, kernel: Callable) -> None:
        """Makes ``kernel(*device_buffers, **params)`` the GPU kernel of ``primitive`` (a
        plugin's primitive, or a replacement of the table's). It runs on the device's stream;
        bfloat16 operands arrive widened to float32 unless ``kernel.bf16 == "bits"``.

        Example:
          >>> backend.register_kernel(my_p, lambda x, *, k: x * k)   # doctest: +SKIP
        """
        self._kernels[primitive] = kernel
        self._eager.pop(primitive, None)

    def eager_impl(self, primitive):
        fn = self._eager.get(primitive)
        if fn is None:
            fn = self._eager[primitive] = self._make_eager(primitive)
        return fn

    def program_impl(self, primitive, params: dict) -> Callable | None:
        """The kernel one equation of a compiled program runs, made for that equation and held
        by the program (:func:`plax_cupy.kernels.program_kernel`: a cuFFT ``fft`` owning its
        plans), or ``None`` where the primitive has none or a plugin replaced its kernel
        (:meth:`register_kernel`): the program then calls :meth:`eager_impl`'s.

        Example:
          >>> fn = backend.program_impl(fft_p, eqn.params)       # doctest: +SKIP
          >>> fn(x)                                              # on x's device and stream
        """
        from plax_cupy import kernels
        factory = kernels.program_impls().get(primitive)
        if factory is None or primitive in self._kernels:
            return None
        held = factory(**params)
        run = self._wrap(held, primitive)
        run.program_kernel = held   # (its describe(), if any, joins the program's as_text())
        return run

    def execute(self, primitive, *buffers: Any, **params: Any) -> Any:
        return self.eager_impl(primitive)(*buffers, **params)

    def _make_eager(self, primitive) -> Callable:
        """The eager kernel of ``primitive``: a plugin's (:meth:`register_kernel`), control flow,
        the generated kernel of a fusible primitive, the GPU kernel table
        (:func:`plax_cupy.kernels.impls`, cuBLAS ``dot_general`` included) and the threefry kernel; the
        host reference kernel only as a counted, warned last resort."""
        from plax.lowering import fusion_kind
        from plax_cupy import kernels
        if primitive in self._kernels:  # on the device's stream too, bfloat16 as the table's
            return self._wrap(self._kernels[primitive], primitive)
        name = primitive.name
        if name in ("cond", "while", "scan"):
            return self._control_flow(name)
        gpu = kernels.impls().get(primitive)
        if fusion_kind(primitive) is not None and not primitive.multiple_results:
            # handed bfloat16 as bits: the generated kernel plans bfloat16 itself, and
            # _eager_fused widens only for the fallbacks that need it
            fused = functools.partial(self._eager_fused, primitive, gpu)
            fused.bf16 = "bits"
            return self._wrap(fused, primitive)
        if gpu is not None:
            return self._wrap(gpu, primitive)
        if name == "threefry2x32":
            return self._wrap(self._threefry, primitive)
        return self._wrap(functools.partial(self._on_host, primitive), primitive, counted=False)

    def _wrap(self, fn: Callable, primitive, counted: bool = True) -> Callable:
        """``fn`` run on the operands' device and stream, with out-of-memory errors named and
        bfloat16 operands widened to float32 (results of bfloat16 type rounded back).

        This is where every kernel-table (and plugin) kernel is dispatched, eagerly and under
        ``jit`` alike, so it is where they are counted (``plax_cupy.counters``): a call counts
        as one launch however many CuPy, cuBLAS, cuSOLVER or cuFFT kernels it issues inside,
        unless it launched generated kernels (which count themselves; judged by the calling
        thread's own counts, :data:`plax_cupy.runtime.THIS_THREAD`, so that another thread's
        launches meanwhile do not hide this one) or returned only views of its operands (a
        reshape, a slice: no device work)."""
        on_bits = getattr(fn, "bf16", None) == "bits"  # the kernel takes Bf16Buffers itself
        launches, this_thread = runtime.LAUNCHES, runtime.THIS_THREAD

        def run(*buffers, **params):
            device = self._device_for(buffers)
            # (this thread's counts: another thread's launch meanwhile is not this call's)
            counts = this_thread.counts
            launched = counts[launches]
            with self.on(device):
                if not on_bits and (any(isinstance(b, Bf16Buffer) for b in buffers)
                                    or _mentions_bf16(params)):
                    out = self._alloc(device, lambda: self._bf16_call(primitive, fn, buffers, params), None)
                else:
                    out = self._alloc(device, lambda: fn(*buffers, **params), None)
            if counted and counts[launches] == launched and not _views_of(out, buffers):
                counts[launches] += 1
            return out
        return run

    def _bf16_call(self, primitive, fn, buffers, params):
        """``fn`` on float32 views of bfloat16 operands, with bfloat16 in ``params`` read as
        float32; outputs whose abstract type is bfloat16 are rounded to it."""
        from plax.core.shaped_array import ShapedArray
        avals = [ShapedArray(tuple(b.shape), BF16 if isinstance(b, Bf16Buffer) else np.dtype(b.dtype))
                 for b in buffers]
        out_avals = primitive.abstract_eval(*avals, **params)
        if primitive.name == "bitcast_convert_type":  # on the bits, never the values
            from plax_cupy import kernels
            return kernels.impls()[primitive](*buffers, **params)
        wide = [widen_bf16(b) if isinstance(b, Bf16Buffer) else b for b in buffers]
        p32 = {k: (np.dtype(np.float32) if _is_bf16(v) else v) for k, v in params.items()}
        out = fn(*wide, **p32)
        if primitive.multiple_results:
            return [narrow_bf16(o) if a.dtype == BF16 else o for o, a in zip(out, out_avals)]
        aval = out_avals[0] if isinstance(out_avals, (list, tuple)) else out_avals
        return narrow_bf16(out) if aval.dtype == BF16 else out

    def _device_for(self, buffers):
        for b in buffers:
            if isinstance(b, (cupy.ndarray, Bf16Buffer)):
                return self._devices[b.device.id]
        return self._devices[0]

    def _eager_fused(self, primitive, gpu, *buffers, **params):
        """One fusible primitive as its generated kernel (cached per signature); where the
        generator declines it, the kernel table's kernel, else the host fallback.

        bfloat16 operands arrive as :class:`Bf16Buffer` bits (this kernel is marked
        ``bf16 = "bits"``): the generated kernel reads them as they are, as under ``jit``. Only
        a fallback that does not take bits (a table kernel without the mark, the host kernel)
        gets float32 widenings through :meth:`_bf16_call`."""
        from plax.core.jaxpr import JaxprEqn, Var
        from plax.core.shaped_array import ShapedArray
        from plax.lowering import inserts_unit_axes
        if gpu is not None and inserts_unit_axes(primitive, tuple(buffers[0].shape), params):
            return gpu(*buffers, **params)  # new size-1 axes (x[None]): a view, no kernel
        avals = [ShapedArray(tuple(b.shape), np.dtype(b.dtype)) for b in buffers]
        key = (primitive, _freeze(params), tuple((a.shape, a.dtype) for a in avals))
        launcher = self._launchers.get(key)
        if launcher is None:
            out_aval = primitive.abstract_eval(*avals, **params)
            if isinstance(out_aval, (list, tuple)):
                out_aval = out_aval[0]
            eqn = JaxprEqn(primitive, [Var(a) for a in avals], [Var(out_aval)], params)
            try:
                plan = codegen.plan_equation(eqn, literal_values=False)
                launcher = Launcher(plan, self)
            except codegen.Unsupported as why:
                launcher = None
                if gpu is None:
                    warn_once(("eager", primitive.name, tuple(str(a.dtype) for a in avals)),
                              f"plax_cupy: {why}; {primitive.name} has no other GPU path.")
            self._launchers[key] = launcher or False
        if not launcher:
            fallback = gpu if gpu is not None else functools.partial(self._on_host, primitive)
            if getattr(fallback, "bf16", None) != "bits" and (
                    any(isinstance(b, Bf16Buffer) for b in buffers) or _mentions_bf16(params)):
                return self._bf16_call(primitive, fallback, buffers, params)
            return fallback(*buffers, **params)
        return launcher(*buffers)[0]

    def _on_host(self, primitive, *buffers, **params):
        """The last resort of a primitive with no GPU path: its reference (NumPy) kernel on the
        host, operands copied there and results back; counted
        (:func:`plax_cupy.counters` ``host_fallbacks``) and warned once per primitive."""
        ref = self._reference().get(primitive)
        if ref is None:
            raise UnsupportedPrimitiveError(self.name, primitive.name)
        runtime.note_fallback(primitive.name)
        warn_once(("host", primitive.name),
                  f"plax_cupy: primitive {primitive.name!r} has no GPU path; it runs on the "
                  "reference kernels on the host (operands copied there and back).")
        host = [self.to_host(b) if isinstance(b, (cupy.ndarray, Bf16Buffer)) else b for b in buffers]
        with np.errstate(all="ignore"):
            out = ref(*host, **params)
        return self._as_device(out, buffers)

    def _as_device(self, out, buffers):
        device = self._device_for(buffers)
        if isinstance(out, (list, tuple)):
            return [self.put(np.asarray(o), device) for o in out]
        return self.put(np.asarray(out), device)

    def _threefry(self, k0, k1, x0, x1):
        launcher = self._launchers.get("threefry")
        if launcher is None:
            launcher = self._launchers["threefry"] = ThreefryLauncher(self)
        return launcher(k0, k1, x0, x1)

    def scan_launcher(self, params: dict):
        """The one-kernel form of a ``scan`` (:mod:`plax_cupy.scan_kernel`): a
        :class:`ScanLauncher`, or the reason (a string) the scan keeps the host loop. Cached per
        body and parameters; ``PLAX_CUPY_SCAN_KERNEL=0`` keeps every scan a host loop."""
        if not env_flag("PLAX_CUPY_SCAN_KERNEL", True):
            return "disabled (PLAX_CUPY_SCAN_KERNEL=0)"
        from plax_cupy import scan_kernel
        per_body = self._scan_plans.get(params["jaxpr"])
        if per_body is None:
            per_body = self._scan_plans[params["jaxpr"]] = {}
        key = (int(params["length"]), bool(params["reverse"]), int(params["num_consts"]),
               int(params["num_carry"]))
        found = per_body.get(key)
        if found is None:
            try:
                found = ScanLauncher(scan_kernel.plan_scan(params), self)
            except codegen.Unsupported as why:
                found = str(why)
            per_body[key] = found
        return found

    def _control_flow(self, name: str) -> Callable:
        from plax_cupy import control_flow
        runners: dict = {}

        def runner_for(device):
            r = runners.get(device.id)
            if r is None:
                r = runners[device.id] = control_flow.BodyRunner(
                    self, device, read_scalar=lambda b: self.to_host(b)[()],
                    stack=_stack)
            return r

        fn = {"cond": control_flow.run_cond, "while": control_flow.run_while,
              "scan": control_flow.run_scan}[name]

        def run(*buffers, **params):
            # on the device's stream, as every other operation (_wrap): the loop's own CuPy work
            # (slicing xs, stacking ys) must queue behind the bodies' kernels, not run on the
            # legacy default stream, which does not wait for the backend's non-blocking stream
            device = self._device_for(buffers)
            with self.on(device):
                if name == "scan":  # the whole scan as one kernel where the body allows it
                    launcher = self.scan_launcher(params)
                    if not isinstance(launcher, str):
                        return self._alloc(device, lambda: launcher(*buffers), None)
                return fn(runner_for(device), *buffers, **params)
        return run

    def sm_count(self, device_id: int) -> int:
        """The streaming multiprocessors of GPU ``device_id`` (the launch grids' size), as
        :func:`plax_cupy.runtime.probe` read them: the simulated GPU reports its own (2 by
        default: ``fake_cupy.install(sm_count=...)``); :data:`plax_cupy.codegen.DEFAULT_SM_COUNT`
        only where the backend lists no GPU."""
        if not self.gpus:
            return codegen.DEFAULT_SM_COUNT
        return self.gpus[device_id].multiprocessors

    # ------------------------------------------------------------ compile

    def compile(self, jaxpr, device) -> Callable[..., Sequence[Any]]:
        from plax.lowering import fold_transposed_products, lower
        from plax_cupy.emitter import CupyEmitter
        # a gradient's matrix product written in its final layout: cuBLAS computes (A B)^T as
        # B^T A^T at no cost, where the transpose's strided view cost the next kernel a copy
        jaxpr = fold_transposed_products(jaxpr)
        emitter = CupyEmitter(self, device)
        with self.on(device):
            fn = lower(jaxpr, emitter, self, device)
        source = fn.__plax_source__
        # the program's kernels compiled concurrently now, not one by one at their first launch
        kernel_modules.compile_all([(k.source, k.entry) for k in emitter.kernel_sources], device.id)
        if emitter.kernel_sources or emitter.notes:
            source = "\n".join([source] + emitter.notes
                               + [codegen.describe(k) for k in emitter.kernel_sources])
        on = self.on
        # CUDA graphs: captured on the second call, one launch from the third (plax_cupy.graphs)
        from plax_cupy.graphs import GraphedProgram
        program = GraphedProgram(fn, jaxpr, self, device)

        def run(*buffers):
            with on(device):
                try:
                    return program(*buffers)
                except cupy.cuda.memory.OutOfMemoryError as err:
                    cupy.get_default_memory_pool().free_all_blocks()
                    raise GpuOutOfMemoryError(device, oom_bytes(err), str(err)) from None

        run.__plax_source__ = source
        held = [k for k in emitter.program_kernels if hasattr(k, "describe")]

        def as_text() -> str:   # (the state now: the graph's, the program kernels')
            states = [(type(k).__name__, k.describe()) for k in held]
            return "\n".join([source] + [f"// {name}: {text}" for name, text in states if text]
                             + [program.describe()])
        run.as_text = as_text
        run.graphed = program
        return run


class _On:
    """``with cupy.cuda.Device(i), stream:`` in one object (entered on every operation)."""

    __slots__ = ("dev", "stream")

    def __init__(self, device_id: int, stream):
        self.dev, self.stream = cupy.cuda.Device(device_id), stream

    def __enter__(self):
        self.dev.__enter__()
        self.stream.__enter__()
        return self

    def __exit__(self, *exc):
        self.stream.__exit__(*exc)
        self.dev.__exit__(*exc)
        return False


def _memory_of(buffer):
    """The object owning a device buffer's memory (shared by its views), or ``None``."""
    raw = buffer.bits if isinstance(buffer, Bf16Buffer) else buffer
    data = getattr(raw, "data", None) if isinstance(raw, cupy.ndarray) else None
    return getattr(data, "mem", data)


def _views_of(out, operands) -> bool:
    """Whether every result in ``out`` views the memory of one of ``operands`` (no kernel ran
    to make it)."""
    results = out if isinstance(out, (list, tuple)) else (out,)
    memories = {id(m) for m in map(_memory_of, operands) if m is not None}
    found = [_memory_of(r) for r in results]
    return bool(found) and all(m is not None and id(m) in memories for m in found)


def _is_bf16(value) -> bool:
    try:
        return value is not None and not isinstance(value, (bool, int, float, str, tuple)) \
            and np.dtype(value) == BF16
    except TypeError:
        return False


def _mentions_bf16(params: dict) -> bool:
    return any(_is_bf16(v) for v in params.values())


def _freeze(params: dict):
    try:
        key = tuple(sorted(params.items()))
        hash(key)
        return key
    except TypeError:
        return repr(sorted(params.items()))


# ---------------------------------------------------------------- launchers

class Launcher:
    """Launches a :class:`plax_cupy.codegen.ClusterKernel` on CuPy arrays.

    The module comes from :func:`plax_cupy.kernel_modules.module` (one per source and device in
    the process; compiled by CuPy's NVRTC, cached on disk in ``~/.cupy/kernel_cache``); a
    compiled program builds its launchers' modules concurrently before its first call. Calling
    it with the cluster's input buffers returns the cluster's output buffers.
    """

    def __init__(self, plan: codegen.ClusterKernel, backend: CupyBackend):
        self.plan, self.backend = plan, backend
        self._fns: dict = {}   # device id -> the module's kernels on that device

    def _functions(self, device_id: int):
        fns = self._fns.get(device_id)
        if fns is None:
            built = kernel_modules.module(self.plan.source, self.plan.entry, device_id=device_id)
            fns = self._fns[device_id] = [built.get_function(n) for n in self.plan.entry]
        return fns

    def __call__(self, *buffers):
        plan = self.plan
        device = cupy.cuda.Device()
        sm = self.backend.sm_count(device.id)
        args = _kernel_args(plan, buffers)
        outs: list = [None] * len(plan.out_dtypes)
        for j in plan.elem_outputs:
            outs[j] = _device_empty(plan.out_shapes[j], plan.out_dtypes[j])
        fns = self._functions(device.id)
        elem_args = [_bits(outs[j]) for j in plan.elem_outputs]
        if not plan.reductions:
            if plan.n:
                grid, block = codegen.elementwise_launch(plan.n, sm, per_thread=plan.per_thread)
                fns[0]((grid,), (block,), tuple(args + elem_args + [np.int64(plan.n)]))
                runtime.THIS_THREAD.counts[runtime.LAUNCHES] += 1
            return outs
        grid, block, bpo = codegen.reduction_launch(plan.n_out, plan.n_red, sm,
                                                    outputs_per_block=plan.outputs_per_block)
        for j in plan.final_outputs:   # (the reductions' results and their epilogue's)
            outs[j] = _device_empty(plan.out_shapes[j], plan.out_dtypes[j])
        red_args = [_bits(outs[j]) for j in plan.final_outputs]
        if not plan.n_out:
            return outs
        # one block per output (bpo == 1): the kernel stores the results itself and never
        # reads its partial buffers or counters (a result stands in for them); else each
        # output's blocks count themselves done on a tagged counter (scratch needs no clearing)
        if bpo == 1:
            partials, done = [red_args[0]] * len(plan.reductions), red_args[0]
        else:
            partials = [cupy.empty(plan.n_out * bpo * red.partial_items, red.partial_dtype)
                        for _, red in plan.reductions]   # (an argmax's pairs: 8 or 16 bytes)
            done = cupy.empty(plan.n_out, np.uint64)
        tag = codegen.launch_tag()
        fns[0]((grid,), (block,), tuple(args + elem_args + partials + red_args
                                       + [np.int64(plan.n_out), np.int64(plan.n_red),
                                          np.int32(bpo), done, tag]))
        runtime.THIS_THREAD.counts[runtime.LAUNCHES] += 1
        return outs


class ScanLauncher(Launcher):
    """Launches a :class:`plax_cupy.scan_kernel.ScanKernel`: the whole ``scan`` as one kernel
    of one block. Called with the scan's operands (consts, initial carry, xs), it returns the
    final carry and the stacked ys.
    """

    def __init__(self, plan, backend: CupyBackend):
        super().__init__(plan, backend)
        self._consts: dict = {}  # device id -> the body's own constants, put once

    def __call__(self, *buffers):
        plan = self.plan
        device_id = cupy.cuda.Device().id
        fn = self._functions(device_id)[0]
        consts = self._consts.get(device_id)
        if consts is None:
            device = self.backend._devices[device_id]
            consts = self._consts[device_id] = [self.backend.put(np.asarray(c), device)
                                                for c in plan.body_consts]
        args = [_contiguous_bits(buf) for buf in consts + list(buffers)]
        outs = [_device_empty(s, d) for s, d in zip(plan.out_shapes, plan.out_dtypes)]
        args += [_bits(o) for o in outs]
        if plan.scratch_bytes:
            args.append(cupy.empty(plan.scratch_bytes, np.uint8))
        fn((1,), (plan.block,), tuple(args))
        runtime.THIS_THREAD.counts[runtime.LAUNCHES] += 1
        return outs


def _kernel_args(plan: codegen.ClusterKernel, buffers) -> list:
    """The kernel arguments of ``plan``'s inputs: literals by value, arrays as contiguous
    device buffers (bfloat16 as its bits; a strided view copied, a counted launch)."""
    args: list = []
    for inp, buf in zip(plan.inputs, buffers):
        if inp.kind == "literal":
            value = np.asarray(inp.value, inp.dtype)
            args.append((value.view(np.uint16) if value.dtype == BF16 else value)[()])
        else:
            args.append(_contiguous_bits(buf))
    return args


def _contiguous_bits(buf):
    """Device buffer ``buf`` as a kernel argument: bfloat16 as its bits (the kernel reads
    16-bit patterns), a strided view copied contiguous (by CuPy: a counted launch)."""
    raw = _bits(buf)
    if not raw.flags.c_contiguous:
        raw = cupy.ascontiguousarray(raw)
        runtime.THIS_THREAD.counts[runtime.LAUNCHES] += 1
        runtime.THIS_THREAD.counts[runtime.D2D] += 1
    return raw


class GroupLauncher(Launcher):
    """Launches a :class:`plax_cupy.codegen.GroupKernel` (a multi-tensor kernel): called with
    the group's input buffers (``HorizontalGroup.inputs``), it returns every member's outputs,
    member after member, from one launch.

    Args:
      plan: the group's kernel.
      backend: the backend.
      member_inputs: per member, the index in the group's inputs of each of its inputs.
    """

    def __init__(self, plan: codegen.GroupKernel, backend: CupyBackend, member_inputs: list):
        super().__init__(plan, backend)
        self.member_inputs = member_inputs

    def __call__(self, *buffers):
        plan = self.plan
        device = cupy.cuda.Device()
        sm = self.backend.sm_count(device.id)
        args, results = [], []
        for member, where in zip(plan.members, self.member_inputs):
            args += _kernel_args(member, [buffers[k] for k in where])
            outs: list = [None] * len(member.out_dtypes)
            for j in member.elem_outputs:
                outs[j] = _device_empty(member.out_shapes[j], member.out_dtypes[j])
            args += [_bits(outs[j]) for j in member.elem_outputs]
            results += outs
        grid, block = codegen.elementwise_launch(plan.n, sm)
        self._functions(device.id)[0]((grid,), (block,), tuple(args + [np.int64(plan.n)]))
        runtime.THIS_THREAD.counts[runtime.LAUNCHES] += 1
        return results


def _device_empty(shape, dtype):
    """An uninitialised device buffer (a :class:`Bf16Buffer` of bits for bfloat16)."""
    if np.dtype(dtype) == BF16:
        return Bf16Buffer(cupy.empty(shape, np.uint16))
    return cupy.empty(shape, dtype)


def _bits(buf):
    return buf.bits if isinstance(buf, Bf16Buffer) else buf


class ThreefryLauncher:
    """``threefry2x32`` on CuPy arrays with the generated hash kernel."""

    def __init__(self, backend: CupyBackend):
        self.backend = backend
        self._fn = None

    def __call__(self, k0, k1, x0, x1):
        if self._fn is None:
            self._fn = kernel_modules.module(codegen.threefry_source(), ("plax_threefry2x32",)) \
                .get_function("plax_threefry2x32")
        raw = [cupy.asarray(o, dtype=np.uint32) for o in (k0, k1, x0, x1)]
        # (a size-1 dimension meeting a size-0 one broadcasts to 0, so not the maximum)
        shape = np.broadcast_shapes(*[o.shape for o in raw if o.ndim])
        # an operand of size 1 along some axes (vmap's unbatched counters, JAX's broadcasting
        # rule) is copied out to the full shape: the kernel reads each operand at i * stride
        raw = [cupy.broadcast_to(o, shape) if o.ndim and o.shape != shape else o for o in raw]
        # strides from the operands' own ranks: ascontiguousarray makes rank-0 arrays rank 1
        strides = [np.int64(1 if o.ndim else 0) for o in raw]
        ops = [cupy.ascontiguousarray(o) for o in raw]
        n = int(np.prod(shape)) if shape else 1
        y0 = cupy.empty(shape, np.uint32)
        y1 = cupy.empty(shape, np.uint32)
        if n:
            grid, block = codegen.elementwise_launch(n, self.backend.sm_count(cupy.cuda.Device().id))
            self._fn((grid,), (block,), tuple(ops + [y0, y1, np.int64(n)] + strides))
            runtime.THIS_THREAD.counts[runtime.LAUNCHES] += 1
        return [y0, y1]


