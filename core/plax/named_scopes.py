"""``jax.named_scope`` and ``jax.named_call``: names for parts of a program.

JAX records these names in each equation's source information (its "name stack"), which
``make_jaxpr`` does not print and which only profilers and HLO dumps show. plax's jaxprs keep
no source names and plax has no HLO, so both keep the program unchanged (as its printed
jaxpr is in JAX); they check their arguments as JAX does.
"""
from __future__ import annotations

import contextlib
import functools
from typing import Callable, Iterator, TypeVar

F = TypeVar("F", bound=Callable)


@contextlib.contextmanager
def named_scope(name: str) -> Iterator[None]:
    """A context manager naming the operations traced inside it (for profilers).

    Args:
      name: the scope's name.

    Raises:
      TypeError: if ``name`` is not a string (as in JAX).

    Example:
      >>> with jax.named_scope("layer1"):
      ...     y = jnp.ones(3) * 2
    """
    if not isinstance(name, str):
        raise TypeError("named_scope name argument must be a string.")
    yield


def named_call(fun: F, *, name: str | None = None) -> F:
    """``fun``, its operations named ``name`` (default: ``fun.__name__``) for profilers.

    Args:
      fun: the function.
      name: the name (default: the function's own).

    Returns:
      A function computing what ``fun`` computes.

    Example:
      >>> jax.named_call(lambda x: x * 2, name="double")(3)
      6
    """
    if name is not None and not isinstance(name, str):
        raise TypeError("named_call name argument must be a string.")

    @functools.wraps(fun)
    def named(*args, **kwargs):
        return fun(*args, **kwargs)
    return named
