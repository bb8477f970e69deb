"""Entry point of the NumPy backend (``plax.backends: numpy = plax_numpy.plugin``)."""
from plax.plugins import hookimpl


@hookimpl
def plax_backends():
    from plax_numpy.backend import NumpyBackend
    return [NumpyBackend()]
