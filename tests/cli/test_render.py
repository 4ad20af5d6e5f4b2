"""The layout engine on its own: any mix of names, figures and prose at any width gives lines
no wider than the width, names whole, words unbroken, and no ANSI codes when not a terminal."""

from __future__ import annotations

import io
import re

from hypothesis import given, settings
from hypothesis import strategies as st
from rich.cells import cell_len
from rich.console import Console

from tokenprobe.cli.render import Col, print_side_by_side, print_table

NAME = st.from_regex(r"[a-z][a-z0-9.-]{0,23}[a-z0-9]", fullmatch=True)
FIGURE = st.from_regex(r"[0-9]{1,6}(\.[0-9]{1,3})? (ms|GiB|W)", fullmatch=True)
WORD = st.from_regex(r"[a-z]{1,12}", fullmatch=True)
PROSE = st.lists(WORD, min_size=1, max_size=12).map(" ".join)


def _console(width: int, terminal: bool) -> tuple[Console, io.StringIO]:
    buf = io.StringIO()
    return Console(file=buf, width=width, force_terminal=terminal, color_system=None), buf


def _whole(piece: str, text: str) -> bool:
    return re.search(rf"(?<![\w.-]){re.escape(piece)}(?![\w.-])", text) is not None


@st.composite
def tables(draw: st.DrawFn) -> tuple[list[Col], list[list[str]]]:
    kinds = ["name", *draw(st.lists(st.sampled_from(["name", "num", "text"]), max_size=7))]
    cols = [
        Col(draw(PROSE), draw(st.sampled_from(["", "x"])), k, drop=draw(st.integers(0, 2)))  # type: ignore[arg-type]
        for k in kinds
    ]
    cols[0] = Col(cols[0].header, kind="name")  # a row's name is never optional
    strategy = {"name": NAME, "num": FIGURE, "text": PROSE}
    rows = draw(st.lists(st.tuples(*(strategy[k] for k in kinds)), min_size=1, max_size=6))
    return cols, [list(r) for r in rows]


@settings(max_examples=150, deadline=None)
@given(tables(), st.integers(40, 200), st.booleans())
def test_any_table_fits_and_keeps_names_and_words_whole(
    table: tuple[list[Col], list[list[str]]], width: int, terminal: bool
) -> None:
    cols, rows = table
    out, buf = _console(width, terminal)
    print_table("a title of several words", cols, rows, out=out)
    text = buf.getvalue()
    assert all(cell_len(line) <= width for line in text.splitlines())
    assert "\x1b[" not in text
    flat = " ".join(text.split())
    left_out = flat.split("left out at this width:", 1)[-1] if "left out" in flat else ""
    for row in rows:
        for col, cell in zip(cols, row, strict=True):
            # prose may wrap, at spaces only; a name or a figure stays on one line
            pieces = cell.split() if col.kind == "text" else [cell]
            if all(_whole(p, text) for p in pieces):
                continue
            assert col.drop > 0 and col.header.split()[0] in left_out, (col, cell)


@settings(max_examples=60, deadline=None)
@given(st.lists(NAME, min_size=2, max_size=8, unique=True), st.integers(40, 200))
def test_side_by_side_keeps_every_label_whole(labels: list[str], width: int) -> None:
    out, buf = _console(width, False)
    lines = [("TTFT", ["12.5 ms"] * len(labels)), ("fits", ["yes"] * len(labels))]
    print_side_by_side("Side by side", labels, lines, out=out)
    text = buf.getvalue()
    assert all(cell_len(line) <= width for line in text.splitlines())
    assert all(_whole(label, text) for label in labels)
