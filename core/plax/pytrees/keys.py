"""Key paths: the keys that name a leaf's position in a pytree (``[0]``, ``['a']``, ``.x``)."""
from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:  # pragma: no cover
    from typing import Any
    KeyPath = tuple[Any, ...]

_object_setattr = object.__setattr__

class _KeyBase:
    __slots__ = ("_v",)

    def __init__(self, value):
        _object_setattr(self, "_v", value)

    def __setattr__(self, name, value):
        raise AttributeError(f"{type(self).__name__} is immutable")

    def __eq__(self, other):
        if type(other) is not type(self):
            return False  # not NotImplemented: a foreign reflected __eq__ may raise
        # bool(): a key such as np.int64(1) compares to a NumPy bool.
        return self._v is other._v or bool(self._v == other._v)

    def __ne__(self, other):
        eq = self.__eq__(other)
        return eq if eq is NotImplemented else not eq

    def __hash__(self):
        return hash((type(self).__name__, self._v))

    def __reduce__(self):
        return (type(self), (self._v,))

    def __repr__(self):
        return f"{type(self).__name__}({self.__match_args__[0]}={self._v!r})"


class SequenceKey(_KeyBase):
    """Key of an element of a tuple or list: its index. ``str`` gives ``[i]``.

    Example:
      >>> k = SequenceKey(0)
      >>> k.idx, str(k)
      (0, '[0]')
    """

    __slots__ = ()
    __match_args__ = ("idx",)

    @property
    def idx(self) -> int:
        return self._v

    def __str__(self):
        return f"[{self._v!r}]"


class DictKey(_KeyBase):
    """Key of a dict entry. ``str`` gives ``[repr(key)]``.

    Example:
      >>> str(DictKey('w'))
      "['w']"
    """

    __slots__ = ()
    __match_args__ = ("key",)

    @property
    def key(self) -> Any:
        return self._v

    def __str__(self):
        return f"[{self._v!r}]"


class GetAttrKey(_KeyBase):
    """Key of an attribute (namedtuple field, dataclass field). ``str`` gives ``.name``.

    Example:
      >>> str(GetAttrKey('weight'))
      '.weight'
    """

    __slots__ = ()
    __match_args__ = ("name",)

    @property
    def name(self) -> str:
        return self._v

    def __str__(self):
        return f".{self._v}"


class FlattenedIndexKey(_KeyBase):
    """Key of a child of a custom node registered without keys: its position.

    Example:
      >>> str(FlattenedIndexKey(1))
      '[<flat index 1>]'
    """

    __slots__ = ()
    __match_args__ = ("key",)

    @property
    def key(self) -> int:
        return self._v

    def __str__(self):
        return f"[<flat index {self._v}>]"


def keystr(keys: KeyPath, *, simple: bool = False, separator: str = "") -> str:
    """Formats a key path as a string.

    Args:
      keys: a key path (tuple of key entries; other objects are shown with
        ``str``).
      simple: if True, show each key bare (``0``, ``w``, ``name``) instead of
        in its indexing form (``[0]``, ``['w']``, ``.name``).
      separator: string put between the keys.

    Returns:
      The formatted path.

    Example:
      >>> path = (DictKey('layers'), SequenceKey(0), GetAttrKey('w'))
      >>> keystr(path)
      "['layers'][0].w"
      >>> keystr(path, simple=True, separator='/')
      'layers/0/w'
    """
    if simple:
        return separator.join(
            str(k._v) if isinstance(k, _KeyBase) else str(k) for k in keys
        )
    return separator.join(map(str, keys))
