"""plax_toybackend: a toy plax backend on its own platform ("toy").

Its buffers are :class:`ToyBuffer` objects (NumPy arrays in a box, so plax cannot
mistake them for host arrays), its one device is ``ToyDevice(id=0)``, and its
work is delegated to the NumPy reference backend's implementations.
``PLAX_TOY_PLATFORM=cpu`` makes it a second CPU backend instead (see
:mod:`plax_toybackend.backend`).
"""
from plax_toybackend.backend import ToyBackend, ToyBuffer, ToyDevice

__all__ = ["ToyBackend", "ToyBuffer", "ToyDevice"]
