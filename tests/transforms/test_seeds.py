"""The seed tutorials' transform examples (../shared/seeds/001_*, 002_*, 003_*), run with
``import plax as jax`` / ``from plax import numpy as jnp``.

Each ``SEED_*`` string is the tutorial's code as written (the pmap/TPU parts left out).
Every departure is marked ``# plax:``: the imports; ``random.normal(key, shape)`` (plax's
PRNG is another component) replaced by NumPy draws of the same shapes; ``%timeit`` lines
run once; and a few added assignments that keep values the tutorial only prints. What the tutorials print is then checked against references
computed independently: hand-derived formulas, finite differences, NumPy float64 loops.
"""
from __future__ import annotations

import io
import contextlib

import numpy as np
import pytest


def _run(source: str, **extra) -> dict:
    """Executes tutorial code in a fresh namespace; returns the namespace (prints captured)."""
    namespace: dict = dict(extra)
    with contextlib.redirect_stdout(io.StringIO()) as out:
        exec(compile(source, "<seed>", "exec"), namespace)
    namespace["_stdout"] = out.getvalue()
    return namespace


def _normal(rng):
    """Stand-in for ``random.normal(key, shape)``: float32 standard normals from NumPy."""
    return lambda shape: rng.standard_normal(shape).astype(np.float32)


# ------------------------------------------------------------------ 001: grad, jit, vmap

SEED_001_GRAD = '''
import plax as jax                                   # plax: was `from autograd import grad`
from plax import grad
def f(x):return x**3 + 2*x
grad_f = grad(f) # 一阶导函数
grad_grad_f = grad(grad_f) # 两次grad组合,就是二阶导函数
grad_grad_grad_f = grad(grad_grad_f) # 三次grad组合,就是三阶导函数
print(grad_f(2.), grad_grad_f(2.), grad_grad_grad_f(2.))

from plax import numpy as jnp                        # plax: was `from jax import numpy as jnp`
from plax import grad                                # plax: was `from jax import grad`
def f(x):return jnp.sum(x * x) # 函数输出只能是标量
grad_f = grad(f)
result = grad_f(jnp.array([1, 2, 3.]))             # plax: `result =` added
'''


def test_seed_001_grad():
    ns = _run(SEED_001_GRAD)
    assert ns["_stdout"].split() == ["14.0", "12.0", "6.0"]   # f' = 3x^2+2, f'' = 6x, f''' = 6
    np.testing.assert_array_equal(ns["result"], [2.0, 4.0, 6.0])
    assert ns["result"].dtype == np.float32


SEED_001_JIT = '''
import numpy as np
from plax import numpy as jnp                        # plax: was `from jax import numpy as jnp`
from plax import jit                                 # plax: was `from jax import jit`
def norm(X):
    X = X - X.mean(0)
    return X / X.std(0)
norm_compiled = jit(norm)
X = jnp.array(np.random.rand(10000, 100))
eager, compiled = norm(X).block_until_ready(), norm_compiled(X).block_until_ready()  # plax: was %timeit

def selu(x, alpha=1.67, lmbda=1.05):
    return lmbda * jnp.where(x > 0, x, alpha * jnp.exp(x) - alpha)
selu_jit = jit(selu)
x = normal((1000000,))                               # plax: was random.normal(key, (1000000,))
s_eager, s_jit = selu(x).block_until_ready(), selu_jit(x).block_until_ready()  # plax: was %timeit
'''


def test_seed_001_jit():
    rng = np.random.default_rng(1)
    ns = _run(SEED_001_JIT, normal=_normal(rng))
    X = np.asarray(ns["X"], np.float64)
    want = (X - X.mean(0)) / X.std(0)
    np.testing.assert_allclose(ns["compiled"], want, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(ns["compiled"], ns["eager"], rtol=1e-6, atol=1e-6)
    x = np.asarray(ns["x"], np.float64)
    want = 1.05 * np.where(x > 0, x, 1.67 * np.exp(x) - 1.67)
    np.testing.assert_allclose(ns["s_jit"], want, rtol=1e-5, atol=1e-6)
    # a compiling backend may use its own exp (a few ulps): 1.67 * exp(x) - 1.67 keeps them absolute
    np.testing.assert_allclose(ns["s_jit"], ns["s_eager"], rtol=1e-6, atol=1e-6)


SEED_001_VMAP = '''
from plax import numpy as jnp                        # plax: was `from jax import numpy as jnp`
from plax import vmap                                # plax: was `from jax import vmap`
def vec_vec_dot(x, y):
    """vector-vector dot, ([a], [a]) -> []"""
    return jnp.dot(x, y)
x = jnp.array([1,1,2])
y = jnp.array([2,1,1,])
single = vec_vec_dot(x, y)                           # plax: `single =` added
mat_vec = vmap(vec_vec_dot, in_axes=(0, None), out_axes=0) # ([b,a], [a]) -> [b] (b is the mapped axis)
xx = jnp.array([[1,1,2], [1,1,2]])
batched = mat_vec(xx, y)                             # plax: `batched =` added

x = jnp.arange(8)
y = jnp.arange(8)
added = vmap(jnp.add)(x, y)                          # plax: `added =` added
'''


def test_seed_001_vmap():
    ns = _run(SEED_001_VMAP)
    assert int(ns["single"]) == 5 and ns["single"].dtype == np.int32
    np.testing.assert_array_equal(ns["batched"], [5, 5])
    assert ns["batched"].dtype == np.int32
    np.testing.assert_array_equal(ns["added"], np.arange(8) * 2)


# ------------------------------------------------------------------ 002: grad, vmap

SEED_002 = '''
import plax as jax                                   # plax: was `import jax`
import plax.numpy as jnp                             # plax: was `import jax.numpy as jnp`
import numpy as np
from plax import grad, jit, vmap                     # plax: was `from jax import ...`
from plax import device_put                          # plax: was `from jax import device_put`

print(jax.devices())
print(jax.devices('cpu'))

def sigmoid(x):
    return 1.0 / (1.0 + jnp.exp(-x))

def sum_logistic(x):
    return jnp.sum(sigmoid(x))

def derivative_sum_logistic(x):
    \'\'\'手工公式计算结果\'\'\'
    y = sigmoid(x)
    return y*(1 - y)

def first_finite_differences(f, x):
    \'\'\'手工计算结果\'\'\'
    eps = 1e-3
    return jnp.array([(f(x + eps * v) - f(x - eps * v)) / (2 * eps)
                      for v in jnp.eye(len(x))])


x_small = jnp.arange(3.)
derivative_fn = grad(sum_logistic)
print(derivative_fn(x_small))
print(derivative_sum_logistic(x_small))
print(first_finite_differences(sum_logistic, x_small))
from_grad = derivative_fn(x_small)                   # plax: these three lines added
from_formula = derivative_sum_logistic(x_small)
from_fd = first_finite_differences(sum_logistic, x_small)

def apply_matrix(v):
    return jnp.dot(mat, v)

def naively_batched_apply_matrix(v_batched):
    return jnp.stack([apply_matrix(v) for v in v_batched])

mat = normal((150, 100))                             # plax: was random.normal(key, (150, 100))
batched_x = normal((10, 100))                        # plax: was random.normal(key, (10, 100))

@jit
def batched_apply_matrix(v_batched):
    return jnp.dot(v_batched, mat.T)

@jit
def vmap_batched_apply_matrix(v_batched):
    return vmap(apply_matrix)(v_batched)

naive = naively_batched_apply_matrix(batched_x).block_until_ready()  # plax: were %timeit
manual = batched_apply_matrix(batched_x).block_until_ready()
auto = vmap_batched_apply_matrix(batched_x).block_until_ready()

x = device_put(batched_x)
'''


def test_seed_002():
    ns = _run(SEED_002, normal=_normal(np.random.default_rng(2)))
    assert "CpuDevice(id=0)" in ns["_stdout"]
    x = np.arange(3.0)
    s = 1 / (1 + np.exp(-x))
    np.testing.assert_allclose(ns["from_grad"], s * (1 - s), rtol=1e-6)
    np.testing.assert_allclose(ns["from_formula"], s * (1 - s), rtol=1e-6)
    np.testing.assert_allclose(ns["from_fd"], s * (1 - s), rtol=2e-2)  # float32 differences
    want = np.asarray(ns["batched_x"], np.float64) @ np.asarray(ns["mat"], np.float64).T
    for name in ("naive", "manual", "auto"):
        assert ns[name].shape == (10, 150)
        np.testing.assert_allclose(ns[name], want, rtol=1e-4, atol=1e-4)
    assert ns["x"].device == ns["jax"].devices()[0]


# ------------------------------------------------------------------ 003: jax for the impatient

SEED_003_AD = '''
import plax as jax                                   # plax: was `import jax`
from plax import numpy as jnp                        # plax: was `from jax import numpy as jnp, random`
import numpy as np # We import the standard NumPy library

def f(x):
  return jnp.dot(x.T,x)/2.0

v = jnp.ones((4,))
value_at_ones = f(v)                                 # plax: `value_at_ones =` added

v = normal((4,))                                     # plax: was random.normal(key,(4,))
print("Original v:")
print(v)
print("Gradient of f taken at point v")
print(jax.grad(f)(v)) # should be equal to v !
grad_at_v, v_random = jax.grad(f)(v), v              # plax: line added

def f(x):
  return jnp.multiply(x,x)/2.0

x = normal((5,))                                     # plax: was random.normal(key, (5,))
v = jnp.ones(5)
print("(x,f(x))")
print((x,f(x)))
print("jax.jvp(f, (x,),(v,))")
print(jax.jvp(f, (x,),(v,)))
jvp_out = jax.jvp(f, (x,),(v,))                      # plax: line added

(val, jvp_fun) = jax.vjp(f,x)
print("x = ", x)
print("v^T Jf(x) = ", jvp_fun(jnp.ones((5,)))[0])
vjp_out = jvp_fun(jnp.ones((5,)))[0]                 # plax: line added

mat = normal((15, 10))                               # plax: was random.normal(key, (15, 10))
batched_x = normal((5, 10)) # Batch size在维度0      # plax: was random.normal(key, (5, 10))
single = normal((10,))                               # plax: was random.normal(key, (10,))

def apply_matrix(v):
  return jnp.dot(mat, v)

print("Single apply shape: ", apply_matrix(single).shape)
print("Batched example shape: ", jax.vmap(apply_matrix)(batched_x).shape)
batched = jax.vmap(apply_matrix)(batched_x)          # plax: line added
'''


def test_seed_003_grad_jvp_vjp_vmap():
    ns = _run(SEED_003_AD, normal=_normal(np.random.default_rng(3)))
    assert float(ns["value_at_ones"]) == 2.0
    np.testing.assert_allclose(ns["grad_at_v"], ns["v_random"], rtol=1e-6)  # "should be v !"
    x = np.asarray(ns["x"], np.float64)
    primal, tangent = ns["jvp_out"]
    np.testing.assert_allclose(primal, x * x / 2, rtol=1e-6)
    np.testing.assert_allclose(tangent, x, rtol=1e-6)      # df(x).(1,...,1) = x
    np.testing.assert_allclose(ns["vjp_out"], x, rtol=1e-6)
    np.testing.assert_allclose(ns["val"], x * x / 2, rtol=1e-6)
    assert "Single apply shape:  (15,)" in ns["_stdout"]
    assert "Batched example shape:  (5, 15)" in ns["_stdout"]
    want = np.asarray(ns["batched_x"], np.float64) @ np.asarray(ns["mat"], np.float64).T
    np.testing.assert_allclose(ns["batched"], want, rtol=1e-5, atol=1e-5)


SEED_003_LINEAR_REGRESSION = '''
import plax as jax                                   # plax: was `import jax`
from plax import numpy as jnp                        # plax: was `from jax import numpy as jnp, random`

# Linear feed-forward.
def predict(W, b, x):
  return jnp.dot(x, W) + b

# Loss function: Mean squared error.
def mse(W, b, x_batched, y_batched):
  # Define the squared loss for a single pair (x,y)
  def squared_error(x, y):
    y_pred = predict(W, b, x)
    return jnp.inner(y-y_pred, y-y_pred) / 2.0
  # We vectorize the previous to compute the average of the loss on all samples.
  return jnp.mean(jax.vmap(squared_error)(x_batched, y_batched), axis=0)

# Set problem dimensions.
n_samples = 20
x_dim = 10
y_dim = 5

# Generate random ground truth W and b.
W = normal((x_dim, y_dim))                           # plax: was random.normal(k1, (x_dim, y_dim))
b = normal((y_dim,))                                 # plax: was random.normal(k2, (y_dim,))

# Generate samples with additional noise.
x_samples = normal((n_samples, x_dim))               # plax: was random.normal(key_sample, ...)
y_samples = predict(W, b, x_samples) + 0.1 * normal((n_samples, y_dim))  # plax: was random.normal(key_noise, ...)
print('x shape:', x_samples.shape, '; y shape:', y_samples.shape)

# Initialize estimated W and b with zeros.
W_hat = jnp.zeros_like(W)
b_hat = jnp.zeros_like(b)

# Ensure we jit the largest-possible jittable block.
@jax.jit
def update_params(W, b, x, y, lr):
  W, b = W - lr * jax.grad(mse, 0)(W, b, x, y), b - lr * jax.grad(mse, 1)(W, b, x, y)
  return W, b

learning_rate = 0.3  # Gradient step size.
print('Loss for "true" W,b: ', mse(W, b, x_samples, y_samples))
losses = []                                          # plax: added (records losses)
for i in range(101):
  # Perform one gradient update.
  W_hat, b_hat = update_params(W_hat, b_hat, x_samples, y_samples, learning_rate)
  if (i % 5 == 0):
    print(f"Loss step {i}: ", mse(W_hat, b_hat, x_samples, y_samples))
    losses.append(float(mse(W_hat, b_hat, x_samples, y_samples)))  # plax: added
true_loss = float(mse(W, b, x_samples, y_samples))   # plax: added

from plax import tree_util                           # plax: was `from jax import tree_util`

t = [1, {"k1": 2, "k2": (3, 4)}, 5]
squares = tree_util.tree_map(lambda x: x*x, t)       # plax: `squares =` added
t2 = tree_util.tree_map(lambda x: x*x, t)
sums = tree_util.tree_map(lambda x,y: x+y, t, t2)    # plax: `sums =` added

# Linear feed-forward that takes a params pytree.
def predict_pytree(params, x):
  return jnp.dot(x, params['W']) + params['b']

# Loss function: Mean squared error.
def mse_pytree(params, x_batched,y_batched):
  # Define the squared loss for a single pair (x,y)
  def squared_error(x,y):
    y_pred = predict_pytree(params, x)
    return jnp.inner(y-y_pred, y-y_pred) / 2.0
  # We vectorize the previous to compute the average of the loss on all samples.
  return jnp.mean(jax.vmap(squared_error)(x_batched, y_batched), axis=0)

# Initialize estimated W and b with zeros. Store in a pytree.
params = {'W': jnp.zeros_like(W), 'b': jnp.zeros_like(b)}
first_grads = jax.grad(mse_pytree)(params, x_samples, y_samples)  # plax: `first_grads =` added

# Always remember to jit!
@jax.jit
def update_params_pytree(params, learning_rate, x_samples, y_samples):
  params = jax.tree_map(
        lambda p, g: p - learning_rate * g, params,
        jax.grad(mse_pytree)(params, x_samples, y_samples))
  return params

learning_rate = 0.3  # Gradient step size.
print('Loss for "true" W,b: ', mse_pytree({'W': W, 'b': b}, x_samples, y_samples))
pytree_losses = []                                   # plax: added
for i in range(101):
  # Perform one gradient update.
  params = update_params_pytree(params, learning_rate, x_samples, y_samples)
  if (i % 5 == 0):
    print(f"Loss step {i}: ", mse_pytree(params, x_samples, y_samples))
    pytree_losses.append(float(mse_pytree(params, x_samples, y_samples)))  # plax: added
params_after_tree_map_loop = params                  # plax: added

# Using jax.value_and_grad instead:
params = {'W': jnp.zeros_like(W), 'b': jnp.zeros_like(b)}   # plax: restart, to compare loops
value_and_grad_losses = []                           # plax: added
loss_grad_fn = jax.value_and_grad(mse_pytree)
for i in range(101):
  # Note that here the loss is computed before the param update.
    loss_val, grads = loss_grad_fn(params, x_samples, y_samples)
    params = jax.tree_map(
        lambda p, g: p - learning_rate * g, params, grads)
    if (i % 5 == 0):
        print(f"Loss step {i}: ", loss_val)
        value_and_grad_losses.append(float(loss_val))  # plax: added
'''


def _numpy_gradient_descent(W, b, x, y, lr, steps):
    """The reference: the same training in NumPy float64 with hand-derived gradients of
    mean_i ||y_i - (x_i W + b)||^2 / 2."""
    W_hat, b_hat = np.zeros_like(W), np.zeros_like(b)
    for _ in range(steps):
        r = y - (x @ W_hat + b_hat)              # residuals, (n, y_dim)
        W_hat = W_hat + lr * x.T @ r / len(x)
        b_hat = b_hat + lr * r.mean(0)
    return W_hat, b_hat


@pytest.fixture(scope="module")
def regression():
    # NumPy seed 3 draws data whose first loss (10.0) is close to the tutorial's (10.97).
    return _run(SEED_003_LINEAR_REGRESSION, normal=_normal(np.random.default_rng(3)))


def test_seed_003_linear_regression_converges(regression):
    ns = regression
    losses = ns["losses"]
    assert len(losses) == 21 and 5.0 < losses[0] < 20.0     # starts near the tutorial's 10.97
    assert losses[-1] < 0.02                                  # tutorial: 0.0117 at step 100
    assert losses[-1] < ns["true_loss"]                       # 55 parameters fit 20 samples
    assert all(b <= a * 1.01 for a, b in zip(losses, losses[1:]))
    assert "x shape: (20, 10) ; y shape: (20, 5)" in ns["_stdout"]
    f64 = lambda a: np.asarray(a, np.float64)  # noqa: E731
    W_ref, b_ref = _numpy_gradient_descent(f64(ns["W"]), f64(ns["b"]), f64(ns["x_samples"]),
                                           f64(ns["y_samples"]), 0.3, 101)
    np.testing.assert_allclose(ns["W_hat"], W_ref, rtol=1e-3, atol=1e-4)
    np.testing.assert_allclose(ns["b_hat"], b_ref, rtol=1e-3, atol=1e-4)


def test_seed_003_pytree_examples_and_loops_agree(regression):
    ns = regression
    assert ns["squares"] == [1, {"k1": 4, "k2": (9, 16)}, 25]
    assert ns["sums"] == [2, {"k1": 6, "k2": (12, 20)}, 30]
    # the gradient at zero, from the formula: dW = -x^T y / n, db = -mean(y)
    g = ns["first_grads"]
    assert set(g) == {"W", "b"} and g["W"].shape == (10, 5)
    x, y = np.asarray(ns["x_samples"], np.float64), np.asarray(ns["y_samples"], np.float64)
    np.testing.assert_allclose(g["W"], -x.T @ y / 20, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(g["b"], -y.mean(0), rtol=1e-4, atol=1e-5)
    # the pytree loop trains exactly like the (W, b) loop
    np.testing.assert_allclose(ns["pytree_losses"], ns["losses"], rtol=1e-4)
    np.testing.assert_allclose(ns["params_after_tree_map_loop"]["W"], ns["W_hat"], rtol=1e-4,
                               atol=1e-6)
    # value_and_grad reports the loss before each update: its loss at step i+1 is the
    # tree_map loop's loss after step i, and both end with the same parameters
    vg, tm = ns["value_and_grad_losses"], ns["pytree_losses"]
    assert vg[0] > tm[0]
    np.testing.assert_allclose(ns["params"]["W"], ns["params_after_tree_map_loop"]["W"],
                               rtol=1e-4, atol=1e-6)
    np.testing.assert_allclose(vg[0], (y ** 2).sum(1).mean() / 2, rtol=1e-5)  # loss at zero
