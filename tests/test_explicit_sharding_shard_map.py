"""``shard_map`` as JAX 0.10.2 runs and prints it (issue 25, item 2).

Eagerly (called with arrays, outside ``jit``) the body runs op by op: ``print(x)`` shows each
device's block under ``On cpu:0 at mesh coordinates (i, j,) = (0, 0):`` and
``jax.debug.print`` prints once per distinct block. ``make_jaxpr`` shows one ``shard_map``
equation with its body and parameters. One script runs the cases with plax (no
JAX needed: its output is compared with the text JAX 0.10.2 printed, recorded below) and,
where JAX is installed, with JAX, whose output must be the same record.
"""
import importlib.util
import json

import pytest

from subprocess_util import last_json, run_python

CASES = r'''
import json, sys, io, contextlib
import numpy as np
if sys.argv[1] == "jax":
    import jax
    jax.config.update("jax_num_cpu_devices", 4)
else:
    import plax as jax
jnp, lax, P = jax.numpy, jax.lax, jax.P
out = {}

def captured(fn):
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        result = fn()
    return buf.getvalue(), np.asarray(result).tolist()

mesh = jax.sharding.Mesh(np.array(jax.devices()).reshape(2, 2), ("i", "j"))  # Auto axes
jax.set_mesh(mesh)

@jax.shard_map(in_specs=P("i"), out_specs=P("i"))
def show(x):
    jax.debug.print("x={x}", x=x)      # once per distinct block: x varies over i only
    print(x)                             # every device's block
    y = lax.psum(x, "j")                 # an invariant value summed: twice it
    print(repr(y))
    return y
out["eager_print"] = captured(lambda: show(jax.device_put(jnp.arange(4.), P("i"))))

@jax.shard_map(in_specs=P("i", "j"), out_specs=P(None, "j"))
def col_sum(b):
    print("BEFORE:\n", b)
    s = lax.psum(b, "i")
    print("AFTER:\n", s)
    print(jax.typeof(s))
    return s
out["psum_blocks"] = captured(lambda: col_sum(jnp.arange(16).reshape(4, 4)))

@jax.shard_map(in_specs=P(("i", "j")), out_specs=P(("i", "j")))
def gathered(b):
    g = lax.all_gather(b, ("i", "j"), tiled=True)
    print(g + lax.axis_index("i"))
    return g
out["all_gather"] = captured(lambda: gathered(jnp.array([3, 9, 5, 2])))

@jax.shard_map(in_specs=P("i"), out_specs=P("i"))
def local_grad(b):
    return jax.grad(lambda v: jnp.sum(jnp.sin(v) * lax.axis_index("i")))(b)
out["grad_inside"] = captured(lambda: local_grad(jnp.arange(4.)))

with jax.set_mesh(jax.make_mesh((2,), ("i",))):   # Explicit axes
    @jax.shard_map(in_specs=(P("i"), P()), out_specs=P("i"))
    def scaled(a, b):
        return a * b
    xi = jax.device_put(jnp.arange(6.), P("i"))
    yi = jnp.arange(3.)
    closed = jax.make_jaxpr(scaled)(xi, yi)
    out["make_jaxpr"] = [str(closed), np.asarray(jax.jit(scaled)(xi, yi)).tolist()]
    summed = jax.shard_map(lambda a: lax.psum(jnp.sin(a), "i"), in_specs=P("i"), out_specs=P())
    out["make_jaxpr_psum"] = str(jax.make_jaxpr(summed)(xi))

# inside jit, make_jaxpr shows the same equation; the mesh passed as mesh= prints as itself
doubled = jax.shard_map(lambda a: lax.psum(jnp.sin(a) * 2, "i"), mesh=mesh,
                        in_specs=P("i"), out_specs=P())
out["make_jaxpr_jit"] = str(jax.make_jaxpr(jax.jit(doubled))(jnp.arange(4.))).replace(
    "frozenset({'j', 'i'})", "frozenset({'i', 'j'})")   # JAX prints a set in hash order

# eagerly, JAX zips each operand's distinct blocks (mesh order) to the shortest list
def zipped(x, z, c):
    jax.debug.print("none")                      # no operands: not printed
    jax.debug.print("A {} {}", x, c)             # x over i, c invariant: once
    jax.debug.print("C {} {}", x, z)             # x over i, z over j: twice
    jax.debug.print("H {}", lax.pcast(c, ("i", "j"), to="varying"))   # every device
    return x
out["eager_debug_zip"] = captured(lambda: jax.shard_map(
    zipped, mesh=mesh, in_specs=(P("i"), P("j"), P()), out_specs=P("i"))(
        jnp.arange(4.), jnp.arange(4.) + 10, jnp.float32(7)))

# under jit every device runs the body: debug.print prints once per device (JAX's order
# between devices varies from run to run; plax's is mesh order at each print)
def printing(x, c):
    jax.debug.print("x={x} c={c}", x=x, c=c)
    y = lax.psum(x * 2, "j")
    jax.debug.print("y={y}", y=y)
    return y
def printed_under_jit():
    y = jax.jit(jax.shard_map(printing, mesh=mesh, in_specs=(P("i"), P()), out_specs=P("i"))
                )(jnp.arange(4.), 7.)
    jax.effects_barrier()   # JAX's callbacks may still be running
    return y
out["jit_debug_print"] = captured(printed_under_jit)

try:  # a mesh= other than the one set
    other = jax.sharding.Mesh(np.array(jax.devices()[:2]), ("k",))
    jax.shard_map(lambda b: b, mesh=other, in_specs=P("k"), out_specs=P("k"))(jnp.arange(4.))
    out["context_mesh"] = None
except ValueError as e:
    out["context_mesh"] = str(e)

try:
    jax.shard_map(lambda b: b, in_specs=P("i"), out_specs=P())(jnp.arange(4.))
    out["vma_error"] = None
except ValueError as e:
    out["vma_error"] = "ValueError"
print(json.dumps(out))
'''

EAGER_PRINT = """x=[0. 1.]
x=[2. 3.]
On cpu:0 at mesh coordinates (i, j,) = (0, 0):
[0. 1.]

On cpu:1 at mesh coordinates (i, j,) = (0, 1):
[0. 1.]

On cpu:2 at mesh coordinates (i, j,) = (1, 0):
[2. 3.]

On cpu:3 at mesh coordinates (i, j,) = (1, 1):
[2. 3.]

On cpu:0 at mesh coordinates (i, j,) = (0, 0):
[0. 2.]

On cpu:1 at mesh coordinates (i, j,) = (0, 1):
[0. 2.]

On cpu:2 at mesh coordinates (i, j,) = (1, 0):
[4. 6.]

On cpu:3 at mesh coordinates (i, j,) = (1, 1):
[4. 6.]

"""


def _blocks(*blocks: str) -> str:
    coords = [(0, 0), (0, 1), (1, 0), (1, 1)]
    return "\n".join(f"On cpu:{n} at mesh coordinates (i, j,) = {c}:\n{b}\n"
                     for n, (c, b) in enumerate(zip(coords, blocks)))


PSUM_BLOCKS = ("BEFORE:\n " + _blocks("[[0 1]\n [4 5]]", "[[2 3]\n [6 7]]",
                                       "[[ 8  9]\n [12 13]]", "[[10 11]\n [14 15]]")
               + "\nAFTER:\n " + _blocks("[[ 8 10]\n [16 18]]", "[[12 14]\n [20 22]]",
                                          "[[ 8 10]\n [16 18]]", "[[12 14]\n [20 22]]")
               + "\nint32[2,2]{V:j}\n")

MAKE_JAXPR = """{ lambda ; a:f32[6@i] b:f32[3]. let
    c:f32[6@i] = shard_map[
      check_vma=True
      in_specs=(P('i',), P())
      jaxpr={ lambda ; d:f32[3]{V:i} e:f32[3]. let
          f:f32[3]{V:i} = pvary[axes=('i',)] e
          g:f32[3]{V:i} = mul d f
        in (g,) }
      mesh=AbstractMesh('i': 2, axis_types=(Explicit,), device_kind=cpu, num_cores=None, platform=cpu)
      newly_manual_axes=frozenset({'i'})
      out_specs=(P('i',),)
    ] a b
  in (c,) }"""

MAKE_JAXPR_PSUM = """{ lambda ; a:f32[6@i]. let
    b:f32[3] = shard_map[
      check_vma=True
      in_specs=(P('i',),)
      jaxpr={ lambda ; c:f32[3]{V:i}. let
          d:f32[3]{V:i} = sin c
          e:f32[3] = psum_invariant[axes=('i',)] d
        in (e,) }
      mesh=AbstractMesh('i': 2, axis_types=(Explicit,), device_kind=cpu, num_cores=None, platform=cpu)
      newly_manual_axes=frozenset({'i'})
      out_specs=(P(),)
    ] a
  in (b,) }"""

MAKE_JAXPR_JIT = """{ lambda ; a:f32[4]. let
    b:f32[2] = jit[
      name=<lambda>
      ctx_mesh=Mesh('i': 2, 'j': 2, axis_types=(Auto, Auto))
      jaxpr={ lambda ; a:f32[4]. let
          b:f32[2] = shard_map[
            check_vma=True
            in_specs=(P('i',),)
            jaxpr={ lambda ; c:f32[2]{V:i}. let
                d:f32[2]{V:i} = sin c
                e:f32[]{V:i} = pvary[axes=('i',)] 2.0:f32[]
                f:f32[2]{V:i} = mul d e
                g:f32[2] = psum_invariant[axes=('i',)] f
              in (g,) }
            mesh=Mesh('i': 2, 'j': 2, axis_types=(Auto, Auto))
            newly_manual_axes=frozenset({'i', 'j'})
            out_specs=(P(),)
          ] a
        in (b,) }
    ] a
  in (b,) }"""

JIT_DEBUG_PRINT = ["x=[0. 1.] c=7.0\n" * 2 + "x=[2. 3.] c=7.0\n" * 2
                   + "y=[0. 4.]\n" * 2 + "y=[ 8. 12.]\n" * 2, [0.0, 4.0, 8.0, 12.0]]

EAGER_DEBUG_ZIP = ["A [0. 1.] 7.0\nC [0. 1.] [10. 11.]\nC [2. 3.] [12. 13.]\n"
                   + "H 7.0\n" * 4, [0.0, 1.0, 2.0, 3.0]]

RECORD = {
    "eager_debug_zip": EAGER_DEBUG_ZIP,
    "make_jaxpr_jit": MAKE_JAXPR_JIT,
    "make_jaxpr_psum": MAKE_JAXPR_PSUM,
    "context_mesh": ("The context mesh AbstractMesh('i': 2, 'j': 2, axis_types=(Auto, Auto), "
                     "device_kind=cpu, num_cores=None, platform=cpu) should match the mesh "
                     "passed to shard_map Mesh('k': 2, axis_types=(Auto,))"),
    # the jaxpr JAX prints; jit of the same function (its trace shared with make_jaxpr's)
    "make_jaxpr": [MAKE_JAXPR, [0.0, 1.0, 4.0, 0.0, 4.0, 10.0]],
    "eager_print": [EAGER_PRINT, [0.0, 2.0, 4.0, 6.0]],
    "psum_blocks": [PSUM_BLOCKS, [[8, 10, 12, 14], [16, 18, 20, 22]]],
    "all_gather": [_blocks(*["[3 9 5 2]"] * 2, *["[ 4 10  6  3]"] * 2) + "\n", [3, 9, 5, 2] * 4],
    "vma_error": "ValueError",
}
# plax's text exactly (JAX's lines come in a varying order: compared sorted below)
PLAX_ONLY = {"jit_debug_print": JIT_DEBUG_PRINT}


@pytest.fixture(scope="module")
def plax_run():
    return last_json(run_python(args=["-c", CASES, "plax"],
                                env={"PLAX_NUM_CPU_DEVICES": "4", "PLAX_PLATFORMS": "cpu"}))


@pytest.mark.parametrize("case", sorted(RECORD))
def test_eager_shard_map_prints_as_jax(plax_run, case):
    assert plax_run[case] == RECORD[case]


@pytest.mark.parametrize("case", sorted(PLAX_ONLY))
def test_plax_text(plax_run, case):
    assert plax_run[case] == PLAX_ONLY[case]


def test_grad_inside_eager_body(plax_run):
    # d/dv sum(sin(v) * i) = cos(v) * i, i the device's position along "i"
    import numpy as np
    text, value = plax_run["grad_inside"]
    assert text == ""
    want = np.cos(np.arange(4.0)) * np.array([0, 0, 1, 1])
    np.testing.assert_allclose(value, want, rtol=1e-6)


@pytest.mark.skipif(importlib.util.find_spec("jax") is None, reason="JAX is not installed")
def test_record_is_jaxs():
    out = last_json(run_python(args=["-c", CASES, "jax"], env={"JAX_PLATFORMS": "cpu"}))
    for case, want in RECORD.items():
        assert out[case] == want, (case, json.dumps(out[case]))
    assert out["grad_inside"][0] == ""
    text, value = out["jit_debug_print"]   # the same lines, in an order that varies
    assert sorted(text.splitlines()) == sorted(JIT_DEBUG_PRINT[0].splitlines())
    assert value == JIT_DEBUG_PRINT[1]
