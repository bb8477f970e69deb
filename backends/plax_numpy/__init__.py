"""plax_numpy: the NumPy reference backend.

Every primitive has an eager implementation over NumPy arrays (``impls_*``
modules, collected in :data:`plax_numpy.registry.IMPLS`), and ``compile``
turns a jaxpr into a straight-line Python function over those implementations.
It is registered through the ``plax.backends`` entry point like any third-party
backend; nothing in the core imports it.
"""
