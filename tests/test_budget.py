"""Budget files: a dataset's total ε, spent across releases, runs and processes."""

from __future__ import annotations

import json
import multiprocessing
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from dpfast.budget import BudgetFile
from dpfast.cli import main
from dpfast.exceptions import BudgetExceededError

SCHEMA = {"columns": {"age": {"type": "integer", "bounds": [17, 90]}}}


@pytest.fixture
def files(tmp_path: Path) -> Path:
    rng = np.random.default_rng(6)
    pd.DataFrame({"age": rng.integers(17, 91, 60)}).to_parquet(tmp_path / "in.parquet")
    (tmp_path / "s.json").write_text(json.dumps(SCHEMA), encoding="utf-8")
    return tmp_path


def _release(files: Path, name: str, epsilon: str, *extra: str) -> int:
    argv = ["release", "laplace", str(files / "in.parquet"), "-o", str(files / name), "--quiet"]
    argv += ["--epsilon", epsilon, "--schema", str(files / "s.json"), "--seed", "1"]
    return main([*argv, "--budget", str(files / "b.json"), *extra])


def test_releases_spend_from_the_file_until_it_is_used_up(files, capsys):
    assert main(["budget", "init", str(files / "b.json"), "--total-epsilon", "2"]) == 0
    assert _release(files, "r1.parquet", "1") == 0
    assert _release(files, "r2.parquet", "0.75") == 0
    assert BudgetFile(files / "b.json").remaining() == pytest.approx(0.25)
    capsys.readouterr()
    # refused before any work: no output, no report, and nothing spent
    assert _release(files, "r3.parquet", "0.5") == 2
    err = capsys.readouterr().err
    assert "needs epsilon=0.5" in err and "0.25 of 2 left" in err
    assert not list(files.glob("r3.parquet*"))
    data = BudgetFile(files / "b.json").read()
    assert [(e["status"], e["epsilon"]) for e in data["entries"]] == [
        ("spent", 1.0),
        ("spent", 0.75),
    ]
    assert data["entries"][0]["method"] == "laplace"
    assert main(["budget", "show", str(files / "b.json")]) == 0
    shown = capsys.readouterr().out
    assert "total epsilon 2, spent 1.75, left 0.25" in shown and "r2.parquet" in shown


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
    entries = BudgetFile(files / "b.json").read()["entries"]
    assert [e["method"] for e in entries] == list(commands)
    assert all(0 < e["epsilon"] <= 1.0 and e["status"] == "spent" for e in entries)


def test_a_failed_release_returns_its_reservation(files, monkeypatch, capsys):
    BudgetFile.create(files / "b.json", 1.0)

    def broken(*args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr("dpfast.cli._common.write_release", broken)
    assert _release(files, "r.parquet", "1") == 2
    entry = BudgetFile(files / "b.json").read()["entries"][0]
    assert entry["status"] == "cancelled" and entry["epsilon"] == 0.0
    assert BudgetFile(files / "b.json").remaining() == 1.0


def test_the_spend_is_recorded_before_the_output_is_written(files, monkeypatch):
    BudgetFile.create(files / "b.json", 1.0)
    seen = []

    def look(*args, **kwargs):
        # a crash from here on must lose no spend: it is already in the file
        seen.append(BudgetFile(files / "b.json").read()["entries"][0]["status"])
        raise KeyboardInterrupt

    monkeypatch.setattr("dpfast.cli._common.write_release", look)
    assert _release(files, "r.parquet", "0.5") == 130
    assert seen == ["spent"]
    # interrupted before anything was published (the writers leave nothing): returned
    assert BudgetFile(files / "b.json").remaining() == 1.0


def test_a_reservation_counts_until_it_is_settled_or_cancelled(tmp_path):
    budget = BudgetFile.create(tmp_path / "b.json", 1.0)
    entry = budget.reserve(0.6, method="ir_dp", output="x")
    assert budget.remaining() == pytest.approx(0.4)  # a crash here keeps it counted
    with pytest.raises(BudgetExceededError):
        budget.reserve(0.5, method="ir_dp", output="y")
    with pytest.raises(BudgetExceededError, match="was not published"):
        budget.settle(entry, 1.5)  # spent more than fits: cancelled, must not publish
    assert budget.remaining() == 1.0
    other = budget.reserve(0.3, method="laplace_dp", output="z")
    budget.cancel(other)
    assert budget.remaining() == 1.0


def test_init_and_reading_refuse_bad_files(tmp_path, capsys):
    path = tmp_path / "b.json"
    for total in ("0", "-1", "nan", "inf"):
        assert main(["budget", "init", str(path), "--total-epsilon", total]) == 2
    assert main(["budget", "init", str(path), "--total-epsilon", "1"]) == 0
    assert main(["budget", "init", str(path), "--total-epsilon", "5"]) == 2
    assert "not replaced unless --force" in capsys.readouterr().err
    assert BudgetFile(path).read()["total_epsilon"] == 1.0
    (tmp_path / "other.json").write_text('{"a": 1}', encoding="utf-8")
    assert main(["budget", "show", str(tmp_path / "other.json")]) == 2
    assert main(["budget", "show", str(tmp_path / "missing.json")]) == 2
    assert "dpfast budget init" in capsys.readouterr().err


def _take(path: str, barrier, results) -> None:
    barrier.wait()
    try:
        BudgetFile(path).reserve(0.6, method="laplace_dp", output="x")
        results.put("ok")
    except BudgetExceededError:
        results.put("refused")


def test_two_processes_cannot_both_take_the_last_of_a_budget(tmp_path):
    path = str(tmp_path / "b.json")
    BudgetFile.create(path, 1.0)
    context = multiprocessing.get_context("spawn")
    barrier = context.Barrier(4)
    results = context.Queue()
    workers = [context.Process(target=_take, args=(path, barrier, results)) for _ in range(4)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(timeout=60)
    outcomes = sorted(results.get(timeout=5) for _ in workers)
    assert outcomes == ["ok", "refused", "refused", "refused"]
    assert BudgetFile(path).remaining() == pytest.approx(0.4)
