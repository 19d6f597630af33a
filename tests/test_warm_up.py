"""First use: ``dpfast warm-up`` compiles what the releases use; a compile says so.

Compiles are counted with Numba's ``numba:compile`` event (a cache hit emits none), never
guessed from seconds.
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numba
import pytest

from dpfast.cli._progress import COMPILING, ProgressLine

ROOT = Path(__file__).resolve().parent.parent


class FakeStream(io.StringIO):
    def __init__(self, tty: bool) -> None:
        super().__init__()
        self._tty = tty

    def isatty(self) -> bool:
        return self._tty


def _fresh_kernel():
    """A kernel no cache holds: its first call with each signature compiles."""
    return numba.njit(lambda x: x + 1)


def test_a_compile_shows_once_on_a_pipe_and_not_after_close():
    stream = FakeStream(tty=False)
    line = ProgressLine(stream)
    line.watch_compiles()
    line("noise", 1, 4)
    kernel = _fresh_kernel()
    kernel(1)
    kernel(1.0)  # a second signature, a second compile: said once
    kernel(2)  # compiled already: nothing
    line("assemble", 1, 1)
    line.close()
    _fresh_kernel()(1)  # after close: not watched
    expected = f"dpfast: noise...\ndpfast: {COMPILING}...\ndpfast: assemble...\n"
    assert stream.getvalue() == expected


def test_on_a_terminal_the_phase_comes_back_after_a_compile():
    stream = FakeStream(tty=True)
    line = ProgressLine(stream)
    line.watch_compiles()
    line("noise", 1, 4)
    _fresh_kernel()(1)
    got = stream.getvalue().split("\r")
    assert got[1:] == [
        "dpfast: noise  25%",
        f"dpfast: {COMPILING}",
        "dpfast: noise  25%".ljust(len(f"dpfast: {COMPILING}")),
    ]
    line.close()


def test_a_delayed_line_shows_a_compile_at_once(monkeypatch):
    monkeypatch.setattr("dpfast.cli._progress.time.monotonic", lambda: 10.0)
    stream = FakeStream(tty=False)
    line = ProgressLine(stream, delay=1.0)
    line.watch_compiles()
    line("reading a.csv", 0, 4)  # not shown: the phase is younger than its delay
    _fresh_kernel()(1)
    line.close()
    assert stream.getvalue() == f"dpfast: {COMPILING}...\n"


def test_the_warm_up_runs_every_release_command_and_function():
    import dpfast
    from dpfast.cli import RELEASE_COMMANDS
    from dpfast.cli._warm_up_command import _api_jobs, _cli_jobs, synthetic_table

    commands = {job[0] for job in _cli_jobs()}
    assert commands == {command.name for command in RELEASE_COMMANDS}
    called = {name.split()[0] for name, _ in _api_jobs(synthetic_table())}
    releases = {
        name for name in dpfast.__all__ if name.islower() and callable(getattr(dpfast, name))
    }
    # forecast spends nothing and releases nothing; accuracy reads a report, no data
    assert called == releases - {"forecast", "accuracy"}


# The check, in a fresh process (no kernel in memory) on the suite's own Numba cache: the
# warm-up, then a table unlike the warm-up's (other names, 1,000 rows, Pareto and signed
# values, the bundled ARX taxonomy), every release command from CSV and Parquet with its
# progress line on, and every function on pandas and NumPy inputs (writable and read-only)
# of one and several integer and float columns. The releases must add no type signature to
# any kernel: each signature they use is one the warm-up used, which a warm-up caches
# whether it compiled it or found it on disk. The process's compiles, counted with Numba's
# event (a cache hit emits none), are those the warm-up says it made. The cache is shared
# with the rest of the suite, so its compiles are made once; what this check adds to a
# compile in an empty cache of its own is the second process, _AGAIN, which runs the
# warm-up again and must compile nothing: every signature it uses is on disk.
_CHECK = textwrap.dedent(
    """
    import contextlib, io, json, os, sys, warnings
    import numba
    from numba.core import event

    compiled = []

    def signatures():
        found = set()
        for name, module in list(sys.modules.items()):
            if name.startswith("dpfast"):
                for kernel in list(vars(module).values()):
                    if isinstance(kernel, numba.core.dispatcher.Dispatcher):
                        function = kernel.py_func
                        where = f"{function.__module__}.{function.__qualname__}"
                        found.update(f"{where}{signature}" for signature in kernel.signatures)
        return found

    class Recorder(event.Listener):
        depth = 0

        def on_start(self, found):
            self.depth += 1
            if self.depth == 1:
                kernel = found.data["dispatcher"].py_func
                compiled.append(f"{kernel.__qualname__}{found.data['args']}")

        def on_end(self, found):
            self.depth -= 1

    event.register("numba:compile", Recorder())
    import numpy as np
    import pandas as pd
    import dpfast
    from dpfast.cli import main
    from dpfast.datasets import adult_hierarchy_path, adult_taxonomy

    said = io.StringIO()
    with contextlib.redirect_stdout(said):
        code = main(["warm-up", "--quiet", "--processes", "1"])  # its kernels in this process
    assert code == 0, said.getvalue()
    warmed = signatures()
    folder = sys.argv[1]
    rng = np.random.default_rng(7)
    n = 1000
    jobs = ["Adm-clerical", "Sales", "Tech-support", "Craft-repair", "Farming-fishing"]
    table = pd.DataFrame({
        "years": rng.integers(18, 80, n),
        "wage": np.round(rng.lognormal(9.0, 1.2, n), 2),
        "wealth": np.round((rng.pareto(1.5, n) + 1) * 1000.0, 2),
        "gain": np.round(rng.normal(0, 1, n) * rng.pareto(2.0, n) * 500.0, 2),
        "job": rng.choice(jobs, n),
        "smoker": rng.choice(["no", "yes"], n),
        "label": rng.choice(["a", "b"], n),
    })
    bounds = {"years": (18, 80), "wage": (0, 1e6), "wealth": (1000, 1e8), "gain": (-1e6, 1e6)}
    schema = {"version": 1, "columns": {
        **{c: {"type": "integer" if c == "years" else "float", "bounds": list(b)}
           for c, b in bounds.items()},
        "job": {"type": "categorical", "taxonomy": str(adult_hierarchy_path("occupation"))},
        "smoker": {"type": "categorical", "taxonomy": ["no", "yes"]},
        "label": {"type": "categorical", "protect": False},
    }}
    paths = {kind: os.path.join(folder, f"t.{kind}") for kind in ("csv", "parquet")}
    table.to_csv(paths["csv"], index=False)
    table.to_parquet(paths["parquet"], index=False)
    schema_path = os.path.join(folder, "t.schema.json")
    with open(schema_path, "w") as file:
        json.dump(schema, file)
    S = ["--schema", schema_path]
    commands = [
        ["ir-dp", "--k", "20", "--epsilon", "2", *S],
        ["ir-dp", "--k", "20", "--epsilon", "2", *S, "--columns", "years"],
        ["ir-dp", "--k", "20", "--epsilon", "2", *S, "--columns", "wage,job", "--metrics"],
        ["laplace", "--epsilon", "2", *S, "--columns", "wage,gain"],
        ["individual-ranking", "--k", "4", *S, "--columns", "wealth"],
        ["mdav", "--k", "6", *S],
        ["mdav", "--k", "6", *S, "--columns", "years,wage,gain"],
        ["mdav-dp", "--k", "40", "--epsilon", "2", *S],
        ["diffgen", "--target", "label", "--classes", "a,b", "--steps", "4", "--epsilon", "2",
         *S],
        ["k-noise", "--k", "6", *S, "--columns", "wealth,gain"],
        ["k-pram", "--k", "6", *S, "--columns", "years"],
        ["randomized-response", "--column", "job", "--epsilon", "2", *S],
    ]
    runs = 0
    for kind in ("csv", "parquet"):
        for command in commands:
            runs += 1
            out = os.path.join(folder, f"out{runs}.parquet")
            err = io.StringIO()
            with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
                code = main(["release", command[0], paths[kind], "-o", out, *command[1:]])
            assert code == 0, (command, err.getvalue())
            assert "compiling" not in err.getvalue(), (command, err.getvalue())
    warnings.simplefilter("ignore")
    taxonomies = {"job": adult_taxonomy("occupation"), "smoker": ["no", "yes"]}
    for columns in (["years"], ["wage"], ["years", "wage", "gain"]):
        limits = {c: bounds[c] for c in columns}
        dpfast.ir_dp(table, k=20, epsilon=2, bounds=limits, columns=columns)
        dpfast.laplace_dp(table, epsilon=2, bounds=limits, columns=columns)
        dpfast.individual_ranking(table, k=4, columns=columns)
        dpfast.mdav(table, k=6, columns=columns)
        dpfast.mdav_dp(table, k=40, epsilon=2, bounds=limits, columns=columns)
        dpfast.k_noise(table, k=6, columns=columns)
        dpfast.k_pram(table, k=6, columns=columns)
        by_index = dict(enumerate(limits.values()))
        # pandas' array, and arrays in NumPy's own (C) order, writable and read-only: the
        # kernels see each column read-only, contiguous or (C order) a strided view
        for order, writable in [("K", True), ("C", True), ("C", False)]:
            matrix = np.array(table[columns].to_numpy(), order=order)
            matrix.flags.writeable = writable
            dpfast.ir_dp(matrix, k=20, epsilon=2, bounds=by_index)
            dpfast.laplace_dp(matrix, epsilon=2, bounds=by_index)
            dpfast.mdav(matrix, k=6)
            dpfast.mdav_dp(matrix, k=40, epsilon=2, bounds=by_index)
            dpfast.k_noise(matrix, k=6)
            dpfast.k_pram(matrix, k=6)
    mixed = ["years", "job", "smoker"]
    dpfast.ir_dp(table, k=20, epsilon=2, bounds={"years": bounds["years"]}, columns=mixed,
                 taxonomies=taxonomies)
    dpfast.mdav(table, k=6, columns=mixed, taxonomies=taxonomies)
    dpfast.randomized_response(table, column="smoker", domain=["no", "yes"], epsilon=1)
    new = sorted(signatures() - warmed)
    print(json.dumps({"runs": runs, "new": new, "compiled": compiled, "said": said.getvalue()}))
    """
)

# The warm-up again in a fresh process, after the check: everything it uses is cached.
_AGAIN = textwrap.dedent(
    """
    import contextlib, io, json
    from numba.core import event

    compiled = []

    class Recorder(event.Listener):
        def on_start(self, found):
            compiled.append(str(found.data["args"]))

        def on_end(self, found):
            pass

    event.register("numba:compile", Recorder())
    from dpfast.cli import main

    said = io.StringIO()
    with contextlib.redirect_stdout(said):
        code = main(["warm-up", "--quiet", "--processes", "1"])
    assert code == 0, said.getvalue()
    print(json.dumps({"compiled": compiled, "said": said.getvalue()}))
    """
)


def _dpfast(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "dpfast", *args], capture_output=True, text=True, env=env
    )


def test_after_the_warm_up_no_release_compiles(tmp_path):
    check = subprocess.run(
        [sys.executable, "-c", _CHECK, str(tmp_path)], capture_output=True, text=True
    )
    assert check.returncode == 0, check.stderr[-5000:]
    got = json.loads(check.stdout.splitlines()[-1])
    assert got["runs"] == 24
    assert got["new"] == []  # no release used a signature the warm-up did not
    if got["compiled"]:  # what the warm-up found missing in the cache: it says so
        expected = f"dpfast warm-up: compiled and cached {len(got['compiled'])} kernel signature"
        assert got["said"].startswith(expected), (got["said"], got["compiled"])
    else:
        assert "every kernel was compiled and cached already" in got["said"], got["said"]
    again = subprocess.run([sys.executable, "-c", _AGAIN], capture_output=True, text=True)
    assert again.returncode == 0, again.stderr[-5000:]
    got = json.loads(again.stdout.splitlines()[-1])
    assert got["compiled"] == []  # every signature the warm-up uses was cached
    assert "every kernel was compiled and cached already" in got["said"], got["said"]


def test_the_progress_line_says_when_a_release_compiles(tmp_path):
    data = tmp_path / "t.csv"
    data.write_text("x,y\n" + "".join(f"{i % 37},{i}\n" for i in range(200)), encoding="utf-8")
    env = {**os.environ, "NUMBA_CACHE_DIR": str(tmp_path / "empty-cache")}
    release = ["release", "individual-ranking", str(data), "--k", "3", "--columns", "x"]
    first = _dpfast(*release, "-o", str(tmp_path / "a.csv"), env=env)
    assert first.returncode == 0, first.stderr[-3000:]
    assert first.stderr.count(f"dpfast: {COMPILING}...\n") == 1, first.stderr
    second = _dpfast(*release, "-o", str(tmp_path / "b.csv"), env=env)  # cached now
    assert second.returncode == 0, second.stderr[-3000:]
    assert "compiling" not in second.stderr, second.stderr
    quiet = _dpfast(*release, "-o", str(tmp_path / "c.csv"), "--quiet", env=env)
    assert quiet.returncode == 0 and quiet.stderr == "", quiet.stderr


@pytest.mark.parametrize("argv", [["warm-up", "--help"], ["--help"]])
def test_the_warm_up_is_a_command_with_help(argv, capsys):
    from dpfast.cli import main

    assert main(argv) == 0
    assert "warm-up" in capsys.readouterr().out


def test_the_warm_up_groups_every_job_once_by_method():
    from dpfast.cli._warm_up_command import _api_jobs, _cli_jobs, _groups, synthetic_table

    groups = _groups()
    jobs = [job for group in groups for job in group]
    assert sorted(jobs) == sorted(
        [("command", i) for i in range(len(_cli_jobs()))]
        + [("function", i) for i in range(len(_api_jobs(synthetic_table())))]
    )
    assert [len(group) for group in groups] == sorted(map(len, groups), reverse=True)
    names = {
        "command": [job[0] for job in _cli_jobs()],
        "function": [name for name, _ in _api_jobs(synthetic_table())],
    }
    methods = [{_short(names[kind][i]) for kind, i in group} for group in groups]
    assert all(len(found) == 1 for found in methods), methods  # one method a group
    assert len({found.pop() for found in methods}) == len(groups)


def _short(name: str) -> str:
    function = name.split()[0].replace("-", "_")
    return {"laplace": "laplace_dp"}.get(function, function)


# Two groups in two processes, on an empty cache of their own: the kernel the two commands
# share compiles in both at once and is saved under the cache's lock. A third process then
# runs the same commands and compiles nothing.
_PARALLEL = textwrap.dedent(
    """
    import json, os, sys, tempfile
    from dpfast.cli._warm_up_command import _run_groups

    groups = [[("command", int(index))] for index in sys.argv[1:]]  # a command a group
    processes = int(os.environ["PROCESSES"])
    with tempfile.TemporaryDirectory() as folder:
        compiled = _run_groups(groups, folder, processes, lambda jobs: None)
    print(json.dumps({"groups": len(groups), "compiled": sorted(compiled)}))
    """
)


def test_two_processes_warm_up_one_cache_that_a_third_then_loads(tmp_path):
    from dpfast.cli._warm_up_command import _cli_jobs

    # the two randomized-response commands in memory, from CSV: each compiles the same
    # kernel signature (the quickest commands to compile, about 7 s each on the 2-core VM)
    jobs = _cli_jobs()
    chosen = [str(i) for i, job in enumerate(jobs) if job[:2] == ("randomized-response", "{csv}")]
    assert len(chosen) == 2
    env = {**os.environ, "NUMBA_CACHE_DIR": str(tmp_path / "cache")}
    runs = []
    for processes in ("2", "1"):
        done = subprocess.run(
            [sys.executable, "-c", _PARALLEL, *chosen],
            capture_output=True,
            text=True,
            env={**env, "PROCESSES": processes},
        )
        assert done.returncode == 0, done.stderr[-5000:]
        runs.append(json.loads(done.stdout.splitlines()[-1]))
    assert runs[0]["groups"] == 2
    assert runs[0]["compiled"]  # an empty cache: the two processes compiled
    assert runs[1]["compiled"] == []  # each signature they compiled loads from the cache


def test_the_warm_up_refuses_no_processes(capsys):
    from dpfast.cli import main

    assert main(["warm-up", "--processes", "0"]) == 2
    assert "--processes must be 1 or more, got 0" in capsys.readouterr().err
