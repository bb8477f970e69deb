"""Liveness: where each value of a jaxpr is read for the last time.

A compiling backend frees (or reuses) a buffer right after its last reader, so that large
intermediates do not stay alive until the function returns.
"""
from __future__ import annotations

from plax.core.jaxpr import Jaxpr, Var


def last_uses(jaxpr: Jaxpr) -> dict[Var, int]:
    """For each variable an equation reads, the index of the last equation reading it.

    Variables that are outputs of the jaxpr get ``len(jaxpr.eqns)``: they never die inside.

    Example:
      >>> jaxpr = plax.make_jaxpr(lambda x: jnp.sin(x) * x)(1.0).jaxpr
      >>> jaxpr
      { lambda ; a:f32[]. let b:f32[] = sin a; c:f32[] = mul b a in (c,) }
      >>> uses = last_uses(jaxpr)
      >>> a, b, c = jaxpr.invars[0], jaxpr.eqns[0].outvars[0], jaxpr.eqns[1].outvars[0]
      >>> uses[a], uses[b], uses[c]   # a and b are last read by eqn 1; c is the output
      (1, 1, 2)
    """
    last: dict[Var, int] = {}
    for i, eqn in enumerate(jaxpr.eqns):
        for v in eqn.invars:
            if isinstance(v, Var):
                last[v] = i
    for v in jaxpr.outvars:
        if isinstance(v, Var):
            last[v] = len(jaxpr.eqns)
    return last


def dead_after(jaxpr: Jaxpr) -> list[list[Var]]:
    """For each equation, the variables (not inputs of the jaxpr) that die right after it.

    Inputs are excluded: their buffers belong to the caller.
    """
    last = last_uses(jaxpr)
    inputs = set(jaxpr.invars) | set(jaxpr.constvars)
    dead: list[list[Var]] = [[] for _ in jaxpr.eqns]
    for v, i in last.items():
        if i < len(jaxpr.eqns) and v not in inputs:
            dead[i].append(v)
    for vs in dead:
        vs.sort(key=lambda v: v.count)
    return dead


def _primitives(*names: str) -> frozenset:
    from plax import lax
    return frozenset(getattr(lax, n) for n in names if hasattr(lax, n))


#: updates: their value is their first operand with some elements replaced
_UPDATES = ("dynamic_update_slice_p", "scatter_p", "scatter_add_p", "scatter_sub_p",
            "scatter_mul_p", "scatter_min_p", "scatter_max_p")
#: the primitives whose value a backend may hold as a view of their operand's buffer
_VIEWS = ("reshape_p", "squeeze_p", "expand_dims_p", "slice_p", "dynamic_slice_p",
          "transpose_p", "broadcast_in_dim_p", "rev_p", "copy_p", "bitcast_convert_type_p")


def reads_before_updates(jaxpr: Jaxpr) -> Jaxpr:
    """``jaxpr`` with every other reader of an update's operand scheduled before the update,
    where the reader does not depend on the update's result.

    An update (``dynamic_update_slice``, the ``scatter`` family) may write into its operand's
    buffer instead of a copy once nothing reads the operand, or a view of it (a reshape, a
    slice, ...), afterwards: a backend updating a
    loop carry in place (``x = x.at[i].set(v)`` in a ``fori_loop``) needs the step's reads of
    the old ``x`` before the write. Tracing often puts them after it: in
    ``new = c.at[i].add(v); return new, c[0]`` the read ``c[0]`` comes last. The schedule is
    the program's own order wherever it can be (a stable topological order, effects in
    their order); a reader that depends on the update (``new[i] + c[i]``) keeps the operand
    alive, and the update must copy.

    Args:
      jaxpr: the program (sub-jaxprs are not visited: a backend calls this on each body).

    Returns:
      ``jaxpr`` itself when the order does not change, else a new :class:`Jaxpr`.

    Example:
      >>> def step(c, i):
      ...     new = c.at[i].add(1.0)
      ...     return new, c[0]
      >>> j = plax.make_jaxpr(step)(jnp.zeros((3, 2)), 1).jaxpr
      >>> [e.primitive.name for e in j.eqns][-3:]
      ['scatter-add', 'slice', 'squeeze']
      >>> [e.primitive.name for e in reads_before_updates(j).eqns][-3:]
      ['slice', 'squeeze', 'scatter-add']
    """
    import heapq

    from plax.core.passes import dependency_graph
    eqns = jaxpr.eqns
    kinds, views = _primitives(*_UPDATES), _primitives(*_VIEWS)
    updates = [u for u, e in enumerate(eqns)
               if e.primitive in kinds and isinstance(e.invars[0], Var)]
    if not updates:
        return jaxpr
    readers, waiting = dependency_graph(eqns)
    added = False
    for u in updates:
        operand = eqns[u].invars[0]
        after, todo = {u}, [u]   # (the update and everything that depends on it)
        while todo:
            for r in readers[todo.pop()]:
                if r not in after:
                    after.add(r)
                    todo.append(r)
        held = {operand}   # (the operand and the values that may be views of it)
        for i, e in enumerate(eqns):
            if i in after or not any(isinstance(v, Var) and v in held for v in e.invars):
                continue
            if e.primitive in views:
                held.update(e.outvars)
            if i > u:
                readers[i].append(u)
                waiting[u] += 1
                added = True
    if not added:
        return jaxpr
    ready = [i for i, w in enumerate(waiting) if not w]
    heapq.heapify(ready)
    order: list[int] = []
    while ready:
        i = heapq.heappop(ready)
        order.append(i)
        for r in readers[i]:
            waiting[r] -= 1
            if not waiting[r]:
                heapq.heappush(ready, r)
    if len(order) < len(eqns) or order == list(range(len(eqns))):
        return jaxpr   # (a cycle: two updates of one operand, each read before the other)
    return Jaxpr(jaxpr.constvars, jaxpr.invars, jaxpr.outvars, [eqns[i] for i in order])
