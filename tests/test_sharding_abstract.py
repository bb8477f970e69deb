"""plax.sharding's device-free names of JAX 0.10.2: AbstractDevice, ManualAxisType and
use_abstract_mesh (alone, and printed and raising beside JAX where it is installed)."""
from __future__ import annotations

import pickle

import pytest

import plax
from plax import sharding as sh


def test_abstract_device_and_its_mesh():
    d = sh.AbstractDevice(device_kind="cpu", num_cores=None, platform="cpu")
    assert repr(d) == "AbstractDevice(device_kind=cpu, num_cores=None, platform=cpu)"
    assert d == sh.AbstractDevice("cpu", None, "cpu") and len({d, sh.AbstractDevice("cpu", None, "cpu")}) == 1
    with pytest.raises(TypeError):
        sh.AbstractDevice("cpu")
    mesh = sh.AbstractMesh((2,), ("x",), (sh.AxisType.Explicit,), abstract_device=d)
    assert repr(mesh) == ("AbstractMesh('x': 2, axis_types=(Explicit,), device_kind=cpu, "
                          "num_cores=None, platform=cpu)")


def test_use_abstract_mesh():
    mesh = sh.AbstractMesh((2,), ("x",))
    assert sh.get_abstract_mesh().empty
    with sh.use_abstract_mesh(mesh) as bound:
        assert bound is None
        assert sh.get_abstract_mesh() is mesh
        with sh.use_abstract_mesh(sh.AbstractMesh((2,), ("y",))):
            assert sh.get_abstract_mesh().axis_names == ("y",)
        with pytest.raises(ValueError, match="cannot change the size of the mesh"):
            with sh.use_abstract_mesh(sh.AbstractMesh((4,), ("x",))):
                pass
        assert sh.get_abstract_mesh() is mesh  # a refused entry leaves the mesh as it was
    assert sh.get_abstract_mesh().empty
    with pytest.raises(ValueError, match="Expected mesh of type `plax.sharding.AbstractMesh`"):
        sh.use_abstract_mesh(plax.make_mesh((1,), ("x",)))
    with plax.set_mesh(plax.make_mesh((1,), ("y",))):
        with pytest.raises(ValueError, match="cannot change the size"):
            with sh.use_abstract_mesh(mesh):
                pass
        with sh.use_abstract_mesh(sh.AbstractMesh((1,), ("z",))):
            assert sh.get_abstract_mesh().axis_names == ("z",)


def test_manual_axis_type():
    t = sh.ManualAxisType(varying={"x"})
    assert t is sh.ManualAxisType(varying=frozenset({"x"}))  # interned
    assert repr(t) == ("ManualAxisType(varying=frozenset({'x'}), unreduced=frozenset(), "
                       "reduced=frozenset())")
    assert sh.ManualAxisType().empty and not t.empty
    assert t.update(reduced={"y"}).vur == {"x", "y"}
    assert t.update(reduced={"y"}).to_ct_mat().unreduced == {"y"}
    assert pickle.loads(pickle.dumps(t)) is t
    with pytest.raises(ValueError, match="varying and reduced cannot have common mesh axes"):
        sh.ManualAxisType(varying={"x"}, reduced={"x"})
    with pytest.raises(ValueError, match="varying and unreduced"):
        sh.ManualAxisType(varying={"x"}, unreduced={"x"})
    with pytest.raises(TypeError):
        sh.ManualAxisType({"x"})
    with pytest.raises(AttributeError, match="immutable"):
        t.varying = frozenset()
    mesh = sh.AbstractMesh((2, 2), ("x", "y"), (sh.AxisType.Manual,) * 2)
    assert t.invarying(mesh) == {"y"}


def test_beside_jax():
    jax = pytest.importorskip("jax", reason="JAX is not installed: nothing to compare with")
    jsh = jax.sharding
    d, jd = (m.AbstractDevice(device_kind="cpu", num_cores=None, platform="cpu")
             for m in (sh, jsh))
    assert repr(d) == repr(jd)
    ours = sh.AbstractMesh((2,), ("x",), (sh.AxisType.Explicit,), abstract_device=d)
    theirs = jsh.AbstractMesh((2,), ("x",), (jsh.AxisType.Explicit,), abstract_device=jd)
    assert repr(ours) == repr(theirs)
    with sh.use_abstract_mesh(ours), jsh.use_abstract_mesh(theirs):
        assert repr(sh.get_abstract_mesh()) == repr(jsh.get_abstract_mesh())
    for kwargs in ({"varying": {"x"}}, {"unreduced": {"a"}, "reduced": {"b"}}, {}):
        assert repr(sh.ManualAxisType(**kwargs)) == repr(jsh.ManualAxisType(**kwargs))
    for m in (sh, jsh):
        with pytest.raises(ValueError, match="varying and reduced"):
            m.ManualAxisType(varying={"x"}, reduced={"x"})
