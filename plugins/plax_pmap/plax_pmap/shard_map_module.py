"""``plax.experimental.shard_map``: the older home of ``shard_map`` (JAX's
``jax.experimental.shard_map``). The implementation loads on first use."""


def __getattr__(name: str):
    if name == "shard_map":
        from plax_pmap.api import shard_map
        return shard_map
    raise AttributeError(f"module 'plax.experimental.shard_map' has no attribute {name!r}")
