"""The user's files and budget: --force, SIGTERM, k = 1, --steps, and messages in CLI terms."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import textwrap
import time
from fractions import Fraction
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import dpfast
from dpfast import cli, datasets
from dpfast._validation import cli_spelling, option
from dpfast.cli._outputs import report_paths
from dpfast.methods.diffgen._budget import Budget

ROOT = Path(__file__).resolve().parents[1]
N_ROWS = 40
SCHEMA = {
    "columns": {
        "age": {"type": "integer", "bounds": [17, 90]},
        "income": {"type": "float", "bounds": [0, 200000]},
        "job": {"type": "categorical", "protect": False},
    }
}
DIFFGEN_SCHEMA = str(Path(datasets.__file__).with_name("adult_diffgen.schema.json"))

# A run of every command that writes, with OUTPUT as its output.
WRITERS = {
    "ir-dp": ["release", "ir-dp", "people.csv", "-o", "OUT", "--k", "5", "--epsilon", "1",
              "--schema", "schema.json", "--seed", "1"],
    "laplace": ["release", "laplace", "people.csv", "-o", "OUT", "--epsilon", "1",
                "--schema", "schema.json", "--seed", "1"],
    "individual-ranking": ["release", "individual-ranking", "people.csv", "-o", "OUT", "--k",
                           "3", "--columns", "age,income"],
    "mdav": ["release", "mdav", "people.csv", "-o", "OUT", "--k", "3", "--columns",
             "age,income"],
    "mdav-dp": ["release", "mdav-dp", "people.csv", "-o", "OUT", "--k", "5", "--epsilon", "1",
                "--schema", "schema.json", "--seed", "1"],
    "k-noise": ["release", "k-noise", "people.csv", "-o", "OUT", "--k", "3", "--columns",
                "age,income", "--seed", "1"],
    "k-pram": ["release", "k-pram", "people.csv", "-o", "OUT", "--k", "3", "--columns",
               "age,income", "--seed", "1"],
    "randomized-response": ["release", "randomized-response", "people.csv", "-o", "OUT",
                            "--column", "job", "--domain", "clerk,nurse,pilot", "--epsilon",
                            "1", "--seed", "1"],
    "diffgen": ["release", "diffgen", "adult.parquet", "-o", "OUT", "--target", "income",
                "--steps", "2", "--epsilon", "1", "--schema", DIFFGEN_SCHEMA, "--seed", "1"],
}  # fmt: skip


def people(n: int = N_ROWS) -> pd.DataFrame:
    rng = np.random.default_rng(0)
    return pd.DataFrame(
        {
            "age": rng.integers(17, 91, n),
            "income": rng.uniform(0, 150_000, n),
            "job": rng.choice(["clerk", "nurse", "pilot"], n),
        }
    )


@pytest.fixture
def workdir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    people().to_csv(tmp_path / "people.csv", index=False)
    datasets.adult("train", drop_missing=True).head(200).to_parquet(tmp_path / "adult.parquet")
    (tmp_path / "schema.json").write_text(json.dumps(SCHEMA), encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    return tmp_path


def run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    code = cli.main(argv)
    return code, capsys.readouterr().err


def one_error_line(err: str) -> str:
    """The error: one line, the last (a method's note may come before it)."""
    errors = [line for line in err.splitlines() if line.startswith("dpfast: error: ")]
    assert len(errors) == 1 and err.splitlines()[-1] == errors[0], err
    assert "Traceback" not in err
    return errors[0]


def with_output(argv: list[str], output: str) -> list[str]:
    return [output if item == "OUT" else item for item in argv]


# -- --force ---------------------------------------------------------------------------------


@pytest.mark.parametrize("method", sorted(WRITERS))
@pytest.mark.parametrize("existing", [0, 1, 2])
def test_an_existing_output_or_report_is_refused_before_any_work(
    workdir: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    method: str,
    existing: int,
) -> None:
    output = "out.csv"
    path = (output, *report_paths(output))[existing]
    Path(path).write_text("an earlier release\n", encoding="utf-8")
    before = sorted(p.name for p in workdir.iterdir())

    def no_work(*args: object, **kwargs: object) -> None:
        raise AssertionError("the input was read before the output check")

    monkeypatch.setattr(dpfast.io, "read_table", no_work)
    code, err = run(with_output(WRITERS[method], output), capsys)
    assert code == 2
    line = one_error_line(err)
    assert f"{path!r} already exists" in line and "--force" in line
    assert sorted(p.name for p in workdir.iterdir()) == before
    assert Path(path).read_text(encoding="utf-8") == "an earlier release\n"


@pytest.mark.parametrize("method", sorted(WRITERS))
def test_force_overwrites_the_output_and_both_reports(
    workdir: Path, capsys: pytest.CaptureFixture[str], method: str
) -> None:
    output = "out.csv"
    for path in (output, *report_paths(output)):
        Path(path).write_text("an earlier release\n", encoding="utf-8")
    code, err = run([*with_output(WRITERS[method], output), "--force", "--quiet"], capsys)
    assert code == 0, err
    for path in report_paths(output):
        assert json.loads(Path(path).read_text(encoding="utf-8"))["method"]
    assert "an earlier release" not in Path(output).read_text(encoding="utf-8")
    assert not [p.name for p in workdir.iterdir() if p.name.endswith(".tmp")]


def test_a_rerun_without_force_is_refused(
    workdir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = [*with_output(WRITERS["laplace"], "out.parquet"), "--quiet"]
    assert run(argv, capsys)[0] == 0
    first = Path("out.parquet").read_bytes()
    code, err = run(argv, capsys)
    assert code == 2 and "'out.parquet' already exists" in one_error_line(err)
    assert Path("out.parquet").read_bytes() == first


def test_the_input_is_never_overwritten_even_with_force(
    workdir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, err = run([*with_output(WRITERS["laplace"], "people.csv"), "--force"], capsys)
    assert code == 2 and "would overwrite the input" in one_error_line(err)


def test_demo_replaces_its_own_files_and_nothing_else(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # the demo releases public data and spends no budget: a rerun replaces its own files
    out = tmp_path / "demo"
    out.mkdir()
    data = out / "adult_ir_dp.parquet"
    Path(report_paths(data)[1]).write_text("{}", encoding="utf-8")
    (out / "notes.txt").write_text("mine", encoding="utf-8")
    code, err = run(["demo", "--out", str(out), "--seed", "1", "--quiet"], capsys)
    assert code == 0, err
    assert json.loads(Path(report_paths(data)[1]).read_text(encoding="utf-8"))["method"] == "ir_dp"
    assert (out / "notes.txt").read_text(encoding="utf-8") == "mine"
    code, err = run(["demo", "--out", str(out), "--force"], capsys)
    assert code == 2 and "unrecognized arguments: --force" in err


# -- SIGTERM -----------------------------------------------------------------------------------

# Runs the CLI with os.replace slowed down at its Nth call into the working directory or
# below (1: the data, complete, into OUTPUT's hidden staging directory; 2 and 3: the public
# and the private report beside it; 4 and 5: the reports into place; 6: the data), after a
# marker file names the file being renamed.
_SLOW_WRITER = """
import os, sys, time
from pathlib import Path
from dpfast import cli
real_replace, calls = os.replace, []
here = Path.cwd().resolve()
def slow_replace(src, dst):
    # count the release's own files only (Numba's cache writes through os.replace too)
    if Path(dst).resolve().is_relative_to(here):
        calls.append(dst)
        if len(calls) == int(sys.argv[1]):
            Path("marker").write_text(str(src))
            sleep_in_steps(120)
    real_replace(src, dst)
os.replace = slow_replace
sys.exit(cli.main(sys.argv[2:]))
"""


#: Put before each script of :func:`cli_process`: SIGUSR1 prints every thread's stack (for
#: :func:`stopped` to show where a process that does not end is), and
#: ``sleep_in_steps(seconds)`` sleeps in short steps, so that a signal is handled at once
#: whichever thread of the process the kernel gave it to (Python runs handlers in the main
#: thread, between steps). Ctrl-C raises ``KeyboardInterrupt`` as in a terminal, also where
#: the test run was started in the background (whose processes inherit SIGINT ignored).
_PROLOGUE = """
import faulthandler as _faulthandler, signal as _signal, time as _time
_faulthandler.register(_signal.SIGUSR1, all_threads=True)
_signal.signal(_signal.SIGINT, _signal.default_int_handler)
def sleep_in_steps(seconds):
    end = _time.monotonic() + seconds
    while _time.monotonic() < end:
        _time.sleep(0.05)
"""


def cli_process(script: str, args: list[str], cwd: Path) -> subprocess.Popen[str]:
    """Start ``python -c script ARGS...`` in ``cwd``, importing this checkout's dpfast.

    The script may call ``sleep_in_steps(seconds)`` (:data:`_PROLOGUE`).
    """
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    env.pop("DPFAST_DEBUG", None)
    return subprocess.Popen(
        [sys.executable, "-c", _PROLOGUE + textwrap.dedent(script), *args],
        cwd=cwd,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def wait_for(marker: Path, process: subprocess.Popen[str], timeout: float = 240) -> None:
    """Wait until ``process`` makes ``marker``; fail if it ends first or takes too long."""
    deadline = time.monotonic() + timeout
    while not marker.exists():
        assert process.poll() is None, process.communicate()
        assert time.monotonic() < deadline, f"the process never made {marker.name}"
        time.sleep(0.05)


def stopped(process: subprocess.Popen[str], signum: int) -> tuple[int, str]:
    """Send ``signum`` to ``process``; return its exit code and stderr once it ends.

    A process still running 60 s later fails the test with its threads' stacks.
    """
    try:
        process.send_signal(signum)
        _, err = process.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        process.send_signal(signal.SIGUSR1)  # the stacks, to stderr (_PROLOGUE)
        time.sleep(2)
        process.kill()
        _, err = process.communicate()
        message = f"the process did not end 60 s after signal {signum}:\n{err}"
        raise AssertionError(message) from None
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()
    return process.returncode, err


@pytest.mark.parametrize(
    "stage",
    [1, 4, 6],
    ids=["while writing the data", "while publishing the reports", "before the data's rename"],
)
def test_sigterm_removes_the_temporary_file_and_the_output(workdir: Path, stage: int) -> None:
    argv = with_output(WRITERS["laplace"], "out.parquet")
    process = cli_process(_SLOW_WRITER, [str(stage), *argv], workdir)
    try:
        wait_for(workdir / "marker", process)
        temporary = Path(workdir / "marker").read_text()
        assert Path(temporary).exists()  # the test interrupts a write in progress
        assert not (workdir / "out.parquet").exists()
        reports = [os.path.exists(workdir / path) for path in report_paths("out.parquet")]
        assert reports == [stage == 6] * 2  # the reports are in place before the data
    finally:
        code, err = stopped(process, signal.SIGTERM)
    assert code == 143, err
    assert err.splitlines()[-1] == "dpfast: terminated (SIGTERM)"
    assert "Traceback" not in err
    left = sorted(p.name for p in workdir.iterdir())
    assert left == ["adult.parquet", "marker", "people.csv", "schema.json"]


def test_main_restores_the_previous_sigterm_handler(
    workdir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    def host_handler(signum: int, frame: object) -> None:
        raise AssertionError("not called")

    previous = signal.signal(signal.SIGTERM, host_handler)
    try:
        seen = []
        real = cli._handle

        def spy(args: object) -> int:
            seen.append(signal.getsignal(signal.SIGTERM))
            return real(args)  # type: ignore[arg-type]

        cli._handle, saved = spy, cli._handle  # type: ignore[assignment]
        try:
            assert run([*with_output(WRITERS["laplace"], "out.csv"), "--quiet"], capsys)[0] == 0
        finally:
            cli._handle = saved  # type: ignore[assignment]
        assert seen and seen[0] is not host_handler  # the CLI's own handler while it runs
        assert signal.getsignal(signal.SIGTERM) is host_handler
    finally:
        signal.signal(signal.SIGTERM, previous)


def test_library_writes_leave_the_signal_handlers_alone(tmp_path: Path) -> None:
    before = signal.getsignal(signal.SIGTERM), signal.getsignal(signal.SIGINT)
    dpfast.io.write_table_atomic(people(), tmp_path / "x.parquet")
    dpfast.io.write_json_atomic({"a": 1}, tmp_path / "x.json")
    release = dpfast.laplace_dp(people(), epsilon=1, bounds={"age": (17, 90)}, columns=["age"])
    assert release.report.epsilon == 1
    assert (signal.getsignal(signal.SIGTERM), signal.getsignal(signal.SIGINT)) == before


# -- k = 1 --------------------------------------------------------------------------------------


@pytest.mark.parametrize("method", ["mdav", "individual_ranking", "k_pram"])
def test_k_1_is_refused_where_it_can_release_the_input_unchanged(method: str) -> None:
    data = np.arange(20.0).reshape(-1, 1)  # evenly spread: k-PRAM's intervals hold one value
    with pytest.raises(ValueError, match=r"k=1 can release the input unchanged.*k >= 2"):
        getattr(dpfast, method)(data, k=1)
    assert getattr(dpfast, method)(data, k=2).report.parameters["k"] == 2


def test_k_1_of_the_noisy_methods_stays_allowed() -> None:
    data = np.arange(20.0).reshape(-1, 1)
    bounds = {0: (0.0, 19.0)}
    assert dpfast.ir_dp(data, k=1, epsilon=1, bounds=bounds, seed=1).report.epsilon == 1
    assert dpfast.mdav_dp(data, k=1, epsilon=1, bounds=bounds, seed=1).report.epsilon == 1
    released = dpfast.k_noise(data, k=1, seed=1).data
    assert not np.array_equal(released, data)  # noise of width above half the largest gap


@pytest.mark.parametrize("method", ["mdav", "individual-ranking", "k-pram"])
def test_cli_k_1_is_one_line_naming_the_flag(
    workdir: Path, capsys: pytest.CaptureFixture[str], method: str
) -> None:
    argv = with_output(WRITERS[method], "out.csv")
    argv[argv.index("--k") + 1] = "1"
    code, err = run(argv, capsys)
    assert code == 2
    line = one_error_line(err)
    assert "--k 1 can release the input unchanged" in line and "--k >= 2" in line
    assert "dpfast release ir-dp" in line and "out.csv" not in os.listdir(workdir)


# -- DiffGen --steps ------------------------------------------------------------------------------


def _budget(epsilon: float, n_numeric: int, utility: str = "max") -> Budget:
    delta_u = 1.0  # Max: 1; InfoGain: log2(2 classes) = 1
    numeric = [object()] * n_numeric
    return Budget(Fraction(epsilon), Fraction(0), delta_u, numeric, utility)  # type: ignore[arg-type]


def _draws_work(epsilon: float, n_numeric: int, steps: int, utility: str) -> bool:
    """Try what a DiffGen draw does with the ε' of ``steps`` steps: build its base, log it."""
    epsilon_prime = float(Fraction(epsilon) / (2 * (n_numeric + 2 * steps)))
    units = 1 if utility == "max" else dpfast.noise.quality_units(np.zeros(1), sensitivity=1.0)[1]
    unit = 1.0 if utility == "max" else 2.0**-dpfast.noise.SCORE_BITS
    try:
        base = dpfast.noise.exponential_base(epsilon=epsilon_prime, sensitivity=units)
        json.dumps({"scale": base.scale(unit), **base.details(unit)}, allow_nan=False)
    except (ValueError, ArithmeticError):
        return False
    return True


@pytest.mark.parametrize(
    ("epsilon", "n_numeric", "utility"),
    [
        (1.0, 0, "max"),
        (1.0, 1, "max"),
        (1e-9, 3, "max"),
        (2.0**-31, 2, "info_gain"),
        (2.0**-1000, 0, "max"),
        (3.5, 7, "info_gain"),
    ],
)
def test_max_steps_is_the_largest_step_count_whose_draws_work(
    epsilon: float, n_numeric: int, utility: str
) -> None:
    got = _budget(epsilon, n_numeric, utility).max_steps()
    assert got > 0
    assert _draws_work(epsilon, n_numeric, got, utility)
    assert not _draws_work(epsilon, n_numeric, got + 1, utility)
    assert _budget(epsilon, n_numeric, utility).served(got)
    assert not _budget(epsilon, n_numeric, utility).served(got + 1)


def test_too_many_steps_are_refused_with_the_largest_that_fits(
    workdir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = with_output(WRITERS["diffgen"], "out.csv")
    largest = _budget(1.0, 6).max_steps()  # adult_diffgen: six numeric predictors
    argv[argv.index("--steps") + 1] = str(largest + 1)
    code, err = run(argv, capsys)
    assert code == 2
    line = one_error_line(err)
    assert f"--steps {largest + 1} is too large" in line
    assert f"use --steps <= {largest} (or raise --epsilon)" in line
    assert not Path("out.csv").exists()


def test_the_largest_step_count_is_served(workdir: Path) -> None:
    # the largest step count runs (at about epsilon / 4e-308); one more is refused
    table = pd.read_parquet("adult.parquet")[["age", "education", "sex", "income"]]
    taxonomies = {
        c: dpfast.Taxonomy.from_arx(
            Path(datasets.__file__).parent / "hierarchies" / f"adult_hierarchy_{file}.csv"
        )
        for c, file in (("education", "education"), ("sex", "sex"), ("income", "salary-class"))
    }
    kwargs = dict(target="income", taxonomies=taxonomies, bounds={"age": (17, 90)}, seed=1)
    largest = _budget(1.0, 1).max_steps()
    assert 10**307 < largest < 10**308
    release = dpfast.diffgen(table, epsilon=1.0, steps=largest, **kwargs)
    assert release.report.epsilon == 1
    with pytest.raises(ValueError, match=rf"steps={largest + 1} is too large.*steps <= {largest}"):
        dpfast.diffgen(table, epsilon=1.0, steps=largest + 1, **kwargs)


# -- messages name the CLI's flags ---------------------------------------------------------------

# Python keywords of the release functions that the CLI spells differently or as a flag.
_PYTHON_KEYWORDS = re.compile(
    r"\bn_threads\b|\btaxonomies\b"
    r"|(?<![-\w])(k|epsilon|seed|steps|retention|columns|column|unprotected|linkage|shuffle|"
    r"target|classes|domain|utility|calibration|reference|sensitivity|bounds)="
    r"|(?<![-\w])(k|seed|steps|retention|n_threads|columns|domain|classes) (must|lists)\b"
    r"|(?<![-\w])(k|steps|columns) is\b"
    r"|\bor None\b|\bpass None\b"
)


def _replace(argv: list[str], flag: str, value: str) -> list[str]:
    argv = list(argv)
    if flag in argv:
        argv[argv.index(flag) + 1] = value
    else:
        argv += [flag, value]
    return argv


USAGE_ERRORS = [
    ("ir-dp", "--k", "0"),
    ("ir-dp", "--k", "41"),
    ("ir-dp", "--threads", "0"),
    ("ir-dp", "--seed", "-1"),
    ("ir-dp", "--epsilon", "0"),
    ("laplace", "--seed", "-3"),
    ("mdav", "--k", "1"),
    ("mdav", "--k", "0"),
    ("mdav", "--columns", "age,age"),
    ("mdav", "--columns", "age,nope"),
    ("mdav", "--columns", "job"),
    ("mdav-dp", "--k", "41"),
    ("individual-ranking", "--k", "1"),
    ("individual-ranking", "--k", "99"),
    ("individual-ranking", "--columns", "nope"),
    ("k-noise", "--k", "0"),
    ("k-noise", "--threads", "0"),
    ("k-noise", "--seed", "-1"),
    ("k-pram", "--k", "1"),
    ("k-pram", "--retention", "1"),
    ("k-pram", "--retention", "-0.5"),
    ("randomized-response", "--column", "nope"),
    ("randomized-response", "--threads", "0"),
    ("randomized-response", "--domain", "clerk"),
    ("randomized-response", "--domain", "clerk,nurse,clerk"),
    ("diffgen", "--classes", "<=50K,>50K"),
    ("diffgen", "--steps", "-1"),
    ("diffgen", "--steps", str(10**400)),
    ("diffgen", "--seed", "-1"),
]


@pytest.mark.parametrize(("method", "flag", "value"), USAGE_ERRORS)
def test_cli_usage_errors_name_flags_not_python_keywords(
    workdir: Path, capsys: pytest.CaptureFixture[str], method: str, flag: str, value: str
) -> None:
    argv = _replace(with_output(WRITERS[method], "out.csv"), flag, value)
    code, err = run(argv, capsys)
    assert code == 2, err
    line = one_error_line(err)
    assert flag in line, line  # the message names the flag that was wrong
    assert not _PYTHON_KEYWORDS.search(line), line
    assert not Path("out.csv").exists()


@pytest.mark.parametrize(
    "python_text",
    [
        "n_threads must be >= 1 or None, got 0",
        "k must be in [1, 40] (the number of rows), got 41",
        "k=1 can release the input unchanged",
        "domain must hold at least 2 categories, got 1",
        "the class domain is given twice (classes= and taxonomies['income']); keep one",
        "use utility='max'",
        "columns lists a column twice: ['age', 'age']",
    ],
)
def test_the_keyword_pattern_catches_python_spellings(python_text: str) -> None:
    assert _PYTHON_KEYWORDS.search(python_text)
    with cli_spelling():
        assert not _PYTHON_KEYWORDS.search(f"{option('k', 1)} and {option('n_threads')} must")


def test_the_same_checks_name_python_keywords_in_python() -> None:
    data = people()
    with pytest.raises(ValueError, match=r"^n_threads must be >= 1 or None, got 0$"):
        dpfast.k_noise(data, k=2, columns=["age"], n_threads=0)
    with pytest.raises(ValueError, match=r"^seed must be a non-negative integer or None"):
        dpfast.k_noise(data, k=2, columns=["age"], seed=-1)
    with pytest.raises(ValueError, match=r"^k=1 can release the input unchanged.*dpfast.ir_dp\(\)"):
        dpfast.mdav(data, k=1, columns=["age"])
    with pytest.raises(ValueError, match=r"^columns lists a column twice"):
        dpfast.mdav(data, k=2, columns=["age", "age"])
    with pytest.raises(ValueError, match=r"^retention must be in \[0, 1\)"):
        dpfast.k_pram(data, k=2, columns=["age"], retention=1.0)


def test_option_spells_a_keyword_for_its_caller() -> None:
    assert (option("n_threads"), option("k", 1), option("steps")) == ("n_threads", "k=1", "steps")
    with cli_spelling():
        got = option("n_threads"), option("k", 1), option("steps"), option("shuffle", False)
    assert got == ("--threads", "--k 1", "--steps", "--no-shuffle")
