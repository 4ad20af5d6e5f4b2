"""Command-line interface: the only module that reads argv, prints, or exits.

Each sub-command lives in its own module and registers itself on `app`.
"""

from __future__ import annotations

from tokenprobe.cli import bench as _bench  # noqa: F401  (registers commands)
from tokenprobe.cli import calibrate as _calibrate  # noqa: F401
from tokenprobe.cli import catalog as _catalog  # noqa: F401
from tokenprobe.cli import compare as _compare  # noqa: F401
from tokenprobe.cli import diagnose as _diagnose  # noqa: F401
from tokenprobe.cli import estimate as _estimate  # noqa: F401
from tokenprobe.cli import export as _export  # noqa: F401
from tokenprobe.cli import import_telemetry as _import_telemetry  # noqa: F401
from tokenprobe.cli import monitor as _monitor  # noqa: F401
from tokenprobe.cli import plan as _plan  # noqa: F401
from tokenprobe.cli import report as _report  # noqa: F401
from tokenprobe.cli import serve as _serve  # noqa: F401
from tokenprobe.cli import simulate as _simulate  # noqa: F401
from tokenprobe.cli import whatif as _whatif  # noqa: F401
from tokenprobe.cli.app import app


def main() -> None:
    app()


__all__ = ["app", "main"]
