"""Entry point of the Numba backend (``plax.backends: numba = plax_numba.plugin``)."""
from plax.plugins import hookimpl


@hookimpl
def plax_backends():
    from plax_numba.backend import NumbaBackend  # imports numba: a failure is a failed plugin
    return [NumbaBackend()]
