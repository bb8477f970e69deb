"""The primitive conformance suite: ``pytest tests/conformance --plax-backend=NAME`` is a
backend's acceptance test (see harness.py for what each check does)."""
