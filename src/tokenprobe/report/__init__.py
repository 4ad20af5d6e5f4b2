"""HTML reports with plots (U3): figures as plotly dicts, pages as one self-contained file.

    from tokenprobe.report import estimate_sections, write_report
    write_report("report.html", estimate_sections(est.to_dict()), title="llama-3.1-8b on H100")

plot.py           figure helpers and the display-unit conversions (ms, GiB, TFLOP/s)
estimate_figs.py  roofline, time shares, TPOT vs context, throughput vs batch, memory, KV, energy
run_figs.py       latency CDFs, timelines (batch, KV, queue, power + arrivals), run energy
compare.py        several estimates side by side (also the web app's what-if panel)
sections.py       tables + figures per report section (a run's report opens with its headline)
sweep.py          a sweep folder: throughput-vs-latency and goodput-vs-load curves, the knee
describe.py       what a run was (model, GPU, engine, load, server) from its config
fmt.py            the one number formatter (3 significant digits, thousands separators)
html.py           the page: inline CSS, plotly.js inlined from its Python package, no network
"""

from __future__ import annotations

from tokenprobe.report.compare import compare_row, comparison_figure
from tokenprobe.report.describe import run_facts
from tokenprobe.report.estimate_figs import estimate_figures
from tokenprobe.report.html import Section, Table, plotly_js, render_html, write_report
from tokenprobe.report.plot import Figure
from tokenprobe.report.run_figs import run_figures
from tokenprobe.report.sections import (
    compare_sections,
    describe_estimate,
    estimate_sections,
    memory_rows,
    run_compare_rows,
    run_compare_sections,
    run_sections,
)
from tokenprobe.report.sweep import (
    SweepPoint,
    find_knee,
    is_sweep_folder,
    load_text,
    make_point,
    point_load,
    read_sweep,
    sweep_point_dirs,
    sweep_sections,
)

__all__ = [
    "Figure",
    "Section",
    "SweepPoint",
    "Table",
    "compare_row",
    "compare_sections",
    "comparison_figure",
    "describe_estimate",
    "estimate_figures",
    "estimate_sections",
    "find_knee",
    "is_sweep_folder",
    "load_text",
    "make_point",
    "memory_rows",
    "plotly_js",
    "point_load",
    "read_sweep",
    "render_html",
    "run_compare_rows",
    "run_compare_sections",
    "run_facts",
    "run_figures",
    "run_sections",
    "sweep_point_dirs",
    "sweep_sections",
    "write_report",
]
