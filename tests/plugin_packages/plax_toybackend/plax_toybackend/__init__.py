"""plax_toybackend: a toy plax backend on its own platform ("toy").

Its buffers are :class:`ToyBuffer` objects (NumPy arrays in a box, so plax cannot
mistake them for host arrays), its one device is ``ToyDevice(id=0)``, and its
work is delegated to the NumPy reference backend's implementations.
"""
from plax_toybackend.backend import ToyBackend, ToyBuffer, ToyDevice

__all__ = ["ToyBackend", "ToyBuffer", "ToyDevice"]
