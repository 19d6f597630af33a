"""The two reports of a release: the fields every release shares, and what is stated.

:class:`Reporting` builds the public :class:`~dpfast.accounting.Report` and the
:class:`~dpfast.accounting.PrivateReport` from what a run recorded; the guarantee of the
columns a release does not protect is stated by :func:`unprotected_guarantee`
(docs/design.md#unprotected-columns).
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from typing import Any

from dpfast._validation import option
from dpfast.accounting import (
    GuaranteeLevel,
    Ledger,
    PhaseTimer,
    PrivateReport,
    Report,
    UnprotectedPolicy,
    names,
)
from dpfast.dataflow.on_bound import OnBound
from dpfast.intervals import accuracy_section

__all__ = ["SEEDED_NOTE", "Reporting", "unprotected_guarantee", "unprotected_note"]


SEEDED_NOTE = "reproducible — not for publication: noise was drawn from a seeded generator"


def unprotected_note(unprotected: Sequence[str], *, emphasis: bool = False) -> str:
    """Return the sentence a guarantee ends with when columns are released unchanged."""
    if not unprotected:
        return ""
    word = "NOT" if emphasis else "not"
    return (
        f" Column(s) {list(unprotected)} are released unchanged and are {word} protected by "
        "any guarantee."
    )


def unprotected_guarantee(
    guarantee: tuple[str, GuaranteeLevel],
    copied: Sequence[str],
    policy: UnprotectedPolicy,
    groups: str | None,
) -> tuple[str, GuaranteeLevel]:
    """State what holds once the unprotected columns ``copied`` are handled by ``policy``.

    ``groups`` names what rows share in the method (``"rank group"``, ``"cluster"``), or is
    ``None`` when every row is released on its own (noise drawn independently per row), so
    that keeping a row's unprotected values beside its protected ones reveals nothing more
    about the protected ones (docs/design.md#unprotected-columns).
    """
    text, level = guarantee
    if not copied:
        return text, level
    shown = list(copied)
    if policy == "drop":
        return (
            f"{text} Column(s) {shown} are not released ({option('unprotected', 'drop')}).",
            level,
        )
    weaker = "protected_only" if level == "proven" else level
    if policy == "shuffle" or groups is None:
        how = (
            "in a random row order drawn independently of the protected columns"
            if policy == "shuffle"
            else "in their rows; each row's protected values get noise independent of "
            "every other row, so this shows nothing more about them"
        )
        return (
            f"{text} Column(s) {shown} are released unchanged, {how}: they are NOT "
            "protected (their exact values are published), and the guarantee above holds "
            "for a change of one record's protected values only.",
            weaker,
        )
    if level == "none":
        return text + unprotected_note(shown, emphasis=True), level
    return (
        f"NOT differentially private as released: column(s) {shown} are kept in their "
        f"rows ({option('unprotected', 'keep')}), so they show which rows share a {groups}, "
        f"which no epsilon covers. Choose {option('unprotected', 'drop')} or "
        f"{option('unprotected', 'shuffle')} for the guarantee the protected columns have "
        f"on their own: {text}",
        "none",
    )


class Reporting:
    """The report builder that every release's run shares (the fields every report has).

    A run gives ``method``, ``engine_label`` (the public report's ``engine``),
    ``policy``, ``timer``, ``clamped``, ``alerts`` (the warning of its forecast, if any),
    ``timings_extra``, :meth:`unprotected`, :meth:`input_rows`, :meth:`released_names`
    and :meth:`bound_counts`.
    """

    method: str
    engine_label: str
    policy: UnprotectedPolicy | None
    timer: PhaseTimer
    clamped: dict[str, int]
    alerts: list[str]
    timings_extra: dict[str, float]

    def unprotected(self) -> list[str]:
        raise NotImplementedError

    def input_rows(self) -> int:
        raise NotImplementedError

    def released_names(self) -> list[Hashable]:
        raise NotImplementedError

    def bound_counts(self, domains: Mapping[Hashable, tuple[float, float]]) -> dict[str, OnBound]:
        raise NotImplementedError

    def reports(
        self,
        *,
        parameters: dict[str, Any],
        guarantee: tuple[str, GuaranteeLevel],
        ledger: Ledger | None = None,
        seed: int | None = None,
        sampler: str | None = None,
        notes: Sequence[str] = (),
        extra: dict[str, Any] | None = None,
        private: dict[str, Any] | None = None,
        metrics: dict[str, Any] | None = None,
        released_rows: int | None = None,
        protected: Sequence[str] | None = None,
        unprotected: Sequence[str] | None = None,
        groups: str | None = None,
        domains: Mapping[Hashable, tuple[float, float]] | None = None,
        emphasis: bool = False,
    ) -> tuple[Report, PrivateReport]:
        """Build the public and the private report, filling the fields every release shares.

        ``guarantee`` is the text and level of what holds for the protected columns (by
        default the released ones). The unprotected columns (by default those not
        released) are then stated by :attr:`policy` (:func:`unprotected_guarantee`, with
        ``groups`` naming what rows share); a method that takes no ``unprotected``
        argument keeps them in their rows and names them after the guarantee (with
        ``emphasis``, in capitals: NOT protected). ``domains`` (public bounds of the
        numeric columns) let the private report count the rows on a bound (released there,
        there before the noise, pushed there by the noise). The
        public report's warnings are the run's ``alerts`` (:meth:`Run.expect`). A seeded
        run is noted as not for publication. The report's ε is the ledger's total. Its
        ``accuracy`` is computed from its other fields alone (docs/accuracy.md).
        """
        copied = self.unprotected() if unprotected is None else list(unprotected)
        if self.policy is None:
            text, level = guarantee
            stated = (text + unprotected_note(copied, emphasis=emphasis), level)
        else:
            stated = unprotected_guarantee(guarantee, copied, self.policy, groups)
        report = Report(
            method=self.method,
            engine=self.engine_label,
            parameters=parameters,
            epsilon=None if ledger is None else ledger.total,
            ledger=[] if ledger is None else list(ledger.entries),
            guarantee=stated[0],
            guarantee_level=stated[1],
            protected_columns=names(self.released_names())
            if protected is None
            else list(protected),
            unprotected_columns=copied,
            unprotected=(self.policy or "keep") if copied else None,
            seeded=seed is not None,
            sampler=sampler,
            released_rows=self.input_rows() if released_rows is None else released_rows,
            notes=([SEEDED_NOTE] if seed is not None else []) + list(notes),
            warnings=list(self.alerts),
            extra=dict(extra or {}),
        )
        # from the public fields only (shallow: to_dict would copy every ledger entry)
        fields = {**vars(report), "ledger": [vars(entry) for entry in report.ledger]}
        report.accuracy = accuracy_section(fields)
        counted = self.bound_counts(domains or {})
        private_report = PrivateReport(
            method=self.method,
            input_rows=self.input_rows(),
            clamped=dict(self.clamped),
            clamped_output={name: c.released for name, c in counted.items()},
            timings={**self.timer.timings, **self.timings_extra},
            metrics=metrics,
            on_bound_before_noise={name: c.before for name, c in counted.items()},
            pushed_onto_bound={name: c.pushed for name, c in counted.items()},
            extra=dict(private or {}),
        )
        return report, private_report
