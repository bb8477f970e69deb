"""Heavy scalar forms (and the blocked scan) compiled once per process and called by the
kernels, not re-optimised in each of them.

A numba function called from another is linked into the caller's LLVM module and optimised
again there (inlined, unrolled, vectorised with the caller's loop), so every generated kernel
calling float32 ``zeta`` paid LLVM's whole optimisation and code generation of it (~4 CPU
seconds per kernel on the 2-core host), every kernel calling an iterative form (``igamma``,
``betainc``, ``polygamma``, ...) some tenths. :func:`compiled_once` gives such a function a
second face for compiled callers: a call of its separately compiled machine code (the
function compiled once for its signature, kept in numba's disk cache as any ``cache=True``
function, and called with numba's calling convention, so an exception it raises propagates)
through an external symbol,
``plax_once.<module>.<name>.<signature>``, which this module registers with LLVM's linker.
The kernel's module then holds one ``call`` instruction where it held the function's body.

The symbol is registered when a kernel calling it is compiled, and again before numba loads
such a kernel from its disk cache in another process (numba's ``reload_init`` hooks of the
kernel's library, pickled with its cache entry), so a cached kernel never meets an unresolved
symbol. A kernel's native artifact carries the object code of each compiled-once function it
calls (:func:`object_code`, :func:`plax_numba.native_emit.compiled_once_objects`), which the
numba-free loader links once per process under the symbol; only an artifact without it makes
that loader import numba (:func:`resolve`).

Same bits: the scalar code is the same numba function with the same options (no fast-math, so
LLVM contracts no ``a * b + c`` either way); only where it is compiled changes. The cost is a
function call per element where the inlined form could vectorise with its loop: the iterative
forms never vectorise and are always called, while the forms that do vectorise (``zeta``, the
float32 ``erf``, ``lgamma``, ``digamma``, ..., the Bessel functions) have a compiled-once
:func:`twin`, ``<name>_once``, which the code generator calls in kernels over few elements and
inlines in larger ones (:data:`plax_numba.codegen.INLINE_FROM`); ``exp``, ``tanh`` and
``logistic`` are always inlined. Array functions work the same way (numba's array structure
passed by value; a literal constant passes as its type): every fused ``cumsum``/``cumprod``
kernel calls :mod:`plax_numba.scan_lines`' blocked scan compiled once per work dtype.
"""
from __future__ import annotations

import functools
import importlib
import threading
from typing import Callable

from numba.core import cgutils, types
from numba.extending import intrinsic, overload

#: what prefixes every symbol of this module (the loaders recognise them by it)
SYMBOL_PREFIX = "plax_once."

#: symbol -> (module name, function name, signature text); every function declared here
_declared: dict[str, tuple[str, str, str]] = {}
#: symbol -> the machine code's address, once registered with LLVM in this process
_addresses: dict[str, int] = {}
#: symbol -> how many times its function was compiled (or loaded from numba's cache) in this
#: process: 1 however many kernels call it (tests read it)
compiles: dict[str, int] = {}
#: symbol -> its object code and the compiled function's name in it (:func:`object_code`)
_objects: dict[str, tuple[bytes, str]] = {}
_lock = threading.RLock()


def symbol_of(module: str, name: str, signature: str) -> str:
    """The external symbol of ``module.name`` compiled for ``signature``.

    Args:
      module: the defining module's name.
      name: the compiled-once function's name there.
      signature: numba's signature text (``"float32(float32, float32)"``).

    Returns:
      The symbol, ``plax_once.<module>.<name>.<signature without spaces>``.

    Example::

      symbol_of("plax_numba.special_gamma", "igamma_f32", "float32(float32, float32)")
    """
    return f"{SYMBOL_PREFIX}{module}.{name}.{signature.replace(' ', '')}"


def compiled_once(dispatcher, signature: str, module: str, name: str) -> Callable:
    """Makes compiled callers of the numba function ``dispatcher`` call its code compiled
    once for ``signature`` instead of linking its body into their own module.

    Args:
      dispatcher: a ``numba.njit`` function (``cache=True``: its machine code is reused
        across processes too).
      signature: the one signature kernels call it with, as numba's text
        (``"float32(float32, float32)"``); calls with other argument types compile and
        inline ``dispatcher`` as before.
      module: the module defining the returned function (where a loading process finds it).
      name: its name in that module.

    Returns:
      A Python function of the same arguments: called from Python it runs ``dispatcher``;
      called from numba-compiled code it is one call of the compiled-once code.

    Example::

      zeta_f32_once = compiled_once(zeta_f32, "float32(float32, float32)",
                                    __name__, "zeta_f32_once")
    """
    from numba.core.sigutils import normalize_signature
    args, result = normalize_signature(signature)
    symbol = symbol_of(module, name, signature)
    _declared[symbol] = (module, name, signature)

    if len(args) not in _ARITIES:
        raise ValueError(f"compiled_once: {name} takes {len(args)} arguments; "
                         f"functions of {sorted(_ARITIES)} are supported")
    python_call = _ARITIES[len(args)](dispatcher)
    python_call.__name__ = python_call.__qualname__ = name
    python_call.__doc__ = dispatcher.__doc__
    python_call.dispatcher, python_call.signature = dispatcher, signature
    python_call.symbol = symbol

    def codegen(context, builder, sig, values):
        register(symbol)
        # a process loading this kernel from numba's cache registers the symbol first
        context.active_code_library._reload_init.add(functools.partial(_reload, module, name))
        # numba's own calling convention (a status and the result through a pointer), as a
        # call of another compiled function: an exception the function raises (a failed
        # allocation) propagates to the kernel's caller instead of being printed and lost
        ll_type = context.call_conv.get_function_type(result, args)
        function = cgutils.get_or_insert_function(builder.module, ll_type, symbol)
        status, value = context.call_conv.call_function(builder, function, result, args,
                                                        list(values))
        with cgutils.if_unlikely(builder, status.is_error):
            context.call_conv.return_status_propagate(builder, status)
        return value

    def typer(typingctx, *operands):
        return result(*args), codegen

    call_compiled = intrinsic(prefer_literal=False)(_ARITIES[len(args)](typer, context=True))
    compiled_form = _ARITIES[len(args)](call_compiled)
    inlined_form = _ARITIES[len(args)](dispatcher)

    def choose(*operands):
        # the compiled-once code for its own signature (a literal constant passes as its
        # type); other types compile and inline ``dispatcher`` as before
        given = tuple(types.unliteral(t) for t in operands)
        return compiled_form if given == tuple(args) else inlined_form

    overload(python_call, inline="never", jit_options=dict(nogil=True))(
        _ARITIES[len(args)](choose))
    return python_call


def twin(form, signature: str, module: str) -> Callable:
    """The compiled-once twin of an inlined scalar form, named ``<form's name>_once``: what
    kernels over few elements call instead of linking ``form``'s body
    (:data:`plax_numba.codegen.INLINE_FROM` says from how many elements they inline it).

    Args:
      form: a ``numba.njit`` function (``cache=True``), inlined by the larger kernels.
      signature: the signature kernels call it with (``"float32(float32)"``).
      module: the module defining both (the twin is looked up there as ``<name>_once``).

    Returns:
      :func:`compiled_once` of ``form``.

    Example::

      lgamma_f32_once = twin(lgamma_f32, "float32(float32)", __name__)
    """
    return compiled_once(form, signature, module, f"{form.py_func.__name__}_once")


def _reload(module: str, name: str) -> None:
    """numba's ``reload_init`` hook of a cached kernel calling ``module.name``: registers
    its symbol before the kernel's object code is linked."""
    function = getattr(importlib.import_module(module), name)
    register(function.symbol)


def register(symbol: str) -> int:
    """Compiles (or loads from numba's cache) the function behind ``symbol``, once per
    process, and registers its machine code's address with LLVM's linker under ``symbol``.

    Args:
      symbol: a symbol of :func:`symbol_of` whose module has been imported.

    Returns:
      The address.

    Example::

      register(zeta_f32_once.symbol)
    """
    with _lock:
        address = _addresses.get(symbol)
        if address is not None:
            return address
        result = _compiled(symbol)
        address = result.library.get_pointer_to_function(result.fndesc.mangled_name)
        import llvmlite.binding as llvm
        llvm.add_symbol(symbol, address)
        _addresses[symbol] = address
        compiles[symbol] = compiles.get(symbol, 0) + 1
        return address


def _compiled(symbol: str):
    """numba's compile result of the function behind ``symbol`` for its signature (compiled,
    or loaded from numba's disk cache, on the first call)."""
    module, name, signature = _declared[symbol]
    dispatcher = getattr(importlib.import_module(module), name).dispatcher
    from numba.core.sigutils import normalize_signature
    args, _ = normalize_signature(signature)
    dispatcher.compile(args)
    return dispatcher.overloads[tuple(args)]


def object_code(symbol: str) -> tuple[bytes, str]:
    """The machine code behind ``symbol`` as a relocatable object, for a kernel's native
    artifact (:func:`plax_numba.native_emit.emit`): a process loading the kernel without
    numba links it from there (:mod:`plax_numba.native_loader`) instead of importing numba to
    compile it or load it from numba's cache.

    Args:
      symbol: a symbol of :func:`symbol_of` whose module has been imported.

    Returns:
      ``(object, function)``: numba's compiled library of the function for its signature
      (ELF object code) and the name, defined in it, of the compiled function the symbol
      names (numba's calling convention).

    Example::

      code, function = object_code(zeta_f32_once.symbol)
    """
    with _lock:
        found = _objects.get(symbol)
        if found is not None:
            return found
        register(symbol)  # (compiled, or loaded from numba's cache, once per process)
        result = _compiled(symbol)
        library = result.library
        try:
            code = library._get_compiled_object()
        except (RuntimeError, ValueError):
            # loaded from numba's disk cache, whose object code numba's JIT consumed when it
            # linked it: the machine code again from the library's optimised module (numba's
            # own target machine: the same instructions)
            code = library.codegen._tm.emit_object(library._get_module_for_linking())
        found = _objects[symbol] = (code, result.fndesc.mangled_name)
        return found


def resolve(symbol: str) -> bool:
    """Registers ``symbol`` if it is one of this module's, for loaders resolving a kernel's
    undefined symbols (:mod:`plax_numba.native_loader`).

    Args:
      symbol: an undefined symbol of a kernel's object code.

    Returns:
      Whether it is now registered (False: not a :func:`symbol_of` symbol, or its module or
      function failed to load; the loader then falls back).

    Example::

      if name.startswith(SYMBOL_PREFIX) and resolve(name): ...
    """
    if not symbol.startswith(SYMBOL_PREFIX):
        return False
    module = symbol[len(SYMBOL_PREFIX):].rsplit(".", 2)[0]
    try:
        importlib.import_module(module)
        register(symbol)
    except Exception:  # noqa: BLE001 - unresolved: the caller falls back
        return False
    return True


def _one(f, context=False):
    if context:
        return lambda typingctx, a: f(typingctx, a)
    return lambda a: f(a)


def _two(f, context=False):
    if context:
        return lambda typingctx, a, b: f(typingctx, a, b)
    return lambda a, b: f(a, b)


def _three(f, context=False):
    if context:
        return lambda typingctx, a, b, c: f(typingctx, a, b, c)
    return lambda a, b, c: f(a, b, c)


def _four(f, context=False):
    if context:
        return lambda typingctx, a, b, c, d: f(typingctx, a, b, c, d)
    return lambda a, b, c, d: f(a, b, c, d)


def _five(f, context=False):
    if context:
        return lambda typingctx, a, b, c, d, e: f(typingctx, a, b, c, d, e)
    return lambda a, b, c, d, e: f(a, b, c, d, e)


#: functions of fixed arity forwarding to ``f`` (numba's overloads and intrinsics take no
#: ``*args`` of scalars)
_ARITIES = {1: _one, 2: _two, 3: _three, 4: _four, 5: _five}
