"""`tokenprobe export RUN --format csv|parquet --out FILE`: one row per request of a run folder,
the columns the RequestRecord fields (`tokenprobe.records` export). Parquet needs pyarrow, the
`parquet` extra: without it, one line naming the extra and exit 2. A folder that holds a sweep
(one run per point) is refused with the names of its points."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from tokenprobe.cli.app import app, console, guarded, print_json
from tokenprobe.cli.deployment_options import (
    JsonOption,
)
from tokenprobe.errors import ConfigError
from tokenprobe.files import check_out_file


def _export(run_dir: Path, fmt: str, out: Path) -> int:
    from tokenprobe.records import (
        CONFIG_FILE,
        EXPORT_FORMATS,
        pyarrow_module,
        read_run,
        write_records,
    )

    if fmt not in EXPORT_FORMATS:
        raise ConfigError("format", fmt, f"one of {', '.join(EXPORT_FORMATS)}")
    if fmt == "parquet":
        pyarrow_module()  # refused before the run is read
    if run_dir.is_dir() and not (run_dir / CONFIG_FILE).exists():
        points = sorted(p.name for p in run_dir.iterdir() if (p / CONFIG_FILE).is_file())
        if points:
            raise ConfigError(
                "run", str(run_dir), f"is a sweep; export one point: {', '.join(points)}"
            )
    check_out_file(out)
    run = read_run(run_dir)
    write_records(run.records, out, fmt)
    return len(run.records)


@app.command("export")
def export_cmd(
    run_dir: Annotated[Path, typer.Argument(help="A run folder (its records.jsonl)")],
    out: Annotated[Path, typer.Option(help="The file to write")],
    fmt: Annotated[str, typer.Option("--format", help="csv or parquet (needs pyarrow)")] = "csv",
    json_out: JsonOption = False,
) -> None:
    """Export a run's requests as CSV or Parquet, one row per request."""
    rows = guarded(lambda: _export(run_dir, fmt, out))
    if json_out:
        print_json({"out": str(out), "format": fmt, "rows": rows})
        return
    console.print(f"wrote {rows} requests to {out} ({fmt})", highlight=False, markup=False)
