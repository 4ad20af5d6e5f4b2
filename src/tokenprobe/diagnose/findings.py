"""A finding of the diagnosis, and the record of every rule's verdict."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Literal

Severity = Literal["info", "warning", "critical"]
SEVERITY_ORDER = {"critical": 0, "warning": 1, "info": 2}

Evidence = dict[str, float | int | str | None]


@dataclass(frozen=True)
class Finding:
    """What a rule saw: `kind` (e.g. "memory-bandwidth-bound"), `severity`, a one-line
    `summary`, the `evidence` (numbers in SI units / fractions, the unit in the key) and the
    `action` to take."""

    kind: str
    severity: Severity
    summary: str
    evidence: Evidence
    action: str

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class Verdict:
    """One rule's outcome: "fired", "clear" (checked, not present) or "skipped" (no data),
    with the reason in words."""

    rule: str
    status: Literal["fired", "clear", "skipped"]
    reason: str
    finding: Finding | None = None

    @classmethod
    def fired(cls, finding: Finding) -> Verdict:
        """The rule found what it looks for: the finding names the rule and says why."""
        return cls(finding.kind, "fired", finding.summary, finding)


@dataclass
class Diagnosis:
    """Every rule's verdict, the findings (most severe first), and measured vs predicted."""

    verdicts: list[Verdict] = field(default_factory=list)
    comparison: dict[str, Any] | None = None  # see predict.py
    replay: dict[str, Any] | None = None  # see replay.py
    notes: list[str] = field(default_factory=list)

    @property
    def findings(self) -> list[Finding]:
        found = [v.finding for v in self.verdicts if v.finding is not None]
        return sorted(found, key=lambda f: SEVERITY_ORDER[f.severity])

    def kinds(self) -> set[str]:
        return {f.kind for f in self.findings}

    def to_dict(self) -> dict[str, Any]:
        return {
            "findings": [f.to_dict() for f in self.findings],
            "rules": [
                {"rule": v.rule, "status": v.status, "reason": v.reason} for v in self.verdicts
            ],
            "comparison": self.comparison,
            "replay": self.replay,
            "notes": list(self.notes),
        }
