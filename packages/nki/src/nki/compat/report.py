"""Tables of outcomes: a plain-text one for the terminal, Markdown for docs/nki_compatibility.md."""

from __future__ import annotations

import re
from collections import Counter

from .outcome import CRASH, OK, SKIPPED, STATUSES, Outcome

# Frameworks whose devices some public scripts run kernels on (an XLA device, JAX arrays): a unit
# that stops importing one needs another framework, not something of nki's.
OTHER_FRAMEWORKS = ("jax", "torch_xla")
_OTHER_FRAMEWORK = re.compile(r"ModuleNotFoundError: No module named '(" + "|".join(OTHER_FRAMEWORKS) + r")(\.|')")


def needs_other_framework(o: Outcome) -> bool:
    return o.status == CRASH and bool(_OTHER_FRAMEWORK.match(o.detail))


def summary(outcomes: list[Outcome]) -> dict:
    counts = Counter(o.status for o in outcomes)
    ran = len(outcomes) - counts[SKIPPED]
    other = sum(map(needs_other_framework, outcomes))
    return {"units": len(outcomes), **{s: counts[s] for s in STATUSES},
            "ok_percent": round(100.0 * counts[OK] / ran, 1) if ran else 0.0, "other_framework": other,
            "ok_percent_nki": round(100.0 * counts[OK] / (ran - other), 1) if ran > other else 0.0}


def text_table(outcomes: list[Outcome]) -> str:
    rows = [("status", "device us", "wall s", "unit", "detail")]
    for o in outcomes:
        rows.append((o.status, f"{o.device_ns / 1e3:.1f}", f"{o.wall_s:.2f}", f"{o.file}::{o.unit}", o.detail[:160]))
    widths = [max(len(r[i]) for r in rows) for i in range(4)]
    lines = ["  ".join(r[i].ljust(widths[i]) for i in range(4)) + "  " + r[4] for r in rows]
    s = summary(outcomes)
    lines.append("")
    lines.append(", ".join(f"{s[k]} {k}" for k in STATUSES if s[k]) + f" of {s['units']} units; {s['ok_percent']}% of those that ran are ok")
    return "\n".join(lines)


_LOCATION = re.compile(r" at \S+:\d+")


def causes(outcomes: list[Outcome]) -> list[tuple[str, int]]:
    """What stopped units that did not pass, most frequent first (locations dropped, so one
    missing name used by many kernels counts once per kernel)."""
    counter = Counter(_LOCATION.sub("", o.detail).strip() for o in outcomes if o.status not in (OK, SKIPPED))
    return counter.most_common()


def markdown(groups: list[tuple[str, list[Outcome]]], header: str) -> str:
    """``groups``: (label, outcomes) per repository."""
    out = [header.rstrip(), ""]
    out.append("| repository | units | ok | wrong | rejected | crash | timeout | skipped | no-check | ok % "
               "| crash: needs jax / torch_xla | ok % of the rest |")
    out.append("|---|---|---|---|---|---|---|---|---|---|---|---|")
    total = [o for _, outcomes in groups for o in outcomes]
    for label, outcomes in groups + [("**all**", total)]:
        s = summary(outcomes)
        out.append(f"| {label} | {s['units']} | {s['ok']} | {s['wrong']} | {s['rejected']} | {s['crash']} | {s['timeout']} "
                   f"| {s['skipped']} | {s['no-check']} | {s['ok_percent']} | {s['other_framework']} | {s['ok_percent_nki']} |")
    for label, outcomes in groups:
        out += ["", f"## {label}", ""]
        top = causes(outcomes)
        if top:
            out += ["What stops the others (units per cause):", ""]
            out += [f"* {n} x {_cell(cause)}" for cause, n in top[:25]]
            out.append("")
        out.append("| status | file | unit | kernels launched | device us | wall s | detail (rule and line) |")
        out.append("|---|---|---|---|---|---|---|")
        for o in outcomes:
            out.append(f"| {o.status} | `{o.file}` | `{_cell(o.unit)}` | {_cell(', '.join(o.kernels))} | {o.device_ns / 1e3:.1f} "
                       f"| {o.wall_s:.2f} | {_cell(o.detail)} |")
    return "\n".join(out) + "\n"


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")
