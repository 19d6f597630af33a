"""The quick tier (``benchmarks/quick.py``) under pytest-benchmark: the CI regression gate.

Each case times dpfast with pytest-benchmark while the round's ``setup`` times the
baseline (untimed by pytest-benchmark), so the two alternate: baseline, dpfast, baseline,
dpfast... The ratio and the memory multiple go to the benchmark's ``extra_info``, so
``--benchmark-json`` carries them for ``benchmarks/gate.py`` and for external trackers.
"""

from __future__ import annotations

import os
import statistics
import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

import quick

import dpfast


@pytest.mark.parametrize("case_id", list(quick.CASES))
def test_quick(benchmark, note, case_id):
    case = quick.CASES[case_id]
    state = case.setup()
    try:
        result = case.dpfast(state)  # warm-up: compile or load the kernels
        case.check(state, result)
        del result
        case.baseline(state)
        baseline_s = []

        def time_baseline():
            start = time.perf_counter()
            case.baseline(state)
            baseline_s.append(time.perf_counter() - start)

        benchmark.pedantic(case.dpfast, args=(state,), setup=time_baseline, rounds=case.rounds)
    finally:
        case.teardown(state)
    dpfast_s = list(benchmark.stats.stats.data)
    ratio = quick.ratio_of_rounds(dpfast_s, baseline_s)
    if os.environ.get("DPFAST_BENCH_MEMORY") == "0":  # bench-compare after its first pair
        memory = {"multiple": None, "peak_extra_bytes": None, "input_bytes": None}
    else:
        memory = quick.measure_memory(case_id)
    benchmark.extra_info.update(
        {
            "case": case_id,
            "description": case.name,
            "baseline": case.baseline_name,
            "ratio": ratio,
            "ratio_rounds": [b / d for b, d in zip(baseline_s, dpfast_s, strict=True)],
            "dpfast_median_s": statistics.median(dpfast_s),
            "baseline_median_s": statistics.median(baseline_s),
            "memory_multiple": memory["multiple"],
            "memory_peak_extra_bytes": memory["peak_extra_bytes"],
            "memory_input_bytes": memory["input_bytes"],
            "dpfast_path": str(Path(dpfast.__file__).resolve().parent),
            "dpfast_module_paths": sorted(
                {
                    str(Path(module.__file__).resolve().parent)
                    for name, module in list(sys.modules.items())
                    if name.split(".")[0] == "dpfast" and getattr(module, "__file__", None)
                }
            ),
        }
    )
    multiple = "-" if memory["multiple"] is None else f"{memory['multiple']:5.2f}x"
    note(
        f"quick {case_id:<22} ratio {ratio:7.2f} (baseline / dpfast; {case.baseline_name})   "
        f"memory {multiple} the input"
    )
