"""plax.scipy: SciPy's API on plax (``plax.scipy.linalg``, ``special``, ``stats``, ``optimize``,
``signal``, ``integrate``, ``ndimage``, ``fft``, ``cluster``, ``sparse``, ``interpolate``, ``spatial``, each loaded on first use)."""
_LAZY_SUBMODULES = ("linalg", "special", "stats", "optimize", "signal", "integrate",
                    "ndimage", "fft", "cluster", "sparse", "interpolate", "spatial")


def __getattr__(name: str):
    if name in _LAZY_SUBMODULES:
        import importlib
        return importlib.import_module(f"plax.scipy.{name}")
    raise AttributeError(f"module 'plax.scipy' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY_SUBMODULES))
