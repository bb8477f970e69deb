"""The machinery behind :mod:`plax.tree_util`: node encoding and registry (``nodes``),
key paths (``keys``) and the flatten/unflatten engine (``engine``). Users import
:mod:`plax.tree_util` or :mod:`plax.tree`; nothing here is public API."""
