"""The entry point (``plax.plugins: count_flops = plax_plugin_template.plugin``).

Keep this module light: plax imports it when it discovers plugins, and imports inside the
hook, so that a missing dependency is reported as a failed plugin (``python -m plax info``).
"""
from plax.plugins import hookimpl


@hookimpl
def plax_plugins():
    from plax_plugin_template import count_flops
    return {"experimental.count_flops": count_flops}   # plax.experimental.count_flops
