"""Telemetry: NVML and host sampling on the run's clock; imports of nvidia-smi / Prometheus logs.

`nvml.py` is the only module that imports pynvml; `host.py` wraps psutil and RAPL; `sampler.py`
runs both in a background thread; `nvidia_smi_csv.py` and `prometheus_text.py` turn other tools'
logs into the same `TelemetrySample`s; `exporter.py` serves them to Prometheus.
"""

from __future__ import annotations

from tokenprobe.records import HOST_FILE, NOTES_FILE
from tokenprobe.telemetry.exporter import EnergyMeter, Exporter, RecordsTail
from tokenprobe.telemetry.host import HostReader, HostSample, RaplReader
from tokenprobe.telemetry.nvidia_smi_csv import CsvImport, parse_nvidia_smi_csv, read_nvidia_smi_csv
from tokenprobe.telemetry.nvml import GpuReading, NvmlGpus
from tokenprobe.telemetry.prometheus_text import gpu_samples, server_sample
from tokenprobe.telemetry.sampler import (
    DEFAULT_PERIOD_S,
    Gap,
    HostLog,
    Sampler,
    make_sampler,
    notes_doc,
    open_gpus,
    write_notes,
)
from tokenprobe.telemetry.scrape import ServerScraper

__all__ = [
    "DEFAULT_PERIOD_S",
    "HOST_FILE",
    "NOTES_FILE",
    "CsvImport",
    "EnergyMeter",
    "Exporter",
    "Gap",
    "GpuReading",
    "HostLog",
    "HostReader",
    "HostSample",
    "NvmlGpus",
    "RaplReader",
    "RecordsTail",
    "Sampler",
    "ServerScraper",
    "gpu_samples",
    "make_sampler",
    "notes_doc",
    "open_gpus",
    "parse_nvidia_smi_csv",
    "read_nvidia_smi_csv",
    "server_sample",
    "write_notes",
]
