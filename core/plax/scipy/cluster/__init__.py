"""plax.scipy.cluster: vector quantization (``plax.scipy.cluster.vq.vq``), as in JAX."""
from plax.scipy.cluster import vq

__all__ = ["vq"]
