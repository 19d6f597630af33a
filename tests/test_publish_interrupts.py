"""The interrupt window: a release is never visible without its two reports (issue 43).

The command line publishes three files: the data and its public and private reports. Each
run here is interrupted at one step of its release (every rename into the working
directory and the budget's commit, just before or just after it), by ``KeyboardInterrupt``
or by SIGTERM through the command line's own handler, and must leave either nothing (the
budget as the step says: abandoned before the commit, spent after it) or the data and both
reports, with no scratch or staging file either way. The runs go on until one passes every
step; Spark and Dask run one case each, at the step that used to leave the data alone: just
after their engine's rename.
"""

from __future__ import annotations

import json
import os
import signal
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest

from dpfast import cli
from dpfast.budget import BudgetFile, Reservation
from dpfast.cli._outputs import report_paths

SCHEMA = {
    "columns": {
        "age": {"type": "integer", "bounds": [17, 90]},
        "income": {"type": "float", "bounds": [0, 200000]},
    }
}
EPSILON = 0.5
INPUTS = ["b.json", "b.json.lock", "in.csv", "in.parquet", "s.json"]


def _inputs(where: Path) -> None:
    rng = np.random.default_rng(3)
    frame = pd.DataFrame({"age": rng.integers(17, 91, 300), "income": rng.uniform(0, 2e5, 300)})
    frame.to_parquet(where / "in.parquet")
    frame.to_csv(where / "in.csv", index=False)
    (where / "s.json").write_text(json.dumps(SCHEMA), encoding="utf-8")
    BudgetFile.create(where / "b.json", 1.0)


def _argv(where: Path, source: str, output: str, *extra: str) -> list[str]:
    return [
        *("release", "ir-dp", str(where / source), "-o", str(where / output)),
        *("--k", "5", "--epsilon", str(EPSILON), "--schema", str(where / "s.json")),
        *("--seed", "1", "--quiet", "--budget", str(where / "b.json"), *extra),
    ]


class Interrupter:
    """Interrupts the ``at``-th step of a release that ``chosen`` picks, ``when`` it runs.

    A step is a rename into the working directory (``os.replace``; not the budget file's
    own) or the budget's commit, in the main thread (where Python delivers Ctrl-C and
    SIGTERM). ``how``: ``"interrupt"`` raises ``KeyboardInterrupt``; ``"sigterm"`` sends
    this process SIGTERM, which the command line's handler turns into its exception at the
    next bytecode.
    """

    def __init__(
        self,
        root: Path,
        at: int,
        when: str,
        how: str,
        chosen: Callable[[str, tuple[Any, ...]], bool] = lambda kind, args: True,
    ) -> None:
        self.root, self.at, self.when, self.how, self.chosen = root, at, when, how, chosen
        self.steps: list[str] = []
        self.hit = False
        self.committed = False

    def _step(self, kind: str, args: tuple[Any, ...], call: Callable[[], Any]) -> Any:
        counted = threading.current_thread() is threading.main_thread() and self.chosen(kind, args)
        here = False
        if counted:
            self.steps.append(f"{kind} {' -> '.join(str(a) for a in args)}")
            here = len(self.steps) == self.at
        if here and self.when == "before":
            self._stop()
        result = call()
        if kind == "commit":
            self.committed = True
        if here and self.when == "after":
            self._stop()
        return result

    def _stop(self) -> None:
        self.hit = True
        if self.how == "interrupt":
            raise KeyboardInterrupt
        os.kill(os.getpid(), signal.SIGTERM)
        for _ in range(10_000):  # the handler raises at a bytecode boundary of this loop
            pass
        raise AssertionError("SIGTERM was not delivered")

    @contextmanager
    def installed(self, monkeypatch: pytest.MonkeyPatch) -> Iterator[Interrupter]:
        real_replace, real_commit = os.replace, Reservation.commit
        budget = str((self.root / "b.json").resolve())

        def replace(source: Any, target: Any, **kwargs: Any) -> None:
            inside = os.path.abspath(target).startswith(str(self.root.resolve()) + os.sep)
            if not inside or os.path.abspath(target) == budget:
                return real_replace(source, target, **kwargs)
            call = lambda: real_replace(source, target, **kwargs)  # noqa: E731
            return self._step("rename", (source, target), call)  # type: ignore[no-any-return]

        def commit(held: Reservation, report: Any) -> Any:
            return self._step("commit", (), lambda: real_commit(held, report))

        with monkeypatch.context() as patch:
            patch.setattr(os, "replace", replace)
            patch.setattr(Reservation, "commit", commit)
            yield self


def check_all_or_nothing(where: Path, output: str, interrupter: Interrupter, code: int) -> bool:
    """Assert what an interrupted (or finished) run left; return whether it published."""
    paths = [where / output, *map(Path, report_paths(where / output))]
    visible = [os.path.lexists(p) for p in paths]
    shown = f"{interrupter.when} step {interrupter.at}: {interrupter.steps[-3:]}"
    assert visible in ([False] * 3, [True] * 3), f"{visible} {shown}"
    left = sorted(p.name for p in where.iterdir() if p not in paths)
    assert left == INPUTS, f"leftovers {left} {shown}"  # no scratch, no staging
    entries = BudgetFile(where / "b.json").entries()
    if visible[0]:
        assert pq.read_table(paths[0]).num_rows == 300
        for report in paths[1:]:
            assert json.loads(report.read_text(encoding="utf-8"))["method"] == "ir_dp"
        assert [(e.status, e.epsilon) for e in entries] == [("committed", EPSILON)], shown
    elif interrupter.committed:
        assert [(e.status, e.epsilon) for e in entries] == [("committed", EPSILON)], shown
    else:
        assert entries == [], shown  # abandoned: nothing was published
    if interrupter.hit:
        assert code == (130 if interrupter.how == "interrupt" else 143), shown
    else:
        assert code == 0, shown
    return visible[0]


def _each_step(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    source: str,
    extra: list[str],
    how: str,
) -> int:
    """Interrupt every step in turn, before and after it; return the steps found."""
    runs = 0
    for when in ("before", "after"):
        at = 1
        while True:
            where = tmp_path / f"{when}-{at}"
            where.mkdir()
            _inputs(where)
            interrupter = Interrupter(where, at, when, how)
            with interrupter.installed(monkeypatch):
                code = cli.main(_argv(where, source, "out.parquet", *extra))
            err = capsys.readouterr().err
            assert "Traceback" not in err, err
            check_all_or_nothing(where, "out.parquet", interrupter, code)
            runs += 1
            if not interrupter.hit:  # every step was interrupted once
                assert at > 5, interrupter.steps
                break
            at += 1
    return runs


@pytest.mark.parametrize("how", ["interrupt", "sigterm"])
def test_an_interrupt_at_any_step_in_memory_leaves_all_or_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], how: str
) -> None:
    _each_step(tmp_path, monkeypatch, capsys, "in.csv", [], how)


@pytest.mark.parametrize("how", ["interrupt", "sigterm"])
def test_an_interrupt_at_any_step_out_of_core_leaves_all_or_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], how: str
) -> None:
    _each_step(tmp_path, monkeypatch, capsys, "in.parquet", ["--memory-limit", "1MiB"], how)


def _engine_rename(kind: str, args: tuple[Any, ...]) -> bool:
    """The engine's own rename of its complete output (its scratch's ``release...``)."""
    return kind == "rename" and Path(args[0]).name.startswith("release")


def _just_after_the_engine_renames(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, extra: list[str], how: str
) -> None:
    _inputs(tmp_path)
    interrupter = Interrupter(tmp_path, 1, "after", how, _engine_rename)
    with interrupter.installed(monkeypatch):
        code = cli.main(_argv(tmp_path, "in.parquet", "out", *extra))
    assert interrupter.hit and interrupter.steps, "the engine never renamed its output"
    assert not check_all_or_nothing(tmp_path, "out", interrupter, code)


def test_an_interrupt_just_after_spark_renames_its_output_leaves_nothing(
    spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _just_after_the_engine_renames(tmp_path, monkeypatch, ["--engine", "spark"], "sigterm")


def test_an_interrupt_just_after_dask_renames_its_output_leaves_nothing(
    client: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    scheduler = ["--scheduler", client.scheduler.address]
    _just_after_the_engine_renames(
        tmp_path, monkeypatch, ["--engine", "dask", *scheduler], "interrupt"
    )


def test_an_interrupted_replacement_puts_back_the_earlier_output_and_reports(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # with --force, OUTPUT and its reports are replaced all three, or none of them
    at = 1
    while True:
        where = tmp_path / f"at-{at}"
        where.mkdir()
        _inputs(where)
        paths = [where / "out.parquet", *map(Path, report_paths(where / "out.parquet"))]
        for path in paths:
            path.write_text(f"earlier {path.name}", encoding="utf-8")
        interrupter = Interrupter(where, at, "before", "interrupt")
        with interrupter.installed(monkeypatch):
            code = cli.main([*_argv(where, "in.csv", "out.parquet"), "--force"])
        capsys.readouterr()
        earlier = [p.read_bytes() == f"earlier {p.name}".encode() for p in paths]
        assert earlier in ([True] * 3, [False] * 3), (earlier, interrupter.steps)
        assert sorted(p.name for p in where.iterdir() if p not in paths) == INPUTS
        if not interrupter.hit:
            assert code == 0 and earlier == [False] * 3
            break
        assert code == 130 and earlier == [True] * 3
        at += 1
