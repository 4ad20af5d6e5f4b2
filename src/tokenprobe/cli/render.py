"""Tables, prose and progress for the terminal: readable at any width, plain when piped.

The rules (issue 15): a name a user must type back (model, GPU, deployment, rule, dtype) is
never cut or broken; prose and headers wrap at spaces, never mid-word; no line is wider than
the console; piped output (stdout not a terminal) has no box drawing and, rich's rule, no ANSI
codes. A table is tried in falling order of comfort until one fits the width:

1. boxed (a terminal) or plain columns (piped), full headers;
2. the short headers;
3. plain columns (a terminal);
4. without the optional columns, least needed first, with a line naming what was left out;
5. one `header: value` block per row.

Each try gives every column at least its longest unbreakable piece (a whole name or number,
the longest word of prose or of the header) and shares the rest by how much each could use, so
rich never has to break a word. Progress goes to stderr, only when stderr is a terminal.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Literal

from rich import box
from rich.cells import cell_len
from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)
from rich.table import Table
from rich.text import Text

from tokenprobe.cli.app import console as stdout_console
from tokenprobe.cli.app import err_console

Kind = Literal["name", "num", "text"]
Cell = str | Text
ProgressFn = Callable[[int, int], None]

# a block's value moves under its key when less room than this is left beside it
MIN_VALUE_WIDTH = 20
BLOCK_INDENT = 2


@dataclass(frozen=True, slots=True)
class Col:
    """One column: `name` cells are never broken (an identifier), `num` cells neither (a figure
    with its unit), `text` wraps at spaces. `short` is the header to use when the full one makes
    the table too wide; `drop` > 0 marks an optional column (the highest is left out first)."""

    header: str
    short: str = ""
    kind: Kind = "text"
    justify: Literal["left", "right"] = "left"
    drop: int = 0


def _text(cell: Cell) -> Text:
    return cell if isinstance(cell, Text) else Text(cell)


def _longest_word(text: str) -> int:
    return max((cell_len(w) for w in text.split()), default=0)


def _longest_line(text: str) -> int:
    return max((cell_len(line) for line in text.splitlines()), default=0)


def _bounds(header: str, kind: Kind, cells: Sequence[Text]) -> tuple[int, int]:
    """(narrowest, widest) content width of a column that breaks nothing it must not."""
    lo, hi = _longest_word(header), _longest_line(header)
    for cell in cells:
        whole = _longest_line(cell.plain)
        lo = max(lo, whole if kind != "text" else _longest_word(cell.plain))
        hi = max(hi, whole)
    return max(lo, 1), max(hi, 1)


def _overhead(n: int, boxed: bool) -> int:
    """Characters a table adds around n columns: rich's padding (1 each side) and, boxed, a rule
    between columns and one at each edge; plain columns drop the edge padding."""
    return 3 * n + 1 if boxed else max(2 * n - 2, 0)


def _share(lo: list[int], hi: list[int], room: int) -> list[int] | None:
    """Column widths within `room`: each its widest if all fit, else its narrowest plus a share
    of what is left by how much more it could use (largest remainders); None if even the
    narrowest do not fit."""
    if sum(hi) <= room:
        return hi
    spare = room - sum(lo)
    if spare < 0:
        return None
    want = [h - m for m, h in zip(lo, hi, strict=True)]
    total = sum(want)
    exact = [spare * w / total for w in want]
    widths = [m + int(e) for m, e in zip(lo, exact, strict=True)]
    left = room - sum(widths)
    for i in sorted(range(len(lo)), key=lambda i: int(exact[i]) - exact[i])[:left]:
        widths[i] += 1
    return widths


def _build(
    cols: Sequence[Col], rows: Sequence[Sequence[Text]], short: bool, boxed: bool, width: int
) -> Table | None:
    headers = [(c.short or c.header) if short else c.header for c in cols]
    bounds = [
        _bounds(h, c.kind, [r[i] for r in rows])
        for i, (h, c) in enumerate(zip(headers, cols, strict=True))
    ]
    widths = _share(
        [b[0] for b in bounds], [b[1] for b in bounds], width - _overhead(len(cols), boxed)
    )
    if widths is None:
        return None
    table = (
        Table(box=box.HEAVY_HEAD)
        if boxed
        else Table(box=None, show_edge=False, pad_edge=False, header_style="bold")
    )
    for h, c, w in zip(headers, cols, widths, strict=True):
        # no no_wrap: it would crop the header too; every cell fits its width, so only
        # prose and headers wrap, at spaces
        table.add_column(h, justify=c.justify, width=w, overflow="fold")
    for r in rows:
        table.add_row(*r)
    return table


def _styles(terminal: bool, dropped: bool) -> list[tuple[bool, bool]]:
    """(short headers, boxed) to try, in falling order of comfort."""
    if dropped:
        return [(True, False)]
    return [(False, terminal), (True, terminal)] + ([(True, False)] if terminal else [])


def _fit(
    cols: Sequence[Col], rows: Sequence[Sequence[Text]], width: int, terminal: bool
) -> tuple[Table, list[str]] | None:
    """The most comfortable table that fits, with the headers of the columns left out; None
    if even the required columns do not fit."""
    keep = list(range(len(cols)))
    optional = sorted((i for i, c in enumerate(cols) if c.drop > 0), key=lambda i: -cols[i].drop)
    while True:
        sub_cols = [cols[i] for i in keep]
        sub_rows = [[r[i] for i in keep] for r in rows]
        for short, boxed in _styles(terminal, dropped=len(keep) < len(cols)):
            table = _build(sub_cols, sub_rows, short, boxed, width)
            if table is not None:
                return table, [c.header for i, c in enumerate(cols) if i not in keep]
        if not optional:
            return None
        keep.remove(optional.pop(0))


def _title(out: Console, title: str, width: int, terminal: bool) -> None:
    if title:
        out.print(Text(title, style="bold" if terminal else ""), width=width, overflow="fold")


def print_table(
    title: str,
    cols: Sequence[Col],
    rows: Sequence[Sequence[Cell]],
    *,
    caption: str = "",
    out: Console | None = None,
) -> None:
    """Print rows under `cols` as the most comfortable layout that fits the console's width."""
    out = out or stdout_console
    width, terminal = out.width, out.is_terminal
    texts = [[_text(c) for c in r] for r in rows]
    fitted = _fit(cols, texts, width, terminal) if texts else None
    if not texts:
        _title(out, title, width, terminal)
        prose(caption or "(none)", out=out, markup=False)
        return
    if fitted is None:
        print_blocks(title, cols, texts, out=out)
    else:
        table, left_out = fitted
        _title(out, title, width, terminal)
        _emit(out, table)
        if left_out:
            prose(
                f"(left out at this width: {', '.join(left_out)}; --json or a wider terminal "
                "shows them)",
                out=out,
            )
    if caption:
        prose(caption, out=out)


def print_side_by_side(
    title: str,
    labels: Sequence[str],
    lines: Sequence[tuple[str, Sequence[Cell]]],
    *,
    out: Console | None = None,
) -> None:
    """Things compared side by side: one column per label, one row per line, if that fits;
    else one block per label (its lines as `name: value`)."""
    out = out or stdout_console
    width, terminal = out.width, out.is_terminal
    cols = [Col(""), *(Col(label, kind="num", justify="right") for label in labels)]
    rows = [[_text(name), *(_text(c) for c in cells)] for name, cells in lines]
    fitted = _fit(cols, rows, width, terminal)
    if fitted is not None and not fitted[1]:
        _title(out, title, width, terminal)
        _emit(out, fitted[0])
        return
    block_cols = [Col(""), *(Col(name) for name, _ in lines)]
    records = [[label, *(cells[i] for _, cells in lines)] for i, label in enumerate(labels)]
    print_blocks(title, block_cols, records, out=out)


def _emit(out: Console, table: Table) -> None:
    """Print a table; a plain one with a blank line after it (nothing else marks where it ends)
    and, piped, without the padding rich leaves at the ends of lines."""
    if out.is_terminal:
        out.print(table)
    else:
        with out.capture() as captured:
            out.print(table)
        out.file.write("".join(line.rstrip() + "\n" for line in captured.get().splitlines()))
    if table.box is None:
        out.print()


def _wrap(text: Text, width: int, out: Console) -> list[Text]:
    lines = list(text.wrap(out, max(width, 1), overflow="fold"))
    for line in lines:
        line.rstrip()  # the space a line was broken at
    return lines


def print_blocks(
    title: str, cols: Sequence[Col], rows: Sequence[Sequence[Cell]], *, out: Console | None = None
) -> None:
    """One block per row: its first cell as the head, then `header: value` lines."""
    out = out or stdout_console
    width, terminal = out.width, out.is_terminal
    _title(out, title, width, terminal)
    for r in rows:
        cells = [_text(c) for c in r]
        head = cells[0].copy()
        if terminal:
            head.stylize("bold")
        out.print()
        out.print(head, width=width, overflow="fold")
        for col, cell in zip(cols[1:], cells[1:], strict=True):
            _block_line(out, col.header, cell, width)
    out.print()


def _block_line(out: Console, key: str, value: Text, width: int) -> None:
    label = " " * BLOCK_INDENT + key + ": "
    room = width - cell_len(label)
    fits_whole = room >= _longest_line(value.plain)
    if fits_whole or room >= max(MIN_VALUE_WIDTH, _longest_word(value.plain)):
        lines = _wrap(value, room, out) or [Text("")]
        out.print(Text(label) + lines[0], soft_wrap=True)
        for line in lines[1:]:
            out.print(Text(" " * cell_len(label)) + line, soft_wrap=True)
        return
    out.print(Text(label.rstrip()), width=width, overflow="fold")
    indent = 2 * BLOCK_INDENT
    for line in _wrap(value, width - indent, out):
        out.print(Text(" " * indent) + line, soft_wrap=True)


def prose(text: str | Text, *, out: Console | None = None, markup: bool = True) -> None:
    """A sentence or two, wrapped at spaces to the console's width (a long word is folded, never
    cut)."""
    out = out or stdout_console
    out.print(text, overflow="fold", markup=markup, highlight=False)


def print_names(intro: str, names: Sequence[str], *, out: Console | None = None) -> None:
    """`intro`, then each name whole on its own indented line (prose would wrap a name with
    spaces in it, e.g. a deployment label, across two lines)."""
    out = out or stdout_console
    prose(intro if names else f"{intro} -", out=out, markup=False)
    for name in names:
        out.print(Text(" " * BLOCK_INDENT + name), soft_wrap=True)


@contextmanager
def progress(
    description: str,
    *,
    total: int | None = None,
    enabled: bool = True,
    out: Console | None = None,
) -> Iterator[ProgressFn | None]:
    """A bar with the elapsed time and an ETA on stderr while the block runs, as a `(done,
    total)` callback for the library; None (draw nothing) when disabled or stderr is not a
    terminal, so piped output and --json stay clean."""
    out = out or err_console
    if not enabled or not out.is_terminal:
        yield None
        return
    columns = (
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TextColumn("ETA"),
        TimeRemainingColumn(),
    )
    with Progress(*columns, console=out, transient=True) as bar:
        task = bar.add_task(description, total=total)

        def report(done: int, total: int) -> None:
            bar.update(task, completed=done, total=total)

        yield report
