"""The entry point (``plax.plugins: cost_analysis = plax_cost_analysis.plugin``)."""
from plax.plugins import hookimpl


@hookimpl
def plax_plugins():
    import plax_cost_analysis
    from plax_cost_analysis import cli
    # ``cli.cost`` is the ``python -m plax cost`` subcommand (see plax.__main__)
    return {"experimental.cost_analysis": plax_cost_analysis, "cli.cost": cli.main}
