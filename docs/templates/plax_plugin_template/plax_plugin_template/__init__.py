"""plax-plugin-template: ``plax.experimental.count_flops``, a toy transform with a rule table."""
from plax_plugin_template.count_flops import count_flops

__all__ = ["count_flops"]
