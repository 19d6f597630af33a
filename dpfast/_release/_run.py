"""One release in progress over an engine, from its opening to its published data."""

from __future__ import annotations

import os
import threading
import time
import warnings
from collections.abc import Callable, Hashable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import numpy as np

from dpfast import noise
from dpfast._release._reports import Reporting
from dpfast._release.data_forecast import DataForecast, forecast_check
from dpfast._release.forecast import Forecast
from dpfast._release.options import BudgetLike, Progress, Reservation, release_options
from dpfast._validation import check_share, option, quoted
from dpfast.accounting import PhaseTimer, PrivateReport, Report, UnprotectedPolicy
from dpfast.dataflow.on_bound import BoundCount, OnBound
from dpfast.dataflow.source import Staged
from dpfast.dataflow.values import CategoricalColumn, NumericColumn, PublishHook
from dpfast.dataflow.writes import CopyColumns
from dpfast.engines import engine_label, engine_name, open_engine
from dpfast.engines.base import Engine, Measurer, RankSender
from dpfast.exceptions import DPFastRuntimeError, NoiseDominatesWarning
from dpfast.risk import ReleaseDefaults, RiskOptions, risk_options

__all__ = ["Release", "Run", "open_run"]


@dataclass(frozen=True)
class Release:
    """Released data, its public report, and the data holder's private report.

    Attributes
    ----------
    data : pandas.DataFrame, pyarrow.Table, polars.DataFrame or numpy.ndarray
        The released table, of the same kind as the input (a pyarrow Table for another
        object read through the Arrow C stream interface).
    report : Report
        Public: method, parameters, ε ledger, guarantee. Safe to publish with the data.
    private : PrivateReport
        NOT for publication: exact clamped counts, timings, utility metrics, disclosure
        risk.

    Examples
    --------
    >>> import pandas as pd, dpfast
    >>> release = dpfast.laplace_dp(pd.DataFrame({"age": [23, 35, 41, 52]}), epsilon=1.0,
    ...                             bounds={"age": (17, 90)}, seed=7)
    >>> release.data.shape, release.report.guarantee_level, release.private.input_rows
    ((4, 1), 'proven', 4)
    """

    data: Any
    report: Report
    private: PrivateReport


class Run(Reporting):
    """One release in progress over an engine: its timer, progress and released columns.

    A method opens it with :func:`open_run`, asks :attr:`engine` for every step that
    touches the data, records each released column with :meth:`keep`, and ends with
    :meth:`finish`, which places the columns it did not protect (:attr:`policy`), builds
    the two reports and publishes the data. ``options`` are the release's options, every
    one of :data:`~dpfast._release.options.DEFAULTS` present (:func:`release_options`);
    ``risk`` is the checked ``risk`` option; ``engine_label`` names the engine in the
    public report (:func:`~dpfast.engines.engine_label`; by default ``engine.name``).
    """

    def __init__(
        self,
        method: str,
        engine: Engine,
        options: Mapping[str, Any],
        risk: RiskOptions | None = None,
        engine_label: str | None = None,
    ) -> None:
        self.method = method
        self.engine = engine
        self.engine_label = engine.name if engine_label is None else engine_label
        self.risk_options = risk
        self.risk_width: dict[Hashable, float] = {}
        self.risk_counts: Hashable | None = None
        self.progress: Progress | None = options["progress"]
        self.budget: BudgetLike | None = options["budget"]
        self.seed: int | None = options["seed"]
        self.with_metrics = bool(options["metrics"])
        output = options["output"]
        self.output = None if output is None else os.fspath(output)
        self.reservation: Reservation | None = None
        self.committed = False
        self.timer = PhaseTimer()
        self.policy: UnprotectedPolicy | None = None
        #: The columns the release copies unprotected, once :meth:`protect` said; None: not said.
        self.copied: list[str] | None = None
        self.clamped: dict[str, int] = {}
        self.on_bound: dict[str, OnBound] = {}
        self._later: dict[str, Callable[[], OnBound]] = {}
        limit = options.get("max_on_bound")
        self.max_on_bound = None if limit is None else check_share(limit, "max_on_bound")
        self.expected: Forecast | None = None
        self.data_forecast: DataForecast | None = None
        self.alerts: list[str] = []
        self.timings_extra: dict[str, float] = {}
        self._lock = threading.Lock()
        self._released: list[Hashable] = []
        self._start = time.perf_counter()

    @property
    def n_rows(self) -> int:
        """The number of input rows."""
        return self.engine.n_rows

    @contextmanager
    def phase(self, name: str) -> Iterator[None]:
        """Time the ``with`` block as phase ``name`` of the report's timings."""
        with self.timer.phase(name):
            yield

    def tick(self, phase: str, done: int, total: int) -> None:
        """Report progress to the caller's callback, if any."""
        if self.progress is not None:
            self.progress(phase, done, total)

    def add_seconds(self, name: str, seconds: float) -> None:
        """Add ``seconds`` to timing ``name`` of the private report (from any thread)."""
        with self._lock:
            self.timings_extra[name] = self.timings_extra.get(name, 0.0) + seconds

    def expect(
        self, forecast: Forecast, from_data: Callable[[float], DataForecast] | None = None
    ) -> None:
        """Check the release's forecast, before any ε is reserved; warn once if noise swamps.

        ``forecast`` is the method's own, from its plan and public values only
        (docs/forecast.md#warning); its warning goes to the public report's warnings.
        With ``max_on_bound``, ``from_data(max_on_bound)`` (where the method has one)
        reads the data for the forecast from the data (PRIVATE: kept for the private
        report), and the release is refused if the forecast (that one, else the public
        one) puts more than ``max_on_bound`` of a column's values onto a bound. The
        warning shown is the forecast from the data's when it was read.
        """
        self.expected = forecast
        public = forecast.public_warning
        if public is not None and public not in self.alerts:
            self.alerts.append(public)
        shown = public
        if self.max_on_bound is not None:
            if from_data is not None:
                self.data_forecast = from_data(self.max_on_bound)
                shown = self.data_forecast.warning
                self.data_forecast.refuse_above(self.max_on_bound)
            else:
                forecast.refuse_above(self.max_on_bound)
        if shown is not None:
            warnings.warn(shown, NoiseDominatesWarning, stacklevel=3)

    def protect(self, columns: Sequence[Hashable]) -> None:
        """Tell the engine the columns the release protects, once its arguments are checked.

        The others are copied as :attr:`policy` says, none where it drops them: the
        engine chooses its rank sender by them (:meth:`rank_sender`).
        """
        protected = {str(c) for c in columns}
        names = [str(n) for n in self.engine.names if str(n) not in protected]
        self.copied = [] if self.policy == "drop" else names

    def rank_sender(self) -> RankSender | None:
        """Return the engine as a rank sender for this release, or None (ir_dp's columns).

        By the columns it copies, once :meth:`protect` said which
        (:meth:`Engine.rank_sender <dpfast.engines.base.Engine.rank_sender>`).
        """
        return self.engine.rank_sender(self.copied)

    def reserve(self, epsilon: float, columns: Sequence[Hashable]) -> None:
        """Hold ``epsilon`` in the run's budget, if it has one, before any work.

        Called once the arguments are checked; a budget that cannot hold it refuses the
        release here, before any pass over the data.
        """
        if self.budget is not None and self.reservation is None:
            self.reservation = self.budget.reserve(
                float(epsilon),
                method=self.method,
                output=self.output,
                columns=[str(c) for c in columns],
            )

    def keep(
        self, name: Hashable, *, clamped: int | None = None, on_bound: BoundCount | None = None
    ) -> None:
        """Record a released protected column: its clamped inputs and its rows on a bound.

        ``on_bound`` (:class:`~dpfast.dataflow.on_bound.OnBound`: released on a bound, on
        one before the noise, pushed there by the noise) may be a function, called once
        the release is written (:meth:`Engine.write_rank_groups`); the private report
        holds its counts from then.
        """
        self._released.append(name)
        if clamped is not None:
            self.clamped[str(name)] = int(clamped)
        if callable(on_bound):
            self._later[str(name)] = on_bound
            self.on_bound[str(name)] = OnBound()
        elif on_bound is not None:
            self.on_bound[str(name)] = on_bound

    def released_names(self) -> list[Hashable]:
        """Return the protected columns released, in the order they were kept."""
        return list(self._released)

    def unprotected(self) -> list[str]:
        """Return the input's columns that no mechanism of the release protects."""
        released = set(self._released)
        return [str(n) for n in self.engine.names if n not in released]

    def input_rows(self) -> int:
        """Return the number of rows of the input."""
        return self.n_rows

    def bound_counts(self, domains: Mapping[Hashable, tuple[float, float]]) -> dict[str, OnBound]:
        """Return the rows on a bound of the columns of ``domains``, as the method counted them."""
        return {str(n): self.on_bound[str(n)] for n in domains if str(n) in self.on_bound}

    def metrics(
        self,
        numeric: Sequence[NumericColumn],
        categorical: Sequence[CategoricalColumn] = (),
        domains: Mapping[Hashable, tuple[float, float]] | None = None,
    ) -> dict[str, Any] | None:
        """Compute utility metrics of the released columns against the original (private).

        Rows are matched through the shuffle, so the relative error is record-linked.
        ``None`` when the release was not asked for them (the ``metrics`` option).
        """
        if not self.with_metrics:
            return None
        with self.phase("metrics"):
            return self._measurer().metrics(numeric, categorical, domains)

    def _measurer(self) -> Measurer:
        """Return the engine as a measurer (an engine that is none refused the options)."""
        measurer = self.engine.measurer
        if measurer is None:
            raise DPFastRuntimeError(
                f"the {self.engine.name} engine measures neither utility nor risk; release "
                f"in memory to ask for {option('metrics')} or {option('risk')}"
            )
        return measurer

    def _risk(self, options: RiskOptions, parameters: Mapping[str, Any]) -> dict[str, Any]:
        """Measure the release's risk before it is published (private; risk=True).

        What ``risk=`` leaves unset comes from the release: the compared columns are the
        protected ones, ``k`` the method's own, the widths those the method set in
        :attr:`risk_width` (``k_noise``: ``2δ``).
        """
        k = parameters.get("k")
        defaults = ReleaseDefaults(
            protected=self.released_names(),
            k=k if isinstance(k, int) and not isinstance(k, bool) else None,
            width=dict(self.risk_width),
            counts=self.risk_counts,
        )
        self.tick("risk", 0, 1)
        with self.phase("risk"):
            found = self._measurer().risk(options, defaults)
        self.tick("risk", 1, 1)
        return found

    def finish(
        self,
        *,
        source: noise.NoiseSource | None = None,
        order_key: np.ndarray | None = None,
        reindex: bool = False,
        before_publish: PublishHook | None = None,
        **fields: Any,
    ) -> Release:
        """Place the unprotected columns, report, publish; return the :class:`Release`.

        The columns not released follow :attr:`policy`: left out (``"drop"``), in a
        random order of their own drawn from ``source`` (``"shuffle"``), or in the rows'
        order (``"keep"``, or a method with no policy): the permutation of ``order_key``
        (``None``: the input order). ``reindex``: the released rows are in a new order.
        ``fields`` go to :meth:`reports`.
        """
        copied = self.unprotected()
        with self.phase("assemble"):
            if copied and self.policy == "shuffle":
                if source is None:
                    raise AssertionError("a shuffle of the unprotected columns needs a source")
                key = source.key(self.method, "unprotected-order")
                self.engine.write(CopyColumns(copied, key))
                reindex = True
            elif copied and self.policy != "drop":
                self.engine.write(CopyColumns(copied, order_key))
                reindex = reindex or order_key is not None
        report, private = self.reports(**fields)
        if self.risk_options is not None:
            private.risk = self._risk(self.risk_options, fields.get("parameters") or {})
            private.timings["risk"] = self.timer.timings["risk"]
        if self.budget is not None and self.reservation is None:
            raise AssertionError(f"{self.method} was given a budget but reserved nothing")

        with self.phase("write"):
            data, work = self._publish(report, reindex, before_publish)
        private.timings["write"] = self.timer.timings["write"]
        for name, count in self._later.items():  # counted where the output was made
            self.on_bound[name] = count()
            if name in private.clamped_output:
                counted = self.on_bound[name]
                private.clamped_output[name] = counted.released
                private.on_bound_before_noise[name] = counted.before
                private.pushed_onto_bound[name] = counted.pushed
        if self.expected is not None and private.clamped_output:
            private.forecast = forecast_check(private, self.expected, self.data_forecast)
        if work is not None:
            private.extra["work"] = work
        self.tick("assemble", 1, 1)
        private.timings["total"] = time.perf_counter() - self._start
        return Release(data, report, private)

    def _publish(
        self, report: Report, reindex: bool, before_publish: PublishHook | None
    ) -> tuple[Any, dict[str, int] | None]:
        """Have the engine stage the release; commit, write the reports, then reveal it.

        Returns the released data and what the engine's passes did (``Staged.work``).

        The engine only writes: the budget's reservation is committed here, with the final
        report, before anything is visible, so that no engine can publish without it. An
        engine whose ``publish`` returns anything but a :class:`Staged` release is refused,
        its ε counted as spent: it may have made its output visible already, and no spend
        is given back once output may be visible.
        """
        staged = self.engine.publish(report, reindex=reindex)
        if not isinstance(staged, Staged):
            if self.reservation is not None:
                self.reservation.commit(report)
                self.committed = True
            raise DPFastRuntimeError(
                f"the {quoted(self.engine.name)} engine's publish returned "
                f"{type(staged).__name__}, not a Staged release: an engine writes its "
                "output whole under a staging name and returns "
                "dpfast.dataflow.source.Staged (docs/engines.md); the release's ε counts as "
                "spent, since the engine may have written its output"
            )
        try:
            if self.reservation is not None:  # final before any output is visible
                self.reservation.commit(report)
                self.committed = True
            if before_publish is not None:
                before_publish(report)
            return staged.reveal(), staged.work
        finally:
            staged.discard()


@contextmanager
def open_run(
    method: str, data: Any, options: Mapping[str, Any], kind: Any, *, reads_only: bool = False
) -> Iterator[Run]:
    """Open the engine that releases ``data`` and a :class:`Run` of ``method`` over it.

    ``options`` are the release's ``**options``, checked against its options class
    ``kind`` (:func:`~dpfast._release.options.release_options`: an unknown name is
    refused) before any work, as is ``risk`` (True, or a dict of
    :class:`dpfast.risk.RiskOptions`): :meth:`Run.finish` measures the release's
    disclosure risk into the private report. However the block ends, the engine removes
    what the release left behind, and a budget's reservation not yet committed is given
    back (nothing was published); an error that an engine can state better (a bad value
    found in a pass, named as the in-memory release names it; an interrupt a cluster
    reported as a failed job) is raised so. ``reads_only``: the run only reads the input's
    names, size and types (a forecast), and needs no ``output`` on any engine.
    """
    given = release_options(method, options, kind)
    risk = risk_options(given["risk"])
    opened = open_engine(
        data,
        method=method,
        engine=given["engine"],
        output=given["output"],
        memory_limit=given["memory_limit"],
        progress=given["progress"],
        metrics=given["metrics"],
        risk=risk is not None,
        reads_only=reads_only,
    )
    label = engine_label(engine_name(data, given["engine"]))
    run = Run(method, opened, given, risk, label)
    try:
        if risk is not None:
            risk.check_names(opened.names)
        yield run
    except Exception as exc:
        better = opened.explain(exc)
        if better is exc:
            raise
        raise better from None
    finally:
        try:
            if run.reservation is not None and not run.committed:
                run.reservation.abandon()
        finally:
            opened.close()
