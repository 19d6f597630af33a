"""Keyed randomness: :class:`NoiseSource`, the master key and the per-use ChaCha20 keys.

A source holds a 32-byte master key from ``os.urandom`` or from a seed; each use of
randomness derives its own key from a label, so distinct uses get independent streams.
"""

from __future__ import annotations

import hashlib
import numbers
import os
from typing import Any

import numpy as np

from dpfast._validation import check_int, quoted
from dpfast.exceptions import DPFastTypeError, DPFastValueError

_SEED_DOMAIN = b"dpfast-seed-v1"
_KEY_DOMAIN = b"dpfast-key-v1"


def _encode_int(value: int) -> bytes:
    body = value.to_bytes(max(1, (value.bit_length() + 8) // 8), "big", signed=True)
    return len(body).to_bytes(8, "big") + body


def _encode_label(parts: tuple[Any, ...]) -> bytes:
    # Each part is tagged and length-prefixed, so distinct labels never share an encoding.
    chunks = []
    for part in parts:
        if isinstance(part, str):
            body = part.encode("utf-8")
            chunks.append(b"s" + len(body).to_bytes(8, "big") + body)
        elif isinstance(part, numbers.Integral) and not isinstance(part, (bool, np.bool_)):
            chunks.append(b"i" + _encode_int(int(part)))
        else:
            raise DPFastTypeError(
                f"key label parts must be str or int, got {type(part).__name__} ({quoted(part)}); "
                "convert it with str() first"
            )
    return b"".join(chunks)


class NoiseSource:
    """An immutable source of keyed ChaCha20 streams, holding a 32-byte master key.

    Build one with :meth:`secure` (the default for private releases) or
    :meth:`from_seed` (reproducible, not for publication). The master key is never shown by
    ``repr``.

    Examples
    --------
    >>> source = NoiseSource.from_seed(7)
    >>> source
    NoiseSource(seeded=True)
    >>> source.key("example").shape
    (8,)
    """

    __slots__ = ("_master", "_seeded")

    _master: bytes
    _seeded: bool

    def __init__(self, master: bytes, *, seeded: bool) -> None:
        if not isinstance(master, bytes) or len(master) != 32:
            raise DPFastValueError(
                "master must be 32 bytes; use NoiseSource.secure() or NoiseSource.from_seed()"
            )
        object.__setattr__(self, "_master", master)
        object.__setattr__(self, "_seeded", bool(seeded))

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError("NoiseSource is immutable")

    def __delattr__(self, name: str) -> None:
        raise AttributeError("NoiseSource is immutable")

    def __repr__(self) -> str:
        return f"NoiseSource(seeded={self._seeded})"

    def __reduce__(self) -> Any:
        raise DPFastTypeError("NoiseSource holds a secret key and cannot be pickled")

    @classmethod
    def secure(cls) -> NoiseSource:
        """Return a source whose master key comes from the OS CSPRNG (``os.urandom(32)``).

        Returns
        -------
        NoiseSource
            A fresh source; two calls give independent sources.

        Examples
        --------
        >>> NoiseSource.secure().seeded
        False
        """
        return cls(os.urandom(32), seeded=False)

    @classmethod
    def from_seed(cls, seed: int) -> NoiseSource:
        """Return a reproducible source: master key ``sha256(b"dpfast-seed-v1" + enc(seed))``.

        ``enc(seed)`` is the 8-byte big-endian length of the seed's minimal two's-complement
        big-endian encoding, followed by that encoding. Output drawn from a seeded source is
        reproducible and **not for publication**.

        Parameters
        ----------
        seed : int
            Any integer.

        Returns
        -------
        NoiseSource

        Raises
        ------
        TypeError
            If ``seed`` is not an integer.

        Examples
        --------
        >>> a = NoiseSource.from_seed(1).key("x")
        >>> b = NoiseSource.from_seed(1).key("x")
        >>> bool((a == b).all())
        True
        """
        master = hashlib.sha256(_SEED_DOMAIN + _encode_int(check_int(seed, "seed"))).digest()
        return cls(master, seeded=True)

    @property
    def seeded(self) -> bool:
        """Whether the source came from a seed (reproducible, not for publication)."""
        return self._seeded

    def key(self, *label: str | int) -> np.ndarray:
        """Derive the ChaCha20 key of one use of randomness.

        The key is ``sha256(master || b"dpfast-key-v1" || enc(label))`` read as eight
        little-endian 32-bit words, where ``enc`` tags and length-prefixes every part, so
        distinct labels give independent keys.

        Parameters
        ----------
        *label : str or int
            Names the use, e.g. ``("ir_dp", "centroid-noise", "age")``.

        Returns
        -------
        numpy.ndarray
            ``uint64`` array of shape ``(8,)``, each entry one 32-bit key word.

        Raises
        ------
        TypeError
            If a label part is not a str or an int.

        Examples
        --------
        >>> source = NoiseSource.from_seed(0)
        >>> bool((source.key("a", 1) == source.key("a", "1")).all())
        False
        """
        digest = hashlib.sha256(self._master + _KEY_DOMAIN + _encode_label(label)).digest()
        return np.frombuffer(digest, dtype="<u4").astype(np.uint64)
