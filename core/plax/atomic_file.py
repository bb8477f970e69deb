"""Writing a file so that readers see either nothing or the whole file: the backends' disk
caches (compiled kernels, native objects) are shared by every process and thread compiling
the same thing at once, and a reader must never load a half-written file."""
from __future__ import annotations

import os
import threading


def write_atomically(path: str | os.PathLike, data: bytes | str) -> None:
    """Writes ``data`` to ``path`` through a temporary file in the same directory that is
    renamed into place (``os.replace``, atomic on POSIX and Windows within one file system).

    The temporary name carries this process's id and this thread's, so concurrent writers of
    the same path never share one; the last rename wins, which is harmless when every writer
    writes the same bytes (a cache keyed by its content). On any failure the temporary file is
    removed and the exception propagates, and ``path`` is left as it was.

    Args:
      path: the file to create or replace; its directory must exist.
      data: the contents: ``bytes`` are written as they are, a ``str`` as UTF-8 text.

    Returns:
      None.

    Raises:
      TypeError: ``data`` is neither ``bytes`` nor ``str``.
      OSError: the file could not be written or renamed.

    Example:
      >>> import os, tempfile
      >>> from plax.atomic_file import write_atomically
      >>> path = os.path.join(tempfile.mkdtemp(), "kernel.bin")
      >>> write_atomically(path, b"\\x7fELF")
      >>> open(path, "rb").read()
      b'\\x7fELF'
    """
    if isinstance(data, str):
        data = data.encode("utf-8")
    elif not isinstance(data, (bytes, bytearray, memoryview)):
        raise TypeError(f"write_atomically writes bytes or str, got {type(data).__name__}; "
                        "serialize the object first (e.g. pickle.dumps)")
    path = os.fspath(path)
    tmp = f"{path}.{os.getpid()}.{threading.get_ident()}.tmp"
    try:
        with open(tmp, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    finally:
        # after a successful rename the temporary name no longer exists
        if os.path.exists(tmp):
            os.remove(tmp)
