"""plax: JAX's programming model (NumPy API, composable grad/jit/vmap, pytrees, devices)
as a small core plus pip-installable backend and transform plugins.

    import plax as jax
    from plax import numpy as jnp

Backends are discovered through entry points on first use; ``import plax``
itself loads none of them.
"""
from plax.version import __version__
from plax.config import config
from plax.config import (debug_nans, debug_infs, enable_checks, log_compiles,
                         explain_cache_misses, numpy_rank_promotion, numpy_dtype_promotion,
                         default_matmul_precision, default_prng_impl, threefry_partitionable)
from plax.config import enable_x64, _MORE_CONTEXTS, context_manager as _config_context
from plax import float_checks as _float_checks  # registers the jax_debug_nans listener
from plax import dtypes, errors, tree_util, tree, core
from plax.core import ShapeDtypeStruct
from plax import dispatch as _dispatch  # installs the eager path of Primitive.bind
from plax.array import Array, make_array_from_callback, make_array_from_single_device_arrays
from plax import sharding
from plax.sharding import NamedSharding, PartitionSpec as P, Shard, make_mesh, reshard, set_mesh
from plax.device import (Device, devices, local_devices, device_count, local_device_count,
                          default_backend, device_put, device_get, process_index, process_count)
from plax.device import default_device_context as default_device
from plax import lax
from plax import numpy
from plax.transforms.jit import jit, make_jaxpr, eval_shape
from plax.transforms.autodiff import (jvp, vjp, linearize, grad, value_and_grad, jacfwd, jacrev,
                                      jacobian, hessian)
from plax.transforms.vmap_api import vmap
from plax.transforms.custom_derivatives import custom_jvp, custom_vjp, closure_convert
from plax.transforms.checkpoint import checkpoint, remat
from plax.api_util import block_until_ready, disable_jit, typeof
from plax import ref
from plax.ref import new_ref, freeze, Ref, empty_ref, free_ref
from plax.state.indexing import ds
from plax.tree_util import tree_map as _tree_map

tree_map = _tree_map  # the alias older JAX code (and the seed tutorials) use

# Submodules imported on first use. Only modules that exist are named here, so that
# ``hasattr(plax, "nn")`` is False until plax.nn is written.
_LAZY_SUBMODULES = frozenset({"random", "test_util", "plugins", "api_util", "ad_checkpoint",
                               "debug", "debugger", "experimental", "scipy", "nn", "distributed",
                               "ops", "typing", "image", "custom_batching",
                               "custom_derivatives", "stages", "memory", "flatten_util", "profiler",
                               "dlpack"})
# Names loaded on first use, with the module that defines them.
_LAZY_NAMES = {"pure_callback": "plax.lax.callbacks", "float0": "plax.dtypes",
               "named_scope": "plax.named_scopes", "named_call": "plax.named_scopes",
               "print_environment_info": "plax.environment",
               "process_indices": "plax.environment", "clear_caches": "plax.transforms.jit",
               "linear_transpose": "plax.transforms.linear_transpose",
               "custom_gradient": "plax.transforms.custom_gradient",
               "ensure_compile_time_eval": "plax.transforms.compile_time_eval",
               "fwd_and_bwd": "plax.transforms.fwd_and_bwd",
               "checkpoint_policies": "plax.transforms.checkpoint_policies",
               "live_arrays": "plax.array_runtime", "copy_to_host_async": "plax.array_runtime",
               "effects_barrier": "plax.array_runtime"}
_config_contexts = frozenset(_MORE_CONTEXTS)


def __getattr__(name: str):
    # Submodules loaded on first use, and names exported by transform plugins (pmap, ...).
    if name in _config_contexts:  # jax.transfer_guard(...) and JAX's other option contexts
        value = globals()[name] = _config_context(name)
        return value
    if name in _LAZY_SUBMODULES:
        import importlib
        return importlib.import_module(f"plax.{name}")
    if name in _LAZY_NAMES:
        import importlib
        value = globals()[name] = getattr(importlib.import_module(_LAZY_NAMES[name]), name)
        return value
    from plax import plugins
    exports = plugins.registry().exports
    if name in exports:
        return exports[name]
    raise AttributeError(plugins.missing_message(name))  # names the package for pmap, ...


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY_NAMES) | set(_config_contexts))
