"""The reports' JSON Schemas (dpfast/schemas/): every method's reports validate, wrong ones fail.

Each method is released through the Python API (in several configurations) and through the
command line (the written ``OUTPUT.public-report.json`` and ``OUTPUT.private-report.json``),
and both reports are validated against the shipped schemas with ``jsonschema``. Reports
with a field missing, a wrong guarantee level, an unknown field or another method's
extras must fail validation.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jsonschema
import numpy as np
import pandas as pd
import pytest

import dpfast
from dpfast import cli
from dpfast.accounting import REPORT_SCHEMA_VERSION, report_schema
from dpfast.datasets import adult, adult_taxonomy

SCHEMAS = Path(__file__).resolve().parents[1] / "dpfast" / "schemas"
BOUNDS = {"age": (17, 90), "hours-per-week": (1, 99), "education-num": (1, 16)}

pytestmark = [
    pytest.mark.filterwarnings("ignore::dpfast.exceptions.UnprovenReleaseWarning"),
    pytest.mark.filterwarnings("ignore::dpfast.exceptions.PrivacyLeakWarning"),
]


def _validator(kind: str) -> jsonschema.protocols.Validator:
    schema = report_schema(kind)  # type: ignore[arg-type]
    return jsonschema.Draft202012Validator(schema)


def _errors(kind: str, report: dict[str, Any]) -> list[str]:
    return [error.message for error in _validator(kind).iter_errors(report)]


def assert_valid(public: dict[str, Any], private: dict[str, Any]) -> None:
    assert _errors("public", public) == []
    assert _errors("private", private) == []


@pytest.fixture(scope="module")
def sample() -> pd.DataFrame:
    return adult("train", drop_missing=True).iloc[:400].reset_index(drop=True)


# -- the schema files ------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["public", "private"])
def test_schemas_are_valid_draft_2020_12_with_a_version(kind: str) -> None:
    schema = report_schema(kind)  # type: ignore[arg-type]
    jsonschema.Draft202012Validator.check_schema(schema)
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    assert schema["$id"].endswith(f":{REPORT_SCHEMA_VERSION}")
    assert schema["properties"]["schema_version"] == {
        "const": REPORT_SCHEMA_VERSION,
        "description": schema["properties"]["schema_version"]["description"],
    }
    # no field may pass unchecked: only the listed method extras are allowed
    assert schema["unevaluatedProperties"] is False
    for name, spec in schema["properties"].items():
        assert spec.get("description"), name


def test_schemas_are_read_from_the_package_files() -> None:
    for kind, name in (("public", "report.schema.json"), ("private", "private-report.schema.json")):
        expected = json.loads((SCHEMAS / name).read_text(encoding="utf-8"))
        assert report_schema(kind) == expected  # type: ignore[arg-type]


def test_schemas_are_package_data() -> None:
    import fnmatch

    tomllib = pytest.importorskip("tomllib")  # Python >= 3.11
    pyproject = tomllib.loads((SCHEMAS.parents[1] / "pyproject.toml").read_text(encoding="utf-8"))
    patterns = pyproject["tool"]["setuptools"]["package-data"]["dpfast"]
    for path in SCHEMAS.glob("*.json"):
        relative = path.relative_to(SCHEMAS.parent).as_posix()
        assert any(fnmatch.fnmatch(relative, pattern) for pattern in patterns), relative


def test_unknown_schema_kind_is_refused() -> None:
    with pytest.raises(ValueError, match='"public" or "private"'):
        report_schema("secret")  # type: ignore[arg-type]


def test_every_level_and_method_is_in_the_schema() -> None:
    from typing import get_args

    from dpfast.accounting import GuaranteeLevel

    schema = report_schema("public")
    assert set(schema["properties"]["guarantee_level"]["enum"]) == set(get_args(GuaranteeLevel))
    assert set(schema["properties"]["method"]["enum"]) == METHODS
    assert set(report_schema("private")["properties"]["method"]["enum"]) == METHODS


# -- every method's reports, through the API -------------------------------------------


def _occupation() -> dict[str, Any]:
    return {"occupation": adult_taxonomy("occupation")}


API_CASES: dict[str, tuple[str, Callable[[pd.DataFrame], Any]]] = {
    "ir_dp": (
        "ir_dp",
        lambda t: dpfast.ir_dp(
            t, k=5, epsilon=1.0, columns=["age", "hours-per-week"], bounds=BOUNDS, seed=1
        ),
    ),
    "ir_dp_categorical_shuffle": (
        "ir_dp",
        lambda t: dpfast.ir_dp(
            t,
            k=10,
            epsilon=1.0,
            columns=["age", "occupation"],
            bounds=BOUNDS,
            taxonomies=_occupation(),
            unprotected="shuffle",
            metrics=True,
            seed=2,
        ),
    ),
    "ir_dp_numpy": (
        "ir_dp",
        lambda t: dpfast.ir_dp(
            t[["age", "hours-per-week"]].to_numpy(dtype=np.float64),
            k=5,
            epsilon=1.0,
            bounds={0: (17, 90), 1: (1, 99)},
            seed=3,
        ),
    ),
    "laplace_dp": (
        "laplace_dp",
        lambda t: dpfast.laplace_dp(
            t, epsilon=1.0, columns=["age"], bounds=BOUNDS, unprotected="keep", seed=4
        ),
    ),
    "individual_ranking": (
        "individual_ranking",
        lambda t: dpfast.individual_ranking(
            t, k=3, columns=["age", "hours-per-week"], metrics=True
        ),
    ),
    "mdav": (
        "mdav",
        lambda t: dpfast.mdav(t, k=4, columns=["age", "occupation"], taxonomies=_occupation()),
    ),
    "mdav_dp": (
        "mdav_dp",
        lambda t: dpfast.mdav_dp(
            t, k=50, epsilon=1.0, columns=["age", "hours-per-week"], bounds=BOUNDS, seed=5
        ),
    ),
    "k_noise": ("k_noise", lambda t: dpfast.k_noise(t, k=5, columns=["age", "fnlwgt"], seed=6)),
    "k_pram": (
        "k_pram",
        lambda t: dpfast.k_pram(t, k=5, columns=["age", "hours-per-week"], seed=7),
    ),
    "randomized_response": (
        "randomized_response",
        lambda t: dpfast.randomized_response(
            t, column="sex", domain=["Female", "Male"], epsilon=1.0, seed=8
        ),
    ),
    "diffgen": (
        "diffgen",
        lambda t: dpfast.diffgen(
            t[["age", "education-num", "occupation", "income"]],
            target="income",
            epsilon=1.0,
            steps=4,
            taxonomies=_occupation(),
            bounds={"age": (17, 90), "education-num": (1, 16)},
            classes=["<=50K", ">50K"],
            seed=9,
        ),
    ),
}
METHODS = {method for method, _ in API_CASES.values()}


def test_every_release_function_has_an_api_case() -> None:
    names = set(report_schema("public")["properties"]["method"]["enum"])
    assert all(callable(getattr(dpfast, name)) and name in dpfast.__all__ for name in names)
    assert names == METHODS


@pytest.mark.parametrize("case", sorted(API_CASES))
def test_api_reports_validate(sample: pd.DataFrame, case: str) -> None:
    method, call = API_CASES[case]
    release = call(sample)
    public, private = release.report.to_dict(), release.private.to_dict()
    assert public["method"] == private["method"] == method
    assert list(public)[:2] == ["report", "schema_version"]
    assert public["schema_version"] == REPORT_SCHEMA_VERSION
    assert private["schema_version"] == REPORT_SCHEMA_VERSION
    assert_valid(public, private)
    # what was written as JSON validates too (no NumPy scalars, no NaN)
    assert_valid(json.loads(release.report.to_json()), json.loads(release.private.to_json()))


# -- every command's written reports ---------------------------------------------------

CLI_SCHEMA = {
    "columns": {
        "age": {"type": "integer", "bounds": [17, 90]},
        "income": {"type": "float", "bounds": [0, 200000]},
        "job": {"type": "categorical", "protect": False},
        "label": {"type": "categorical", "protect": False},
    }
}
CLI_DIFFGEN_SCHEMA = {
    "columns": {
        "age": {"type": "integer", "bounds": [17, 90]},
        "income": {"type": "float", "bounds": [0, 200000]},
        "label": {"type": "categorical"},
        "job": {"type": "categorical", "protect": False},
    }
}
CLI_COMMANDS: dict[str, list[str]] = {
    "ir-dp": ["--k", "4", "--epsilon", "1", "--schema", "schema.json", "--seed", "3"],
    "laplace": ["--epsilon", "1", "--schema", "schema.json", "--unprotected", "shuffle"],
    "mdav-dp": ["--k", "10", "--epsilon", "1", "--schema", "schema.json", "--seed", "3"],
    "diffgen": [
        *("--target", "label", "--steps", "3", "--epsilon", "1"),
        *("--schema", "diffgen.json", "--classes", "no,yes", "--seed", "3"),
    ],
    "randomized-response": [
        *("--column", "job", "--domain", "clerk,nurse,pilot", "--epsilon", "1"),
        *("--schema", "schema.json", "--seed", "3"),
    ],
    "individual-ranking": ["--k", "4", "--schema", "schema.json"],
    "mdav": ["--k", "4", "--schema", "schema.json"],
    "k-noise": ["--k", "4", "--schema", "schema.json", "--seed", "3"],
    "k-pram": ["--k", "4", "--schema", "schema.json", "--seed", "3"],
}


@pytest.fixture(scope="module")
def cli_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    directory = tmp_path_factory.mktemp("report-schema")
    rng = np.random.default_rng(5)
    n = 60
    pd.DataFrame(
        {
            "age": rng.integers(17, 91, n),
            "income": rng.uniform(0, 150_000, n),
            "job": rng.choice(["clerk", "nurse", "pilot"], n),
            "label": rng.choice(["no", "yes"], n),
        }
    ).to_parquet(directory / "people.parquet", index=False)
    (directory / "schema.json").write_text(json.dumps(CLI_SCHEMA), encoding="utf-8")
    (directory / "diffgen.json").write_text(json.dumps(CLI_DIFFGEN_SCHEMA), encoding="utf-8")
    return directory


def test_every_command_has_a_cli_case() -> None:
    assert {command.name for command in cli.RELEASE_COMMANDS} == set(CLI_COMMANDS)


@pytest.mark.parametrize("method", sorted(CLI_COMMANDS))
def test_cli_written_reports_validate(
    cli_dir: Path, method: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(cli_dir)
    output = f"{method}.parquet"
    argv = ["release", method, "people.parquet", "-o", output, "--quiet", *CLI_COMMANDS[method]]
    assert cli.main(argv) == 0
    public = json.loads(Path(f"{output}.public-report.json").read_text(encoding="utf-8"))
    private = json.loads(Path(f"{output}.private-report.json").read_text(encoding="utf-8"))
    assert public["method"] == method.replace("-", "_").replace("laplace", "laplace_dp")
    assert_valid(public, private)


# -- what must fail --------------------------------------------------------------------


@pytest.fixture(scope="module")
def reports(sample: pd.DataFrame) -> dict[str, tuple[dict[str, Any], dict[str, Any]]]:
    out = {}
    for case in ("ir_dp", "diffgen", "randomized_response", "k_noise", "k_pram"):
        release = API_CASES[case][1](sample)
        out[case] = (release.report.to_dict(), release.private.to_dict())
    return out


def _required(kind: str) -> list[str]:
    return list(report_schema(kind)["required"])  # type: ignore[arg-type]


@pytest.mark.parametrize("field", _required("public"))
def test_public_report_missing_a_field_fails(reports: Any, field: str) -> None:
    public = copy.deepcopy(reports["ir_dp"][0])
    del public[field]
    assert any(f"'{field}' is a required property" in m for m in _errors("public", public))


@pytest.mark.parametrize("field", _required("private"))
def test_private_report_missing_a_field_fails(reports: Any, field: str) -> None:
    private = copy.deepcopy(reports["ir_dp"][1])
    del private[field]
    assert any(f"'{field}' is a required property" in m for m in _errors("private", private))


@pytest.mark.parametrize(
    ("case", "field"),
    [
        ("diffgen", "cut"),
        ("diffgen", "steps_done"),
        ("diffgen", "leftover_budget"),
        ("randomized_response", "domain"),
        ("randomized_response", "rho_bound"),
    ],
)
def test_method_extras_are_required_for_their_method(reports: Any, case: str, field: str) -> None:
    public = copy.deepcopy(reports[case][0])
    del public[field]
    assert _errors("public", public) != []


@pytest.mark.parametrize(("case", "field"), [("k_noise", "deltas"), ("k_pram", "intervals")])
def test_private_extras_are_required_for_their_method(reports: Any, case: str, field: str) -> None:
    private = copy.deepcopy(reports[case][1])
    del private[field]
    assert _errors("private", private) != []


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("guarantee_level", "private"),
        ("guarantee_level", "PROVEN"),
        ("guarantee_level", None),
        ("report", "PRIVATE: not for publication"),
        ("schema_version", "0"),
        ("schema_version", 1),
        ("method", "ir-dp"),
        ("epsilon", -1.0),
        ("epsilon", "1"),
        ("unprotected", "copy"),
        ("seeded", "yes"),
        ("released_rows", -1),
        ("released_rows", 1.5),
        ("protected_columns", "age"),
        ("notes", [1]),
    ],
)
def test_public_report_with_a_wrong_value_fails(reports: Any, field: str, value: Any) -> None:
    public = copy.deepcopy(reports["ir_dp"][0])
    public[field] = value
    assert _errors("public", public) != []


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("epsilon", -0.5),
        ("columns", "age"),
        ("noise_scale", "large"),
        ("details", []),
        ("surprise", 1),
    ],
)
def test_ledger_entry_with_a_wrong_value_fails(reports: Any, field: str, value: Any) -> None:
    public = copy.deepcopy(reports["ir_dp"][0])
    public["ledger"][0][field] = value
    assert _errors("public", public) != []


def test_ledger_entry_missing_a_field_fails(reports: Any) -> None:
    for field in list(reports["ir_dp"][0]["ledger"][0]):
        public = copy.deepcopy(reports["ir_dp"][0])
        del public["ledger"][0][field]
        assert _errors("public", public) != [], field


def test_unknown_or_misplaced_fields_fail(reports: Any) -> None:
    ir_public, ir_private = reports["ir_dp"]
    assert _errors("public", {**ir_public, "input_rows": 400}) != []  # a private field
    assert _errors("public", {**ir_public, "cut": {}}) != []  # diffgen's extra
    rr_public = reports["randomized_response"][0]
    assert _errors("public", {**ir_public, "domain": rr_public["domain"]}) != []
    assert _errors("private", {**ir_private, "deltas": {}}) != []  # k_noise's extra
    assert _errors("private", {**ir_private, "guarantee": "x"}) != []  # a public field


def test_private_report_with_a_wrong_value_fails(reports: Any) -> None:
    private = reports["ir_dp"][1]
    assert _errors("private", {**private, "report": "public"}) != []
    assert _errors("private", {**private, "input_rows": -3}) != []
    assert _errors("private", {**private, "clamped": {"age": "some"}}) != []
    assert _errors("private", {**private, "metrics": []}) != []
