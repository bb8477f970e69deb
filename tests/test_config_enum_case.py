"""``plax.config.update`` on enum options spelt in another case: JAX 0.10.2 takes each word
exactly as spelt (``"ALLOW"`` for ``jax_numpy_rank_promotion`` is a ValueError) except for
``jax_send_traceback_to_runtime``, whose enum class looks a word up in any case. Checked
beside JAX where it is installed; plax's half runs without it.
"""
from __future__ import annotations

import pytest

import plax
from plax.config import _ENUMS

try:
    import jax
except ImportError:  # the JAX halves are skipped
    jax = None


def _other_cases(word: str) -> list[str]:
    return sorted({word.upper(), word.lower(), word.capitalize()} - {word})


_CASES = [(name, choice, other) for name, (choices, _) in sorted(_ENUMS.items())
          for choice in choices[:2] for other in _other_cases(choice)]


@pytest.fixture
def restore(request):
    saved = dict(plax.config._values)
    yield
    for k, v in saved.items():
        if plax.config._values[k] != v:
            plax.config.update(k, v)


def _jax_outcome(name: str, value: str):
    """What ``jax.config.update(name, value)`` does: ``("ok", value read back)`` or the
    exception's type; the old value is put back."""
    old = getattr(jax.config, name)
    try:
        jax.config.update(name, value)
    except Exception as e:  # noqa: BLE001 (its type is what is compared)
        return type(e)
    got = getattr(jax.config, name)
    jax.config.update(name, old)
    return "ok", getattr(got, "value", got)


@pytest.mark.parametrize("short,choice,value", _CASES)
def test_enum_words_in_another_case_are_refused_as_jax_refuses_them(short, choice, value,
                                                                    restore):
    name = "jax_" + short
    if short == "send_traceback_to_runtime":  # JAX's one option of any case
        plax.config.update(name, value)
        assert plax.config.read(name) == choice
        want = ("ok", choice)
    else:
        with pytest.raises(ValueError) as info:
            plax.config.update(name, value)
        message = str(info.value)
        assert name in message and f"got {value} of type" in message
        assert str(list(_ENUMS[short][0])) in message
        assert plax.config.read(name) != value
        want = ValueError
    plax.config.update(name, choice)  # the word as spelt is taken
    assert plax.config.read(name) == choice
    if jax is not None and hasattr(jax.config, name):
        assert _jax_outcome(name, value) == want
