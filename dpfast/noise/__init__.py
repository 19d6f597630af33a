"""Secure random noise: keyed ChaCha20 streams and exact integer samplers.

All randomness in dpfast comes from here. A :class:`NoiseSource` holds a 32-byte master
key, from ``os.urandom`` (:meth:`NoiseSource.secure`, the default) or from a seed
(:meth:`NoiseSource.from_seed`, reproducible, for tests and benchmarks only). Each use of
randomness asks the source for its own key with a label (``source.key("ir_dp", "noise",
column)``), so that distinct uses get independent streams and adding a column never
changes the noise of another.

Element ``i`` of every per-element sampler reads only the ChaCha20 stream
``(key, nonce = start + i)``, so drawing in chunks gives the same values as drawing at
once. The dyadic-base discrete Laplace sampler (:func:`add_discrete_laplace_dyadic`, the
noise of counts) reads one stream per segment of 4096 draws instead, so threads split
on segment boundaries. The samplers are exact: all sampling decisions use integer
arithmetic on random bits, with no floating point (docs/design.md#secure-noise, #discrete-laplace,
#sampler-choices), except the exponential mechanism's, whose float bounds are certified and
fall back to integer arithmetic when they do not decide (#em-sampler).
"""

from __future__ import annotations

from dpfast.noise._dyadic import (
    COUNT_MAX_EPSILON,
    COUNT_MIN_EPSILON,
    DYADIC_SAMPLER_NAME,
    CountNoise,
    add_count_noise,
    add_discrete_laplace_dyadic,
    apply_count_noise,
    count_noise_plan,
    dyadic_base_at_most,
    dyadic_epsilon,
)
from dpfast.noise._em_exact import ExponentialBase, exponential_base
from dpfast.noise._exponential import (
    EM_SAMPLER_NAME,
    SCORE_BITS,
    exponential_chances,
    exponential_mechanism,
    exponential_mechanism_sorted_groups,
    exponential_probabilities,
    quality_units,
)
from dpfast.noise._laplace import (
    RATE_SAMPLER_NAME,
    SAMPLER_NAME,
    discrete_laplace,
    discrete_laplace_rate,
    rate_at_most,
    unsafe_float_laplace,
)
from dpfast.noise._quantile import (
    QUANTILE_BITS,
    QUANTILE_SENSITIVITY,
    exponential_quantile,
    quantile_quality,
)
from dpfast.noise._source import NoiseSource
from dpfast.noise._tails import (
    clamped_moments,
    discrete_laplace_at_least,
    discrete_laplace_sd,
    log_mean_exp,
    on_bound_share,
)
from dpfast.noise._uniform import (
    bernoulli_rational,
    permutation,
    permutation_bucket_bits,
    permutation_bucket_sizes,
    permutation_buckets,
    permutation_order,
    permutation_part,
    permutation_part_groups,
    uniform_integers,
)
from dpfast.noise._wordstream import (
    KEEP_DENOMINATOR,
    RETAIN_SAMPLER_NAME,
    UNIFORM_SAMPLER_NAME,
    add_uniform,
    retain_draws,
    retain_or_replace,
)

__all__ = [
    "COUNT_MAX_EPSILON",
    "COUNT_MIN_EPSILON",
    "DYADIC_SAMPLER_NAME",
    "EM_SAMPLER_NAME",
    "KEEP_DENOMINATOR",
    "QUANTILE_BITS",
    "QUANTILE_SENSITIVITY",
    "RATE_SAMPLER_NAME",
    "RETAIN_SAMPLER_NAME",
    "SAMPLER_NAME",
    "SCORE_BITS",
    "UNIFORM_SAMPLER_NAME",
    "CountNoise",
    "ExponentialBase",
    "NoiseSource",
    "add_count_noise",
    "add_discrete_laplace_dyadic",
    "add_uniform",
    "apply_count_noise",
    "bernoulli_rational",
    "clamped_moments",
    "count_noise_plan",
    "discrete_laplace",
    "discrete_laplace_at_least",
    "discrete_laplace_rate",
    "discrete_laplace_sd",
    "dyadic_base_at_most",
    "dyadic_epsilon",
    "exponential_base",
    "exponential_chances",
    "exponential_mechanism",
    "exponential_mechanism_sorted_groups",
    "exponential_probabilities",
    "exponential_quantile",
    "log_mean_exp",
    "on_bound_share",
    "permutation",
    "permutation_bucket_bits",
    "permutation_bucket_sizes",
    "permutation_buckets",
    "permutation_order",
    "permutation_part",
    "permutation_part_groups",
    "quality_units",
    "quantile_quality",
    "rate_at_most",
    "retain_draws",
    "retain_or_replace",
    "uniform_integers",
    "unsafe_float_laplace",
]
