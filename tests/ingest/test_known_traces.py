"""``KnownTraces`` and ``sums`` without a server: rows are trusted only under the version they were summed for,
the bound counts rows and forgets the oldest traces first, and a summary is the same whatever the rows' order."""

from __future__ import annotations

from evalsi.stores.traces.summaries import KnownTraces, SpanRow, sums


def _row(trace: str, span: str, parent: str = "", start: int = 0, tokens: tuple[int, int] = (0, 0)) -> SpanRow:
    return (trace, span, parent, f"name-{span}", "svc", "", start, start + 10, 0, *tokens)


def test_rows_are_given_back_only_for_the_version_they_were_summed_under() -> None:
    known = KnownTraces()
    rows = {"a": _row("t", "a")}
    known.remember("p", "t", 7, rows)
    assert known.rows("p", "t", 7) == rows
    assert known.rows("p", "t", 8) is None  # another writer's newer summary row
    assert known.rows("q", "t", 7) is None  # projects are apart


def test_the_bound_counts_rows_and_forgets_the_oldest_traces_first() -> None:
    known = KnownTraces(limit=5)
    known.remember("p", "old", 1, {s: _row("old", s) for s in "abc"})
    known.remember("p", "new", 2, {s: _row("new", s) for s in "de"})
    assert known.rows_held == 5 and len(known) == 2
    known.remember("p", "old", 3, {s: _row("old", s) for s in "abc"})  # summarized again: now the newest
    known.remember("p", "third", 4, {"f": _row("third", "f")})
    assert known.rows("p", "new", 2) is None  # the oldest went
    assert known.rows("p", "old", 3) is not None and known.rows("p", "third", 4) is not None
    assert known.rows_held == 4


def test_sums_take_the_root_the_first_start_and_every_token() -> None:
    rows = [_row("t", "c", parent="a", start=30, tokens=(5, 1)), _row("t", "a", start=10),
            _row("t", "b", parent="a", start=20, tokens=(3, 2))]
    root_id, root_name, service, session, start, end, count, errors, tokens_in, tokens_out = sums(rows)
    assert (root_id, root_name, service, session) == ("a", "name-a", "svc", "")
    assert (start, end, count, errors, tokens_in, tokens_out) == (10, 40, 3, 0, 8, 3)
    assert sums(list(reversed(rows))) == sums(rows)
