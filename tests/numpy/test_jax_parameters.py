"""The parameters plax takes because JAX 0.10 takes them (``test_signature_coverage.py``
checks that they exist): each one's meaning, against NumPy or a plain reference, and the
errors JAX gives for the values it refuses. Small eager shapes: cheap to run."""
from __future__ import annotations

import warnings

import numpy as np
import pytest

import plax
from plax import lax, random
from plax import numpy as jnp


# ---------------------------------------------------------------- jnp: values that change

@pytest.mark.parametrize("fn", ["var", "std"])
def test_var_std_mean_is_the_centre(fn):
    x = np.arange(12.0, dtype=np.float32).reshape(3, 4)
    m = np.full((3, 1), 2.0, np.float32)
    got = getattr(jnp, fn)(jnp.asarray(x), axis=1, mean=jnp.asarray(m), ddof=1)
    want = getattr(np, fn)(x.astype(np.float64), axis=1, mean=m.astype(np.float64), ddof=1)
    np.testing.assert_allclose(np.asarray(got), want, rtol=1e-6)
    # a scalar centre broadcasts, as JAX's lax.sub takes it
    np.testing.assert_allclose(np.asarray(jnp.var(jnp.asarray(x), mean=0.0)),
                               np.mean(x.astype(np.float64) ** 2), rtol=1e-6)


def test_var_mean_of_another_rank_is_a_type_error():
    with pytest.raises(TypeError, match="rank"):
        jnp.var(jnp.ones((2, 3)), axis=1, mean=jnp.zeros(2))


def test_nanvar_mean_and_positional_where():
    x = np.array([0.0, np.nan, 2.0, 4.0], np.float32)
    got = jnp.nanvar(jnp.asarray(x), mean=jnp.asarray(1.0))
    np.testing.assert_allclose(float(got), np.nanmean((x.astype(np.float64) - 1.0) ** 2),
                               rtol=1e-6)
    where = np.array([True, True, False, True])
    # where is JAX's 7th positional parameter of nanvar / 6th of nanmean
    got = jnp.nanvar(jnp.asarray(x), None, None, None, 0, False, jnp.asarray(where))
    np.testing.assert_allclose(float(got), np.nanvar(x, where=where), rtol=1e-6)
    got = jnp.nanmean(jnp.asarray(x), None, None, None, False, jnp.asarray(where))
    np.testing.assert_allclose(float(got), np.nanmean(x, where=where), rtol=1e-6)


def test_unique_equal_nan_and_sorted():
    x = np.array([3.0, np.nan, 1.0, np.nan, 3.0], np.float32)
    for equal_nan in (True, False):
        want = np.unique(x, equal_nan=equal_nan)
        np.testing.assert_array_equal(np.asarray(jnp.unique(jnp.asarray(x), equal_nan=equal_nan)),
                                      want)
    np.testing.assert_array_equal(np.asarray(jnp.unique(jnp.asarray(x), sorted=False)),
                                  np.unique(x))   # as JAX: always sorted


@pytest.mark.parametrize("equal_nan", [True, False])
def test_unique_equal_nan_under_jit_matches_eager(equal_nan):
    x = jnp.array([3.0, np.nan, 1.0, np.nan])
    f = lambda v: jnp.unique(v, size=4, fill_value=0.0, equal_nan=equal_nan,  # noqa: E731
                             return_counts=True)
    for got, want in zip(plax.jit(f)(x), f(x)):
        np.testing.assert_array_equal(np.asarray(got), np.asarray(want))


def test_argsort_dtype():
    x = np.array([3, 1, 2, 1])
    got = jnp.argsort(jnp.asarray(x), dtype=jnp.int8)
    assert got.dtype == np.int8
    np.testing.assert_array_equal(np.asarray(got), np.argsort(x, kind="stable"))
    got = jnp.argsort(jnp.asarray(x), dtype=jnp.int16, descending=True)
    assert got.dtype == np.int16
    np.testing.assert_array_equal(np.asarray(got), np.argsort(-x, kind="stable"))


def test_ravel_multi_index_dtype():
    idx = (np.array([0, 2, 1]), np.array([3, 0, 1]))
    got = jnp.ravel_multi_index(tuple(map(jnp.asarray, idx)), (3, 4), dtype=jnp.int16)
    assert got.dtype == np.int16
    np.testing.assert_array_equal(np.asarray(got), np.ravel_multi_index(idx, (3, 4)))
    with pytest.raises(ValueError, match="not an integer type"):
        jnp.ravel_multi_index(tuple(map(jnp.asarray, idx)), (3, 4), dtype=jnp.float32)
    with pytest.raises(ValueError, match="not large enough"):
        jnp.ravel_multi_index(tuple(map(jnp.asarray, idx)), (300, 400), dtype=jnp.int8,
                              mode="wrap")


def test_array_device():
    d = plax.devices()[0]
    x = jnp.array([1, 2], device=d)
    assert x.devices() == {d}
    np.testing.assert_array_equal(np.asarray(x), [1, 2])


# ---------------------------------------------------------------- jnp: names and refusals

def test_keyword_calls_by_jax_names():
    a, b = np.array([1.0, np.nan]), np.array([2.0, 0.5])
    np.testing.assert_array_equal(np.asarray(jnp.fmax(x1=jnp.asarray(a), x2=jnp.asarray(b))),
                                  np.fmax(a, b).astype(np.float32))
    assert int(jnp.gcd(x1=12, x2=18)) == 6
    assert float(jnp.trunc(x=-1.5)) == -1.0
    assert jnp.issubdtype(arg1=jnp.float32, arg2=jnp.floating)
    assert jnp.empty_like(prototype=jnp.ones((2, 3))).shape == (2, 3)
    assert jnp.broadcast_to(array=jnp.ones(3), shape=(2, 3)).shape == (2, 3)
    assert lax.reshape(operand=jnp.arange(6), new_sizes=(2, 3)).shape == (2, 3)
    assert lax.squeeze(array=jnp.ones((1, 3)), dimensions=(0,)).shape == (3,)
    assert plax.dtypes.issubdtype(a=jnp.int8, b=jnp.integer)   # jax.dtypes' names
    from plax.scipy.stats import gumbel_r, logistic
    assert float(logistic.ppf(x=0.5)) == 0.0
    np.testing.assert_allclose(float(gumbel_r.ppf(p=0.5)), -np.log(np.log(2.0)), rtol=1e-6)


@pytest.mark.parametrize("name", ["add", "maximum", "logaddexp", "logical_and", "negative"])
def test_ufunc_out_and_where_only_none(name):
    fn = getattr(jnp, name)
    args = (jnp.ones(2),) * (1 if name == "negative" else 2)
    np.testing.assert_array_equal(np.asarray(fn(*args, out=None, where=None)),
                                  np.asarray(fn(*args)))
    with pytest.raises(NotImplementedError, match="out argument"):
        fn(*args, out=jnp.zeros(2))
    with pytest.raises(NotImplementedError, match="where argument"):
        fn(*args, where=True)


def test_out_none_accepted_and_arrays_refused():
    x = jnp.eye(3)
    assert float(jnp.trace(x, out=None)) == 3.0
    assert float(jnp.einsum("ii", x, out=None)) == 3.0
    np.testing.assert_array_equal(np.asarray(jnp.isposinf(jnp.array([np.inf, 1.0]), out=None)),
                                  [True, False])
    for call in (lambda: jnp.trace(x, out=jnp.zeros(())),
                 lambda: jnp.einsum("ii", x, out=jnp.zeros(())),
                 lambda: jnp.isneginf(x, out=jnp.zeros((3, 3), bool))):
        with pytest.raises(NotImplementedError, match="'out' argument"):
            call()


def _out_calls(np_, x, b, i, m):
    """Every function of jnp taking ``out=`` with small arguments (``np_`` the namespace: plax's
    jnp or JAX's), and the name its refusal names (JAX names the reduction a nan-variant
    or alias runs)."""
    calls = {n: (getattr(np_, n), (x, x), n)
             for n in ("add logaddexp logaddexp2 maximum minimum multiply subtract "
                       "outer").split()}
    calls.update({n: (getattr(np_, n), (b, b), n) for n in
                  "bitwise_and bitwise_or bitwise_xor logical_and logical_or logical_xor".split()})
    alias = {"amax": "max", "amin": "min", "nanmax": "max", "nanmin": "min", "nansum": "sum",
             "nanprod": "prod", "around": "round"}
    calls.update({n: (getattr(np_, n), (x,), alias.get(n, n)) for n in
                  ("all amax amin any argmax argmin around cumprod cumsum isneginf isposinf max "
                   "mean min modf nanargmax nanargmin nancumprod nancumsum nanmax nanmean nanmin "
                   "nanprod nanstd nansum nanvar negative prod ptp round std sum var").split()})
    calls.update(choose=(np_.choose, (i, [x, x]), "choose"),
                 compress=(np_.compress, (b, x), "compress"),
                 einsum=(np_.einsum, ("i->", x), "einsum"), stack=(np_.stack, ([x, x],), "stack"),
                 take=(np_.take, (x, i), "take"), trace=(np_.trace, (m,), "trace"),
                 method_trace=(lambda v, out: v.trace(out=out), (m,), "trace"),
                 method_std=(lambda v, out: v.std(out=out), (x,), "std"),
                 method_ptp=(lambda v, out: v.ptp(out=out), (x,), "ptp"))
    return calls


def _refusal(call, args, out):
    try:
        call(*args, out=out)
    except Exception as e:  # noqa: BLE001 (the type is what is compared)
        return type(e), str(e)
    return None, ""


def test_every_out_refusal_is_jaxs():
    # NotImplementedError naming the function (a ufunc object's call names the ufunc), for
    # every jnp function that takes out=; the quantile family's is ValueError (as JAX's)
    x, b = jnp.array([1.0, 2.0, 3.0]), jnp.array([True, False, True])
    i, m = jnp.array([0, 1, 0]), jnp.ones((2, 2))
    out = np.zeros(3, np.float32)
    for name, (call, args, named) in _out_calls(jnp, x, b, i, m).items():
        kind, message = _refusal(call, args, out)
        assert kind is NotImplementedError, (name, kind, message)
        assert f"jnp.{named} " in message or f"'{named}'>" in message, (name, message)
    for name in ("median", "nanmedian", "quantile", "percentile"):
        args = (x,) if "median" in name else (x, 0.5)
        assert _refusal(getattr(jnp, name), args, out)[0] is ValueError
    f = jnp.frompyfunc(lambda u, v: u + v, 2, 1, identity=0)
    for call in (lambda: f(x, x, out=out), lambda: f.accumulate(x, out=out),
                 lambda: f.reduce(x, out=out)):
        with pytest.raises(NotImplementedError, match="out argument of"):
            call()
    assert float(jnp.outer(x, x, out=None)[1, 2]) == 6.0


def test_out_refusal_types_as_jax():
    jax = pytest.importorskip("jax")
    args = (np.array([1.0, 2.0, 3.0], np.float32), np.array([True, False, True]),
            np.array([0, 1, 0], np.int32), np.ones((2, 2), np.float32))
    ours = _out_calls(jnp, *(jnp.asarray(a) for a in args))
    theirs = _out_calls(jax.numpy, *(jax.numpy.asarray(a) for a in args))
    out = np.zeros(3, np.float32)
    for name in ours:
        assert _refusal(*ours[name][:2], out)[0] is _refusal(*theirs[name][:2], out)[0], name


# ---------------------------------------------------------------- lax

@pytest.mark.parametrize("n, batch_size", [(5, 2), (6, 3), (3, 5), (4, 0)])
def test_map_batch_size_matches_a_loop(n, batch_size):
    # (batch_size 0, as JAX reads it: one batch of every slice, a plain vmap)
    xs = {"a": np.arange(n, dtype=np.float32), "b": np.ones((n, 2), np.float32)}
    f = lambda x: x["a"] * 2.0 + jnp.sum(x["b"])  # noqa: E731
    got = lax.map(f, {k: jnp.asarray(v) for k, v in xs.items()}, batch_size=batch_size)
    want = [xs["a"][i] * 2.0 + xs["b"][i].sum() for i in range(n)]
    np.testing.assert_allclose(np.asarray(got), want)
    with pytest.raises(ValueError, match="batch_size"):
        lax.map(f, xs, batch_size=-1)


@pytest.mark.parametrize("batch_size", [None, 0, 2, 7])
def test_map_leading_lengths_must_agree(batch_size):
    # (JAX raises a ValueError naming both lengths, batched or not)
    xs = {"a": jnp.zeros((5,)), "b": jnp.zeros((4, 2))}
    with pytest.raises(ValueError, match="5, 4"):
        lax.map(lambda x: x["a"], xs, batch_size=batch_size)
    with pytest.raises(ValueError, match="no values to scan over"):
        lax.map(lambda x: 1.0, (), batch_size=batch_size)


def test_map_batch_size_of_no_slices_is_empty():
    # (JAX returns the empty stacked result; there are neither whole chunks nor a remainder)
    xs = {"a": jnp.zeros((0,)), "b": jnp.zeros((0, 2))}
    got = lax.map(lambda x: (x["a"] * 2.0, x["b"]), xs, batch_size=2)
    assert [(y.shape, y.dtype) for y in got] == [((0,), np.float32), ((0, 2), np.float32)]


def test_fori_loop_unroll_same_values():
    body = lambda i, c: c * 2.0 + i  # noqa: E731
    want = lax.fori_loop(0, 5, body, 1.0)
    for unroll in (1, 2, True):
        assert float(lax.fori_loop(0, 5, body, 1.0, unroll=unroll)) == float(want)
    with pytest.raises(ValueError, match="statically known"):
        plax.jit(lambda n: lax.fori_loop(0, n, body, 1.0, unroll=2))(5)


def test_cond_and_switch_operand_keyword():
    assert int(lax.cond(True, lambda x: x + 1, lambda x: x - 1, operand=1)) == 2
    assert int(lax.switch(1, [lambda x: x + 1, lambda x: x - 1], operand=1)) == 0
    with pytest.raises(TypeError, match="no positional operands"):
        lax.cond(True, lambda x: x, lambda x: x, 1, operand=1)


def test_accuracy_accepted_values_unchanged():
    x = jnp.linspace(0.1, 2.0, 5)
    for acc in (lax.Tolerance(atol=1e-3), lax.AccuracyMode.HIGHEST):
        np.testing.assert_array_equal(np.asarray(lax.exp(x, accuracy=acc)),
                                      np.asarray(lax.exp(x)))
    with pytest.raises(NotImplementedError, match="accuracy"):
        lax.sin(x, accuracy="fast")


def test_lax_sharding_parameters_place_results():
    from plax.sharding import NamedSharding, PartitionSpec as P
    s = NamedSharding(plax.make_mesh((1,), ("x",)), P("x"))
    results = [lax.full((2,), 1.0, sharding=s),
               lax.full_like(jnp.ones(2), 2.0, sharding=s),
               lax.broadcast_in_dim(jnp.ones(2), (2,), (0,), out_sharding=s),
               lax.broadcasted_iota(np.int32, (2,), 0, out_sharding=s),
               lax.reduce_sum(jnp.ones((2, 3)), (1,), out_sharding=s),
               random.exponential(random.key(0), (2,), out_sharding=s)]
    for r in results:
        assert r.sharding == s
    np.testing.assert_array_equal(np.asarray(results[4]), [3.0, 3.0])
    np.testing.assert_array_equal(np.asarray(results[5]),
                                  np.asarray(random.exponential(random.key(0), (2,))))


def test_mul_out_dtype_converts_first():
    got = lax.mul(jnp.int8(3), jnp.int8(100), out_dtype=jnp.int32)
    assert got.dtype == np.int32 and int(got) == 300   # no int8 wrap-around
    assert lax.mul(jnp.float32(1.5), jnp.float32(2.0), out_dtype=jnp.float16).dtype == np.float16


def test_conv_transpose_use_consistent_padding():
    x = jnp.asarray(np.arange(10.0, dtype=np.float32).reshape(1, 5, 2))
    w = jnp.asarray(np.arange(24.0, dtype=np.float32).reshape(3, 2, 4) / 10)
    # forward padding (lo, hi) of a kernel of 3 pads the dilated input by (2 - lo, 2 - hi)
    got = lax.conv_transpose(x, w, (2,), ((0, 2),), use_consistent_padding=True)
    want = lax.conv_transpose(x, w, (2,), ((2, 0),))
    np.testing.assert_array_equal(np.asarray(got), np.asarray(want))
    # names mean the forward padding either way
    np.testing.assert_array_equal(
        np.asarray(lax.conv_transpose(x, w, (2,), "SAME", use_consistent_padding=True)),
        np.asarray(lax.conv_transpose(x, w, (2,), "SAME")))


# ---------------------------------------------------------------- jnp.linalg

def test_linalg_parameters():
    a = np.array([[2.0, 1.0, 0.0], [1.0, 3.0, 1.0], [0.0, 1.0, 4.0]], np.float32)
    low_rank = jnp.array([[1.0, 2.0], [2.0, 4.0]])
    assert int(jnp.linalg.matrix_rank(low_rank, hermitian=True)) == 1
    assert int(jnp.linalg.matrix_rank(jnp.asarray(a), hermitian=True)) == 3
    np.testing.assert_allclose(np.asarray(jnp.linalg.pinv(jnp.asarray(a), rcond=1e-3)),
                               np.linalg.pinv(a.astype(np.float64)), atol=1e-5)
    with pytest.raises(ValueError, match="only one of rtol and rcond"):
        jnp.linalg.pinv(jnp.asarray(a), 1e-3, rcond=1e-3)
    sign, logdet = jnp.linalg.slogdet(jnp.asarray(a), method="qr")
    want_sign, want_logdet = np.linalg.slogdet(a.astype(np.float64))
    assert float(sign) == want_sign
    np.testing.assert_allclose(float(logdet), want_logdet, rtol=1e-6)
    with pytest.raises(ValueError, match="Unknown slogdet method"):
        jnp.linalg.slogdet(jnp.asarray(a), method="cholesky")
    u, s, vh = jnp.linalg.svd(jnp.asarray(a), full_matrices=False, subset_by_index=(1, 3))
    np.testing.assert_allclose(np.asarray(s), np.linalg.svd(a)[1][1:3], rtol=1e-5)
    assert u.shape == (3, 2) and vh.shape == (2, 3)
    np.testing.assert_allclose(np.asarray(u * s @ vh),  # the rank-2 part of a
                               (lambda U, S, V: (U[:, 1:3] * S[1:3]) @ V[1:3])(
                                   *np.linalg.svd(a.astype(np.float64))), atol=1e-5)
    with pytest.raises(ValueError, match="cannot both be set"):
        jnp.linalg.svd(jnp.asarray(a), subset_by_index=(0, 2))


# ---------------------------------------------------------------- transforms and runtime

def test_linearize_has_aux():
    f = lambda x: (jnp.sin(x) * x, {"twice": x * 2})  # noqa: E731
    y, f_jvp, aux = plax.linearize(f, 0.7, has_aux=True)
    y_ref, t_ref = plax.jvp(lambda x: f(x)[0], (0.7,), (1.0,))
    np.testing.assert_allclose(float(y), float(y_ref))
    np.testing.assert_allclose(float(f_jvp(1.0)), float(t_ref), rtol=1e-6)
    np.testing.assert_allclose(float(aux["twice"]), 1.4, rtol=1e-6)


def test_checkpoint_static_argnames_and_removed_concrete():
    def f(x, n):
        for _ in range(n):   # Python control flow on n: it must stay static
            x = jnp.sin(x)
        return x
    g = plax.grad(plax.checkpoint(f, static_argnames="n"))(0.5, n=2)
    np.testing.assert_allclose(float(g), float(plax.grad(lambda x: f(x, 2))(0.5)), rtol=1e-6)
    with pytest.raises(NotImplementedError, match="concrete"):
        plax.checkpoint(f, concrete=False)


def test_vmap_sum_match_and_vjp_reduce_axes():
    xs = np.arange(3.0, dtype=np.float32)
    got = plax.vmap(lambda x: x * 2.0, out_axes=None, sum_match=True)(jnp.asarray(xs))
    assert float(got) == float((xs * 2).sum())
    with pytest.raises(ValueError, match="out_axes"):
        plax.vmap(lambda x: x * 2.0, out_axes=None)(jnp.asarray(xs))
    assert float(plax.vjp(jnp.sin, 0.0, reduce_axes=())[0]) == 0.0
    with pytest.raises(NotImplementedError, match="reduce_axes"):
        plax.vjp(jnp.sin, 0.0, reduce_axes=("i",))


def test_runtime_parameters():
    d = plax.devices()[0]
    with pytest.warns(DeprecationWarning, match="host_id"):
        assert plax.local_devices(host_id=0) == plax.local_devices()
    assert plax.process_index(backend=d.platform) == plax.process_index()
    assert plax.process_count(backend=d.platform) == plax.process_count()
    with pytest.raises(RuntimeError):
        plax.process_count(backend="no-such-backend")
    with plax.default_device(new_val=d):
        assert jnp.ones(1).devices() == {d}
    np.testing.assert_array_equal(np.asarray(plax.device_put(np.ones(2), src=d)), [1.0, 1.0])
    with pytest.raises(TypeError, match="compiler_options"):
        plax.jit(lambda x: x, compiler_options=["fast"])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert float(plax.jit(lambda x: x + 1, compiler_options={})(1.0)) == 2.0


# ---------------------------------------------------------------- against JAX, where installed

def test_same_values_as_jax():
    jax = pytest.importorskip("jax")
    jjnp = jax.numpy
    x = np.array([3.0, np.nan, 1.0, np.nan, 2.0], np.float32)
    np.testing.assert_array_equal(np.asarray(jnp.unique(jnp.asarray(x), equal_nan=False)),
                                  np.asarray(jjnp.unique(x, equal_nan=False)))
    y = np.arange(6.0, dtype=np.float32).reshape(2, 3)
    m = np.ones((2, 1), np.float32)
    np.testing.assert_allclose(np.asarray(jnp.std(jnp.asarray(y), axis=1, mean=jnp.asarray(m))),
                               np.asarray(jjnp.std(y, axis=1, mean=m)), rtol=1e-6)
    got = jnp.argsort(jnp.asarray(y[0]), dtype=jnp.float32)
    want = jjnp.argsort(y[0], dtype=jjnp.float32)
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(np.asarray(got), np.asarray(want))
    np.testing.assert_allclose(  # (sin's last digit is the math library's)
        np.asarray(lax.map(jnp.sin, jnp.asarray(x[[0, 2, 4]]), batch_size=2)),
        np.asarray(jax.lax.map(jjnp.sin, x[[0, 2, 4]], batch_size=2)), rtol=1e-6)
    for batch_size in (0, 4):   # one vmapped batch, in both
        np.testing.assert_array_equal(
            np.asarray(lax.map(lambda v: v * 2.0, jnp.asarray(x), batch_size=batch_size)),
            np.asarray(jax.lax.map(lambda v: v * 2.0, x, batch_size=batch_size)))


def test_debug_print_unformatted_templates_as_jax(capsys):
    jax = pytest.importorskip("jax")
    calls = [("{{}} {}", (0,), {}), ("a}}b {}", (np.arange(2),), {}), ("{{x}}", (), {}),
             ("loss", (1.5,), {"skip_format_check": True}), ("x: {}", (2,), {})]
    for mod in (jax, plax):
        for fmt, args, kw in calls:
            mod.debug.print(fmt, *args, **kw)
        mod.jit(lambda v: mod.debug.print("{{}} {}", v))(np.arange(2))
    out = capsys.readouterr().out.splitlines()
    assert out[:len(out) // 2] == out[len(out) // 2:]


def test_debug_print_format_check_and_partitioned(capsys):
    with pytest.raises(ValueError, match="Unused keyword arguments"):
        plax.debug.print("x = {x}", x=1, y=2)
    with pytest.raises(KeyError):
        plax.debug.print("x = {z}", x=1)
    with pytest.raises(ValueError, match="Unused positional arguments"):   # as JAX: no field
        plax.debug.print("loss", 1.0)
    plax.debug.print("x = {x}", x=1, y=2, skip_format_check=True)   # the check skipped
    plax.debug.print("x = {x}", x=3, partitioned=True)   # outside a sharded program: once
    assert capsys.readouterr().out == "x = 1\nx = 3\n"
    # checked (and passing) as JAX checks it; its first piece is the literal "{", not a
    # field, so, as JAX prints it, the template as written and then the argument
    plax.debug.print("{{}} {}", 0)
    assert capsys.readouterr().out == "{{}} {} 0\n"
    plax.debug.print("loss", 1.5, skip_format_check=True)   # (JAX: not dropped)
    plax.debug.print("", 2, skip_format_check=True)
    plax.debug.print("x: {}", 3)   # the first piece leads up to a field: formatted
    assert capsys.readouterr().out == "loss 1.5\n 2\nx: 3\n"
    with pytest.raises(ValueError, match="no keyword arguments"):  # (JAX: fails when run)
        plax.debug.print("{{}} {x}", x=1)
    jaxpr = plax.make_jaxpr(lambda v: plax.debug.print("v {v}", v=v, partitioned=True))(1.0)
    assert "partitioned=True" in str(jaxpr)


def test_canonicalize_dtype_allow_extended_dtype():
    key_dtype = random.key(0).dtype
    assert plax.dtypes.canonicalize_dtype(key_dtype, allow_extended_dtype=True) == key_dtype
    with pytest.raises(ValueError, match="allow_extended_dtype=False"):   # JAX's type
        plax.dtypes.canonicalize_dtype(key_dtype)
    with pytest.raises(TypeError):
        plax.dtypes.canonicalize_dtype("not a dtype")
    with pytest.raises(ValueError, match="Cannot convert_element_type from float32 to key"):
        lax.convert_element_type(jnp.ones(2), key_dtype)   # (JAX's ValueError too)
    assert plax.dtypes.canonicalize_dtype(np.float64, True) == jnp.zeros(1, float).dtype
