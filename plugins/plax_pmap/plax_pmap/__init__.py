"""plax-pmap: multi-device plax as a transform plugin.

Installing this package (``pip install -e plugins/plax_pmap``) gives ``plax.pmap``,
``plax.shard_map`` and the collectives ``plax.lax.psum``, ``pmean``, ``pmax``, ``pmin``,
``all_gather``, ``all_to_all``, ``ppermute``, ``pshuffle``, ``psum_scatter``,
``axis_index`` and ``axis_size``. CPU devices (``PLAX_NUM_CPU_DEVICES=N``) run the
per-device program on one thread each; see docs/multi_device.md.
"""
__version__ = "0.1.0"
