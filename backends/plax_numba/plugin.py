"""Entry point of the Numba backend (``plax.backends: numba = plax_numba.plugin``)."""
from plax.plugins import hookimpl


@hookimpl
def plax_backends():
    import importlib.util
    if importlib.util.find_spec("numba") is None:  # reported as a failed plugin
        raise ImportError("the Numba backend needs numba (pip install numba)")
    # numba itself is imported by the first compile, not here: discovering backends stays cheap
    from plax_numba.backend import NumbaBackend
    return [NumbaBackend()]
