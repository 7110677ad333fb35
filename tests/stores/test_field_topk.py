"""The threshold stop of plait.stores.field_topk, on hand-made field lists."""

from __future__ import annotations

from plait.stores.field_topk import FieldList, merge_fields


def test_a_chunk_cut_from_one_field_keeps_the_answer_inexact_until_it_cannot_win() -> None:
    # field A's top 2: a=3, b=2 (last 2); field B's top 2: c=2.5, a=1 (last 1).
    # b's total is at least 2 and at most 2 + 1 = 3; c's at least 2.5, at most 2.5 + 2 = 4.5.
    # a is exact: 4. c (bound 4.5) could still beat a: not exact.
    a = FieldList({"a": 3.0, "b": 2.0}, 1.0, False)
    b = FieldList({"c": 2.5, "a": 1.0}, 1.0, False)
    merged = merge_fields([a, b], 1)
    assert not merged.exact
    assert merged.ranked == [("a", 4.0), ("c", 2.5), ("b", 2.0)]


def test_exact_once_every_bound_and_the_unseen_ranks_after_the_kth() -> None:
    # A: a=3, b=2.9, c=0.5 (last 0.5); B: a=2, b=1.8, d=0.2 (last 0.2).
    # exact: a=5, b=4.7; c <= 0.5+0.2 = 0.7, d <= 0.2+0.5 = 0.7, unseen <= 0.7 < 4.7.
    a = FieldList({"a": 3.0, "b": 2.9, "c": 0.5}, 1.0, False)
    b = FieldList({"a": 2.0, "b": 1.8, "d": 0.2}, 1.0, False)
    merged = merge_fields([a, b], 2)
    assert merged.exact
    assert merged.ranked[:2] == [("a", 5.0), ("b", 4.7)]
    # k=3 needs a third exact total: none
    assert not merge_fields([a, b], 3).exact


def test_complete_lists_and_weights() -> None:
    # B is complete (fewer hits than asked): a chunk missing from it scores 0 there.
    a = FieldList({"x": 1.0, "y": 0.9}, 2.0, True)
    b = FieldList({"y": 0.5}, 0.5, True)
    merged = merge_fields([a, b], None)
    assert merged.exact
    assert merged.ranked == [("y", 2.05), ("x", 2.0)]


def test_a_tie_at_the_bound_goes_by_id() -> None:
    # exact b = 3 (A 2 + B 1); a seen only in A at 2, B's last 1 → bound 3, and "a" < "b":
    # a could tie b and rank first, so k=1 is not proven.
    a = FieldList({"b": 2.0, "a": 2.0}, 1.0, False)
    b = FieldList({"b": 1.0, "z": 1.0}, 1.0, False)
    assert not merge_fields([a, b], 1).exact
