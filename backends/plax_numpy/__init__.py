"""NumPy reference backend."""
