"""plax: JAX's programming model as a small core plus plugins."""
