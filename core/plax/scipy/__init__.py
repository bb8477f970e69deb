"""plax.scipy: SciPy's API on plax (``plax.scipy.linalg``)."""
from plax.scipy import linalg  # noqa: F401
