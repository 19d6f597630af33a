"""Budget files: a dataset's total ε, spent across releases, runs, processes and paths.

The rule under test: a release's spend is committed (final) before any of its output is
visible, so no interrupt, failure or refusal can leave output on disk with its spend given
back, and a reservation that never committed published nothing (docs/budget.md).
"""

from __future__ import annotations

import hashlib
import json
import math
import multiprocessing
import os
import re
import signal
import socket
import stat
import time
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

import dpfast
from dpfast.budget import BudgetFile, Reservation
from dpfast.cli import main
from dpfast.exceptions import (
    BudgetExceededError,
    BudgetFileError,
    DPFastError,
    EpsilonRangeError,
)
from tests.test_cli_safety import cli_process, one_error_line, run, stopped, wait_for

ROOT = Path(__file__).resolve().parents[1]
SCHEMA = {"columns": {"age": {"type": "integer", "bounds": [17, 90]}}}
STEPS = ("before commit", "after commit", "after publish")
ENGINES = {"in memory": [], "out of core": ["--memory-limit", "1MiB"]}


@pytest.fixture
def files(tmp_path: Path) -> Path:
    rng = np.random.default_rng(6)
    pd.DataFrame({"age": rng.integers(17, 91, 60)}).to_parquet(tmp_path / "in.parquet")
    (tmp_path / "s.json").write_text(json.dumps(SCHEMA), encoding="utf-8")
    return tmp_path


def _argv(files: Path, name: str, epsilon: str, *extra: str, budget: str = "b.json") -> list[str]:
    argv = ["release", "laplace", str(files / "in.parquet"), "-o", str(files / name), "--quiet"]
    argv += ["--epsilon", epsilon, "--schema", str(files / "s.json"), "--seed", "1"]
    return [*argv, "--budget", str(files / budget), *extra]


def _release(files: Path, name: str, epsilon: str, *extra: str, budget: str = "b.json") -> int:
    return main(_argv(files, name, epsilon, *extra, budget=budget))


def _statuses(path: Path) -> list[tuple[str, float]]:
    return [(e.status, e.epsilon) for e in BudgetFile(path).entries()]


def _hidden_beside(output: Path) -> list[str]:
    return [p.name for p in output.parent.iterdir() if p.name.startswith(f".{output.name}")]


# -- the lifecycle, through the command line -------------------------------------------------


def test_releases_spend_from_the_file_until_it_is_used_up(files, capsys):
    assert main(["budget", "init", str(files / "b.json"), "--total-epsilon", "2"]) == 0
    assert _release(files, "r1.parquet", "1") == 0
    assert _release(files, "r2.parquet", "0.75") == 0
    assert BudgetFile(files / "b.json").remaining() == pytest.approx(0.25)
    before = (files / "b.json").read_bytes()
    # refused before any work: no output, no report, nothing spent, the file untouched
    code, err = run(_argv(files, "r3.parquet", "0.5"), capsys)
    assert code == 2
    line = one_error_line(err)
    assert "needs --epsilon 0.5" in line and "0.25 of 2 left" in line
    assert "lower --epsilon to at most 0.25" in line
    assert not list(files.glob("r3.parquet*"))
    assert (files / "b.json").read_bytes() == before
    assert _statuses(files / "b.json") == [("committed", 1.0), ("committed", 0.75)]
    assert main(["budget", "show", str(files / "b.json")]) == 0
    shown = capsys.readouterr().out
    assert "total epsilon 2, spent 1.75, left 0.25" in shown and "r2.parquet" in shown


@pytest.mark.parametrize("engine", sorted(ENGINES))
def test_entries_record_the_method_guarantee_columns_and_output(files, capsys, engine):
    BudgetFile.create(files / "b.json", 2.0)
    assert _release(files, "r.parquet", "0.5", *ENGINES[engine]) == 0
    (entry,) = BudgetFile(files / "b.json").entries()
    report = json.loads((files / "r.parquet.public-report.json").read_text(encoding="utf-8"))
    assert entry.status == "committed" and entry.epsilon == 0.5
    assert entry.method == "laplace"
    assert entry.guarantee_level == report["guarantee_level"] == "proven"
    assert entry.columns == ("age",) == tuple(report["protected_columns"])
    assert entry.output == str(files / "r.parquet")
    assert (entry.pid, entry.host) == (os.getpid(), socket.gethostname())
    assert entry.reserved_at <= entry.committed_at
    assert main(["budget", "show", str(files / "b.json")]) == 0
    shown = capsys.readouterr().out
    assert re.search(r"0\s+committed\s+0\.5\s+laplace\s+proven\s+age\s", shown), shown


@pytest.mark.parametrize("engine", sorted(ENGINES))
def test_the_entry_records_the_guarantee_the_reports_state(files, engine):
    # bounds taken from the data: the release is labelled NOT private, and so is its entry
    schema = {"columns": {"age": {"type": "integer", "bounds": [17, 90], "from_data": ["bounds"]}}}
    (files / "s.json").write_text(json.dumps(schema), encoding="utf-8")
    BudgetFile.create(files / "b.json", 2.0)
    assert _release(files, "r.parquet", "0.5", *ENGINES[engine]) == 0
    report = json.loads((files / "r.parquet.public-report.json").read_text(encoding="utf-8"))
    (entry,) = BudgetFile(files / "b.json").entries()
    assert entry.guarantee_level == report["guarantee_level"] == "none"


def test_every_dp_command_takes_a_budget(files):
    rng = np.random.default_rng(1)
    frame = pd.DataFrame({"age": rng.integers(17, 91, 60), "answer": rng.choice(["no", "yes"], 60)})
    frame.to_parquet(files / "in.parquet")
    schema = {
        "columns": {
            "age": {"type": "integer", "bounds": [17, 90]},
            "answer": {"type": "categorical", "taxonomy": ["no", "yes"]},
        }
    }
    (files / "s.json").write_text(json.dumps(schema), encoding="utf-8")
    BudgetFile.create(files / "b.json", 10.0)
    commands = {
        "ir-dp": ["--k", "5", "--columns", "age"],
        "laplace": ["--columns", "age"],
        "mdav-dp": ["--k", "10", "--columns", "age"],
        "diffgen": ["--target", "answer", "--steps", "1"],
        "randomized-response": ["--column", "answer"],
    }
    for method, options in commands.items():
        out = files / f"{method}.parquet"
        argv = ["release", method, str(files / "in.parquet"), "-o", str(out), "--quiet"]
        argv += ["--schema", str(files / "s.json"), "--epsilon", "1", "--seed", "1"]
        assert main([*argv, *options, "--budget", str(files / "b.json")]) == 0, method
    entries = BudgetFile(files / "b.json").entries()
    assert [e.method for e in entries] == list(commands)
    assert all(0 < e.epsilon <= 1.0 and e.status == "committed" for e in entries)
    assert [e.guarantee_level for e in entries][-1] == "local"
    assert entries[-1].columns == ("answer",)


# -- ε is checked before the file is touched -------------------------------------------------


@pytest.mark.parametrize("epsilon", ["-100", "0", "nan", "inf", "-0"])
def test_a_bad_epsilon_is_refused_as_the_release_refuses_it(files, capsys, epsilon):
    BudgetFile.create(files / "b.json", 1.0)
    before = (files / "b.json").read_bytes()
    code, err = run(_argv(files, "r.parquet", epsilon), capsys)
    assert code == 2
    with_budget = one_error_line(err)
    code, err = run(_argv(files, "r.parquet", epsilon)[:-2], capsys)  # without --budget
    assert code == 2
    assert with_budget == one_error_line(err)
    assert "--epsilon must be a finite number > 0" in with_budget
    assert (files / "b.json").read_bytes() == before
    assert not list(files.glob("r.parquet*"))


@pytest.mark.parametrize("epsilon", [-100.0, 0.0, math.nan, math.inf, "1", None, True])
def test_reserve_checks_epsilon_as_the_release_functions_do(tmp_path, epsilon):
    budget = BudgetFile.create(tmp_path / "b.json", 1.0)
    before = budget.real_path.read_bytes()
    with pytest.raises((EpsilonRangeError, TypeError)) as refused:
        budget.reserve(epsilon, method="laplace_dp", output="r.csv")
    with pytest.raises(type(refused.value)) as expected:
        dpfast.laplace_dp(np.zeros((3, 1)), epsilon=epsilon, bounds={0: (0.0, 1.0)})
    assert str(refused.value) == str(expected.value)
    assert budget.real_path.read_bytes() == before


def test_a_negative_epsilon_cannot_make_room_for_an_overspend(files, capsys):
    # the measured attack: a held reservation at -100, then 50 on a total of 1
    BudgetFile.create(files / "b.json", 1.0)
    budget = BudgetFile(files / "b.json")
    with pytest.raises(EpsilonRangeError):
        budget.reserve(-100.0, method="laplace", output="held.parquet")
    assert _release(files, "r.parquet", "50") == 2
    assert "needs --epsilon 50" in capsys.readouterr().err
    assert main(["budget", "show", str(files / "b.json")]) == 0
    assert "total epsilon 1, spent 0, left 1" in capsys.readouterr().out


# -- refused and failed runs leave the file as it was ------------------------------------------


def _columns_not_in_schema(files: Path) -> list[str]:
    return ["--columns", "nope"]  # refused after the reservation, before any work


def _existing_output(files: Path) -> list[str]:
    (files / "r.parquet").write_bytes(b"an earlier release")
    return []


@pytest.mark.parametrize(
    "refusal", [_columns_not_in_schema, _existing_output], ids=["columns", "exists"]
)
def test_a_refused_run_leaves_the_file_byte_identical(files, capsys, refusal):
    BudgetFile.create(files / "b.json", 1.0)
    assert _release(files, "first.parquet", "0.25") == 0
    before = (files / "b.json").read_bytes()
    code, err = run(_argv(files, "r.parquet", "0.5", *refusal(files)), capsys)
    assert code == 2, err
    assert (files / "b.json").read_bytes() == before


@pytest.mark.parametrize("engine", sorted(ENGINES))
def test_a_failed_write_before_the_commit_leaves_the_file_byte_identical(
    files, monkeypatch, engine
):
    BudgetFile.create(files / "b.json", 1.0)
    before = (files / "b.json").read_bytes()

    def full_disk(*args, **kwargs):
        raise OSError(28, "No space left on device")

    if engine == "in memory":
        monkeypatch.setattr("dpfast.io.write_table_atomic", full_disk)
    else:
        monkeypatch.setattr("dpfast.engines.outofcore._output.Output._stitch", full_disk)
    assert _release(files, "r.parquet", "1", *ENGINES[engine]) == 2
    assert (files / "b.json").read_bytes() == before
    assert not (files / "r.parquet").exists() and not _hidden_beside(files / "r.parquet")


def test_failed_reports_after_publishing_keep_the_spend(files, monkeypatch):
    BudgetFile.create(files / "b.json", 1.0)

    def full_disk(*args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr("dpfast.io.write_json_atomic", full_disk)
    assert _release(files, "r.parquet", "0.5") == 2
    assert not (files / "r.parquet").exists()  # taken back: never one without the reports
    assert _statuses(files / "b.json") == [("committed", 0.5)]  # but it was visible


# -- interrupts at every step ------------------------------------------------------------------


def _interrupt_at(monkeypatch: pytest.MonkeyPatch, step: str, output: Path) -> None:
    """Raise KeyboardInterrupt at ``step`` of the release to ``output``."""
    real_commit, real_replace = Reservation.commit, os.replace

    def commit(self, report):
        if step == "before commit":
            raise KeyboardInterrupt
        entry = real_commit(self, report)
        if step == "after commit":
            raise KeyboardInterrupt
        return entry

    def replace(source, target, **kwargs):
        real_replace(source, target, **kwargs)
        if step == "after publish" and os.path.abspath(target) == str(output):
            raise KeyboardInterrupt

    monkeypatch.setattr(Reservation, "commit", commit)
    monkeypatch.setattr(os, "replace", replace)


def assert_never_refunded_when_visible(
    output: Path, budget: Path, before: bytes, step: str, epsilon: float = 0.5
) -> None:
    """What an interrupt at ``step`` leaves: never visible output whose spend was given back."""
    entries = BudgetFile(budget).entries()
    if os.path.lexists(output):
        assert [e.status for e in entries] == ["committed"]
    if step == "before commit":
        assert budget.read_bytes() == before  # the reservation was abandoned
        assert not os.path.lexists(output)
    else:
        assert [(e.status, e.epsilon) for e in entries] == [("committed", epsilon)]  # final
    if step != "after publish":
        assert not os.path.lexists(output)
    assert not _hidden_beside(output)  # no scratch, no temporary, no unpublished copy


@pytest.mark.parametrize("engine", sorted(ENGINES))
@pytest.mark.parametrize("step", STEPS)
def test_keyboard_interrupt_at_each_step_never_refunds_visible_output(
    files, monkeypatch, capsys, engine, step
):
    BudgetFile.create(files / "b.json", 1.0)
    before = (files / "b.json").read_bytes()
    output = files / "r.parquet"
    with monkeypatch.context() as patch:
        _interrupt_at(patch, step, output)
        code, err = run(_argv(files, "r.parquet", "0.5", *ENGINES[engine]), capsys)
    assert code == 130, err
    assert_never_refunded_when_visible(output, files / "b.json", before, step)


# Runs the CLI, pausing at a step of the release (argv[1]) to the output argv[2] once a marker
# file names the step; the test then signals it.
_PAUSING = """
import os, sys, time
from pathlib import Path
from dpfast import cli
from dpfast.budget import Reservation
step, output = sys.argv[1], os.path.abspath(sys.argv[2])
real_commit, real_replace = Reservation.commit, os.replace
def pause():
    Path("marker").write_text(step)
    sleep_in_steps(120)
def commit(self, report):
    if step == "before commit":
        pause()
    entry = real_commit(self, report)
    if step == "after commit":
        pause()
    return entry
def replace(source, target):
    real_replace(source, target)
    if step == "after publish" and os.path.abspath(target) == output:
        pause()
Reservation.commit = commit
os.replace = replace
sys.exit(cli.main(sys.argv[3:]))
"""


@pytest.mark.parametrize(
    ("engine", "signum"),
    [
        ("in memory", signal.SIGINT),
        ("in memory", signal.SIGTERM),
        ("out of core", signal.SIGINT),
    ],
    ids=["in memory-SIGINT", "in memory-SIGTERM", "out of core-SIGINT"],
)
@pytest.mark.parametrize("step", STEPS)
def test_a_signal_at_each_step_never_refunds_visible_output(files, engine, signum, step):
    BudgetFile.create(files / "b.json", 1.0)
    before = (files / "b.json").read_bytes()
    output = files / "r.parquet"
    argv = _argv(files, "r.parquet", "0.5", *ENGINES[engine])
    process = cli_process(_PAUSING, [step, str(output), *argv], files)
    try:
        wait_for(files / "marker", process)
        # paused at the step: what another process sees now
        visible = os.path.lexists(output)
        assert visible == (step == "after publish")
        status = BudgetFile(files / "b.json").entries()[0].status
        assert status == ("reserved" if step == "before commit" else "committed")
    finally:
        code, err = stopped(process, signum)
    assert code == (143 if signum == signal.SIGTERM else 130), err
    assert "Traceback" not in err
    (files / "marker").unlink()
    assert_never_refunded_when_visible(output, files / "b.json", before, step)


# -- one budget, however it is reached ---------------------------------------------------------


def test_a_symlink_and_its_target_are_one_budget(files, capsys):
    BudgetFile.create(files / "b.json", 1.5)
    (files / "link.json").symlink_to(files / "b.json")
    assert _release(files, "r1.parquet", "1", budget="link.json") == 0
    code, err = run(_argv(files, "r2.parquet", "1"), capsys)  # the target itself
    assert code == 2 and "0.5 of 1.5 left" in one_error_line(err)
    assert (files / "link.json").is_symlink()  # written through, not replaced
    assert _statuses(files / "link.json") == [("committed", 1.0)]
    assert sorted(p.name for p in files.glob("*.lock")) == ["b.json.lock"]
    assert BudgetFile(files / "link.json").real_path == (files / "b.json").resolve()


def test_two_releases_racing_through_a_symlink_and_its_target(files):
    BudgetFile.create(files / "b.json", 1.5)
    (files / "link.json").symlink_to(files / "b.json")
    script = "import sys\nfrom dpfast import cli\nsys.exit(cli.main(sys.argv[1:]))\n"
    processes = [
        cli_process(script, _argv(files, f"r{i}.parquet", "1", budget=budget), files)
        for i, budget in enumerate(["link.json", "b.json"])
    ]
    results = [(p.wait(timeout=240), p.communicate()[1]) for p in processes]
    assert sorted(code for code, _ in results) == [0, 2], results
    assert any("needs --epsilon 1 but" in err for _, err in results)
    assert _statuses(files / "b.json") == [("committed", 1.0)]
    assert (files / "link.json").is_symlink()


def _take(path: str, barrier, results) -> None:
    barrier.wait()
    try:
        BudgetFile(path).reserve(0.6, method="laplace_dp", output="x").commit(
            SimpleNamespace(epsilon=0.6, guarantee_level="proven", protected_columns=["x"])
        )
        results.put("ok")
    except BudgetExceededError:
        results.put("refused")


@pytest.mark.parametrize("paths", [["b.json"] * 4, ["b.json", "link.json"] * 2])
def test_processes_racing_for_the_last_of_a_budget_one_wins(tmp_path, paths):
    BudgetFile.create(tmp_path / "b.json", 1.0)
    (tmp_path / "link.json").symlink_to(tmp_path / "b.json")
    context = multiprocessing.get_context("spawn")
    barrier = context.Barrier(len(paths))
    results = context.Queue()
    workers = [
        context.Process(target=_take, args=(str(tmp_path / path), barrier, results))
        for path in paths
    ]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(timeout=60)
    outcomes = sorted(results.get(timeout=5) for _ in workers)
    assert outcomes == ["ok", "refused", "refused", "refused"]
    assert BudgetFile(tmp_path / "b.json").remaining() == pytest.approx(0.4)


def test_a_hard_linked_budget_is_refused_before_it_splits(tmp_path):
    budget = BudgetFile.create(tmp_path / "b.json", 1.0)
    os.link(tmp_path / "b.json", tmp_path / "other.json")
    with pytest.raises(BudgetFileError, match=r"2 hard links.*symbolic links"):
        budget.reserve(0.5, method="laplace_dp", output="x")
    assert BudgetFile(tmp_path / "other.json").entries() == []


# -- the Python API: reserve, commit, abandon ------------------------------------------------


def _report(epsilon: float | None) -> SimpleNamespace:
    return SimpleNamespace(epsilon=epsilon, guarantee_level="proven", protected_columns=["age"])


def test_a_reservation_counts_until_it_is_committed_or_abandoned(tmp_path):
    budget = BudgetFile.create(tmp_path / "b.json", 1.0)
    empty = budget.real_path.read_bytes()
    held = budget.reserve(0.6, method="ir_dp", output="x", columns=["age"])
    assert budget.remaining() == pytest.approx(0.4)  # a crash here keeps it counted
    with pytest.raises(BudgetExceededError):
        budget.reserve(0.5, method="ir_dp", output="y")
    with pytest.raises(BudgetExceededError, match="must not be published"):
        held.commit(_report(1.5))  # spent more than fits: stays reserved, not committed
    assert not held.committed and _statuses(tmp_path / "b.json") == [("reserved", 0.6)]
    assert held.abandon() is True
    assert budget.real_path.read_bytes() == empty  # as it was before the reservation
    with budget.reserve(0.3, method="laplace_dp", output="z") as other:
        entry = other.commit(_report(0.25))  # the report's ε, not the reservation's
    assert (entry.status, entry.epsilon, entry.columns) == ("committed", 0.25, ("age",))
    assert other.abandon() is False  # a committed spend is final
    with pytest.raises(BudgetFileError, match="already committed"):
        other.commit(_report(0.25))
    assert budget.remaining() == pytest.approx(0.75)


def test_a_with_block_abandons_what_it_did_not_commit(tmp_path):
    budget = BudgetFile.create(tmp_path / "b.json", 1.0)
    empty = budget.real_path.read_bytes()
    with pytest.raises(RuntimeError), budget.reserve(0.5, method="laplace_dp", output="x"):
        raise RuntimeError("the release failed")
    with budget.reserve(0.5, method="laplace_dp", output="x"):
        pass
    assert budget.real_path.read_bytes() == empty


def test_a_cleared_reservation_cannot_commit(tmp_path):
    budget = BudgetFile.create(tmp_path / "b.json", 1.0)
    held = budget.reserve(0.5, method="laplace_dp", output="x")
    assert [e.id for e in budget.clear(held.id, force=True)] == [0]
    again = budget.reserve(0.5, method="laplace_dp", output="y")  # takes number 0 again
    assert again.id == held.id
    with pytest.raises(BudgetFileError, match="was cleared while the release ran"):
        held.commit(_report(0.5))
    assert held.abandon() is False  # and it does not remove the other's entry
    assert _statuses(tmp_path / "b.json") == [("reserved", 0.5)]


# -- stale reservations and clearing them ------------------------------------------------------

_HOLDS = """
import sys, time
from pathlib import Path
from dpfast.budget import BudgetFile
BudgetFile(sys.argv[1]).reserve(0.5, method="laplace", output=sys.argv[2])
Path("marker").write_text("reserved")
time.sleep(120)
"""


def _until_ended(pid: int) -> None:
    stat_file = Path(f"/proc/{pid}/stat")
    for _ in range(200):
        if not stat_file.exists() or stat_file.read_text().rsplit(")", 1)[1].split()[0] == "Z":
            return
        time.sleep(0.05)


def test_a_killed_run_leaves_a_stale_reservation_that_clear_removes(files, capsys):
    path = files / "b.json"
    BudgetFile.create(path, 1.0)
    empty = path.read_bytes()
    process = cli_process(_HOLDS, [str(path), str(files / "r.parquet")], files)
    try:
        wait_for(files / "marker", process)
        (entry,) = BudgetFile(path).entries()
        assert (entry.pid, entry.host) == (process.pid, socket.gethostname())
        assert entry.state() == "running"
        assert entry.process_started is not None
        code, err = run(["budget", "clear", str(path), "--entry", "0"], capsys)
        assert code == 2 and "still runs" in one_error_line(err) and "--force" in err
        process.kill()  # SIGKILL: no handler, no cleanup
        _until_ended(process.pid)  # a zombie: gone, though its parent has not collected it
        assert BudgetFile(path).entries()[0].state() == "stale"
        process.communicate()
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()
    (entry,) = BudgetFile(path).entries()
    assert entry.state() == "stale"
    assert main(["budget", "show", str(path)]) == 0
    shown = capsys.readouterr().out
    assert f"STALE: process {process.pid} on host {socket.gethostname()} is gone" in shown
    assert f"dpfast budget clear {path} --entry 0" in shown
    code, err = run(_argv(files, "other.parquet", "0.75"), capsys)
    assert code == 2
    assert "0.5 of that is held by reservations of runs killed before they committed" in err
    # as if the run had left its scratch, named as dpfast names it; another file is not
    host = hashlib.sha256(socket.gethostname().encode()).hexdigest()[:8]
    scratch = files / f".r.parquet.dpfast{process.pid}h{host}-abc123"
    scratch.mkdir()
    (files / ".r.parquet.mine").write_bytes(b"")
    assert main(["budget", "clear", str(path)]) == 0
    said = capsys.readouterr().out
    assert "cleared entry 0: epsilon 0.5 reserved by laplace" in said
    assert "published nothing" in said and f"{str(scratch)!r} (process {process.pid})" in said
    assert not scratch.exists() and (files / ".r.parquet.mine").exists()
    assert path.read_bytes() == empty
    assert main(["budget", "clear", str(path)]) == 0
    assert "no stale reservation to clear" in capsys.readouterr().out


def test_a_reused_pid_is_stale_and_another_host_unknown(tmp_path):
    budget = BudgetFile.create(tmp_path / "b.json", 1.0)
    budget.reserve(0.5, method="laplace_dp", output="x")
    (entry,) = budget.entries()
    assert entry.state() == "running"
    if entry.process_started is None:
        pytest.skip("no process start times on this system")
    older = replace(entry, process_started=entry.process_started - 3600)
    assert older.state() == "stale"  # the same pid now names a later process
    elsewhere = replace(entry, host=entry.host + "-elsewhere")
    assert elsewhere.state() == "unknown"


def _hand_written(path: Path, entries: list[dict]) -> None:
    base = {
        "method": "laplace",
        "output": "/x",
        "columns": None,
        "guarantee_level": None,
        "reserved_at": "2026-01-01T00:00:00+0000",
        "committed_at": None,
        "pid": 1,
        "host": "elsewhere.example",
        "process_started": None,
    }
    data = {"version": 2, "total_epsilon": 2.0, "entries": [{**base, **e} for e in entries]}
    path.write_text(json.dumps(data), encoding="utf-8")


def test_clear_refuses_committed_entries_and_other_hosts_unless_forced(tmp_path, capsys):
    path = tmp_path / "b.json"
    _hand_written(
        path,
        [
            {"id": 0, "status": "committed", "epsilon": 1.0, "guarantee_level": "proven"},
            {"id": 3, "status": "reserved", "epsilon": 0.5},
        ],
    )
    code, err = run(["budget", "clear", str(path), "--entry", "0", "--force"], capsys)
    assert code == 2 and "is committed" in one_error_line(err) and "never cleared" in err
    code, err = run(["budget", "clear", str(path), "--entry", "7"], capsys)
    assert code == 2 and "entries: 0, 3" in one_error_line(err)
    code, err = run(["budget", "clear", str(path), "--entry", "3"], capsys)
    assert code == 2 and "another machine" in one_error_line(err)
    assert main(["budget", "show", str(path)]) == 0
    assert "elsewhere.example, another machine" in capsys.readouterr().out
    assert main(["budget", "clear", str(path)]) == 0  # nothing stale here
    assert _statuses(path) == [("committed", 1.0), ("reserved", 0.5)]
    assert main(["budget", "clear", str(path), "--entry", "3", "--force"]) == 0
    assert _statuses(path) == [("committed", 1.0)]


def test_a_version_1_file_is_read_and_written_as_version_2(tmp_path):
    path = tmp_path / "b.json"
    old = {
        "version": 1,
        "total_epsilon": 3.0,
        "entries": [
            {"id": 0, "status": "spent", "epsilon": 1.0, "method": "laplace", "output": "a",
             "time": "2026-01-01T00:00:00+0000"},
            {"id": 1, "status": "cancelled", "epsilon": 0.0, "method": "ir-dp", "output": "b",
             "time": "2026-01-02T00:00:00+0000"},
            {"id": 2, "status": "reserved", "epsilon": 0.5, "method": "ir-dp", "output": "c",
             "time": "2026-01-03T00:00:00+0000"},
        ],
    }  # fmt: skip
    path.write_text(json.dumps(old), encoding="utf-8")
    budget = BudgetFile(path)
    assert budget.read()["version"] == 2
    assert [(e.id, e.status, e.state()) for e in budget.entries()] == [
        (0, "committed", "committed"),
        (2, "reserved", "stale"),  # no process recorded: version 1 committed before publishing
    ]
    assert budget.entries()[0].reserved_at == "2026-01-01T00:00:00+0000"
    assert json.loads(path.read_text(encoding="utf-8")) == old  # reading does not rewrite
    assert [e.id for e in budget.clear()] == [2]
    assert json.loads(path.read_text(encoding="utf-8"))["version"] == 2
    assert budget.remaining() == 2.0
    assert budget.reserve(1.0, method="laplace_dp", output="d").id == 1


def test_init_and_reading_refuse_bad_files(tmp_path, capsys):
    path = tmp_path / "b.json"
    for total in ("0", "-1", "nan", "inf"):
        code, err = run(["budget", "init", str(path), "--total-epsilon", total], capsys)
        assert code == 2 and "--total-epsilon must be a finite number > 0" in one_error_line(err)
    assert main(["budget", "init", str(path), "--total-epsilon", "1"]) == 0
    assert main(["budget", "init", str(path), "--total-epsilon", "5"]) == 2
    assert "not replaced unless --force" in capsys.readouterr().err
    assert BudgetFile(path).total_epsilon == 1.0
    (tmp_path / "other.json").write_text('{"a": 1}', encoding="utf-8")
    assert main(["budget", "show", str(tmp_path / "other.json")]) == 2
    assert "not a dpfast budget file" in capsys.readouterr().err
    assert main(["budget", "show", str(tmp_path / "missing.json")]) == 2
    assert "dpfast budget init" in capsys.readouterr().err
    with pytest.raises(BudgetFileError, match=r"BudgetFile\.create\(path, total_epsilon\)"):
        BudgetFile(tmp_path / "missing.json")
    with pytest.raises(BudgetFileError, match="total_epsilon must be a finite number > 0"):
        BudgetFile.create(tmp_path / "new.json", -1)
    assert issubclass(BudgetFileError, DPFastError) and issubclass(BudgetFileError, ValueError)


# -- files for the data holder only ------------------------------------------------------------


@pytest.mark.parametrize("umask", [0o022, 0o000])
def test_budget_files_and_private_reports_are_readable_by_their_owner_only(files, umask):
    previous = os.umask(umask)
    try:
        assert main(["budget", "init", str(files / "b.json"), "--total-epsilon", "2"]) == 0
        assert _release(files, "r.parquet", "0.5") == 0
    finally:
        os.umask(previous)

    def mode(name: str) -> int:
        return stat.S_IMODE((files / name).stat().st_mode)

    assert mode("b.json") == 0o600
    assert mode("b.json.lock") == 0o600
    assert mode("r.parquet.private-report.json") == 0o600
    assert mode("r.parquet.public-report.json") == 0o666 & ~umask  # for publication
    assert mode("r.parquet") == 0o666 & ~umask


def test_a_budget_file_keeps_the_permissions_its_owner_gave_it(files):
    BudgetFile.create(files / "b.json", 2.0)
    os.chmod(files / "b.json", 0o640)  # shared with a group, deliberately
    assert _release(files, "r.parquet", "0.5") == 0
    assert stat.S_IMODE((files / "b.json").stat().st_mode) == 0o640


# -- the documentation -------------------------------------------------------------------------


def test_the_python_example_of_docs_budget_md_runs(tmp_path, monkeypatch):
    text = (ROOT / "docs" / "budget.md").read_text(encoding="utf-8")
    blocks = re.findall(r"```python\n(.*?)```", text, flags=re.DOTALL)
    assert blocks
    monkeypatch.chdir(tmp_path)
    namespace: dict = {}
    for block in blocks:
        exec(compile(block, "docs/budget.md", "exec"), namespace)
    assert BudgetFile(tmp_path / "people.budget.json").entries()
