"""How meshes print, beside JAX 0.10.2.

``repr(mesh)`` is JAX's keyword form ``Mesh(axis_sizes=..., axis_names=..., axis_types=...)``;
``str(mesh)`` (also what a ``NamedSharding``'s repr and a jaxpr's ``mesh=``/``ctx_mesh=``
parameters show) is the compact ``Mesh('i': 4, axis_types=(...))``; an ``AbstractMesh`` prints
the compact form both ways. The answers are recorded in ``JAX_ANSWERS`` so the plax side runs
without JAX; a second test checks the record against JAX itself.
"""
import importlib.util

import pytest

from sharding_child import PRELUDE, run_child

SCRIPT = PRELUDE + r'''
AxisType = sharding.AxisType
out = {}
for t in ("Auto", "Explicit", "Manual"):
    kind = getattr(AxisType, t)
    one = jax.make_mesh((4,), ("i",), axis_types=(kind,))
    two = jax.make_mesh((4, 2), ("i", "j"), axis_types=(kind, kind))
    out[t] = [repr(one), str(one), repr(two), str(two), repr(two.abstract_mesh),
              str(two.abstract_mesh)]
mixed = jax.make_mesh((4, 2), ("i", "j"), axis_types=(AxisType.Explicit, AxisType.Auto))
out["mixed"] = [repr(mixed), str(mixed), repr([mixed]), f"{mixed}"]
out["default"] = repr(jax.make_mesh((2, 4), ("X", "Y")))
out["direct"] = repr(sharding.Mesh(np.array(jax.devices()[:2]), ("x",)))
out["abstract"] = [repr(sharding.AbstractMesh((2, 3), ("a", "b"))),
                   str(sharding.AbstractMesh((2, 3), ("a", "b")))]
out["named"] = repr(sharding.NamedSharding(mixed, P("i")))
print(json.dumps(out))
'''

_ABS = ", device_kind=cpu, num_cores=None, platform=cpu)"
JAX_ANSWERS = {
    t: [f"Mesh(axis_sizes=(4,), axis_names=('i',), axis_types=({t},))",
        f"Mesh('i': 4, axis_types=({t},))",
        f"Mesh(axis_sizes=(4, 2), axis_names=('i', 'j'), axis_types=({t}, {t}))",
        f"Mesh('i': 4, 'j': 2, axis_types=({t}, {t}))",
        f"AbstractMesh('i': 4, 'j': 2, axis_types=({t}, {t})" + _ABS,
        f"AbstractMesh('i': 4, 'j': 2, axis_types=({t}, {t})" + _ABS]
    for t in ("Auto", "Explicit", "Manual")
}
JAX_ANSWERS.update({
    "mixed": ["Mesh(axis_sizes=(4, 2), axis_names=('i', 'j'), axis_types=(Explicit, Auto))",
              "Mesh('i': 4, 'j': 2, axis_types=(Explicit, Auto))",
              "[Mesh(axis_sizes=(4, 2), axis_names=('i', 'j'), axis_types=(Explicit, Auto))]",
              "Mesh('i': 4, 'j': 2, axis_types=(Explicit, Auto))"],
    "default": "Mesh(axis_sizes=(2, 4), axis_names=('X', 'Y'), axis_types=(Explicit, Explicit))",
    "direct": "Mesh(axis_sizes=(2,), axis_names=('x',), axis_types=(Auto,))",
    "abstract": ["AbstractMesh('a': 2, 'b': 3, axis_types=(Auto, Auto))",
                 "AbstractMesh('a': 2, 'b': 3, axis_types=(Auto, Auto))"],
    "named": ("NamedSharding(mesh=Mesh('i': 4, 'j': 2, axis_types=(Explicit, Auto)), "
              "spec=P('i',), memory_kind=device)"),
})


def test_plax_prints_meshes_as_jax():
    out = run_child(SCRIPT, "plax")
    for key, want in JAX_ANSWERS.items():
        assert out[key] == want, key


def test_record_is_jaxs():
    if importlib.util.find_spec("jax") is None:
        pytest.skip("jax is not installed: the recorded answers stand")
    out = run_child(SCRIPT, "jax")
    for key, want in JAX_ANSWERS.items():
        assert out[key] == want, key
