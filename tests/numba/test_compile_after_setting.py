"""``PLAX_NUMBA_COMPILE_AFTER``: how many runs make a cluster hot. A bad value is named in a
warning (it was once ignored silently), and a good one is honoured."""
import pytest


def test_unset_is_two(monkeypatch):
    from plax_numba import tiered
    monkeypatch.delenv("PLAX_NUMBA_COMPILE_AFTER", raising=False)
    assert tiered.compile_after() == 2


@pytest.mark.parametrize("value, want", [("1", 1), ("5", 5), ("0", 1), (" 3 ", 3)])
def test_integer_is_honoured(monkeypatch, value, want):
    from plax_numba import tiered
    monkeypatch.setenv("PLAX_NUMBA_COMPILE_AFTER", value)
    assert tiered.compile_after() == want


def test_bad_value_warns_and_keeps_the_default(monkeypatch):
    from plax_numba import tiered
    monkeypatch.setenv("PLAX_NUMBA_COMPILE_AFTER", "soon")
    with pytest.warns(UserWarning, match="'soon' for the environment variable PLAX_NUMBA_COMPILE_AFTER: expected an integer"):
        assert tiered.compile_after() == 2
