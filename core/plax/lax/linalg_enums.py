"""JAX's algorithm choices for ``eig``, ``eigh`` and ``svd``, and the checks that say which of
them plax honours (those a CPU has in JAX: LAPACK's routines), with JAX's exceptions for the
others."""
from __future__ import annotations

import enum


class EigImplementation(enum.Enum):
    """The implementation of ``lax.linalg.eig``: plax runs LAPACK's ``geev``."""
    CUSOLVER = "cusolver"
    MAGMA = "magma"
    LAPACK = "lapack"


class EighImplementation(enum.Enum):
    """The implementation of ``lax.linalg.eigh``: plax runs LAPACK's (QR-type) solver."""
    QR = "qr"
    JACOBI = "jacobi"
    QDWH = "qdwh"


class SvdAlgorithm(enum.Enum):
    """The algorithm of ``lax.linalg.svd``: DEFAULT, QR and DIVIDE_AND_CONQUER run LAPACK's SVD
    (plax does not choose between its drivers); JACOBI and POLAR are TPU/GPU algorithms."""
    DEFAULT = "default"
    QR = "QR"
    JACOBI = "Jacobi"
    POLAR = "polar"
    DIVIDE_AND_CONQUER = "divide_and_conquer"


def _check_member(value, enum_cls, name: str) -> None:
    if value is not None and not isinstance(value, enum_cls):
        raise TypeError(f"{name}: expected an {enum_cls.__name__} or None, got {value!r}")


def check_eigh_implementation(implementation) -> None:
    """Raises for an :class:`EighImplementation` plax cannot run (JAX's CPU messages)."""
    _check_member(implementation, EighImplementation, "eigh")
    if implementation is EighImplementation.JACOBI:
        raise NotImplementedError("Jacobi implementation is not supported on CPU")
    if implementation is EighImplementation.QDWH:
        raise NotImplementedError("QDWH implementation is only supported on TPU")


def check_svd_algorithm(algorithm) -> None:
    """Raises for an :class:`SvdAlgorithm` plax cannot run (JAX's CPU message)."""
    _check_member(algorithm, SvdAlgorithm, "svd")
    if algorithm in (SvdAlgorithm.JACOBI, SvdAlgorithm.POLAR):
        raise NotImplementedError("The SVD Jacobi and Polar algorithms are not implemented on "
                                  "CPU.")


def check_eig_implementation(implementation, use_magma) -> None:
    """Raises for an :class:`EigImplementation` (or ``use_magma=True``) plax cannot run."""
    _check_member(implementation, EigImplementation, "eig")
    if use_magma or implementation not in (None, EigImplementation.LAPACK):
        raise ValueError("Only the lapack implementation is supported on CPU.")


def index_subset(v, w, subset_by_index, size: int, name: str):
    """Keeps the columns ``lo:hi`` of ``v`` (if not None) and entries ``lo:hi`` of ``w``."""
    lo, hi = (int(i) for i in subset_by_index)
    if not 0 <= lo < hi <= size:
        raise ValueError(f"{name}: subset_by_index must be (lo, hi) with 0 <= lo < hi <= {size}, "
                         f"got {tuple(subset_by_index)}")
    w = w[..., lo:hi]
    return (None if v is None else v[..., lo:hi]), w
