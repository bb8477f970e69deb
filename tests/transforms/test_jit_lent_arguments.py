"""Large NumPy arguments of a jitted call are lent to the backend, not copied
(plax.transforms.call.lend_buffers), and no result may alias them."""
from __future__ import annotations

import numpy as np
import pytest

import plax
from plax import numpy as jnp
from plax.transforms.call import LEND_MIN_BYTES, lend_buffers, unlent_outputs

BIG = LEND_MIN_BYTES // 4  # float32 elements in a lendable argument


@pytest.mark.parametrize("fn", [
    lambda x: x,                                  # the argument itself
    lambda x: x.reshape(-1, 16).T,                # a transposed view
    lambda x: x[8:24],                            # a slice
    lambda x: (x.reshape(-1, 16), x * 2.0),       # a reshape beside a computed result
], ids=["identity", "transpose", "slice", "reshape"])
def test_results_never_alias_a_lent_argument(fn):
    a = np.arange(BIG, dtype=np.float32)
    out = plax.jit(fn)(a)
    leaves = plax.tree_util.tree_leaves(out)
    before = [np.asarray(o).copy() for o in leaves]
    a += 1.0  # the caller reuses their buffer
    for o, b in zip(leaves, before):
        np.testing.assert_array_equal(np.asarray(o), b)
    want = plax.tree_util.tree_leaves(plax.jit(fn)(jnp.asarray(a - 1.0)))
    for o, w in zip(leaves, want):
        np.testing.assert_array_equal(np.asarray(o), np.asarray(w))


def test_which_arguments_are_lent():
    device = plax.devices()[0]
    big = np.ones(BIG, np.float32)
    small = np.ones(8, np.float32)
    strided = np.ones(2 * BIG, np.float32)[::2]
    wide = np.ones(BIG, np.float64)  # becomes float32 (x64 off): converted, a copy
    leaves = [big, small, strided, wide]
    avals = [plax.core.get_aval(jnp.asarray(x)) for x in leaves]
    bufs, lent = lend_buffers(leaves, device, avals)
    put_keeps_host = device.backend.put(big, device) is big
    assert [b is x for b, x in zip(bufs, leaves)] == [put_keeps_host, False, False, False]
    assert lent == ([big] if put_keeps_host else [])
    for b, x in zip(bufs, leaves):
        np.testing.assert_array_equal(np.asarray(device.backend.to_host(b)),
                                      x.astype(np.float32))


def test_unlent_outputs_copies_only_what_shares_memory():
    a = np.arange(BIG, dtype=np.float32)
    other = np.zeros(4, np.float32)
    view = a[4:8]
    outs = unlent_outputs([view, other, a], [a])
    assert outs[1] is other
    assert outs[0] is not view and not np.may_share_memory(outs[0], a)
    assert outs[2] is not a and not np.may_share_memory(outs[2], a)
    np.testing.assert_array_equal(outs[0], view)
    assert unlent_outputs([view], [])[0] is view
