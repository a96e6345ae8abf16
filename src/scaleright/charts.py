"""Self-contained SVG charts and HTML tables for the reports (``plan --html``, ``bench report --html``): inline
markup drawn here, no JavaScript, no fetches, every text escaped. Numbers print through ``scaleright.fmt``.

Primitives: ``scale`` / ``span`` / ``ticks`` (linear or log axes), ``axes`` (frame, grid, tick labels, axis
titles), ``legend``, ``path``, ``line``, ``text``, ``dot`` (a marker of one of ``SHAPES``, with hover text as an SVG
``<title>``), ``styles`` (a distinct colour and marker shape per series), ``svg`` (the chart element with its title)
and ``table``.
"""

from __future__ import annotations

import html
import math

from scaleright import fmt

# Colour-blind-safe categorical colours: Okabe & Ito's eight ("Color Universal Design", 2008), then Paul Tol's
# "muted" nine and three of his "light" scheme (Tol, "Colour Schemes", SRON/EPS/TN/09-002) — 20 distinct colours.
# Each series also gets a marker shape that changes with every step, so neighbours differ in two channels and
# the first 80 series have distinct (colour, shape) pairs.
PALETTE = ("#0072B2", "#E69F00", "#009E73", "#D55E00", "#56B4E9", "#CC79A7", "#000000", "#F0E442",
           "#332288", "#CC6677", "#117733", "#882255", "#44AA99", "#999933", "#AA4499", "#88CCEE", "#DDCC77",
           "#EE8866", "#FFAABB", "#BBCC33")  # fmt: skip
SHAPES = ("circle", "square", "triangle", "diamond")
W, H = 720, 360  # chart canvas, px
X0, X1, Y0, Y1 = 72, W - 190, H - 52, 16  # plot area: left, right, bottom, top (px); legend right of X1
DASH = fmt.DASH
CSS = """
body{font-family:system-ui,-apple-system,"Segoe UI",Roboto,Helvetica,Arial,sans-serif;margin:0 auto;max-width:1040px;
padding:24px;color:#1d2330;line-height:1.45}
h1{margin:0 0 4px}h2{border-bottom:2px solid #e3e7ee;padding-bottom:4px;margin-top:36px}h3{margin:18px 0 4px}
table{border-collapse:collapse;margin:8px 0;font-size:14px}
td,th{border:1px solid #dfe3ea;padding:4px 8px;text-align:left}
th{background:#f3f5f9}td.n{text-align:right;font-variant-numeric:tabular-nums}tr.hl td{background:#eaf6ea}
.cards{display:flex;flex-wrap:wrap;gap:10px;margin:10px 0}.card{border:1px solid #dfe3ea;border-radius:8px;
padding:8px 14px;min-width:120px}.card b{display:block;font-size:20px}.card span{color:#5b6475;font-size:13px}
.rec{border-left:5px solid #2ca02c;padding:4px 16px;background:#f6fbf6}
.bad{border-left:5px solid #d62728;padding:4px 16px;background:#fdf4f4}
.note{color:#5b6475;font-size:14px}
.summary{font-size:17px;margin:12px 0 4px}figure{margin:18px 0}figcaption{color:#5b6475;font-size:14px;max-width:720px}
svg.chart{max-width:100%;height:auto;font-size:12px;font-family:inherit}code{background:#f3f5f9;padding:0 3px}
footer{margin-top:40px;border-top:1px solid #e3e7ee;padding-top:8px;color:#5b6475;font-size:13px}
"""


def usd_tick(x: float) -> str:
    """A dollar axis label: $2.5k, $1.2M, $300."""
    return f"${x / 1e6:g}M" if x >= 1e6 else f"${x / 1e3:g}k" if x >= 1e4 else "$" + fmt.number(x)


def esc(x: object) -> str:
    return html.escape(str(x))


def page(title: str, body: list[str]) -> str:
    """A whole report page: ``title`` (escaped here) in the head, the shared ``CSS``, and ``body``'s HTML parts."""
    return (f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8"/>'
            f'<meta name="viewport" content="width=device-width, initial-scale=1"/>'
            f"<title>{esc(title)}</title><style>{CSS}</style></head><body>{''.join(body)}</body></html>\n")  # fmt: skip


def table(cols: list[str] | None, rows: list[list], rec_rows: set[int] | frozenset[int] = frozenset()) -> str:
    head = f"<thead><tr>{''.join(f'<th>{esc(c)}</th>' for c in cols)}</tr></thead>" if cols else ""
    body = []
    for i, r in enumerate(rows):
        cells = "".join(f'<td class="n">{esc(v)}</td>' if fmt.is_number(v) or str(v)[:1] in tuple("$0123456789-")
                        else f"<td>{esc(v)}</td>" for v in r)  # fmt: skip
        cls = ' class="hl"' if i in rec_rows else ""
        body.append(f"<tr{cls}>{cells}</tr>")
    return f"<table>{head}<tbody>{''.join(body)}</tbody></table>"


# ---- SVG primitives -----------------------------------------------------------------------------------------------
def scale(lo: float, hi: float, p0: float, p1: float, log: int = 0):
    """Data -> pixel map; ``log`` is the base of a log axis (0: linear)."""
    f = (lambda v: math.log(v, log)) if log else (lambda v: v)
    a, b = f(lo), f(hi)
    if b - a < 1e-12:
        a, b = a - 1, b + 1
    return lambda v: p0 + (f(v) - a) / (b - a) * (p1 - p0)


def span(vals: list[float], log: int = 0, zero: bool = False) -> tuple[float, float]:
    v = [x for x in vals if fmt.is_number(x) and (x > 0 or not log)] or [1.0]
    lo, hi = min(v), max(v)
    if log:
        return lo / 1.3, hi * 1.3
    lo = 0.0 if zero else lo
    pad = (hi - lo) * 0.06 or abs(hi) * 0.1 or 1.0
    return (lo if zero else lo - pad), hi + pad


def ticks(lo: float, hi: float, log: int = 0) -> list[float]:
    if log == 2:
        return [2.0**e for e in range(math.ceil(math.log2(lo)), math.floor(math.log2(hi)) + 1)]
    if log:
        for mult in ((1,), (1, 2, 5), (1, 2, 3, 5, 7), (1, 1.5, 2, 2.5, 3, 4, 5, 6, 7, 8, 9)):
            t = [m * 10.0**e for e in range(math.floor(math.log10(lo)), math.ceil(math.log10(hi)) + 1)
                 for m in mult if lo <= m * 10.0**e <= hi]  # fmt: skip
            if len(t) >= 3:
                return t[:: max(1, len(t) // 8)]
        return t or [lo, hi]
    raw = (hi - lo) / 5 or 1.0
    mag = 10.0 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1, 2, 2.5, 5, 10) if m * mag >= raw)
    return [k * step for k in range(math.ceil(lo / step), math.floor(hi / step) + 1)]


def svg(title: str, body: list[str], h: int = H) -> str:
    return (f'<svg class="chart" viewBox="0 0 {W} {h}" width="{W}" height="{h}" role="img" aria-label="{esc(title)}">'
            f"<title>{esc(title)}</title>{''.join(body)}</svg>")  # fmt: skip


def text(x: float, y: float, s: str, anchor: str = "middle", **attrs) -> str:
    extra = "".join(f' {k.replace("_", "-")}="{esc(v)}"' for k, v in attrs.items())
    return f'<text x="{x:.1f}" y="{y:.1f}" text-anchor="{anchor}"{extra}>{esc(s)}</text>'


def line(x1, y1, x2, y2, stroke="#888", width=1.0, dash="") -> str:
    d = f' stroke-dasharray="{dash}"' if dash else ""
    return (f'<line x1="{x1:.1f}" y1="{y1:.1f}" x2="{x2:.1f}" y2="{y2:.1f}" stroke="{stroke}" '
            f'stroke-width="{width}"{d}/>')


def path(pts: list[tuple[float, float]], stroke: str, width=2.0, dash="", fill="none", opacity=1.0) -> str:
    d = "M" + " L".join(f"{x:.1f},{y:.1f}" for x, y in pts) + (" Z" if fill != "none" else "")
    da = f' stroke-dasharray="{dash}"' if dash else ""
    return (f'<path d="{d}" stroke="{stroke}" stroke-width="{width}" fill="{fill}" fill-opacity="{opacity}"{da}/>')


def dot(x, y, fill, r=4.0, stroke="none", opacity=1.0, shape="circle", tip: str = "") -> str:
    """A marker; ``tip`` becomes its hover text (an SVG ``<title>``: browsers show it without JavaScript)."""
    paint = f'fill="{fill}" stroke="{stroke}" stroke-width="2" fill-opacity="{opacity}"'
    if shape == "square":
        head = f'<rect x="{x - r:.1f}" y="{y - r:.1f}" width="{2 * r:.1f}" height="{2 * r:.1f}" {paint}'
    elif shape in ("triangle", "diamond"):
        pts = ((x, y - 1.2 * r), (x + 1.1 * r, y + 0.8 * r), (x - 1.1 * r, y + 0.8 * r)) if shape == "triangle" \
            else ((x, y - 1.3 * r), (x + 1.3 * r, y), (x, y + 1.3 * r), (x - 1.3 * r, y))  # fmt: skip
        head = f'<polygon points="{" ".join(f"{a:.1f},{b:.1f}" for a, b in pts)}" {paint}'
    else:
        head = f'<circle cx="{x:.1f}" cy="{y:.1f}" r="{r}" {paint}'
    return f"{head}><title>{esc(tip)}</title></{head[1:].split(' ', 1)[0]}>" if tip else f"{head}/>"


def styles(series: list[str]) -> dict[str, tuple[str, str]]:
    """A (colour, marker shape) per series (GPU type): 20 distinct colours, distinct pairs for the first 80."""
    return {g: (PALETTE[i % len(PALETTE)], SHAPES[(i + i // len(PALETTE)) % len(SHAPES)])
            for i, g in enumerate(dict.fromkeys(series))}  # fmt: skip


def axes(sx, sy, xt, yt, xlabel: str, ylabel: str, xfmt=fmt.number, yfmt=fmt.number) -> list[str]:
    out = [f'<rect x="{X0}" y="{Y1}" width="{X1 - X0}" height="{Y0 - Y1}" fill="#fbfcfe" stroke="#c9ced8"/>']
    for v in xt:
        out += [line(sx(v), Y1, sx(v), Y0, "#e6e9ef"), text(sx(v), Y0 + 16, xfmt(v))]
    for v in yt:
        out += [line(X0, sy(v), X1, sy(v), "#e6e9ef"), text(X0 - 6, sy(v) + 4, yfmt(v), "end")]
    out.append(text((X0 + X1) / 2, Y0 + 38, xlabel, font_weight="600"))
    out.append(text(16, (Y0 + Y1) / 2, ylabel, font_weight="600", transform=f"rotate(-90 16 {(Y0 + Y1) / 2:.1f})"))
    return out


def legend(items: list[tuple[str, str, str]], x: float = X1 + 14, y: float = Y1 + 10) -> list[str]:
    """Items are (label, colour, kind) with kind in line | dash | dot | ring | rect | square | triangle | diamond."""
    out = []
    step = min(18.0, (Y0 - y) / max(len(items), 1))  # many GPU types: the legend tightens to stay on the canvas
    for i, (label, col, kind) in enumerate(items):
        yy = y + i * step
        if kind in ("line", "dash"):
            out.append(line(x, yy, x + 18, yy, col, 2.5, "5 3" if kind == "dash" else ""))
        elif kind == "rect":
            out.append(f'<rect x="{x + 2}" y="{yy - 6}" width="14" height="12" fill="{col}"/>')
        elif kind in SHAPES[1:]:
            out.append(dot(x + 9, yy, col, 4, shape=kind))
        else:
            out.append(dot(x + 9, yy, "none" if kind == "ring" else col, 5 if kind == "ring" else 4,
                            col if kind == "ring" else "none"))  # fmt: skip
        out.append(text(x + 24, yy + 4, label, "start"))
    return out


