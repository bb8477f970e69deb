"""The conformance kit: a backend's acceptance test, shipped with plax.

    pytest --pyargs plax.testing.conformance --plax-backend=NAME

runs every check on backend ``NAME`` (repeat the option for several; without it, every
installed backend), on each of its devices. See README.md beside this file for what is
checked, ``plugin.py`` for the options, and ``harness.py`` for the checks.
"""
