"""The entry point (``plax.plugins: jet = plax_jet.plugin``)."""
from plax.plugins import hookimpl


@hookimpl
def plax_plugins():
    import plax_jet
    return {"experimental.jet": plax_jet}
