"""The exceptions plax raises where JAX raises a specific one, with the same names."""
from __future__ import annotations

def _control_flow_tip() -> str:
    """What to do instead of Python control flow on a tracer, naming only what plax has."""
    import sys
    lax = sys.modules.get("plax.lax")
    loops = [f"lax.{name}" for name in ("cond", "switch", "fori_loop", "while_loop", "scan")
             if hasattr(lax, name)]
    structured = f"use structured control flow ({', '.join(loops)}), " if loops else ""
    return ("This happens when Python control flow or a conversion needs the concrete value of "
            "an abstract tracer, typically inside jit or vmap. What to do: mark the argument "
            "static (jit(f, static_argnums=...) or static_argnames=...), " + structured +
            "or write a branch-free expression such as jnp.where(...).")


def _error_repr(tracer) -> str:
    """A tracer as JAX names it in these errors: ``traced array with shape float32[3]``."""
    aval = getattr(tracer, "aval", None)
    if aval is None or not hasattr(aval, "shape") or not hasattr(aval, "dtype"):
        return str(tracer)
    return f"traced array with shape {aval.dtype.name}[{','.join(map(str, aval.shape))}]"


def jax_array_operand(x) -> ValueError | None:
    """JAX 0.10's ValueError for ``x`` given as an operand (of a ``jax.numpy`` function, a
    primitive or a ``jit`` call) when it is an object with ``__jax_array__``, which JAX no
    longer converts there (``jnp.asarray`` does); None for any other object.

    Example:
      >>> class Wrapped:
      ...     def __jax_array__(self):
      ...         return jnp.ones(2)
      >>> type(jax_array_operand(Wrapped())).__name__, jax_array_operand(1.0)
      ('ValueError', None)
    """
    if not hasattr(type(x), "__jax_array__"):
        return None
    return ValueError("Triggering __jax_array__() during abstractification is no longer "
                      "supported. To avoid this error, either explicitly convert your object "
                      "using jax.numpy.array(), or register your object as a pytree.")


class JAXIndexError(IndexError):
    """Base class of plax's tracer-related index errors."""


class NonConcreteBooleanIndexError(JAXIndexError, TypeError):
    """A boolean mask index was traced: its result shape would depend on values.

    (Also a TypeError, as plax's was before it had JAX's JAXIndexError base.)

    Example:
      >>> try:
      ...     jax.jit(lambda x: x[x > 0])(jnp.arange(3.0))
      ... except jax.errors.NonConcreteBooleanIndexError as err:
      ...     print(type(err).__name__, isinstance(err, IndexError))
      NonConcreteBooleanIndexError True
    """

    def __init__(self, aval):
        super().__init__(f"Array boolean indices must be concrete; got {aval.str_short()}\nThe "
                         "shape of x[mask] depends on the mask's values, which are unknown under "
                         "jit/vmap. Use jnp.where(mask, x, fill) or jnp.nonzero(mask, size=N).")


class JaxprTypeError(TypeError):
    """A jaxpr is not well typed (``plax.core.check_jaxpr``)."""


class JAXTypeError(TypeError):
    """Base class of plax's tracer-related type errors."""


class ConcretizationTypeError(JAXTypeError):
    """A concrete value was needed, but the value is an abstract tracer."""

    def __init__(self, tracer, context: str = ""):
        what = ("Abstract tracer value encountered where concrete value is expected: "
                f"{_error_repr(tracer)}\n")
        super().__init__(what + (context + "\n" if context else "") + _control_flow_tip())


class TracerBoolConversionError(ConcretizationTypeError):
    """``bool()`` (an ``if``, ``while``, ``and``/``or``) was called on an abstract tracer."""

    def __init__(self, tracer):
        # JAX's first line, then plax's tip
        JAXTypeError.__init__(
            self, f"Attempted boolean conversion of {_error_repr(tracer)}.\nThe problem arose "
                  "with the `bool` function: a traced value was used in a Python `if`, "
                  "`while`, `and`, `or` or `not`.\n" + _control_flow_tip())


class TracerIntegerConversionError(JAXTypeError):
    """``int()``/``__index__`` was called on an abstract tracer."""

    def __init__(self, tracer):
        super().__init__(f"The __index__() method was called on {_error_repr(tracer)}.\n"
                         "A traced value cannot be used as a Python integer (for a shape, a "
                         "range or a list index). " + _control_flow_tip())


class TracerArrayConversionError(JAXTypeError):
    """A tracer was converted to a NumPy array (``np.asarray(tracer)``)."""

    def __init__(self, tracer):
        super().__init__(f"The numpy.ndarray conversion method __array__() was called on "
                         f"{_error_repr(tracer)}.\nUse plax.numpy functions instead of numpy "
                         "functions inside transformed code, or move the NumPy call outside.")


class UnexpectedTracerError(Exception):
    """A tracer escaped the transformation that created it and was used afterwards."""

    def __init__(self, msg: str):
        super().__init__(msg + "\nA tracer from a finished transformation (jit, grad, vmap, ...) "
                               "was used, usually because a transformed function stored it in a "
                               "global, a closure or an object. Return values from transformed "
                               "functions instead of storing them.")


class KeyReuseError(RuntimeError):
    """Reserved for PRNG key-reuse checking."""


class JaxRuntimeError(RuntimeError):
    """An error JAX's runtime (XLA) reports when a program runs, such as an argument buffer
    donated and read by the same call; plax raises it where JAX's runtime would."""
