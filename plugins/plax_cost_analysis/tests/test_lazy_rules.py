"""Plugin discovery exports plax-cost-analysis without loading its rules (which import every
module of ``plax.lax``); the first use loads them, through the package or its modules alike.
Each check runs in a fresh interpreter: this session has loaded the rules already."""
from __future__ import annotations

import json
import subprocess
import sys

_PROBE = """
import json, sys
import plax
from plax import plugins
plugins.registry()
found = {{"discovered": "cost_analysis" in [r.name for r in plugins.registry().records
                                            if r.status == "loaded"],
          "rules after discovery": "plax_cost_analysis.rules" in sys.modules}}
{use}
found["rules after use"] = "plax_cost_analysis.rules" in sys.modules
print(json.dumps(found))
"""


def _probe(use: str) -> dict:
    proc = subprocess.run([sys.executable, "-c", _PROBE.format(use=use)],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_discovery_leaves_the_rules_unloaded_and_first_use_loads_them():
    # jaxpr_cost imported from its module, not through the package: without the rules, sin
    # would count bytes only (0 transcendentals)
    found = _probe("import plax.numpy as jnp\n"
                   "from plax_cost_analysis.analysis import jaxpr_cost\n"
                   "cost = jaxpr_cost(plax.make_jaxpr(jnp.sin)(jnp.ones(3)))\n"
                   "assert cost['transcendentals'] == 3.0, cost\n"
                   "cost = plax.jit(jnp.sin).lower(jnp.ones(3)).cost_analysis()\n"
                   "assert cost['transcendentals'] == 3.0, cost\n")
    assert found == {"discovered": True, "rules after discovery": False,
                     "rules after use": True}


def test_package_names_resolve_on_first_use():
    import plax_cost_analysis
    assert set(plax_cost_analysis.__all__) <= set(dir(plax_cost_analysis))
    assert plax_cost_analysis.cost_of is plax_cost_analysis.analysis.cost_of
    assert "threefry2x32" in plax_cost_analysis.bytes_only_primitives()
    try:
        plax_cost_analysis.no_such_name
    except AttributeError as err:
        assert "no_such_name" in str(err)
    else:
        raise AssertionError("an unknown name must raise AttributeError")
