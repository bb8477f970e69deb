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
        AccuracyMode ConvGeneralDilatedDimensionNumbers DotAlgorithm DotAlgorithmPreset DotDimensionNumbers Precision PrecisionLike RaggedDotDimensionNumbers
        RandomAlgorithm Tolerance all_gather all_gather_p all_to_all all_to_all_p approx_max_k approx_min_k
        approx_top_k_p axis_index axis_index_p axis_size batch_matmul broadcast_like broadcast_shapes broadcast_to_rank
        clz clz_p composite conv_general_dilated_local conv_general_dilated_patches conv_general_permutations conv_general_shape_tuple conv_shape_tuple
        conv_transpose_shape_tuple copy_p custom_linear_solve custom_root dce_sink dce_sink_p device_put_p dtype
        empty eq_to_p index_take le_to_p linear_solve_p lt_to_p mulhi mulhi_p
        optimization_barrier optimization_barrier_p pbroadcast pcast platform_dependent pmax pmax_p pmean
        pmin pmin_p ppermute ppermute_p precv psend pshuffle psum
        psum_p psum_scatter pswapaxes ragged_all_to_all ragged_all_to_all_p ragged_dot ragged_dot_general reciprocal
        reduce reduce_p reduce_window_p reduce_window_shape_tuple rng_bit_generator rng_bit_generator_p rng_uniform rng_uniform_p
        scaled_dot scatter_apply scatter_sub scatter_sub_p select_and_gather_add_p select_and_scatter_add_p select_and_scatter_p shape_as_value
        sharding_constraint_p split split_p square square_p stack stack_p stage
        stage_p tile tile_p unstack unstack_p with_sharding_constraint
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
