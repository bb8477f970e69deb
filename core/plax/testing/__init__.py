"""Testing tools shipped with plax.

:mod:`plax.testing.conformance` is the conformance kit every backend must pass::

    pytest --pyargs plax.testing.conformance --plax-backend=NAME

(``plax.test_util`` holds ``check_grads``, the finite-difference checker the kit uses.)
"""
