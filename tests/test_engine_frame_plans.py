"""The frame a cluster engine makes from the writes it kept, and the frames' write plans."""

from __future__ import annotations

import gc
import weakref

import pyarrow as pa
import pytest

from dpfast.dataflow.writes import CopyColumns
from dpfast.engines.frames import WritePlan, plan_of, plans, remember
from dpfast.engines.outofcore._kept import KeptWrites


class Frame:
    """A stand-in for a Spark or Dask frame: an object with weak references."""


def test_a_frame_has_the_plan_it_was_given_and_nothing_is_set_on_it():
    frame, plan = Frame(), WritePlan(tasks="the tasks")
    assert remember(frame, plan) is frame
    assert plan_of(frame) is plan
    assert vars(frame) == {}
    assert plan_of(Frame()) == WritePlan()  # any other frame: none


def test_a_plan_is_forgotten_with_its_frame():
    kept = len(plans._PLANS)
    frames = [remember(Frame(), WritePlan(tasks=i)) for i in range(50)]
    assert [plan_of(f).tasks for f in frames] == list(range(50))
    assert len(plans._PLANS) == kept + 50
    del frames
    gc.collect()
    assert len(plans._PLANS) == kept


def test_a_reused_id_does_not_find_an_earlier_frames_plan():
    earlier, now = Frame(), Frame()
    remember(earlier, WritePlan(tasks="earlier"))
    # as if ``now`` had the id of a collected frame whose callback has not run yet
    plans._PLANS[id(now)] = plans._PLANS.pop(id(earlier))
    try:
        assert plan_of(now) == WritePlan()
    finally:
        del plans._PLANS[id(now)]


def test_a_collected_frame_does_not_remove_a_later_frames_plan_at_its_id():
    earlier, later = Frame(), Frame()
    remember(earlier, WritePlan(tasks="earlier"))
    key = id(earlier)
    entry = (weakref.ref(later), WritePlan(tasks="later"))
    plans._PLANS[key] = entry  # a later frame's, at the same id
    try:
        del earlier
        gc.collect()  # the earlier frame's callback runs
        assert plans._PLANS[key] is entry
    finally:
        del plans._PLANS[key]


_TABLE = pa.table({"count": [1, 2]})
_COPY = CopyColumns(["id"], None)


@pytest.mark.parametrize(
    ("kept", "written", "shape"),
    [
        (KeptWrites(), False, "files"),  # nothing kept: whatever was written here
        (KeptWrites(), True, "files"),
        (KeptWrites(table=_TABLE), False, "table"),
        (KeptWrites(table=_TABLE, groups={"a": "g"}), True, "table"),  # the table is all
        (KeptWrites(groups={"a": "g", "b": "g"}), False, "groups"),
        (KeptWrites(rows={"a": "r"}), False, "rows"),
        (KeptWrites(groups={"a": "g"}, rows={"b": "r"}), False, "files"),  # two kinds: files
        (KeptWrites(copies=[_COPY]), False, "exchange"),
        (KeptWrites(groups={"a": "g"}, rows={"b": "r"}, copies=[_COPY]), False, "exchange"),
        (KeptWrites(ranked={"a": "s"}), False, "exchange"),  # ranks sent through it
        (KeptWrites(groups={"a": "g"}, copies=[_COPY]), True, "files"),  # a column written here
    ],
)
def test_the_kept_writes_choose_the_frame(kept, written, shape):
    assert kept.shape(written) == shape


def test_the_kept_copies_and_columns_in_the_input_order():
    kept = KeptWrites(copies=[CopyColumns(["b", 3], None), CopyColumns(["a"], None)])
    assert kept.copied == ["b", "3", "a"]
    assert KeptWrites.in_order({"c": 1, "a": 2}, ["a", "b", "c"]) == [2, 1]
