"""Charts drawn on the server as SVG: no script, no library, nothing fetched. Each chart is
an image with a title and a description; the page puts a table of its numbers beside it.
Every mark carries its numbers as data-* attributes (the tests read them)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from html import escape

from markupsafe import Markup

from interlock.api.ui.oversight import Oversight, Spread
from interlock.projections.views.review_tables import FAST

WIDTH, LEFT, RIGHT, ROW, TOP = 640, 150, 24, 30, 34
INK, MUTED, LINE, FILL = "#1b1f24", "#57606a", "#d0d7de", "#0550ae"
LOW, HIGH = 0.5, 2 * 86400.0  # the time axis: half a second to two days, log scale
TICKS = ((1, "1 s"), (10, "10 s"), (60, "1 min"), (600, "10 min"), (3600, "1 h"),
         (86400, "1 day"))


@dataclass(frozen=True)
class Bar:
    label: str
    value: float  # on the chart's scale: a share (0 to 1) or a count
    text: str  # what the bar's end says


def duration(seconds: float) -> str:
    """A wait in words a reviewer reads at a glance: 0.8 s, 45 s, 2.5 min, 3.1 h, 2.0 days."""
    if seconds < 10:
        return f"{seconds:.1f} s"
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 5400:
        return f"{seconds / 60:.1f} min"
    if seconds < 172800:
        return f"{seconds / 3600:.1f} h"
    return f"{seconds / 86400:.1f} days"


def time_x(seconds: float) -> float:
    """Where a wait falls on the time axis (clamped to it)."""
    clamped = min(max(seconds, LOW), HIGH)
    share = math.log(clamped / LOW) / math.log(HIGH / LOW)
    return round(LEFT + share * (WIDTH - LEFT - RIGHT), 1)


def _open(key: str, title: str, desc: str, height: int) -> list[str]:
    return [f'<svg xmlns="http://www.w3.org/2000/svg" id="{key}" class="chart" role="img" '
            f'viewBox="0 0 {WIDTH} {height}" width="100%" '
            f'aria-labelledby="{key}-title {key}-desc">',
            f'<title id="{key}-title">{escape(title)}</title>',
            f'<desc id="{key}-desc">{escape(desc)}</desc>']


def _label(y: float, text: str) -> str:
    return (f'<text x="{LEFT - 8}" y="{y + 4}" text-anchor="end" font-size="13" '
            f'fill="{INK}">{escape(text[:22])}</text>')


def boxes(key: str, title: str, desc: str, spreads: Sequence[Spread]) -> Markup:
    """One box per row on a log time axis: whiskers 5th-95th percentile, box the middle
    half, a bar at the median."""
    height = TOP + ROW * max(len(spreads), 1) + 10
    out = _open(key, title, desc, height)
    for at, name in TICKS:
        x = time_x(at)
        out += [f'<line x1="{x}" y1="{TOP - 6}" x2="{x}" y2="{height - 8}" stroke="{LINE}"/>',
                f'<text x="{x}" y="{TOP - 12}" text-anchor="middle" font-size="12" '
                f'fill="{MUTED}">{name}</text>']
    for i, s in enumerate(spreads):
        y = TOP + ROW * i + ROW / 2
        x5, x25, x50, x75, x95 = (time_x(v) for v in (s.p5, s.p25, s.p50, s.p75, s.p95))
        out += [f'<g class="box" data-label="{escape(s.label)}" data-n="{s.n}" '
                f'data-p5="{s.p5:.3f}" data-p25="{s.p25:.3f}" data-p50="{s.p50:.3f}" '
                f'data-p75="{s.p75:.3f}" data-p95="{s.p95:.3f}">', _label(y, s.label),
                f'<line x1="{x5}" y1="{y}" x2="{x95}" y2="{y}" stroke="{INK}"/>',
                f'<rect x="{x25}" y="{y - 9}" width="{max(x75 - x25, 1):.1f}" height="18" '
                f'fill="#ddf4ff" stroke="{FILL}"/>',
                f'<line class="median" x1="{x50}" y1="{y - 9}" x2="{x50}" y2="{y + 9}" '
                f'stroke="{FILL}" stroke-width="3"/></g>']
    return Markup("".join([*out, "</svg>"]))  # every text above is escaped


def bars(key: str, title: str, desc: str, rows: Sequence[Bar], top: float) -> Markup:
    """One horizontal bar per row, `top` being the full width (1 for shares)."""
    height = 8 + ROW * max(len(rows), 1)
    out = _open(key, title, desc, height)
    span = WIDTH - LEFT - RIGHT - 70
    for i, b in enumerate(rows):
        y = 4 + ROW * i + ROW / 2
        width = round(span * (b.value / top if top else 0.0), 1)
        out += [f'<g class="bar" data-label="{escape(b.label)}" data-value="{b.value:.4f}">',
                _label(y, b.label),
                f'<rect x="{LEFT}" y="{y - 9}" width="{width}" height="18" fill="{FILL}"/>',
                f'<text x="{LEFT + width + 6}" y="{y + 4}" font-size="13" '
                f'fill="{INK}">{escape(b.text)}</text></g>']
    return Markup("".join([*out, "</svg>"]))  # every text above is escaped


def pending_label(age: int) -> str:
    """"over 5 min", "over 4 h", "over 1 day" (ages are whole minutes, hours or days)."""
    if age == 0:
        return "all pending"
    if age < 3600:
        return f"over {age // 60} min"
    return f"over {age // 3600} h" if age < 86400 else f"over {age // 86400} day(s)"


def oversight_charts(o: Oversight) -> dict[str, Markup]:
    """The statistics page's charts of the oversight figures."""
    most = max((n for _, n in o.pending), default=0)
    return {
        "by_tool": boxes("wait-by-tool", "Time to decision per tool",
                         "Median, middle half and 5th to 95th percentile of the time from the "
                         "ask to a person's decision, per tool, on a log scale.", o.by_tool),
        "by_approver": boxes("wait-by-approver", "Time to decision per approver",
                             "The same per approver: who decided how fast.", o.by_approver),
        "rejection": bars("rejection-rate", "Rejection rate per tool",
                          "Rejections among people's decisions, per tool.",
                          [Bar(r.tool, r.rejection, f"{r.rejection:.0%} of {r.decided}")
                           for r in o.rates], 1.0),
        "edit": bars("edit-rate", "Edit rate per tool",
                     "Edited inputs (an edit vote, or a restart) among people's decisions.",
                     [Bar(r.tool, r.edit, f"{r.edit:.0%} of {r.decided}") for r in o.rates],
                     1.0),
        "fast": bars("fast-share", "Fast approvals per tool",
                     f"Approvals within {FAST} seconds of the ask, among approvals.",
                     [Bar(r.tool, r.fast_share, f"{r.fast_share:.0%} of {r.approved}")
                      for r in o.rates if r.approved], 1.0),
        "pending": bars("pending-by-age", "Pending by age",
                        "Calls awaiting a decision now, by how long they have waited.",
                        [Bar(pending_label(a), n, str(n)) for a, n in o.pending], most),
    }
