"""Every name a plax module lists in ``__all__`` exists, so ``from MODULE import *`` works (a
name left in ``__all__`` after its function moved made it raise AttributeError). The modules
are imported in a child interpreter: importing all of them here would load lazily loaded
families into the test session."""
from __future__ import annotations

from subprocess_util import last_json, run_python

_CHILD = r"""
import importlib, json, pkgutil
import plax
missing = {}
for info in pkgutil.walk_packages(plax.__path__, "plax."):
    # (not the command line's entry, nor the kit's test modules, which need pytest's plugins)
    if info.name == "plax.__main__" or info.name.startswith("plax.testing.conformance."):
        continue
    module = importlib.import_module(info.name)
    absent = [n for n in getattr(module, "__all__", ()) if not hasattr(module, n)]
    if absent:
        missing[info.name] = absent
print(json.dumps(missing))
"""


def test_every_name_in_every_modules_all_exists():
    missing = last_json(run_python(_CHILD, timeout=300))
    assert missing == {}, f"__all__ names what the module lacks: {missing}"
