"""Operations on an array committed to one device under a set Explicit mesh of that device,
and where JAX 0.10.2 puts each result (recorded by ``record_device_typed.py`` in
``device_typed_jax.json``; ``test_explicit_sharding_device_typed.py`` checks plax against
the record, and against JAX where it is installed)."""
from __future__ import annotations

import numpy as np


def cases(lib, jnp, uncommitted) -> dict:
    """name -> a function of (c, ref, scalar c) computing one result (or a tuple);
    ``uncommitted``: an array made before the mesh was set."""
    host = np.ones((2, 2), np.float32)
    closing_over = lambda k: lib.jit(lambda a: (jnp.sin(a), k.sum()))
    return {
        "sin(c)": lambda c, r, s: jnp.sin(c),
        "jit(sin)(c)": lambda c, r, s: lib.jit(jnp.sin)(c),
        "c + 1": lambda c, r, s: c + 1,
        "c + c": lambda c, r, s: c + c,
        "jit(add)(c, c)": lambda c, r, s: lib.jit(lambda a, b: a + b)(c, c),
        "jit(add 1)(c)": lambda c, r, s: lib.jit(lambda a: a + 1)(c),
        "c * 2.0": lambda c, r, s: c * 2.0,
        "-c": lambda c, r, s: -c,
        "exp(c)": lambda c, r, s: jnp.exp(c),
        "matmul(host, c)": lambda c, r, s: jnp.matmul(host, c),
        "matmul(c, c)": lambda c, r, s: jnp.matmul(c, c),
        "c @ c": lambda c, r, s: c @ c,
        "dot(c, c)": lambda c, r, s: jnp.dot(c, c),
        "sum(c)": lambda c, r, s: jnp.sum(c),
        "c.reshape(4)": lambda c, r, s: c.reshape(4),
        "c.T": lambda c, r, s: c.T,
        "c[0]": lambda c, r, s: c[0],
        "c.astype(int32)": lambda c, r, s: c.astype(jnp.int32),
        "where(c > 0, c, 0.0)": lambda c, r, s: jnp.where(c > 0, c, 0.0),
        "c > 0": lambda c, r, s: c > 0,
        "maximum(c, 0.0)": lambda c, r, s: jnp.maximum(c, 0.0),
        "add(c, host)": lambda c, r, s: jnp.add(c, host),
        "c + uncommitted": lambda c, r, s: c + jnp.ones((2, 2)),
        "sin(ref[...])": lambda c, r, s: jnp.sin(r[...]),
        "ref[...] + 1": lambda c, r, s: r[...] + 1,
        "ref[...]": lambda c, r, s: r[...],
        "jit(sin of ref)(ref)": lambda c, r, s: lib.jit(lambda q: jnp.sin(q[...]))(r),
        "lax.sin(c)": lambda c, r, s: lib.lax.sin(c),
        "lax.add(c, 1.0)": lambda c, r, s: lib.lax.add(c, 1.0),
        "scalar + 1": lambda c, r, s: s + 1,
        "sin(scalar)": lambda c, r, s: jnp.sin(s),
        "zeros_like(c)": lambda c, r, s: jnp.zeros_like(c),
        "concatenate([c, c])": lambda c, r, s: jnp.concatenate([c, c]),
        "broadcast_to(c)": lambda c, r, s: jnp.broadcast_to(c, (3, 2, 2)),
        "c.at[0].set(1.0)": lambda c, r, s: c.at[0].set(1.0),
        "cumsum(c)": lambda c, r, s: jnp.cumsum(c),
        "sort(c)": lambda c, r, s: jnp.sort(c),
        "jit: (sin(c), c + 1)": lambda c, r, s: lib.jit(lambda a: (jnp.sin(a), a + 1))(c),
        "jit(host, c): sin(c)": lambda c, r, s: lib.jit(lambda a, b: jnp.sin(b))(host, c),
        "jit(host, c): host @ c": lambda c, r, s: lib.jit(lambda a, b: a @ b)(host, c),
        "jit(host, c): (sin(host), host + 1)": lambda c, r, s: lib.jit(
            lambda a, b: (jnp.sin(a), a + 1))(host, c),
        "jit(uncommitted, c): sin(uncommitted)": lambda c, r, s: lib.jit(
            lambda a, b: jnp.sin(a))(jnp.ones(2), c),
        "jit(c): c @ constant": lambda c, r, s: lib.jit(lambda a: a @ jnp.ones((2, 2)))(c),
        "jit(c): sin(sin(c)).sum()": lambda c, r, s: lib.jit(lambda a: jnp.sin(jnp.sin(a)).sum())(c),
        "jit(host, c): (sin(host), sin(c))": lambda c, r, s: lib.jit(
            lambda a, b: (jnp.sin(a), jnp.sin(b)))(host, c),
        "jit(host, c): sin(host), keep_unused": lambda c, r, s: lib.jit(
            lambda a, b: jnp.sin(a), keep_unused=True)(host, c),
        "jit(2.0, c): (sin(2.0), c.sum())": lambda c, r, s: lib.jit(
            lambda a, b: (jnp.sin(a), b.sum()))(2.0, c),
        "jit(on mesh, c): (sin(m), c.sum())": lambda c, r, s: lib.jit(
            lambda a, b: (jnp.sin(a), b.sum()))(jnp.ones(2), c),
        "jit(c): c @ host constant": lambda c, r, s: lib.jit(lambda a: a @ host)(c),
        "jit(): sin(host constant)": lambda c, r, s: lib.jit(lambda: jnp.sin(host))(),
        # bodies' results, operands committed and on the mesh in either order
        "scan(c carry, on mesh xs)": lambda c, r, s: lib.lax.scan(
            lambda k, x: (jnp.sin(k), jnp.cos(x)), c[0], jnp.ones((2, 2))),
        "scan(on mesh carry, c xs)": lambda c, r, s: lib.lax.scan(
            lambda k, x: (jnp.sin(k), jnp.cos(x)), jnp.ones(2), c),
        "fori_loop(c) closing over on mesh": lambda c, r, s: (lambda m: lib.lax.fori_loop(
            0, 2, lambda i, v: jnp.sin(v) * m.sum(), c))(jnp.ones(2)),
        "cond(c, on mesh)": lambda c, r, s: lib.lax.cond(
            True, lambda a, b: (jnp.sin(a), jnp.sin(b)), lambda a, b: (a, b), c, jnp.ones(2)),
        "jit(c, on mesh): dynamic_slice(c, on mesh)": lambda c, r, s: lib.jit(
            lambda a, i: lib.lax.dynamic_slice(a, (i, 0), (1, 2)))(c, jnp.ones((), np.int32)),
        "jit(c): (sin(c), constant on mesh .sum())": lambda c, r, s: closing_over(
            jnp.ones(2))(c),
        "jit(c): (sin(c), uncommitted constant .sum())": lambda c, r, s: closing_over(
            uncommitted)(c),
        # an operand split P('x') on the one-device mesh: its update must be typed alike
        "dynamic_update_slice(P('x'), P())": lambda c, r, s: lib.lax.dynamic_update_slice(
            _split(lib, jnp), jnp.zeros((1, 2)), (0, 0)),
        "dynamic_update_slice(P('x'), host)": lambda c, r, s: lib.lax.dynamic_update_slice(
            _split(lib, jnp), np.zeros((1, 2), np.float32), (0, 0)),
        "dynamic_update_slice(P('x'), c)": lambda c, r, s: lib.lax.dynamic_update_slice(
            _split(lib, jnp), c[:1], (0, 0)),
        "dynamic_update_slice(on mesh, host)": lambda c, r, s: lib.lax.dynamic_update_slice(
            jnp.ones((2, 2)) + 1, np.zeros((1, 2), np.float32), (0, 0)),
        "dynamic_update_slice(host, on mesh)": lambda c, r, s: lib.lax.dynamic_update_slice(
            host, jnp.zeros((1, 2)) + 1, (0, 0)),
        "dynamic_update_slice(on mesh, P() on mesh)": lambda c, r, s: lib.lax.dynamic_update_slice(
            jnp.ones((2, 2)) + 1, jnp.asarray(np.zeros((1, 2), np.float32)), (0, 0)),
        # computed from concrete values (no size): placed as the sized ones
        "unique(c)": lambda c, r, s: jnp.unique(c.reshape(4)),
        "nonzero(c)": lambda c, r, s: jnp.nonzero(c.reshape(4))[0],
        "unique(host)": lambda c, r, s: jnp.unique(host),
        # operations of values split P('x') over the one-device mesh keep its spec
        "sin(P('x'))": lambda c, r, s: jnp.sin(_split(lib, jnp)),
        "P('x') + P('x')": lambda c, r, s: (lambda a: a + a)(_split(lib, jnp)),
        "dynamic_update_slice(P('x'), P('x'))": lambda c, r, s: (
            lambda a: lib.lax.dynamic_update_slice(a, a, (0, 0)))(_split(lib, jnp)),
        "dynamic_slice(P('x'))": lambda c, r, s: lib.lax.dynamic_slice(
            _split(lib, jnp), (0, 0), (2, 1)),
        "jit(P('x'), P()): dynamic_update_slice": lambda c, r, s: lib.jit(
            lambda a, u: lib.lax.dynamic_update_slice(a, u, (0, 0)))(
            _split(lib, jnp), jnp.zeros((1, 2))),
        # the eager primal computation of a jvp is checked as eager operations are
        "jvp: dynamic_update_slice(c, on mesh made outside)": lambda c, r, s: (
            lambda z: lib.jvp(lambda a: lib.lax.dynamic_update_slice(a, z, (0, 0)), (c,),
                              (c,)))(jnp.zeros((1, 2))),
        "jvp: dynamic_update_slice(c, on mesh)": lambda c, r, s: lib.jvp(
            lambda a: lib.lax.dynamic_update_slice(a, jnp.zeros((1, 2)), (0, 0)), (c,), (c,)),
        "jvp: dynamic_update_slice(c, host)": lambda c, r, s: lib.jvp(
            lambda a: lib.lax.dynamic_update_slice(a, np.zeros((1, 2), np.float32), (0, 0)),
            (c,), (c,)),
        # a value split P('x'): made like it, copied, and refused beside a host value or
        # where JAX's own computation (sort, cumsum) wants it unsplit
        "zeros_like(P('x') vector)": lambda c, r, s: jnp.zeros_like(_split(lib, jnp)[:, 0]),
        "full_like(P('x'), 2.0)": lambda c, r, s: jnp.full_like(_split(lib, jnp), 2.0),
        "array(P('x'))": lambda c, r, s: jnp.array(_split(lib, jnp)),
        "asarray(P('x'))": lambda c, r, s: jnp.asarray(_split(lib, jnp)),
        "unique(P('x'))": lambda c, r, s: jnp.unique(_split(lib, jnp)),
        "nonzero(P('x'))": lambda c, r, s: jnp.nonzero(_split(lib, jnp)),
        "stack([P('x'), host])": lambda c, r, s: jnp.stack([_split(lib, jnp), host]),
        "concatenate([P('x'), host])": lambda c, r, s: jnp.concatenate([_split(lib, jnp), host]),
        # read by static ints and slices: on an axis of size 1 (every device holds the
        # value whole) JAX slices eagerly, as under a jit, where a split one is a gather
        "P('x')[:1]": lambda c, r, s: _split(lib, jnp)[:1],
        "P('x')[1]": lambda c, r, s: _split(lib, jnp)[1],
        "P('x')[::-1, 0]": lambda c, r, s: _split(lib, jnp)[::-1, 0],
        "P(None, 'x')[:, 0]": lambda c, r, s: lib.device_put(jnp.ones((2, 2)),
                                                            lib.P(None, "x"))[:, 0],
        **{k: v for name, f in _operations(lib, jnp).items()
           for k, v in ((name, f), ("jit: " + name, _jitted(lib, f)))},
        **{k: v for name, f in _gathers_and_scatters(lib, jnp).items()
           for k, v in ((name, f), ("jit: " + name, _jitted(lib, f)))},
    }


def _jitted(lib, f):
    return lambda c, r, s: lib.jit(lambda a: f(a, r, s))(c)


def _operations(lib, jnp) -> dict:
    """Primitives beyond the first cases, each of ``c`` (checked eagerly and inside a jit)."""
    lax = lib.lax
    idx = np.array([1, 0])
    host = np.arange(4, dtype=np.float32).reshape(2, 2)
    fori = lambda c: lax.fori_loop(0, 2, lambda i, v: jnp.sin(v), c)
    return {
        "c[idx] (gather)": lambda c, r, s: c[idx],
        "dynamic_slice": lambda c, r, s: lax.dynamic_slice(c, (0, 0), (1, 2)),
        "dynamic_update_slice(c, host)": lambda c, r, s: lax.dynamic_update_slice(
            c, np.zeros((1, 2), np.float32), (0, 0)),
        "dynamic_update_slice(c, on mesh)": lambda c, r, s: lax.dynamic_update_slice(
            c, jnp.zeros((1, 2)), (0, 0)),
        "pad(c, 1)": lambda c, r, s: jnp.pad(c, 1),
        "lax.pad": lambda c, r, s: lax.pad(c, 0.0, [(1, 1, 0), (0, 0, 0)]),
        "flip(c, 0)": lambda c, r, s: jnp.flip(c, 0),
        "argmax(c, 0)": lambda c, r, s: jnp.argmax(c, axis=0),
        "cumsum(c, 1)": lambda c, r, s: jnp.cumsum(c, axis=1),
        "select_n": lambda c, r, s: lax.select_n(c > 0, c, c),
        "where(c > 0, c, c)": lambda c, r, s: jnp.where(c > 0, c, c),
        "c.at[idx].set(2.0)": lambda c, r, s: c.at[idx].set(2.0),
        "c.at[0, 1].add(2.0)": lambda c, r, s: c.at[0, 1].add(2.0),
        "conv": lambda c, r, s: lax.conv(c[None, None], jnp.ones((1, 1, 1, 1)), (1, 1),
                                         "VALID"),
        "reduce_window sum": lambda c, r, s: lax.reduce_window(c, 0.0, lax.add, (1, 2),
                                                               (1, 1), "VALID"),
        "top_k": lambda c, r, s: lax.top_k(c, 1),
        "sort of 2 operands": lambda c, r, s: lax.sort((c, c), num_keys=1),
        "while (v * 2.0)": lambda c, r, s: lax.while_loop(lambda v: v.sum() < 100.0,
                                                          lambda v: v * 2.0, c),
        "fori_loop (sin)": lambda c, r, s: fori(c),
        "scan (zeros carry)": lambda c, r, s: lax.scan(
            lambda carry, x: (carry + x, jnp.sin(x)), jnp.zeros(2), c),
        "scan (sin, cos)": lambda c, r, s: lax.scan(
            lambda carry, x: (jnp.sin(carry), jnp.cos(x)), c[0], c),
        "cond(True, sin, cos)": lambda c, r, s: lax.cond(True, jnp.sin, jnp.cos, c),
        # a committed operand beside a host one (``host``), in each position
        "take(c, idx)": lambda c, r, s: jnp.take(c, idx, axis=0),
        "take(host, c idx)": lambda c, r, s: jnp.take(host, _index(c), axis=0),
        "host[c idx] (gather)": lambda c, r, s: jnp.asarray(host)[_index(c)],
        "dynamic_slice(host, c start)": lambda c, r, s: lax.dynamic_slice(
            host, (_index(c)[0], 0), (1, 2)),
        "dynamic_update_slice(host, c)": lambda c, r, s: lax.dynamic_update_slice(
            host, c[:1], (0, 0)),
        "dynamic_update_slice(c, host) at c start": lambda c, r, s: lax.dynamic_update_slice(
            c, host[:1], (_index(c)[0], 0)),
        "lax.pad(c, host value)": lambda c, r, s: lax.pad(c, np.float32(3), [(1, 0, 0)] * 2),
        "lax.pad(host, c value)": lambda c, r, s: lax.pad(host, s, [(1, 0, 0)] * 2),
        "flip(c) + host": lambda c, r, s: jnp.flip(c) + host,
        "lax.rev(c)": lambda c, r, s: lax.rev(c, (0,)),
        "argmax(c)": lambda c, r, s: jnp.argmax(c),
        "argmin(c, 1)": lambda c, r, s: jnp.argmin(c, axis=1),
        "cumsum(c) * host": lambda c, r, s: jnp.cumsum(c, axis=0) * host,
        "sort(c, 1)": lambda c, r, s: jnp.sort(c, axis=1),
        "sort of (c, host)": lambda c, r, s: lax.sort((c, host), num_keys=1),
        "sort of (host, c)": lambda c, r, s: lax.sort((host, c), num_keys=1),
        "where(c > 0, c, host)": lambda c, r, s: jnp.where(c > 0, c, host),
        "where(c > 0, host, host)": lambda c, r, s: jnp.where(c > 0, host, host),
        "where(host > 0, c, 0.0)": lambda c, r, s: jnp.where(host > 0, c, 0.0),
        "where(c > 0)": lambda c, r, s: jnp.where(c.reshape(4) > 0, size=4)[0],
        # an operand that does not type the result (indices, padding value) on the mesh
        "dynamic_slice(c, start on mesh)": lambda c, r, s: lax.dynamic_slice(
            c, (jnp.ones((), np.int32), 0), (1, 2)),
        "dynamic_update_slice(c, c, start on mesh)": lambda c, r, s: lax.dynamic_update_slice(
            c, c[:1], (jnp.ones((), np.int32), 0)),
        "lax.pad(c, c + c value)": lambda c, r, s: lax.pad(c, (c + c)[0, 0], [(1, 0, 0)] * 2),
    }


def _split(lib, jnp):
    """A (2, 2) array split ``P('x')`` over the set mesh."""
    return lib.device_put(jnp.ones((2, 2)), lib.P("x"))


def _gathers_and_scatters(lib, jnp) -> dict:
    """Gathers and scatters of an operand committed to one device (``c``), a host one or
    one on the mesh, with indices (and updates) of each of those kinds; then ``jax.numpy``
    functions built on them, of ``c``. (JAX's ``gather`` and scatter rules type their result
    on the set mesh whatever their operands' types, and its ``jax.numpy`` indexing
    normalises indices with elementwise operations that do too.)"""
    lax = lib.lax
    host = np.arange(4, dtype=np.float32).reshape(2, 2)
    gdn = lax.GatherDimensionNumbers(offset_dims=(1,), collapsed_slice_dims=(0,),
                                     start_index_map=(0,))
    sdn = lax.ScatterDimensionNumbers(update_window_dims=(1,), inserted_window_dims=(0,),
                                      scatter_dims_to_operand_dims=(0,))
    # operands, (n, 1) indices and (n, 2) updates: committed to c's device (forwarded from
    # c by rules that keep its type), host values, or placed on the mesh (P())
    operand = {"c": lambda c: c, "host": lambda c: host,
               "on mesh": lambda c: jnp.asarray(host)}
    index = {"c": lambda c: _committed_index(c)[:, None],
             "host": lambda c: np.array([[1], [0]], np.int32),
             "on mesh": lambda c: jnp.asarray(np.array([[1], [0]], np.int32))}
    update = {"c": lambda c: c.T, "host": lambda c: host,
              "on mesh": lambda c: jnp.asarray(host)}
    out = {}
    for (xn, x), (i_n, i) in ((a, b) for a in operand.items() for b in index.items()):
        out[f"lax.gather({xn}, {i_n} idx)"] = lambda c, r, s, x=x, i=i: lax.gather(
            x(c), i(c), gdn, (1, 2))
        out[f"lax.scatter_add({xn}, {i_n} idx, c)"] = lambda c, r, s, x=x, i=i: \
            lax.scatter_add(x(c), i(c), c.T, sdn)
    for un, u in update.items():
        out[f"lax.scatter(c, c idx, {un})"] = lambda c, r, s, u=u: lax.scatter(
            c, index["c"](c), u(c), sdn)
    flat = {"c": lambda c: _committed_index(c), "host": lambda c: np.array([1, 0], np.int32),
            "on mesh": lambda c: jnp.asarray(np.array([1, 0], np.int32))}
    numpy_ops = {
        "c[{} idx]": lambda c, i: c[i],
        "take(c, {} idx)": lambda c, i: jnp.take(c, i, axis=0),
        "take_along_axis(c, {} idx)": lambda c, i: jnp.take_along_axis(c, i[:, None], axis=0),
        "c.at[{} idx].get(clip)": lambda c, i: c.at[i].get(mode="clip"),
        "c.at[{} idx].get(fill)": lambda c, i: c.at[i].get(mode="fill", fill_value=0.0),
        "c.at[{} idx].set(2.0)": lambda c, i: c.at[i].set(2.0),
        "c.at[{} idx].add(c)": lambda c, i: c.at[i].add(c),
        "c.at[{} idx].multiply(2.0)": lambda c, i: c.at[i].multiply(2.0),
        "c.at[{} idx].min(c)": lambda c, i: c.at[i].min(c),
        "c.at[{} idx].max(2.0)": lambda c, i: c.at[i].max(2.0),
    }
    for name, f in numpy_ops.items():
        for i_n, i in flat.items():
            out[name.format(i_n)] = lambda c, r, s, f=f, i=i: f(c, i(c))
    sorted_c = lambda c: jnp.sort(c.reshape(4))
    out.update({
        "take(host, c idx)": lambda c, r, s: jnp.take(host, _committed_index(c), axis=0),
        "take_along_axis(host, c idx)": lambda c, r, s: jnp.take_along_axis(
            host, _committed_index(c)[:, None], axis=0),
        "c[c scalar idx]": lambda c, r, s: c[_committed_index(c)[0]],
        "c.at[c scalar idx].get()": lambda c, r, s: c.at[_committed_index(c)[0]].get(),
        "c.at[0].get(fill)": lambda c, r, s: c.at[0].get(mode="fill", fill_value=0.0),
        "c.at[0].set(c row)": lambda c, r, s: c.at[0].set(c[1]),
        "c.at[0:0].set(2.0)": lambda c, r, s: c.at[0:0].set(2.0),
        "c.at[0:0].set(c[:0])": lambda c, r, s: c.at[0:0].set(c[:0]),
        "c.at[:, 1:1].add(c)": lambda c, r, s: c.at[:, 1:1].add(c[:, :0]),
        "c.at[c scalar idx].set(2.0)": lambda c, r, s: c.at[_committed_index(c)[0]].set(2.0),
        "searchsorted(c, 2.0)": lambda c, r, s: jnp.searchsorted(sorted_c(c), 2.0),
        "searchsorted(c, host)": lambda c, r, s: jnp.searchsorted(
            sorted_c(c), np.array([0.5, 1.5], np.float32)),
        "searchsorted(host, c)": lambda c, r, s: jnp.searchsorted(
            np.array([0.5, 1.5], np.float32), c.reshape(4)),
        "digitize(c, host bins)": lambda c, r, s: jnp.digitize(
            c.reshape(4), np.array([0.5, 1.5], np.float32)),
        "bincount(c, length=3)": lambda c, r, s: jnp.bincount(
            c.reshape(4).astype(np.int32), length=3),
        "unique(c, size=3)": lambda c, r, s: jnp.unique(c.reshape(4), size=3),
        "nonzero(c, size=3)": lambda c, r, s: jnp.nonzero(c.reshape(4), size=3)[0],
        "argsort(c)": lambda c, r, s: jnp.argsort(c.reshape(4)),
        "cumsum(c, 0)": lambda c, r, s: jnp.cumsum(c, axis=0),
    })
    return out


def _committed_index(c):
    """Integer indices ``[1, 1]`` read from ``c`` by rules that keep its type (so committed
    to ``c``'s device, or typed as ``c`` inside a ``jit``)."""
    return c[0].astype(np.int32)


def _index(c):
    """Integer indices ``[1, 0]`` computed from ``c`` (so committed where ``c`` is)."""
    return (c[0] - c[:, 0]).astype(np.int32) + np.array([1, 0], np.int32)


def _described(v) -> str:
    s = v.sharding
    spec = getattr(s, "spec", None)
    return f"{type(s).__name__}{'' if spec is None else ' ' + str(spec)} committed={v.committed}"


def auto_cases(lib, jnp) -> dict:
    """name -> a function of (c, ref, scalar c) computing one result (or a tuple), under a
    set mesh of one Auto axis (results of ``c`` stay on its device, mostly)."""
    host = np.arange(4, dtype=np.float32).reshape(2, 2)
    return {
        "sin(c)": lambda c, r, s: jnp.sin(c),
        "c + 1": lambda c, r, s: c + 1,
        "unique(c)": lambda c, r, s: jnp.unique(c),
        "nonzero(c)": lambda c, r, s: jnp.nonzero(c.reshape(4)),
        "nonzero(c matrix)": lambda c, r, s: jnp.nonzero(c),
        "nonzero(host)": lambda c, r, s: jnp.nonzero(host),
        "c.at[0:0].set(2.0)": lambda c, r, s: c.at[0:0].set(2.0),
        "zeros_like(P('x'))": lambda c, r, s: jnp.zeros_like(_split(lib, jnp)),
        "array(P('x'))": lambda c, r, s: jnp.array(_split(lib, jnp)),
        "stack([P('x'), host])": lambda c, r, s: jnp.stack([_split(lib, jnp), host]),
        "sin(P('x'))": lambda c, r, s: jnp.sin(_split(lib, jnp)),
        "sum(P('x'))": lambda c, r, s: jnp.sum(_split(lib, jnp), axis=1),
        "unique(P('x'))": lambda c, r, s: jnp.unique(_split(lib, jnp)[:, 0]),
    }


def answers(lib, jnp) -> dict:
    """name -> where ``lib`` puts each result (or the exception it raises): the
    :func:`cases` under a mesh of one Explicit axis, then the :func:`auto_cases` (named
    ``"auto: ..."``) under one of an Auto axis."""
    AxisType = lib.sharding.AxisType
    device = lib.devices()[0]
    c = lib.device_put(jnp.ones((2, 2)), device)
    s = lib.device_put(jnp.float32(2.0), device)
    r = lib.new_ref(jnp.ones((2, 2)))
    uncommitted = jnp.ones(2)
    out = {}
    for prefix, axis_type, of in (("", AxisType.Explicit, lambda: cases(lib, jnp, uncommitted)),
                                  ("auto: ", AxisType.Auto, lambda: auto_cases(lib, jnp))):
        with lib.set_mesh(lib.make_mesh((1,), ("x",), axis_types=(axis_type,))):
            for name, f in of().items():
                try:
                    got = f(c, r, s)
                    out[prefix + name] = [_described(v) for v in lib.tree_util.tree_leaves(got)] \
                        if isinstance(got, (tuple, list)) else _described(got)
                except Exception as e:  # noqa: BLE001 - recorded as it is
                    out[prefix + name] = f"{type(e).__name__}: {e}"
    return out
