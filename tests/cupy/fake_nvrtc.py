"""The simulated GPU's NVRTC (``cupy.cuda.nvrtc`` under :mod:`fake_cupy`): it compiles
nothing, but checks and records what reaches it, and hands back a "binary" that the simulated
``cupy.RawModule(path=...)`` loads by building its source for the host.

* :data:`COMPILES` records every compile in the process, plax's own (``via="nvrtc"``) and
  ``cupy.RawModule(code=...)``'s (``via="cupy"``, with the ``-ftz=true`` CuPy appends), so a
  test can check the options of every kernel that reached the compiler.
* It refuses what NVRTC refuses: an option it does not know (``NVRTC_ERROR_INVALID_OPTION``),
  a cubin of a program compiled for a virtual architecture (``-arch=compute_XY``), a program
  not compiled.
* Its binaries carry the options, so a module loaded from one runs as NVRTC compiled it: with
  ``-ftz=true`` the host build runs with x86's flush-to-zero and denormals-are-zero modes on
  (:mod:`fake_cupy`), which flushes float32 subnormals as the GPU does.

Its version, ``(0, 0)``, keeps its binaries apart from a real NVRTC's in plax's kernel cache.
"""
from __future__ import annotations

import json
import re

#: NVRTC's version as the simulation reports it
VERSION = (0, 0)
#: the architectures it compiles for (a recent NVRTC 12's range, shortened)
SUPPORTED_ARCHS = (75, 80, 86, 89, 90)
#: every compile so far: ``{"via": "nvrtc" | "cupy", "options": tuple, "source": str}``
COMPILES: list = []

CUBIN_MAGIC = b"\x7fELF plax-simulated cubin\n"
PTX_MAGIC = b"// plax-simulated PTX\n"

_OPTION_FORMS = [re.compile(p) for p in (
    r"-arch=(sm|compute)_\d+", r"--gpu-architecture=(sm|compute)_\d+", r"-?-std=c\+\+(11|14|17|20)",
    r"-ftz=(true|false)", r"-prec-div=(true|false)", r"-prec-sqrt=(true|false)",
    r"-fmad=(true|false)", r"-G", r"--device-debug", r"-lineinfo", r"--generate-line-info",
    r"-D\w+(=.*)?", r"-I.+", r"-DCUPY_USE_JITIFY", r"--use_fast_math", r"-default-device")]


class NVRTCError(RuntimeError):
    """NVRTC's error (``cupy.cuda.nvrtc.NVRTCError``)."""


class _Program:
    def __init__(self, source: str, name: str):
        self.source, self.name = source, name
        self.options: tuple | None = None


def createProgram(src, name, headers, include_names):  # noqa: N802 - CuPy's name
    return _Program(src.decode() if isinstance(src, bytes) else src, name)


def compileProgram(prog: _Program, options):  # noqa: N802
    options = tuple(o.decode() if isinstance(o, bytes) else o for o in options)
    for option in options:
        if not any(form.fullmatch(option) for form in _OPTION_FORMS):
            raise NVRTCError(f"NVRTC_ERROR_INVALID_OPTION (5): {option!r}")
    arch = architecture(options)
    if arch is not None and int(arch[1]) not in SUPPORTED_ARCHS:
        raise NVRTCError(f"NVRTC_ERROR_INVALID_OPTION (5): architecture {arch[0]}_{arch[1]}")
    record(prog.source, options, via="nvrtc")
    prog.options = options


def record(source: str, options: tuple, via: str) -> None:
    """Adds a compile to :data:`COMPILES`."""
    COMPILES.append({"via": via, "options": tuple(options), "source": source})


def getProgramLog(prog: _Program) -> str:  # noqa: N802
    return ""


def _binary(prog: _Program, magic: bytes) -> bytes:
    if prog.options is None:
        raise NVRTCError("NVRTC_ERROR_INVALID_PROGRAM (4): the program was not compiled")
    header = json.dumps({"options": list(prog.options)}).encode()
    return magic + header + b"\n" + prog.source.encode()


def getPTX(prog: _Program) -> bytes:  # noqa: N802
    return _binary(prog, PTX_MAGIC)


def getCUBIN(prog: _Program) -> bytes:  # noqa: N802
    arch = architecture(prog.options or ())
    if arch is None or arch[0] != "sm":
        raise NVRTCError("NVRTC_ERROR_INVALID_INPUT (3): no cubin for a virtual architecture "
                         "(compile with -arch=sm_XY)")
    return _binary(prog, CUBIN_MAGIC)


def getSupportedArchs():  # noqa: N802
    return SUPPORTED_ARCHS


def getVersion():  # noqa: N802
    return VERSION


def destroyProgram(prog: _Program) -> None:  # noqa: N802
    pass


def architecture(options) -> tuple[str, str] | None:
    """``("sm", "90")`` of ``-arch=sm_90`` among ``options`` (the last one), or None."""
    found = None
    for option in options:
        m = re.fullmatch(r"(?:-arch|--gpu-architecture)=(sm|compute)_(\d+)", option)
        if m:
            found = (m.group(1), m.group(2))
    return found


def flushes_subnormals(options) -> bool:
    """Whether a compile with ``options`` flushes float32 subnormals (``-ftz=true``, the last
    ``-ftz`` wins; NVRTC's default is false)."""
    value = "false"
    for option in options:
        if option.startswith("-ftz="):
            value = option[5:]
    return value == "true"


def parse_binary(data: bytes) -> tuple[str, tuple, str]:
    """``(kind, options, source)`` of a simulated binary.

    Raises:
      ValueError: ``data`` is not one (the driver's ``CUDA_ERROR_INVALID_IMAGE``).
    """
    for kind, magic in (("cubin", CUBIN_MAGIC), ("ptx", PTX_MAGIC)):
        if data.startswith(magic):
            header, _, source = data[len(magic):].partition(b"\n")
            return kind, tuple(json.loads(header)["options"]), source.decode()
    raise ValueError("CUDA_ERROR_INVALID_IMAGE: not a cubin or PTX image of the simulated NVRTC")
