"""The entry point (``plax.plugins: checkify = plax_checkify.plugin``)."""
from plax.plugins import hookimpl


@hookimpl
def plax_plugins():
    # Imported here, not at module level, so that a broken install is reported as a failed
    # plugin by `python -m plax info` rather than as an import error elsewhere.
    import plax_checkify
    return {"experimental.checkify": plax_checkify}
