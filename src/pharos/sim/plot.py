"""An SVG of TTFT distributions (one CDF line per policy, all seeds pooled): no plotting
library needed, and a browser opens it."""

from __future__ import annotations

from collections.abc import Sequence
from xml.sax.saxutils import escape

from pharos.sim.run import Result

WIDTH, HEIGHT, MARGIN = 720.0, 420.0, 50.0
COLOURS = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#17becf")


def ttft_cdf_svg(results: Sequence[Result], title: str) -> str:
    policies = list(dict.fromkeys(r.policy for r in results))
    series = {
        p: sorted(s.ttft_s for r in results if r.policy == p for s in r.samples) for p in policies
    }
    top_s = max((v[int(0.99 * (len(v) - 1))] for v in series.values() if v), default=1.0) or 1.0
    plot_w, plot_h = WIDTH - 2 * MARGIN, HEIGHT - 2 * MARGIN
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH:.0f}" height="{HEIGHT:.0f}" '
        'font-family="sans-serif" font-size="12">',
        f'<text x="{MARGIN}" y="20">{escape(title)}: TTFT CDF (x: seconds, to p99)</text>',
        f'<rect x="{MARGIN}" y="{MARGIN}" width="{plot_w}" height="{plot_h}" fill="none" '
        'stroke="#999"/>',
        f'<text x="{MARGIN}" y="{HEIGHT - 15}">0</text>',
        f'<text x="{WIDTH - MARGIN - 30}" y="{HEIGHT - 15}">{top_s:.1f} s</text>',
    ]
    for index, policy in enumerate(policies):
        values = series[policy]
        colour = COLOURS[index % len(COLOURS)]
        points = []
        for rank, value in enumerate(values):
            x = MARGIN + min(1.0, value / top_s) * plot_w
            y = MARGIN + plot_h * (1 - (rank + 1) / len(values))
            points.append(f"{x:.1f},{y:.1f}")
        parts.append(
            f'<polyline fill="none" stroke="{colour}" stroke-width="1.5" '
            f'points="{" ".join(points)}"/>'
        )
        parts.append(
            f'<text x="{WIDTH - MARGIN - 140}" y="{MARGIN + 16 * (index + 1)}" '
            f'fill="{colour}">{escape(policy)}</text>'
        )
    parts.append("</svg>")
    return "\n".join(parts)
