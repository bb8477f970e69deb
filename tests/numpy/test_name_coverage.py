"""Name coverage against JAX: every public name of the JAX namespaces recorded in
``jax_names.json`` (by ``record_jax_names.py``, so CI needs no JAX) exists in the matching
plax module, unless it is on the exclusion list below with a reason.

Two kinds of exclusion: DELIBERATE (plax will not offer the name; one-line reason each) and
NOT_YET_IMPLEMENTED (tracked by issue 12; the lead shrinks it as names land). A name that
plax now has must be removed from either list (``test_exclusions_are_not_stale``).
"""
from __future__ import annotations

import importlib
import json
import pathlib

import pytest

HERE = pathlib.Path(__file__).parent
RECORD = json.loads((HERE / "jax_names.json").read_text())
NAMESPACES = sorted(RECORD["namespaces"])

# Names plax deliberately lacks: namespace -> {name: why}.
DELIBERATE: dict[str, dict[str, str]] = {
    "lax": {
        "after_all": "XLA ordering tokens: plax orders side effects without tokens",
        "after_all_p": "XLA ordering tokens: plax orders side effects without tokens",
        "create_token": "XLA ordering tokens: plax orders side effects without tokens",
        "create_token_p": "XLA ordering tokens: plax orders side effects without tokens",
        # JAX-internal primitives behind functions plax composes from other primitives
        "approx_top_k_p": "approx_max_k/approx_min_k return the exact top k (lax.top_k)",
        "copy_p": "an XLA copy; plax arrays are immutable and copies are never needed",
        "dce_sink_p": "lax.dce_sink is a no-op: plax has no MLIR dead-code elimination",
        "device_put_p": "device_put moves buffers through the backend protocol, not a primitive",
        "eq_to_p": "shape-polymorphism internals: plax shapes are static",
        "le_to_p": "shape-polymorphism internals: plax shapes are static",
        "lt_to_p": "shape-polymorphism internals: plax shapes are static",
        "optimization_barrier_p": "lax.optimization_barrier is the identity: nothing to fence",
        "reduce_p": "lax.reduce binds reduce_* for monoids, else combines halves pairwise",
        "reduce_window_p": "reduce_window binds reduce_window_{sum,max,min}_p (or composes)",
        "scatter_sub_p": "lax.scatter_sub is scatter_add of the negated updates",
        "select_and_gather_add_p": "max-pool gradients come from reduce_window_max's JVP rule",
        "select_and_scatter_add_p": "max-pool gradients come from reduce_window_max's JVP rule",
        "select_and_scatter_p": "max-pool gradients come from reduce_window_max's JVP rule",
        "stage_p": "lax.stage is asarray: plax traces every array operand already",
        "tile_p": "lax.tile composes broadcast_in_dim and reshape",
        "linear_solve_p": "lax.custom_linear_solve is a custom VJP around the user's solve",
        "ragged_all_to_all_p": "lax.ragged_all_to_all composes all_gather, take and where",
        "rng_uniform": "XLA's stateful RNG (discouraged by JAX): use plax.random",
        "rng_uniform_p": "XLA's stateful RNG (discouraged by JAX): use plax.random",
    },
}

# ---- not yet implemented — tracked by issue 12 (shrink as names land) --------------------
NOT_YET_IMPLEMENTED: dict[str, list[str]] = {
    "numpy": [],
    "numpy.linalg": [],
    "numpy.fft": [],
    "nn": [],
    "nn.initializers": [],
    "scipy.special": [],
    "scipy.stats": [],
    "lax": """
        sharding_constraint_p
    """.split(),
}
# ---- end of the tracked section ----------------------------------------------------------


def _plax_module(namespace: str):
    return importlib.import_module(f"plax.{namespace}")


@pytest.mark.parametrize("namespace", NAMESPACES)
def test_jax_names_exist_in_plax(namespace):
    module = _plax_module(namespace)
    excluded = set(DELIBERATE.get(namespace, {})) | set(NOT_YET_IMPLEMENTED.get(namespace, []))
    missing = [name for name in RECORD["namespaces"][namespace]
               if name not in excluded and not hasattr(module, name)]
    assert not missing, (f"plax.{namespace} lacks these names of jax.{namespace}: {missing} "
                         f"(implement them, or list them in test_name_coverage.py with a reason)")


@pytest.mark.parametrize("namespace", NAMESPACES)
def test_exclusions_are_not_stale(namespace):
    """An excluded name that plax now has (or that JAX does not have) must leave the list."""
    module = _plax_module(namespace)
    jax_names = set(RECORD["namespaces"][namespace])
    excluded = list(DELIBERATE.get(namespace, {})) + NOT_YET_IMPLEMENTED.get(namespace, [])
    stale = [n for n in excluded if hasattr(module, n) or n not in jax_names]
    assert not stale, f"remove from the exclusion lists of plax.{namespace}: {stale}"


def test_exclusion_lists_are_well_formed():
    for namespace, names in DELIBERATE.items():
        assert namespace in RECORD["namespaces"], namespace
        for name, why in names.items():
            assert why.strip(), f"{namespace}.{name} needs a justification"
    for namespace, names in NOT_YET_IMPLEMENTED.items():
        assert namespace in RECORD["namespaces"], namespace
        assert len(names) == len(set(names)), f"duplicates in {namespace}"
        assert not set(names) & set(DELIBERATE.get(namespace, {})), namespace


def test_record_matches_installed_jax():
    """Where the recorded JAX version is installed, the record is current."""
    jax = pytest.importorskip("jax")
    if jax.__version__ != RECORD["jax_version"]:
        pytest.skip(f"record is of JAX {RECORD['jax_version']}, installed {jax.__version__}")
    import sys
    sys.path.insert(0, str(HERE))
    from record_jax_names import record
    assert record() == RECORD
