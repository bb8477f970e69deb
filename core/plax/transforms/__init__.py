"""The transformations (jit, grad/jvp/vjp, vmap, checkpoint, custom derivatives, ...): one
module each. Importing this package loads none of them."""
