"""Eager ``shard_map``'s shortcuts give what its general path gives (issue 25, item 2).

Run op by op, a body's scalar constants are put on the devices once per mesh, and a
``psum`` over one axis sums the blocks directly instead of tracing its vmap formulation.
Each result is compared, bit for bit, with ``jit`` of the same shard_map (which computes
the vmap formulation) and with NumPy float64; ``-0.0`` and ``0.0`` must stay apart.
"""
import numpy as np
import pytest

from subprocess_util import last_json, run_python

CASES = r'''
import json
import numpy as np
import plax as jax
jnp, lax, P = jax.numpy, jax.lax, jax.P
out = {}
rng = np.random.default_rng(0)
mesh = jax.sharding.Mesh(np.array(jax.devices()).reshape(2, 2), ("i", "j"))
x = rng.standard_normal((8, 6)).astype(np.float32)
n = np.arange(48, dtype=np.int32).reshape(8, 6)

def body(b):
    for _ in range(3):
        b = jnp.sin(b) * 2 + 1
    return lax.psum(b, "i")

for check in (True, False):
    f = jax.shard_map(body, mesh=mesh, in_specs=P("i", "j"), out_specs=P(None, "j"),
                      check_vma=check)
    eager, jitted = np.asarray(f(x)), np.asarray(jax.jit(f)(x))
    out[f"float_check_{check}"] = [eager.tobytes() == jitted.tobytes(), eager.tolist()]
g = jax.shard_map(lambda b: lax.psum(b * 3, "j"), mesh=mesh, in_specs=P("i", "j"),
                  out_specs=P("i"))
out["int"] = [np.asarray(g(n)).tolist(), np.asarray(jax.jit(g)(n)).tolist()]
# an invariant operand (summed over an axis it does not vary over): the general path
h = jax.shard_map(lambda b: lax.psum(b, "j"), mesh=mesh, in_specs=P("i"), out_specs=P("i"))
out["invariant"] = np.asarray(h(x)).tolist()
signs = jax.shard_map(lambda b: (b * 0.0, b * -0.0), mesh=mesh, in_specs=P("i"),
                      out_specs=P("i"))
for _ in range(2):  # the second call reuses the constants
    pos, neg = signs(jnp.ones(4))
out["signs"] = [np.signbit(np.asarray(pos)).tolist(), np.signbit(np.asarray(neg)).tolist()]
print(json.dumps(out))
'''


@pytest.fixture(scope="module")
def run():
    return last_json(run_python(args=["-c", CASES],
                                env={"PLAX_NUM_CPU_DEVICES": "4", "PLAX_PLATFORMS": "cpu"}))


def _body_reference(x):
    b = x.astype(np.float64)
    for _ in range(3):
        b = np.sin(b) * 2 + 1
    return b.reshape(2, 4, 6).sum(axis=0)


@pytest.mark.parametrize("check", [True, False])
def test_psum_as_jit_computes_it(run, check):
    same, value = run[f"float_check_{check}"]
    assert same
    x = np.random.default_rng(0).standard_normal((8, 6)).astype(np.float32)
    np.testing.assert_allclose(value, _body_reference(x), rtol=1e-5, atol=1e-5)


def test_int_psum(run):
    n = np.arange(48).reshape(8, 6) * 3
    want = n.reshape(8, 2, 3).sum(axis=1)
    assert run["int"][0] == run["int"][1] == want.tolist()


def test_invariant_psum_doubles(run):
    x = np.random.default_rng(0).standard_normal((8, 6)).astype(np.float32)
    np.testing.assert_allclose(run["invariant"], 2 * x, rtol=1e-6)


def test_signed_zero_constants_kept_apart(run):
    assert run["signs"] == [[False] * 4, [True] * 4]
