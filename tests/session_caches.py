"""Where a test session keeps its caches: a temporary directory of its own (see
:func:`keep_caches_in_the_session`, which tests/conftest.py calls when it is loaded), and what
its processes build there once for all of them (:func:`build_once_per_session`)."""
from __future__ import annotations

import os
import shutil
import tempfile
import time
import traceback
from pathlib import Path
from typing import Callable

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


#: how long a process waits for another process of the session to finish a shared build
SHARED_BUILD_TIMEOUT_S = 900.0


def build_once_per_session(name: str, build: Callable[[Path], None], *,
                           timeout: float = SHARED_BUILD_TIMEOUT_S) -> Path:
    """The directory ``name`` of the session's cache directory, filled by ``build`` once for
    the whole test session: by whichever process (xdist worker) asks first, while the others
    wait for it and reuse its result.

    The directory lies in ``XDG_CACHE_HOME``, which :func:`keep_caches_in_the_session` made
    for this session and its workers (so nothing is reused from another run, and the
    controller removes it at the end). An exclusive ``flock`` on ``NAME.lock`` serialises the
    builders; a ``NAME.done`` marker says the build finished, a ``NAME.failed`` one (holding
    the traceback) that it failed, which the other processes then report at once instead of
    building again. A builder that dies releases its lock with its process, and the next
    process builds afresh. Without ``fcntl`` (Windows) each process builds its own copy.

    Args:
      name: the build's directory name (also the stem of its marker files).
      build: called with the empty directory to fill; an exception fails the build.
      timeout: seconds to wait for another process's build before giving up.

    Returns:
      The filled directory.

    Raises:
      RuntimeError: when the build failed, here or in another process of the session.
      TimeoutError: when another process held the build for more than ``timeout`` seconds.

    Example::

      site = build_once_per_session("kit", lambda d: install_wheel_into(d))
    """
    root = Path(os.environ["XDG_CACHE_HOME"]) / "session-builds"
    root.mkdir(parents=True, exist_ok=True)
    try:
        import fcntl
    except ImportError:  # no shared lock: a copy per process
        target = root / f"{name}-{os.getpid()}"
        if not target.is_dir():
            _build_into(target, build)
        return target
    target, done, failed = root / name, root / f"{name}.done", root / f"{name}.failed"
    with open(root / f"{name}.lock", "a") as lock:
        deadline = time.monotonic() + timeout
        while True:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    raise TimeoutError(
                        f"waited {timeout:.0f} s for another process of this test session to "
                        f"build {target} (its lock {lock.name} is still held)") from None
                time.sleep(0.2)
        try:
            if done.exists():
                return target
            if failed.exists():
                raise RuntimeError(f"building {target} failed in another process of this test "
                                   f"session:\n{failed.read_text()}")
            try:
                _build_into(target, build)
            except BaseException:
                failed.write_text(traceback.format_exc())
                raise
            done.touch()
            return target
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def _build_into(target: Path, build: Callable[[Path], None]) -> None:
    shutil.rmtree(target, ignore_errors=True)  # what a builder that died left half-made
    target.mkdir()
    build(target)
