"""A persistent privacy budget per dataset: a file of every ε spent on it (docs/budget.md).

Several releases of the same data compose: their ε add up. A budget file keeps the total
allowed for a dataset and one entry per release, across runs, processes and paths (a
symbolic link to the file is the same budget). Each release goes through three steps:

1. :meth:`BudgetFile.reserve` checks ε (finite, > 0) and that it fits in what is left,
   and records it as ``"reserved"`` *before any work*; a reservation counts as spent;
2. :meth:`Reservation.commit` records what the release spent, its guarantee level and
   its protected columns as ``"committed"``: final, never refunded. It comes *before any
   output becomes visible*;
3. the release publishes (renames its output into place).

So a reservation that was never committed provably published nothing: a release that
fails or is refused before committing abandons it (:meth:`Reservation.abandon` removes
its entry, leaving the file as it was), and a run killed outright leaves it *stale*
(its process, recorded with its host and start time, is gone), which
:meth:`BudgetFile.clear` (``dpfast budget clear FILE``) removes. Every change happens
under one exclusive lock per file and is written atomically, durably, and readable by
its owner only.

Examples
--------
>>> import os, shutil, tempfile
>>> import pandas as pd, dpfast
>>> folder = tempfile.mkdtemp()
>>> budget = dpfast.BudgetFile.create(os.path.join(folder, "people.budget.json"), 1.0)
>>> people = pd.DataFrame({"age": [23, 35, 47, 52, 61, 38]})
>>> with budget.reserve(0.5, method="laplace_dp", output="released.csv") as reservation:
...     release = dpfast.laplace_dp(people, epsilon=0.5, bounds={"age": (17, 90)}, seed=1)
...     _ = reservation.commit(release.report)  # final, before the output is visible
...     release.data.to_csv(os.path.join(folder, "released.csv"), index=False)
>>> budget.remaining()
0.5
>>> budget.reserve(0.75, method="laplace_dp", output="again.csv")
Traceback (most recent call last):
...
dpfast.exceptions.BudgetExceededError: the release needs epsilon=0.75 but budget file ...
>>> shutil.rmtree(folder)
"""

from __future__ import annotations

from dpfast.budget._file import BudgetFile
from dpfast.budget._format import BudgetEntry
from dpfast.budget._reservation import ReleaseReport, Reservation

__all__ = ["BudgetEntry", "BudgetFile", "ReleaseReport", "Reservation"]
