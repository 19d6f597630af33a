"""The perturbation mechanisms of SPEC §9: k-noise, k-PRAM and randomized response.

k-noise and k-PRAM (Biswal, Arbuckle and Kulik) are k-anonymity-style heuristics whose
parameters depend on the data: they are **not** differential privacy, and their reports
say so. Randomized response (uniform perturbation of one categorical column) is
ε-local differential privacy for that column only.
"""

from __future__ import annotations

from dpfast.mechanisms._k_noise import k_noise, minimal_delta
from dpfast.mechanisms._k_pram import k_pram
from dpfast.mechanisms._randomized_response import randomized_response

__all__ = ["k_noise", "k_pram", "minimal_delta", "randomized_response"]
