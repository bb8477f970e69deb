"""plax-cost-analysis: the numbers against those JAX 0.10.2 reports on CPU (recorded here: CI
has no JAX), the control-flow conventions, the bytes-only default, the command line, and the
error when the plugin is absent."""
from __future__ import annotations

import json

import pytest

import plax
import plax.numpy as jnp
from plax import lax, plugins

from plax_cost_analysis import CostAnalysis, bytes_only_primitives, cost_analysis, cli

X = jnp.ones((3, 4))

# jax.jit(f).lower(*args).cost_analysis() on CPU, JAX 0.10.2, main keys (XLA omits zeros).
RECORDED = {
    "add": (lambda x: x + x, (X,), {"flops": 12, "bytes accessed": 144}),
    "add_scalar": (lambda x: x + 1.0, (X,), {"flops": 12, "bytes accessed": 196}),
    "exp": (jnp.exp, (X,), {"transcendentals": 12, "bytes accessed": 96}),
    "sum": (jnp.sum, (X,), {"flops": 11, "bytes accessed": 56}),
    "sum_axis0": (lambda x: jnp.sum(x, 0), (X,), {"flops": 8, "bytes accessed": 68}),
    "mean": (jnp.mean, (X,), {"flops": 12, "bytes accessed": 68}),
    "matmul": (lambda a, b: a @ b, (X, jnp.ones((4, 5))), {"flops": 120, "bytes accessed": 188}),
    "relu": (plax.nn.relu, (X,), {"flops": 12, "bytes accessed": 196}),
    "sigmoid_flops": (plax.nn.sigmoid, (X,), {"flops": 36, "transcendentals": 12}),
    "selu_flops": (lambda x: 1.05 * jnp.where(x > 0, x, 1.67 * jnp.exp(x) - 1.67), (X,),
                   {"flops": 60, "transcendentals": 12}),
    "cumsum": (lambda x: jnp.cumsum(x, 0), (X,), {"flops": 24, "bytes accessed": 100}),
    "argmax_flops": (jnp.argmax, (X,), {"flops": 99}),
    "conv": (lambda a, k: lax.conv_general_dilated(a, k, (1, 1), "VALID"),
             (jnp.ones((1, 2, 8, 8)), jnp.ones((3, 2, 3, 3))),
             {"flops": 3888, "bytes accessed": 1160}),
    "conv_same_strided": (lambda a, k: lax.conv_general_dilated(a, k, (2, 2), "SAME"),
                          (jnp.ones((2, 4, 8, 8)), jnp.ones((6, 4, 3, 3))),
                          {"flops": 11616, "bytes accessed": 3680}),
    "conv_grouped": (lambda a, k: lax.conv_general_dilated(a, k, (1, 1), "VALID",
                                                           feature_group_count=2),
                     (jnp.ones((1, 4, 8, 8)), jnp.ones((6, 2, 3, 3))), {"flops": 7776}),
    "conv_dilated": (lambda a, k: lax.conv_general_dilated(a, k, (1, 1), "VALID",
                                                           rhs_dilation=(2, 2)),
                     (jnp.ones((1, 2, 8, 8)), jnp.ones((3, 2, 3, 3))), {"flops": 1728}),
    "fft": (lambda z: lax.fft(z, "FFT", (5,)), (jnp.ones((6, 5), jnp.complex64),),
            {"flops": 480, "bytes accessed": 480}),
    "fft2": (lambda z: lax.fft(z, "FFT", (8, 8)), (jnp.ones((8, 8), jnp.complex64),),
             {"flops": 72 * 64}),
    "cond_max_over_branches": (
        lambda p, x: lax.cond(p, jnp.sin, lambda x: x * 2.0 + 1.0, x), (True, X),
        {"flops": 25, "transcendentals": 12}),
    "sort": (lambda x: lax.sort(x, dimension=0), (jnp.ones((6, 5)),),
             {"flops": 150, "bytes accessed": 240}),
    "integer_pow": (lambda x: lax.integer_pow(x, 5), (X,), {"flops": 36}),
    "erf_inv": (lax.erf_inv, (X,), {"flops": 37 * 12, "transcendentals": 24}),
}


@pytest.mark.parametrize("name", sorted(RECORDED))
def test_main_keys_match_jax(name):
    f, args, want = RECORDED[name]
    got = plax.jit(f).lower(*args).cost_analysis()
    for key, value in want.items():
        assert got[key] == value, (name, key, dict(got))


def test_result_is_a_dict_with_jax_keys_in_order():
    got = plax.jit(lambda a, b: a @ b).lower(X, jnp.ones((4, 5))).cost_analysis()
    assert isinstance(got, dict) and isinstance(got, CostAnalysis)
    # the per-operand keys too, as XLA reports them for a dot
    assert got == {"flops": 120.0, "transcendentals": 0.0, "bytes accessed": 188.0,
                   "bytes accessed0{}": 48.0, "bytes accessed1{}": 80.0,
                   "bytes accessedout{}": 60.0}
    assert list(got)[:3] == ["flops", "transcendentals", "bytes accessed"]
    assert plax.jit(lambda x: x).lower(X).cost_analysis() == {
        "flops": 0.0, "transcendentals": 0.0, "bytes accessed": 0.0}
    compiled = plax.jit(jnp.sin).lower(X).compile()
    assert compiled.cost_analysis()["transcendentals"] == 12


def test_shape_dtype_structs_and_the_function_form():
    spec = plax.ShapeDtypeStruct((3, 4), jnp.float32)
    assert cost_analysis(jnp.tanh, spec) == plax.jit(jnp.tanh).lower(X).cost_analysis()
    assert plax.experimental.cost_analysis.cost_analysis is cost_analysis


def test_scan_multiplies_its_body_by_its_length():
    body = lambda c, y: (c * y + 1.0, jnp.sin(y))  # noqa: E731
    one = cost_analysis(lambda c, y: body(c, y), X[0], X[0])
    got = cost_analysis(lambda x: lax.scan(body, x[0], x), X)
    assert got["flops"] == 3 * one["flops"] == 24
    assert got["transcendentals"] == 3 * one["transcendentals"] == 12
    fori = cost_analysis(lambda x: lax.fori_loop(0, 5, lambda i, c: c * 2.0, x), X)
    assert fori["flops"] == 5 * (12 + 1)  # the body and the counter's increment


def test_while_counts_one_test_and_one_iteration():
    f = lambda x: lax.while_loop(lambda c: jnp.sum(c) < 100.0, lambda c: c * 2.0, x)  # noqa
    got = cost_analysis(f, jnp.ones((6, 5)))
    assert got["flops"] == 29 + 1 + 30  # the sum and the comparison, then the body (as XLA: 60)


def test_nested_jit_and_custom_jvp_are_looked_through():
    inner = plax.jit(lambda y: y * 2.0)
    assert cost_analysis(lambda x: inner(x) + 1.0, X)["flops"] == 24
    assert cost_analysis(plax.nn.softmax, X)["transcendentals"] == 12


def test_linear_call_and_custom_vmap_count_their_function():
    from plax.custom_batching import custom_vmap
    from plax.custom_derivatives import linear_call
    n = X.size

    def scaled_sin(x):
        return linear_call(lambda r, v: jnp.sin(v) * r, lambda r, ct: ct * r, 2.0, x)

    @custom_vmap
    def sin3(x):
        return jnp.sin(x) * 3.0

    sin3.def_vmap(lambda size, batched, x: (sin3(x), batched[0]))
    for f in (scaled_sin, sin3):
        got = cost_analysis(f, X)
        assert got["transcendentals"] == n and got["flops"] >= n and got.uncounted == ()


def test_primitives_without_a_rule_count_bytes_only():
    got = cost_analysis(lambda x: jnp.linalg.inv(x), jnp.ones((3, 3)))
    assert "lu" in got.uncounted and "triangular_solve" in got.uncounted
    key = cost_analysis(lambda k: plax.random.uniform(k, (4,)), plax.random.PRNGKey(0))
    assert key.uncounted == ("threefry2x32",) and key["bytes accessed"] > 0
    assert cost_analysis(jnp.sin, X).uncounted == ()


def test_bytes_only_primitives_are_listed_in_the_readme():
    from pathlib import Path
    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text()
    section = readme.split("<!-- bytes-only -->")[1]
    listed = {w.strip("`,. \n") for w in section.split("`")[1::2]}
    assert listed == set(bytes_only_primitives())


def test_command_line(tmp_path, monkeypatch, capsys):
    (tmp_path / "costmod.py").write_text(
        "import plax.numpy as jnp\ndef predict(w, x):\n    return jnp.tanh(x @ w)\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    from plax.__main__ import main
    assert main(["plax", "cost", "costmod:predict", "--shape", "f32[4,2]", "--shape",
                 "f32[3,4]", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["cost"]["flops"] == 2 * 3 * 2 * 4 and out["cost"]["transcendentals"] == 6
    assert main(["plax", "cost", "costmod:predict", "--shape", "f32[4,2]", "--shape",
                 "f32[3,4]"]) == 0
    text = capsys.readouterr().out
    assert "cost of costmod:predict(f32[4,2], f32[3,4]):" in text and "flops" in text
    assert main(["plax", "cost", "costmod:missing"]) == 1
    assert "has no attribute 'missing'" in capsys.readouterr().err
    assert main(["plax", "cost", "costmod:predict", "--shape", "float[3]"]) == 2
    assert main(["plax", "nonesuch"]) == 2
    assert "unknown command 'nonesuch'" in capsys.readouterr().err


def test_parse_shape():
    assert cli.parse_shape("f32[3,4]") == plax.ShapeDtypeStruct((3, 4), jnp.float32)
    assert cli.parse_shape("i32[]").shape == ()
    with pytest.raises(ValueError, match="DTYPE"):
        cli.parse_shape("q9[1]")


def test_without_the_plugin_the_error_names_the_package(monkeypatch, capsys):
    real = plugins._entry_points
    monkeypatch.setattr(plugins, "_entry_points",
                        lambda group: [ep for ep in real(group) if ep.name != "cost_analysis"])
    plugins.reset()
    try:
        lowered = plax.jit(jnp.sin).lower(X)
        with pytest.raises(AttributeError, match="'plax-cost-analysis', which is not installed"):
            lowered.cost_analysis()
        from plax.__main__ import main
        assert main(["plax", "cost", "m:f"]) == 2
        assert "pip install -e plugins/plax_cost_analysis" in capsys.readouterr().err
        assert float(plax.jit(jnp.sin)(1.0)) == pytest.approx(0.841471, rel=1e-5)
    finally:
        monkeypatch.undo()
        plugins.reset()
    assert plax.jit(jnp.sin).lower(X).cost_analysis()["transcendentals"] == 12
