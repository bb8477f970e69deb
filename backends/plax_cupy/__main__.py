"""``python -m plax_cupy``: the backend's status line (its GPUs, or why there are none)."""
from plax_cupy import status

print(status())
