"""``jax.checkpoint_policies`` shaped as JAX 0.10.2's: each policy's ``policy=`` line in
``make_jaxpr(checkpoint(f, policy=...))`` is JAX's text (beside JAX where installed; a
JAX-free expectation otherwise), and each policy saves what it says (the residuals
``print_saved_residuals`` lists).
"""
from __future__ import annotations

import re

import pytest

import plax
import plax.numpy as jnp
from plax.ad_checkpoint import checkpoint_name, print_saved_residuals

CP = plax.checkpoint_policies

# name -> (make the policy from a checkpoint_policies namespace, the line plax prints)
_POLICIES = {
    "everything_saveable": (lambda cp: cp.everything_saveable,
                            "<function everything_saveable at 0xXXXXXXXXXXXX>"),
    "nothing_saveable": (lambda cp: cp.nothing_saveable,
                         "<function nothing_saveable at 0xXXXXXXXXXXXX>"),
    "dots_saveable": (lambda cp: cp.dots_saveable, "DotsSaveable(only_if_no_batch_dims=False)"),
    "checkpoint_dots": (lambda cp: cp.checkpoint_dots,
                        "DotsSaveable(only_if_no_batch_dims=False)"),
    "dots_with_no_batch_dims_saveable": (lambda cp: cp.dots_with_no_batch_dims_saveable,
                                         "DotsSaveable(only_if_no_batch_dims=True)"),
    "checkpoint_dots_with_no_batch_dims": (lambda cp: cp.checkpoint_dots_with_no_batch_dims,
                                           "DotsSaveable(only_if_no_batch_dims=True)"),
    "save_only_these_names": (lambda cp: cp.save_only_these_names("a"),
                              "SaveOnlyTheseNames(saveable_names=frozenset({'a'}))"),
    "save_any_names_but_these": (lambda cp: cp.save_any_names_but_these("a"),
                                 "SaveAnyNamesButThese(names=frozenset({'a'}))"),
    "save_anything_except_these_names": (
        lambda cp: cp.save_anything_except_these_names("a"),
        "<function save_anything_except_these_names.<locals>.<lambda> at 0xXXXXXXXXXXXX>"),
    "save_and_offload_only_these_names": (
        lambda cp: cp.save_and_offload_only_these_names(
            names_which_can_be_saved=["a"], names_which_can_be_offloaded=["b"],
            offload_src="device", offload_dst="pinned_host"),
        "<function save_and_offload_only_these_names.<locals>.policy at 0xXXXXXXXXXXXX>"),
    "save_from_both_policies": (
        lambda cp: cp.save_from_both_policies(cp.dots_saveable, cp.save_only_these_names("a")),
        "<function save_from_both_policies.<locals>.policy at 0xXXXXXXXXXXXX>"),
    "offload_dot_with_no_batch_dims": (
        lambda cp: cp.offload_dot_with_no_batch_dims("device", "pinned_host"),
        "<function offload_dot_with_no_batch_dims.<locals>.policy at 0xXXXXXXXXXXXX>"),
}


def _f(jx, np_, name):
    def f(x):
        y = name(np_.sin(x), "a")
        return np_.dot(y, y).sum()
    return f


def _policy_line(jx, np_, name, policy) -> str:
    text = str(jx.make_jaxpr(jx.checkpoint(_f(jx, np_, name), policy=policy))(np_.ones((3, 3))))
    (line,) = re.findall(r"^\s*policy=(.*)$", text, re.M)
    return line


@pytest.mark.parametrize("which", sorted(_POLICIES))
def test_policy_prints_as_jax(which):
    make, expected = _POLICIES[which]
    assert _policy_line(plax, jnp, checkpoint_name, make(CP)) == expected


def test_no_policy_prints_none():
    assert _policy_line(plax, jnp, checkpoint_name, None) == "None"


@pytest.mark.parametrize("which", sorted(_POLICIES))
def test_policy_text_beside_jax(which):
    jax = pytest.importorskip("jax", reason="compared with JAX where installed")
    import jax.ad_checkpoint  # noqa: F401
    make, _ = _POLICIES[which]
    ours = _policy_line(plax, jnp, checkpoint_name, make(CP))
    theirs = _policy_line(jax, jax.numpy, jax.ad_checkpoint.checkpoint_name,
                          make(jax.checkpoint_policies))
    assert ours == theirs


def test_namespace_names_match_jax():
    jax = pytest.importorskip("jax", reason="compared with JAX where installed")
    public = lambda ns: sorted(n for n in vars(ns) if not n.startswith("_"))  # noqa: E731
    assert public(CP) == public(jax.checkpoint_policies)


def _saved(policy, capsys) -> list[str]:
    def f(x):
        y = checkpoint_name(jnp.sin(x), "a")
        z = checkpoint_name(jnp.cos(y), "b")
        return jnp.sin(jnp.dot(z, z)).sum()
    print_saved_residuals(plax.checkpoint(f, policy=policy), jnp.ones((3, 3)))
    return capsys.readouterr().out.splitlines()


@pytest.mark.parametrize("which, n_saved", [
    ("everything_saveable", None), ("nothing_saveable", 1), ("dots_saveable", 2),
    ("save_only_these_names", 2), ("save_any_names_but_these", 2),
    ("save_and_offload_only_these_names", 3), ("save_from_both_policies", 3),
    ("offload_dot_with_no_batch_dims", 2)])  # as JAX 0.10.2 lists them
def test_policy_saves_what_it_names(which, n_saved, capsys):
    lines = _saved(_POLICIES[which][0](CP), capsys)
    everything = _saved(CP.everything_saveable, capsys)
    if n_saved is None:
        assert len(lines) > 3
    else:
        assert len(lines) == n_saved, lines  # the input, plus what the policy saves
    assert len(lines) <= len(everything)


def test_save_from_both_policies_refuses_non_bool_answers():
    policy = CP.save_from_both_policies(CP.save_and_offload_only_these_names(
        names_which_can_be_saved=["a"], names_which_can_be_offloaded=[], offload_src="device",
        offload_dst="pinned_host"), CP.dots_saveable)
    with pytest.raises(ValueError, match="should be a boolean"):
        plax.grad(plax.checkpoint(lambda x: checkpoint_name(jnp.sin(x), "a").sum(),
                                  policy=policy))(jnp.ones(3))


def test_overlapping_offload_names_raise():
    with pytest.raises(ValueError, match="should be exclusive"):
        CP.save_and_offload_only_these_names(names_which_can_be_saved=["a"],
                                             names_which_can_be_offloaded=["a"],
                                             offload_src="device", offload_dst="pinned_host")
