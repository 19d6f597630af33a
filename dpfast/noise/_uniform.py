"""Exact uniform integers, rational Bernoulli draws and uniform permutations."""

from __future__ import annotations

import numpy as np

from dpfast._kernels import ranking as _ranking
from dpfast._kernels import uniform as _kernels
from dpfast._validation import check_int
from dpfast.exceptions import DPFastValueError
from dpfast.noise._common import _MAX_SCALE, _check_key, _check_range


def uniform_integers(key: np.ndarray, high: int, size: int, *, start: int = 0) -> np.ndarray:
    """Draw exact uniform integers on ``{0, ..., high - 1}``.

    Element ``i`` comes from the stream ``(key, nonce = start + i)`` by rejection sampling
    on ``bit_length(high - 1)`` random bits.

    Parameters
    ----------
    key : numpy.ndarray
        ``uint64[8]`` key from :meth:`NoiseSource.key`.
    high : int
        Exclusive upper bound, in ``[1, 2**63 - 1]``.
    size : int
        Number of draws.
    start : int, optional
        Nonce of the first draw.

    Returns
    -------
    numpy.ndarray
        ``int64`` array of shape ``(size,)``.

    Raises
    ------
    TypeError, ValueError
        On a malformed key or out-of-range integers.

    Examples
    --------
    >>> from dpfast.noise import NoiseSource
    >>> key = NoiseSource.from_seed(42).key("doc")
    >>> draws = uniform_integers(key, 6, 1000)
    >>> int(draws.min()), int(draws.max())
    (0, 5)
    """
    key = _check_key(key)
    high = check_int(high, "high", low=1, high=2**63 - 1)
    size, start = _check_range(size, start)
    out = np.empty(size, dtype=np.int64)
    if size > 0:
        _kernels.uniform_integers_kernel(key, high, np.uint64(start), out)
    return out


def bernoulli_rational(
    key: np.ndarray, numerator: int, denominator: int, size: int, *, start: int = 0
) -> np.ndarray:
    """Draw exact ``Bernoulli(numerator / denominator)`` booleans.

    Element ``i`` compares the bits of stream ``(key, nonce = start + i)`` with the
    binary expansion of ``numerator / denominator`` (2 random bits expected).

    Parameters
    ----------
    key : numpy.ndarray
        ``uint64[8]`` key from :meth:`NoiseSource.key`.
    numerator : int
        In ``[0, denominator]``.
    denominator : int
        In ``[1, 2**62]``.
    size : int
        Number of draws.
    start : int, optional
        Nonce of the first draw.

    Returns
    -------
    numpy.ndarray
        ``bool`` array of shape ``(size,)``.

    Raises
    ------
    TypeError, ValueError
        On a malformed key or out-of-range integers.

    Examples
    --------
    >>> from dpfast.noise import NoiseSource
    >>> key = NoiseSource.from_seed(42).key("doc")
    >>> bernoulli_rational(key, 1, 1, 3)
    array([ True,  True,  True])
    """
    key = _check_key(key)
    denominator = check_int(denominator, "denominator", low=1, high=_MAX_SCALE)
    numerator = check_int(numerator, "numerator", low=0, high=denominator)
    size, start = _check_range(size, start)
    out = np.empty(size, dtype=np.bool_)
    if size > 0:
        _kernels.bernoulli_kernel(key, numerator, denominator, np.uint64(start), out)
    return out


# Buckets of the permutation hold 2**15 to 2**16 items on average: a part of the
# permutation then costs one pass over the bucket words plus Fisher-Yates in cache.
_BUCKET_ITEMS_BITS = 16


def permutation_bucket_bits(n: int) -> int:
    """Return the number of bucket bits of :func:`permutation` for ``n`` items.

    ``max(0, bit_length(n - 1) - 16)``: a function of ``n`` only, so every engine cuts the
    permutation into the same ``2**bits`` buckets.

    Examples
    --------
    >>> permutation_bucket_bits(1000), permutation_bucket_bits(200_000_000)
    (0, 12)
    """
    n = check_int(n, "n", low=0, high=2**62)
    return max(0, (n - 1).bit_length() - _BUCKET_ITEMS_BITS) if n > 1 else 0


def permutation(key: np.ndarray, n: int) -> np.ndarray:
    """Return a uniform random permutation of ``range(n)``, as the sequence of items.

    Bucketed so that every part can be computed on its own (:func:`permutation_part`),
    with the same result on every engine: item ``i`` goes to the bucket given by the top
    :func:`permutation_bucket_bits` bits ``b`` of its lane of the stream ``(key, nonce =
    0)`` (lane ``i % 4`` of 64-bit word ``i // 4``, lanes of 16 bits, lowest first,
    while ``b <= 16``; 32-bit lanes up to ``b = 32``); the items of bucket ``b``, in
    increasing order, are shuffled by Fisher-Yates (Durstenfeld) with exact unbiased
    bounded integers (Lemire's method) from the stream ``(key, 1 + b)``; the permutation
    lists bucket 0's shuffled items, then bucket 1's, and so on. Every permutation has
    the same probability: the bucket sizes and memberships are drawn independently of
    the item order, and within each bucket the order is uniform (Rao 1961, Sandelius
    1962; docs/engines.md#permutations).

    Parameters
    ----------
    key : numpy.ndarray
        ``uint64[8]`` key from :meth:`NoiseSource.key`.
    n : int
        Length, ``>= 0``.

    Returns
    -------
    numpy.ndarray
        ``int64`` array of shape ``(n,)`` holding each of ``0 .. n-1`` once.

    Raises
    ------
    TypeError, ValueError
        On a malformed key or a negative ``n``.

    References
    ----------
    D. Lemire, "Fast Random Integer Generation in an Interval", ACM TOMACS 29(1), 2019.
    C. R. Rao, "Generation of random permutations of given number of elements using random
    sampling numbers", Sankhya A 23, 1961. M. Sandelius, "A simple randomization
    procedure", JRSS B 24, 1962.

    Examples
    --------
    >>> from dpfast.noise import NoiseSource
    >>> key = NoiseSource.from_seed(42).key("doc")
    >>> sorted(permutation(key, 5).tolist())
    [0, 1, 2, 3, 4]
    """
    key = _check_key(key)
    n = check_int(n, "n", low=0, high=2**62)
    out = np.empty(n, dtype=np.int64)
    if n > 0:
        _kernels.permutation_kernel(key, permutation_bucket_bits(n), out)
    return out


def permutation_bucket_sizes(key: np.ndarray, n: int) -> np.ndarray:
    """Return the size of every bucket of :func:`permutation` ``(key, n)``.

    One pass over the bucket words, without the permutation: the offsets of the parts that
    :func:`permutation_part` computes.

    Examples
    --------
    >>> from dpfast.noise import NoiseSource
    >>> key = NoiseSource.from_seed(42).key("doc")
    >>> int(permutation_bucket_sizes(key, 100_000).sum())
    100000
    """
    key = _check_key(key)
    n = check_int(n, "n", low=0, high=2**62)
    bits = permutation_bucket_bits(n)
    if bits == 0:
        return np.array([n], dtype=np.int64)
    counts = np.zeros(1 << bits, dtype=np.int64)
    _kernels.bucket_counts(key, bits, n, counts)
    return counts


def permutation_part(
    key: np.ndarray, n: int, lo: int, hi: int, sizes: np.ndarray | None = None
) -> np.ndarray:
    """Return buckets ``lo .. hi - 1`` of :func:`permutation` ``(key, n)``.

    Equal to ``permutation(key, n)[start:stop]`` with ``start = sizes[:lo].sum()`` and
    ``stop = sizes[:hi].sum()``, computed in one pass over the bucket words and memory for
    the part only: engines that cannot hold ``n`` items build the permutation part by part.

    Parameters
    ----------
    key, n
        As for :func:`permutation`.
    lo, hi : int
        Buckets ``0 <= lo <= hi <= len(sizes)``.
    sizes : numpy.ndarray, optional
        :func:`permutation_bucket_sizes` ``(key, n)``, when already known.

    Examples
    --------
    >>> from dpfast.noise import NoiseSource
    >>> key = NoiseSource.from_seed(42).key("doc")
    >>> whole = permutation(key, 300_000)
    >>> sizes = permutation_bucket_sizes(key, 300_000)
    >>> start = int(sizes[:3].sum())
    >>> bool((permutation_part(key, 300_000, 3, 5) == whole[start:start + sizes[3:5].sum()]).all())
    True
    """
    key, n, bits, lo, hi, starts = _part_layout(key, n, lo, hi, sizes)
    if bits == 0:
        return permutation(key, n) if hi > lo else np.empty(0, dtype=np.int64)
    out = np.empty(int(starts[-1]), dtype=np.int64)
    _kernels.bucket_scatter(key, bits, n, lo, hi, starts[:-1].copy(), out)
    _kernels.shuffle_buckets(key, lo, starts, out)
    return out


def _part_layout(
    key: np.ndarray, n: int, lo: int, hi: int, sizes: np.ndarray | None
) -> tuple[np.ndarray, int, int, int, int, np.ndarray]:
    """Check the arguments of a permutation part; add its buckets' starts in the part.

    Returns ``(key, n, bits, lo, hi, starts)``: ``starts[j]`` is where bucket ``lo + j``
    begins in the part, ``starts[-1]`` the part's length.
    """
    key = _check_key(key)
    n = check_int(n, "n", low=0, high=2**62)
    bits = permutation_bucket_bits(n)
    n_buckets = 1 << bits
    lo = check_int(lo, "lo", low=0, high=n_buckets)
    hi = check_int(hi, "hi", low=lo, high=n_buckets)
    if sizes is None:
        sizes = permutation_bucket_sizes(key, n)
    starts = np.zeros(hi - lo + 1, dtype=np.int64)
    np.cumsum(sizes[lo:hi], out=starts[1:])
    return key, n, bits, lo, hi, starts


def permutation_part_groups(
    key: np.ndarray,
    n: int,
    lo: int,
    hi: int,
    group_values: np.ndarray,
    k: int,
    sizes: np.ndarray | None = None,
    out: np.ndarray | None = None,
    *,
    big: int | None = None,
) -> np.ndarray:
    """Return the group value of every item of buckets ``lo .. hi - 1`` of the permutation.

    Item ``i`` of ``range(n)`` is a rank, and ranks come in groups of ``k``, group ``big``
    also holding the ``r = n - k * len(group_values)`` ranks left over
    (:class:`~dpfast.partitions.ranking.RankGroups`): the result is the group value of
    every item of :func:`permutation_part` ``(key, n, lo, hi, sizes)``. The values are
    placed in bucket order as the items are found, which reads ``group_values``
    forwards, and shuffled within their buckets by the same swaps: no lookup jumps
    across ``group_values``.

    Parameters
    ----------
    key, n, lo, hi, sizes
        As for :func:`permutation_part`.
    group_values : numpy.ndarray
        One value per group (1-D, any dtype): ``n // k`` of them.
    k : int
        Items per group, ``>= 1``.
    out : numpy.ndarray, optional
        Where to write the result and return it: 1-D, contiguous, of ``group_values``'
        dtype, as many items as the buckets hold (a worker reuses its memory: fresh pages
        cost a fault each). A new array otherwise.
    big : int, optional
        The group that holds the ranks left over (default the last,
        ``len(group_values) - 1``).

    Examples
    --------
    >>> from dpfast.noise import NoiseSource
    >>> from dpfast.partitions.ranking import RankGroups
    >>> key = NoiseSource.from_seed(42).key("doc")
    >>> layout = RankGroups(300_005, 10)  # 30,000 groups, group 15,000 of 15 ranks
    >>> values = np.arange(30_000, dtype=np.float64)
    >>> part = permutation_part(key, 300_005, 3, 5)
    >>> got = permutation_part_groups(key, 300_005, 3, 5, values, 10, big=layout.big)
    >>> bool((got == values[layout.group_of(part)]).all())
    True
    """
    key, n, bits, lo, hi, starts = _part_layout(key, n, lo, hi, sizes)
    k = check_int(k, "k", low=1, high=2**62)
    group_values = np.asarray(group_values)  # not ascontiguousarray: it makes a scalar 1-D
    if group_values.ndim != 1 or (n > 0 and group_values.shape[0] == 0):
        raise DPFastValueError(
            f"group_values must be 1-D and hold at least one value, got shape {group_values.shape}"
        )
    n_groups = group_values.shape[0]
    big = n_groups - 1 if big is None else check_int(big, "big", low=0, high=n_groups - 1)
    r = n - k * n_groups
    length = int(starts[-1])
    if out is not None and (
        not isinstance(out, np.ndarray)
        or out.ndim != 1
        or out.shape[0] != length
        or out.dtype != group_values.dtype
        or not out.flags.c_contiguous
        or not out.flags.writeable
    ):
        raise DPFastValueError(
            f"out must be a writable contiguous {group_values.dtype}[{length}], got "
            f"{getattr(out, 'dtype', type(out).__name__)}{list(np.shape(out))}"
        )
    if out is None:
        out = np.empty(length, dtype=group_values.dtype)
    values = np.ascontiguousarray(group_values)
    if bits == 0:
        items = permutation(key, n) if hi > lo else np.empty(0, dtype=np.int64)
        _ranking.take_groups(values, items, k, big, r, out)
        return out
    _kernels.bucket_scatter_groups(key, bits, n, lo, hi, starts[:-1].copy(), values, k, big, r, out)
    _kernels.shuffle_buckets(key, lo, starts, out)
    return out


def permutation_buckets(key: np.ndarray, n: int, first: int, count: int) -> np.ndarray:
    """Return the bucket of items ``first .. first + count - 1`` of :func:`permutation`.

    Item ``i``'s bucket is a function of lane ``i`` of the stream ``(key, 0)`` alone, so
    a task that holds a range of the items (rows of one partition, ranks of one sorted
    range) finds their buckets without reading the rest of the stream. With
    :func:`permutation_order`, the tasks that hold the items send each to its bucket's
    part and each part is put in the permutation's order there: the permutation in one
    exchange, O(n) in all.

    Returns
    -------
    numpy.ndarray
        ``int64[count]``, each in ``[0, 2 ** permutation_bucket_bits(n))``.

    Examples
    --------
    >>> from dpfast.noise import NoiseSource
    >>> key = NoiseSource.from_seed(42).key("doc")
    >>> buckets = permutation_buckets(key, 300_000, 0, 300_000)
    >>> bool((np.bincount(buckets, minlength=4) == permutation_bucket_sizes(key, 300_000)).all())
    True
    """
    key = _check_key(key)
    n = check_int(n, "n", low=0, high=2**62)
    first = check_int(first, "first", low=0, high=n)
    count = check_int(count, "count", low=0, high=n - first)
    bits = permutation_bucket_bits(n)
    out = np.zeros(count, dtype=np.int64)
    if bits > 0:
        _kernels.item_buckets(key, bits, first, out)
    return out


def permutation_order(
    key: np.ndarray, n: int, lo: int, hi: int, buckets: np.ndarray, sizes: np.ndarray | None = None
) -> np.ndarray:
    """Return where the items of buckets ``lo .. hi - 1`` stand in :func:`permutation` order.

    ``buckets`` lists the buckets (:func:`permutation_buckets`) of some items: every item
    of buckets ``lo .. hi - 1`` and perhaps others, each bucket's items in increasing
    order (as they are in increasing item order, or in pieces of increasing items, each
    piece ordered by bucket). The result ``at`` holds positions in that list: if
    ``items`` are the listed items, ``items[at]`` is :func:`permutation_part` ``(key, n,
    lo, hi)``. The positions are ordered by bucket (stably), then each bucket is
    shuffled by the same swaps as the permutation's.

    ``sizes`` (:func:`permutation_bucket_sizes`), if given, is checked: a bucket with
    other than its size of items listed raises ``ValueError``.

    Examples
    --------
    >>> from dpfast.noise import NoiseSource
    >>> key = NoiseSource.from_seed(42).key("doc")
    >>> items = np.arange(300_000)
    >>> at = permutation_order(key, 300_000, 1, 3, permutation_buckets(key, 300_000, 0, 300_000))
    >>> bool((items[at] == permutation_part(key, 300_000, 1, 3)).all())
    True
    """
    key = _check_key(key)
    n = check_int(n, "n", low=0, high=2**62)
    n_buckets = 1 << permutation_bucket_bits(n)
    lo = check_int(lo, "lo", low=0, high=n_buckets)
    hi = check_int(hi, "hi", low=lo, high=n_buckets)
    buckets = np.asarray(buckets)
    if buckets.ndim != 1 or not np.issubdtype(buckets.dtype, np.integer):
        raise DPFastValueError(f"buckets must be a 1-D integer array, got {buckets.dtype}")
    inside = np.flatnonzero((buckets >= lo) & (buckets < hi))
    local = (buckets[inside] - lo).astype(np.int64)
    at = inside[np.argsort(local, kind="stable")].astype(np.int64)
    counts = np.bincount(local, minlength=hi - lo)
    if sizes is not None and not np.array_equal(counts, np.asarray(sizes)[lo:hi]):
        raise DPFastValueError(
            f"the items listed do not fill buckets {lo} to {hi - 1} of the permutation"
        )
    starts = np.zeros(hi - lo + 1, dtype=np.int64)
    np.cumsum(counts, out=starts[1:])
    _kernels.shuffle_buckets(key, lo, starts, at)
    return at
