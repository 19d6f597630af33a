"""Seeded releases of every method on the bundled data, compared with recorded golden files.

The golden file ``tests/golden/releases.json`` was recorded before the package layout was
redesigned; a move of code must leave every seeded release and report bit for bit as it
was. Each case stores a SHA-256 of the released data (values, dtypes, column names, row
order), the public report and the private report without its timings.

Record again (only for a change that is meant to alter releases, and say so in the commit):
``.venv/bin/python tests/test_golden.py --record``.
"""

from __future__ import annotations

import hashlib
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

import dpfast
from dpfast.datasets import adult, adult_taxonomy

# these cases exercise the papers' own modes (record linkage, the paper's calibration) on
# purpose; the warnings those modes raise are tested in test_guarantees.py
pytestmark = [
    pytest.mark.filterwarnings("ignore::dpfast.exceptions.UnprovenReleaseWarning"),
    pytest.mark.filterwarnings("ignore:calibration=:dpfast.exceptions.PrivacyLeakWarning"),
]

GOLDEN = Path(__file__).resolve().parent / "golden" / "releases.json"
BOUNDS = {
    "age": (17, 90),
    "hours-per-week": (1, 99),
    "education-num": (1, 16),
    "capital-loss": (0, 4356),
}


def _sample(n: int = 3000) -> pd.DataFrame:
    table = adult("train", drop_missing=True)
    return table.iloc[:n].reset_index(drop=True)


def _digest_frame(frame: pd.DataFrame) -> str:
    h = hashlib.sha256()
    h.update(json.dumps([str(c) for c in frame.columns]).encode())
    h.update(json.dumps([str(t) for t in frame.dtypes]).encode())
    h.update(pd.util.hash_pandas_object(frame, index=True).to_numpy().tobytes())
    return h.hexdigest()


def digest(data: Any) -> str:
    """SHA-256 of a released table of any kind: values, dtypes, names and row order."""
    if isinstance(data, pd.DataFrame):
        return _digest_frame(data)
    if isinstance(data, pa.Table):
        return "arrow:" + _digest_frame(data.to_pandas())
    if isinstance(data, np.ndarray):
        h = hashlib.sha256(str(data.dtype).encode() + str(data.shape).encode())
        h.update(np.ascontiguousarray(data).tobytes())
        return "numpy:" + h.hexdigest()
    raise TypeError(type(data))


def without_timings(report: Any) -> dict[str, Any]:
    """A report as a dict, without wall-clock timings (which vary from run to run)."""
    out = report.to_dict()
    out.pop("timings", None)
    return out  # type: ignore[no-any-return]


def _ir_numeric() -> Any:
    return dpfast.ir_dp(
        _sample(),
        k=10,
        epsilon=1.0,
        columns=["age", "hours-per-week", "education-num"],
        bounds=BOUNDS,
        seed=11,
    )


def _ir_columns_metrics() -> Any:
    return dpfast.ir_dp(
        _sample(),
        k=7,
        epsilon=2.0,
        columns=["age", "capital-loss"],
        bounds=BOUNDS,
        linkage="columns",
        metrics=True,
        seed=12,
    )


def _ir_remainder_last() -> Any:
    """``_ir_columns_metrics`` with the last group holding the remainder (sdcMicro's rule)."""
    return dpfast.ir_dp(
        _sample(),
        k=7,
        epsilon=2.0,
        columns=["age", "capital-loss"],
        bounds=BOUNDS,
        linkage="columns",
        metrics=True,
        seed=12,
        remainder="last",
    )


def _ir_categorical() -> Any:
    return dpfast.ir_dp(
        _sample(),
        k=25,
        epsilon=1.0,
        columns=["age", "occupation", "native-country"],
        bounds=BOUNDS,
        taxonomies={
            "occupation": adult_taxonomy("occupation"),
            "native-country": adult_taxonomy("native-country"),
        },
        metrics=True,
        seed=13,
    )


def _ir_categorical_proven_unshuffled() -> Any:
    return dpfast.ir_dp(
        _sample(),
        k=5,
        epsilon=1.0,
        columns=["hours-per-week", "occupation"],
        bounds=BOUNDS,
        taxonomies={"occupation": adult_taxonomy("occupation")},
        sensitivity="proven",
        linkage="records",
        shuffle=False,
        seed=14,
    )


def _ir_numpy() -> Any:
    values = _sample()[["age", "hours-per-week"]].to_numpy(dtype=np.float64)
    return dpfast.ir_dp(values, k=4, epsilon=1.0, bounds={0: (17, 90), 1: (1, 99)}, seed=15)


def _ir_arrow() -> Any:
    table = pa.Table.from_pandas(_sample()[["age", "occupation", "sex"]])
    return dpfast.ir_dp(
        table,
        k=10,
        epsilon=1.0,
        columns=["age", "occupation"],
        bounds={"age": BOUNDS["age"]},
        taxonomies={"occupation": adult_taxonomy("occupation")},
        seed=16,
    )


def _laplace() -> Any:
    return dpfast.laplace_dp(
        _sample(), epsilon=1.0, columns=["age", "hours-per-week"], bounds=BOUNDS, seed=21
    )


def _individual_ranking() -> Any:
    return dpfast.individual_ranking(
        _sample(), k=3, columns=["age", "hours-per-week", "fnlwgt"], metrics=True
    )


def _individual_ranking_remainder() -> Any:
    """3000 rows in groups of 7: group 214 of the 428 holds 11 rows."""
    return dpfast.individual_ranking(_sample(), k=7, columns=["age", "fnlwgt"])


def _mdav() -> Any:
    return dpfast.mdav(_sample(1000), k=5, columns=["age", "hours-per-week", "education-num"])


def _mdav_mixed() -> Any:
    return dpfast.mdav(
        _sample(600),
        k=4,
        columns=["age", "occupation"],
        taxonomies={"occupation": adult_taxonomy("occupation")},
        metrics=True,
    )


def _mdav_dp() -> Any:
    return dpfast.mdav_dp(
        _sample(),
        k=60,
        epsilon=1.0,
        columns=["age", "hours-per-week"],
        bounds=BOUNDS,
        metrics=True,
        seed=31,
    )


def _mdav_dp_mixed_as_published() -> Any:
    return dpfast.mdav_dp(
        _sample(),
        k=100,
        epsilon=2.0,
        columns=["age", "occupation"],
        bounds=BOUNDS,
        taxonomies={"occupation": adult_taxonomy("occupation")},
        calibration="as_published",
        seed=32,
    )


def _diffgen_case(utility: str, seed: int) -> dict[str, Any]:
    train = _sample(4000)
    test = adult("test", drop_missing=True).iloc[:500].reset_index(drop=True)
    columns = ["age", "education-num", "hours-per-week", "occupation", "sex", "income"]
    release = dpfast.diffgen(
        train[columns],
        target="income",
        epsilon=1.0,
        steps=6,
        taxonomies={
            "occupation": adult_taxonomy("occupation"),
            "sex": adult_taxonomy("sex"),
        },
        bounds={k: BOUNDS[k] for k in ("age", "education-num", "hours-per-week")},
        classes=["<=50K", ">50K"],
        utility=utility,
        seed=seed,
    )
    test = test.assign(income=test["income"].str.rstrip("."))
    return {
        "counts": digest(release.counts),
        "microdata": digest(release.microdata()),
        "cut_on_test": digest(release.cut.apply(test[columns])),
        "report": without_timings(release.report),
        "private": without_timings(release.private),
    }


def _k_noise() -> Any:
    return dpfast.k_noise(_sample(), k=10, columns=["age", "fnlwgt"], seed=41)


def _k_pram() -> Any:
    return dpfast.k_pram(_sample(), k=10, columns=["age", "hours-per-week"], seed=42)


def _randomized_response() -> Any:
    table = _sample()
    return dpfast.randomized_response(
        table, column="sex", domain=["Female", "Male"], epsilon=1.0, seed=43
    )


def _cli_case(method: str, *options: str) -> Callable[[], dict[str, Any]]:
    """Run ``dpfast release METHOD`` on the bundled Adult sample through ``main``."""

    def run() -> dict[str, Any]:
        import tempfile

        from dpfast.cli import main
        from dpfast.datasets import adult_mixed_schema_path

        with tempfile.TemporaryDirectory() as tmp:
            source = Path(tmp) / "in.parquet"
            _sample(2000).to_parquet(source)
            out = Path(tmp) / "out.parquet"
            argv = ["release", method, str(source), "-o", str(out), "--quiet"]
            argv += ["--schema", str(adult_mixed_schema_path()), *options]
            assert main(argv) == 0
            report = json.loads(Path(f"{out}.public-report.json").read_text(encoding="utf-8"))
            private = json.loads(Path(f"{out}.private-report.json").read_text(encoding="utf-8"))
            private.pop("timings")
            return {"data": digest(pd.read_parquet(out)), "report": report, "private": private}

    return run


def _release_case(make: Callable[[], Any]) -> Callable[[], dict[str, Any]]:
    def run() -> dict[str, Any]:
        release = make()
        return {
            "data": digest(release.data),
            "report": without_timings(release.report),
            "private": without_timings(release.private),
        }

    return run


CASES: dict[str, Callable[[], dict[str, Any]]] = {
    "ir_dp_numeric": _release_case(_ir_numeric),
    "ir_dp_columns_metrics": _release_case(_ir_columns_metrics),
    "ir_dp_remainder_last": _release_case(_ir_remainder_last),
    "ir_dp_categorical": _release_case(_ir_categorical),
    "ir_dp_categorical_proven_unshuffled": _release_case(_ir_categorical_proven_unshuffled),
    "ir_dp_numpy": _release_case(_ir_numpy),
    "ir_dp_arrow": _release_case(_ir_arrow),
    "laplace_dp": _release_case(_laplace),
    "individual_ranking": _release_case(_individual_ranking),
    "individual_ranking_remainder": _release_case(_individual_ranking_remainder),
    "mdav": _release_case(_mdav),
    "mdav_mixed": _release_case(_mdav_mixed),
    "mdav_dp": _release_case(_mdav_dp),
    "mdav_dp_mixed_as_published": _release_case(_mdav_dp_mixed_as_published),
    "diffgen_max": lambda: _diffgen_case("max", 51),
    "diffgen_info_gain": lambda: _diffgen_case("info_gain", 52),
    "k_noise": _release_case(_k_noise),
    "k_pram": _release_case(_k_pram),
    "randomized_response": _release_case(_randomized_response),
    "cli_ir_dp": _cli_case("ir-dp", "--k", "20", "--epsilon", "1", "--seed", "61"),
    "cli_mdav_dp": _cli_case("mdav-dp", "--k", "100", "--epsilon", "1", "--seed", "62"),
}


def _canonical(value: Any) -> Any:
    return json.loads(json.dumps(value, sort_keys=True))


@pytest.mark.parametrize("name", sorted(CASES))
def test_seeded_release_matches_golden(name: str) -> None:
    expected = json.loads(GOLDEN.read_text(encoding="utf-8"))[name]
    got = _canonical(CASES[name]())
    assert got == expected


def test_every_golden_case_is_checked() -> None:
    recorded = json.loads(GOLDEN.read_text(encoding="utf-8"))
    assert sorted(recorded) == sorted(CASES)


def record() -> None:
    """Rewrite the golden file from the current code."""
    GOLDEN.parent.mkdir(exist_ok=True)
    results = {name: _canonical(make()) for name, make in sorted(CASES.items())}
    GOLDEN.write_text(json.dumps(results, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    print(f"recorded {len(results)} cases in {GOLDEN}")


if __name__ == "__main__":
    if sys.argv[1:] != ["--record"]:
        sys.exit("usage: python tests/test_golden.py --record")
    record()
