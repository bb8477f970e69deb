"""The entry point (``plax.backends: toy = plax_toybackend.plugin``)."""
from plax.plugins import hookimpl


@hookimpl
def plax_backends():
    from plax_toybackend.backend import ToyBackend
    return [ToyBackend()]
