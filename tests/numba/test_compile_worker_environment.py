"""The compile worker's environment is copied safely while another thread edits os.environ."""
import collections.abc

from plax_numba import compile_worker


class _DeletedMidCopy(collections.abc.Mapping):
    """An environment from which one variable disappears while the first copy reads it."""

    def __init__(self, data):
        self.data = dict(data)
        self.vanishing = "PLAX_NUMBA_SYNC"
        self.copies = 0

    def __iter__(self):
        self.copies += 1
        return iter(list(self.data))

    def __len__(self):
        return len(self.data)

    def __getitem__(self, key):
        if key == self.vanishing and self.copies == 1:
            del self.data[key]  # another thread popped it between listing and reading
            raise KeyError(key)
        return self.data[key]


def test_environment_copy_retries_when_a_variable_vanishes():
    environ = _DeletedMidCopy({"A": "1", "PLAX_NUMBA_SYNC": "1", "B": "2"})
    assert compile_worker._environment_copy(environ) == {"A": "1", "B": "2"}
    assert environ.copies == 2
