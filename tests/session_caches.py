"""Where a test session keeps its caches: a temporary directory of its own (see
:func:`keep_caches_in_the_session`, which tests/conftest.py calls when it is loaded)."""
from __future__ import annotations

import os
import tempfile

#: name prefix of a test session's cache directory (see :func:`keep_caches_in_the_session`)
SESSION_CACHES_PREFIX = "plax-test-caches-"


def keep_caches_in_the_session(environ=os.environ) -> str | None:
    """Points ``XDG_CACHE_HOME`` at a temporary directory of this test session, so that the
    Numba backend's compiled kernels (``$XDG_CACHE_HOME/plax_numba`` unless
    ``PLAX_NUMBA_CACHE_DIR`` says otherwise), numba's own cache and pip's stay out of the
    user's home and no run sees kernels left by another.

    tests/conftest.py calls it when it is loaded: before any plugin's ``pytest_configure``
    (which may load the backends) and before pytest-xdist starts its workers, which inherit the
    variable, so the session's processes share one cache and a kernel compiled by one worker is
    loaded by the others. Child interpreters inherit it too (they drop the parent's ``PLAX_*``
    variables, not this one), and a pytest run inside the session (the installed-backend
    test's) recognises the directory by its name and keeps using it.

    Args:
      environ: the environment to update (``os.environ``).

    Returns:
      The directory created (the caller removes it at the end of the session), or None when
      an enclosing session's directory is kept.

    Example::

      made = keep_caches_in_the_session()   # os.environ["XDG_CACHE_HOME"] is now `made`
      ...
      if made is not None:
          shutil.rmtree(made, ignore_errors=True)
    """
    current = environ.get("XDG_CACHE_HOME", "")
    if os.path.basename(os.path.normpath(current)).startswith(SESSION_CACHES_PREFIX) \
            and os.path.isdir(current):
        return None
    directory = tempfile.mkdtemp(prefix=SESSION_CACHES_PREFIX)
    environ["XDG_CACHE_HOME"] = directory
    return directory
