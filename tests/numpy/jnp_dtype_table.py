"""A representative table of plax.numpy expressions whose result dtype and weak type must be
JAX's: reductions of small integers, true division of integers, Python-scalar mixing, list
literals, arange and linspace variants, creation defaults, products, where.

Each entry is Python source evaluated with ``jnp`` bound to plax.numpy (or jax.numpy, when
``record_jax_dtypes.py`` records the expected results into ``jax_dtype_table.json``),
``np`` to NumPy and ``bf16`` to ml_dtypes.bfloat16.
"""

EXPRESSIONS = [
    # reductions: small integers widen in sum/prod, not in max/cumsum; means are floats
    "jnp.sum(np.ones(3, np.int8))", "jnp.sum(np.ones(3, np.uint8))", "jnp.sum(np.ones(3, bool))",
    "jnp.sum(np.ones(3, np.float16))", "jnp.sum(np.ones(3, bf16))", "jnp.prod(np.ones(3, np.int16))",
    "jnp.sum(np.ones(3, np.int8), dtype=np.int8)", "jnp.sum(np.ones(3, np.int8), promote_integers=False)",
    "jnp.max(np.ones(3, np.int8))", "jnp.mean(np.ones(3, np.int32))", "jnp.mean(np.ones(3, np.uint8))",
    "jnp.mean(np.ones(3, np.float16))", "jnp.mean(np.ones(3, bool))", "jnp.mean(np.ones(3, np.complex64))",
    "jnp.var(np.ones(3, np.int8))", "jnp.std(np.ones(3, np.complex64))", "jnp.cumsum(np.ones(3, np.int8))",
    "jnp.cumsum(np.ones(3, bool))", "jnp.cumprod(np.ones(3, np.uint16))", "jnp.argmax(np.ones(3))",
    "jnp.count_nonzero(np.ones(3))", "jnp.all(np.ones(3))", "jnp.sum(2)", "jnp.sum(2.5)",
    "jnp.mean(3)", "jnp.max(1.5)", "jnp.average(np.ones(3, np.int8))",
    # true and floor division of integers
    "jnp.asarray(np.arange(3, dtype=np.int32)) / 2", "jnp.asarray(np.arange(3, dtype=np.int8)) / 2",
    "jnp.asarray(np.arange(3, dtype=np.uint8)) / np.uint8(2)",
    "jnp.asarray(np.arange(3, dtype=np.int16)) // 2", "jnp.asarray(np.arange(3, dtype=np.int8)) % 2",
    "jnp.true_divide(1, 2)", "jnp.divide(np.int8(3), 2)", "jnp.floor_divide(7, 2)",
    "jnp.asarray(np.ones(2, bool)) / True",
    # Python scalars are weak; NumPy scalars and arrays are not
    "jnp.asarray(np.ones(3, np.uint8)) + 1", "jnp.asarray(np.ones(3, np.float16)) + 1.0",
    "jnp.asarray(np.ones(3, np.int8)) * 2.0", "jnp.asarray(np.ones(3, np.int8)) + np.int16(1)",
    "jnp.asarray(np.ones(3, np.float16)) + np.float32(1)", "jnp.asarray(np.ones(3, bf16)) + 1",
    "jnp.asarray(np.ones(3, np.float32)) + 1j", "jnp.asarray(np.ones(3, np.int32)) + 1j",
    "jnp.add(1, 2)", "jnp.add(1, 2.0)", "jnp.add(True, 1)", "jnp.add(1, 1j)", "jnp.add(True, False)",
    "jnp.asarray(1) + 1.0", "jnp.asarray(1.0) * 2", "jnp.float32(1) + 1", "jnp.int8(1) + 1000",
    "jnp.asarray(np.ones(2, np.uint8)) + np.ones(2, np.int8)",
    "jnp.asarray(np.ones(2, np.uint32)) + np.ones(2, np.int32)",
    "jnp.asarray(np.ones(2, np.float16)) + np.ones(2, bf16)",
    "jnp.asarray(np.ones(2, np.int32)) ** 2", "2 ** jnp.arange(3)", "jnp.arange(3) ** 2.0",
    "jnp.maximum(np.ones(2, np.int8), 1.5)", "jnp.less(np.ones(2, np.int8), 1.5)",
    "jnp.equal(1, 2)", "-jnp.asarray(1.5)", "abs(jnp.asarray(-2))", "jnp.asarray(3) > 2",
    # unary functions of integers and Python scalars
    "jnp.sqrt(4)", "jnp.exp(np.int8(1))", "jnp.sin(np.ones(2, np.uint8))", "jnp.round(2.5)",
    "jnp.floor(3)", "jnp.isnan(1.0)", "jnp.real(1j)", "jnp.abs(np.ones(2, np.complex64))",
    "jnp.log2(8)", "jnp.rint(np.int8(3))", "jnp.square(np.ones(2, bool))",
    "jnp.clip(np.ones(2, np.int8), 0, 1)", "jnp.nan_to_num(1.5)", "jnp.isclose(1.0, 1.0)",
    # list literals and scalars
    "jnp.array([1, 2.0])", "jnp.array([1, 2])", "jnp.array(1)", "jnp.array(1.0)", "jnp.array([True])",
    "jnp.array([1, 1j])", "jnp.asarray(2.5)", "jnp.array(np.float64(1))", "jnp.array([np.int8(1), 2])",
    "jnp.array([np.float16(1), 2.5])", "jnp.array([[1, 2], [3, 4]], dtype=np.int8)",
    "jnp.array(np.arange(3))", "jnp.array([])", "jnp.asarray(np.ones(2, bf16))",
    # arange and linspace
    "jnp.arange(5)", "jnp.arange(5.0)", "jnp.arange(0, 1, 0.25)", "jnp.arange(np.int8(4))",
    "jnp.arange(3, dtype=np.uint8)", "jnp.arange(2, 10, 3)", "jnp.arange(1, 2.5)",
    "jnp.arange(np.float16(3))", "jnp.arange(5, dtype=float)",
    "jnp.linspace(0, 1, 5)", "jnp.linspace(0, 10, 5, dtype=np.int32)",
    "jnp.linspace(np.float16(0), 1, 3)", "jnp.linspace(0, 1, 4, dtype=bf16)",
    "jnp.linspace(np.int8(0), 5, 3)", "jnp.linspace(0, 1, 3, retstep=True)",
    "jnp.linspace(np.zeros(2, np.float32), 1, 3)", "jnp.logspace(0, 1, 3)", "jnp.geomspace(1, 8, 4)",
    # creation defaults
    "jnp.zeros(3)", "jnp.ones((2,), dtype=int)", "jnp.full(3, 1)", "jnp.full(3, 1.5)",
    "jnp.full(3, np.int8(1))", "jnp.full(2, True)", "jnp.zeros_like(2.0)", "jnp.ones_like(3)",
    "jnp.ones_like(np.ones(2, np.int8))", "jnp.full_like(np.ones(2, np.int8), 2.7)", "jnp.eye(2)",
    "jnp.identity(2, dtype=bool)", "jnp.tri(2)", "jnp.empty(2)", "jnp.indices((2,))",
    "jnp.meshgrid(np.arange(2), np.arange(3.0))",
    # products and selection
    "jnp.dot(np.ones(2, np.int8), np.ones(2, np.int8))", "jnp.dot(np.ones(2, bool), np.ones(2, bool))",
    "jnp.matmul(np.ones((2, 2), np.float16), np.ones((2, 2), bf16))",
    "jnp.einsum('i,i->', np.ones(2, np.int8), np.ones(2, np.float16))",
    "jnp.outer(np.ones(2, np.int8), 2)", "jnp.inner(np.ones(2), 1)",
    "jnp.where(True, 1, 2.0)", "jnp.where(np.array([True]), np.int8(1), 2)",
    "jnp.where(np.array([True]), 1, 2)", "jnp.where(np.array([True]), np.ones(1, np.uint8), 2.5)",
    "jnp.concatenate([np.ones(2, np.int8), np.ones(1, np.uint8)])",
    "jnp.stack([jnp.asarray(1.0), jnp.asarray(2.0)])", "jnp.asarray(2.0)[None]",
    "jnp.asarray(np.ones(3, np.int8)).at[0].set(2.5)", "jnp.asarray(np.ones(3, np.int8)).at[0].divide(2)",
    "jnp.sort(np.ones(2, bf16))", "jnp.nonzero(np.ones(2))", "jnp.searchsorted(np.ones(2), 1.0)",
    "jnp.asarray(np.ones(2, np.int8)).astype(float)", "jnp.asarray(2.5).astype(np.float32)",
]
