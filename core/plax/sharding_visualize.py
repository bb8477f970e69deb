"""The text of ``jax.debug.visualize_array_sharding``: JAX 0.10's table, drawn without ``rich``.

JAX lays the blocks of a rank-1 or rank-2 array out as a grid of cells, one per block, each
naming the devices that hold it (``CPU 0,4`` for a replicated block), and sizes each cell by
the fraction of the array its block covers: ``scale`` times 10 lines for the whole height,
2.5 columns per line of width times the array's aspect ratio, at least ``min_width`` columns
and at most ``max_width``. ``rich`` then draws the grid with square box characters. This
module computes the same cells and draws them as ``rich`` does when the output is not a
colour terminal (where JAX's colours are off too), so the text is JAX's character for
character for tables that fit in ``max_width`` columns (wider ones ``rich`` squeezes; plax
does not).
"""
from __future__ import annotations

from typing import Sequence

#: rich's SQUARE box: corners, joints and lines
_TOP = ("┌", "┬", "┐")
_MID = ("├", "┼", "┤")
_BOTTOM = ("└", "┴", "┘")
_H, _V = "─", "│"


def _chunk(index, n: int) -> tuple[int, int]:
    """The block ``index`` (a slice or int) of a dimension of size ``n``: (start, size)."""
    if isinstance(index, slice):
        start, stop, _ = index.indices(n)
        return start, stop - start
    return int(index), 1


def sharding_table(shape: Sequence[int], sharding, *, scale: float = 1.0, min_width: int = 9,
                   max_width: int = 80) -> str:
    """The table JAX 0.10 prints for an array of ``shape`` placed by ``sharding``.

    Args:
      shape: the array's shape (rank 1 or 2).
      sharding: a :class:`plax.sharding.Sharding`.
      scale: the height of the whole table in units of 10 lines.
      min_width, max_width: the bounds of a cell's width, in columns.

    Returns:
      The table's lines joined by newlines (no trailing newline).

    Raises:
      ValueError: ``shape`` is not of rank 1 or 2 (JAX's message).

    Example:
      >>> print(sharding_table((4,), plax.sharding.SingleDeviceSharding(plax.devices()[0])))
      ┌───────┐
      │ CPU 0 │
      └───────┘
    """
    shape = tuple(shape)
    if len(shape) not in (1, 2):
        raise ValueError("`visualize_sharding` only works for shapes with 1 and 2 dimensions.")
    base_height = int(10 * scale)
    base_width = int(base_height * (shape[1] if len(shape) == 2 else 1) / shape[0])
    kind = next(iter(sharding.device_set)).platform.upper()
    starts: list[set] = [set(), set()]
    blocks: dict = {}  # (row start, column start) -> [devices, height fraction, width fraction]
    for device, index in sharding.devices_indices_map(shape).items():
        index = tuple(index) + (slice(None),) * (len(shape) - len(tuple(index)))
        if len(shape) == 2:
            (r, h), (c, w) = _chunk(index[0], shape[0]), _chunk(index[1], shape[1])
            key, fracs = (r, c), (h / shape[0], w / shape[1])
        else:
            c, w = _chunk(index[0], shape[0])
            key, fracs = (0, c), (None, w / shape[0])
        starts[0].add(key[0])
        starts[1].add(key[1])
        blocks.setdefault(key, [set(), *fracs])[0].add(device.id)
    rows, cols = sorted(starts[0]), sorted(starts[1])
    cells = []  # per row: (text, top, right, bottom, left) per column
    for r in rows:
        line = []
        for c in cols:
            ids, h_frac, w_frac = blocks[r, c]
            text = f"{kind} " + ",".join(map(str, sorted(ids)))
            width = min(max(int(w_frac * base_width * 2.5), min_width), max_width)
            height = 1 if h_frac is None else int(h_frac * base_height)
            left, extra = divmod(width - len(text) - 2, 2)
            top, extra_v = divmod(height - 2, 2)
            line.append((text, max(top, 0), max(left + extra, 0), max(top + extra_v, 0),
                         max(left, 0)))
        cells.append(line)
    col_widths = [max(len(t) + lp + rp for t, _, rp, _, lp in (row[k] for row in cells))
                  for k in range(len(cols))]

    def rule(ends) -> str:
        return ends[0] + ends[1].join(_H * w for w in col_widths) + ends[2]

    out = [rule(_TOP)]
    for k, row in enumerate(cells):
        height = max(top + 1 + bottom for _, top, _, bottom, _ in row)
        grid = []
        for (text, top, right, bottom, left), width in zip(row, col_widths):
            inner = width - left - right  # the text is centred in what the padding leaves
            spare = inner - len(text)
            body = " " * left + " " * (spare // 2) + text + " " * (spare - spare // 2) + \
                " " * right
            grid.append([" " * width] * top + [body] + [" " * width] * (height - top - 1))
        out.extend(_V + _V.join(col[i] for col in grid) + _V for i in range(height))
        out.append(rule(_MID if k < len(cells) - 1 else _BOTTOM))
    return "\n".join(out)
