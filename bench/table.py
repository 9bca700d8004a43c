"""One result row per scenario, and the single table `make bench` prints."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Result:
    """`app` and `reference` are in `unit`; `target` is the ratio app/reference to reach.

    higher_is_better: throughput (req/s, rows/s); otherwise a time, where lower wins.
    A target of None means the row is context (a before/after pair, a growth step).
    absolute_target, in `unit`, is a bound on the app figure itself (p50 <= 50 ms, >= 5,000
    rows/s), checked next to the ratio target when both are given.
    size and size_budget, in bytes: what a page weighs and the most it may (300 KB), checked
    next to the other targets. note replaces the figures and the verdict of a row that has
    none (a page that is "not built" yet).
    """

    database: str
    scenario: str
    app: float
    reference: float | None
    reference_name: str
    unit: str
    target: float | None = None
    higher_is_better: bool = False
    absolute_target: float | None = None
    size: int | None = None
    size_budget: int | None = None
    note: str = ""

    @property
    def ratio(self) -> float | None:
        if self.note or self.reference in (None, 0):
            return None
        return self.app / self.reference

    @property
    def verdict(self) -> str:
        if self.note:
            return self.note
        sign = ">=" if self.higher_is_better else "<="
        checks = []  # (met, what was asked)
        if self.target is not None and self.ratio is not None:
            met = self.ratio >= self.target if self.higher_is_better else self.ratio <= self.target
            checks.append((met, f"{sign} {self.target:.3g}x"))
        if self.absolute_target is not None:
            bound = self.absolute_target
            met = self.app >= bound if self.higher_is_better else self.app <= bound
            checks.append((met, f"{sign} {_figure(bound, self.unit)}"))
        if self.size is not None and self.size_budget is not None:
            checks.append((self.size <= self.size_budget, f"<= {kilobytes(self.size_budget)}"))
        if not checks:
            return ""
        met = all(ok for ok, _ in checks)
        return f"{'met' if met else 'MISSED'} ({', '.join(what for _, what in checks)})"


def _figure(value: float | None, unit: str) -> str:
    if value is None:
        return "-"
    if value >= 100:
        return f"{value:,.0f} {unit}"
    if value >= 1:
        return f"{value:.2f} {unit}"
    return f"{value:.4f} {unit}"


def kilobytes(size: int) -> str:
    """Bytes as the page budget states them: 1 KB = 1,000 bytes, as browsers' tools count."""
    return f"{size / 1000:,.0f} KB" if size >= 10_000 else f"{size / 1000:.1f} KB"


def render(results: list[Result]) -> str:
    """A Markdown table: bench/README.md pastes it as printed."""
    head = ["database", "scenario", "app", "reference", "ratio", "target"]
    rows = [
        [
            r.database,
            r.scenario,
            "-" if r.note else _figure(r.app, r.unit),
            f"{_figure(r.reference, r.unit)} ({r.reference_name})" if r.reference_name else "-",
            "-" if r.ratio is None else f"{r.ratio:.2f}x",
            r.verdict,
        ]
        for r in results
    ]
    widths = [max(len(str(x)) for x in col) for col in zip(head, *rows, strict=True)]

    def line(cells):
        return "| " + " | ".join(c.ljust(w) for c, w in zip(cells, widths, strict=True)) + " |"

    out = [line(head), "|" + "|".join("-" * (w + 2) for w in widths) + "|"]
    out += [line(r) for r in rows]
    return "\n".join(out)
