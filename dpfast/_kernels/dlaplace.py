"""Exact discrete Laplace samplers on ChaCha20 keyed streams (integer scale, rational rate).

Every output element ``i`` reads only the stream ``(key, nonce = start + i)`` (see
:mod:`dpfast._kernels.chacha` for the stream and bit order), so splitting a request into
chunks never changes the result. The counter-0 blocks of 16 consecutive nonces come from
the lane loop of :mod:`dpfast._kernels.lanes` (512 random bits per element); the rare
element that needs more computes counter 1, 2, ... with the scalar block function. The
draws read their bits with the reader of :mod:`dpfast._kernels.uniform` and use its exact
``Unif{0..t-1}`` and ``Bernoulli(a/b)``; all decisions use integer arithmetic only:

* ``Bernoulli(exp(-a/b))``, ``0 <= a <= b`` (Canonne, Kamath and Steinke 2020):
  ``K = 1; while Bernoulli(a/(bK)): K += 1; return K odd``, with
  ``Bernoulli(a/(bK)) = Bernoulli(1/K) and Bernoulli(a/b)`` (in that order, the second
  only drawn when the first is true) so that ``b*K`` never overflows.
* Discrete Laplace of rational rate ``s/t`` (CKS20 Algorithm 2), see
  :func:`discrete_laplace_rate_kernel`; with ``s = 1`` it is the sampler of integer
  scale ``t``.

About 170-180 random bits per draw at ``t`` near ``2**40`` (99th percentile about 500), so
about 1% of the draws need a second block. ``benchmarks/bench_noise.py`` measures about
15 million draws per second on one core of the development machine (2-core AMD EPYC,
AVX-512), against about 60 million for numpy's float ``Generator.laplace``, which is not
safe; the pure-Python exact sampler of docs/design.md#sampler-costs takes about 25 microseconds per
draw.

References
----------
C. L. Canonne, G. Kamath and T. Steinke, "The Discrete Gaussian for Differential
Privacy", NeurIPS 2020, Algorithms 1-2.
D. Lemire, "Fast Random Integer Generation in an Interval", ACM TOMACS 29(1), 2019.
"""

from __future__ import annotations

import numpy as np

from dpfast._jit import jit, jit_inline
from dpfast._kernels.lanes import per_element
from dpfast._kernels.uniform import draw_bernoulli, draw_uniform, read_bit, uniform_params


@jit_inline
def _bernoulli_exp(a, b, cur, nb, widx, ctr, blk, kt, nonce):
    # Exact Bernoulli(exp(-a / b)) for 0 <= a <= b (CKS20 Algorithm 1, gamma in [0, 1]).
    k = 1
    while True:
        if k > 1:
            ok, cur, nb, widx, ctr, blk = draw_bernoulli(1, k, cur, nb, widx, ctr, blk, kt, nonce)
            if not ok:
                break
        ok, cur, nb, widx, ctr, blk = draw_bernoulli(a, b, cur, nb, widx, ctr, blk, kt, nonce)
        if not ok:
            break
        k += 1
    return (k & 1) == 1, cur, nb, widx, ctr, blk


@jit_inline
def _accepted_pair(t, k, lim, cur, nb, widx, ctr, blk, kt, nonce):
    # The first two steps of CKS20 Algorithm 2: U ~ Unif{0..t-1} until Bernoulli(exp(-U/t))
    # accepts it, then V = the number of Bernoulli(exp(-1)) successes before a failure.
    while True:
        u, cur, nb, widx, ctr, blk = draw_uniform(t, k, lim, cur, nb, widx, ctr, blk, kt, nonce)
        ok, cur, nb, widx, ctr, blk = _bernoulli_exp(u, t, cur, nb, widx, ctr, blk, kt, nonce)
        if ok:
            break
    v = 0
    while True:
        ok, cur, nb, widx, ctr, blk = _bernoulli_exp(1, 1, cur, nb, widx, ctr, blk, kt, nonce)
        if not ok:
            break
        v += 1
    return u, v, cur, nb, widx, ctr, blk


# Largest X = U + t * V computed; beyond it the draw's magnitude is cap.
_X_MAX = 2**62


@jit_inline
def _dlaplace_rate_draw(params, blk, kt, nonce):
    s, t, k, lim, cap = params
    cur = np.uint64(0)
    nb = 0
    widx = 0
    ctr = 0
    while True:
        u, v, cur, nb, widx, ctr, blk = _accepted_pair(
            t, k, lim, cur, nb, widx, ctr, blk, kt, nonce
        )
        if v > (_X_MAX - u) // t:
            y = cap
        else:
            y = u + t * v
            if s != 1:  # integer scale t: no division
                y //= s
            if y > cap:
                y = cap
        sign, cur, nb, widx, ctr, blk = read_bit(cur, nb, widx, ctr, blk, kt, nonce)
        if sign == 1 and y == 0:
            continue
        return -y if sign == 1 else y


@jit
def discrete_laplace_rate_kernel(key, s, t, start, cap, out):
    """Fill ``out`` (``int64[n]``) with exact discrete Laplace draws of rational rate ``s/t``.

    ``out[i]`` has ``P(Y = y) = (e^{s/t} - 1)/(e^{s/t} + 1) * exp(-|y| s/t)`` with ``|Y|``
    saturated at ``cap`` (and ``X`` below at ``2**62``), and reads only the stream
    ``(key, start + i)``. ``key``: ``uint64[8]``; ``s``, ``t``: int64 in ``[1, 2**62)``;
    ``start``: uint64; ``cap``: int64 in ``[1, 2**62]``. O(n) expected; the expected cost
    does not depend on ``t`` and grows like ``1 + t/s`` rejections of the sign step only
    when ``s > t``.

    Per draw (CKS20 Algorithm 2)::

        loop: U <- Unif{0..t-1}; if not Bernoulli(exp(-U/t)): continue
              V <- 0; while Bernoulli(exp(-1)): V <- V + 1
              X <- U + t*V; Y <- min(floor(X / s), cap); B <- one bit
              if B == 1 and Y == 0: continue
              return (1 - 2B) Y

    With ``s = 1`` it is the sampler of integer scale ``t``, ``P(Y = y) = (e^{1/t} -
    1)/(e^{1/t} + 1) * exp(-|y|/t)``, and does no division by ``s``.
    """
    k, lim = uniform_params(t)
    per_element(_dlaplace_rate_draw, (s, t, k, lim, cap), key, start, out)
