"""The core vocabulary: Primitive, ShapedArray, Trace/Tracer, Jaxpr and the transform registry."""
from plax.core.shaped_array import ShapedArray, ShapeDtypeStruct, short_dtype_name
from plax.core.registry import (register_rule, get_rule, has_rule, rule_table, new_transform,
                                transforms)
from plax.core.trace import (MainTrace, Trace, Tracer, EvalTrace, new_main, find_top_trace,
                             full_lower, bind_with_trace, get_aval, is_tracer, eager_region,
                             register_trace_context, trace_context, state as trace_state)
from plax.core.primitive import Primitive
from plax.core.jaxpr import Var, Literal, DropVar, JaxprEqn, Jaxpr, ClosedJaxpr
from plax.core.interpret import eval_jaxpr, jaxpr_as_fun
from plax.core.pretty_print import pp_jaxpr
from plax.core.typecheck import check_jaxpr, JaxprTypeError

__all__ = [
    "ShapedArray", "ShapeDtypeStruct", "short_dtype_name", "register_rule", "get_rule", "has_rule",
    "rule_table", "new_transform", "transforms", "MainTrace", "Trace", "Tracer", "EvalTrace",
    "new_main", "find_top_trace", "full_lower", "bind_with_trace", "get_aval", "is_tracer",
    "eager_region", "register_trace_context", "trace_context", "trace_state", "Primitive",
    "Var", "Literal", "DropVar", "JaxprEqn", "Jaxpr", "ClosedJaxpr", "eval_jaxpr",
    "jaxpr_as_fun", "check_jaxpr", "pp_jaxpr", "JaxprTypeError",
]
