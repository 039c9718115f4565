"""Figure 7's drawing: measured efficiencies, the scaling model's curves with their intervals, and the claims.

A named draw function (conf/figure/figure-7.yaml `draw`), since the generic path draws lines of columns: not
bands, not a claim made in words, and not two claims of the same value at the same GPU count, which it would
draw on top of each other (Horovod's 90 % for Inception V3 and for ResNet-101 at 512 GPUs): such points are set
side by side, each with its own marker, and the note says so. Drawn at print size: 16 cm wide, no text under 7 pt.
"""

from __future__ import annotations

import textwrap

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.lines import Line2D

from .figures import COLORS

WIDTH_IN = 16 / 2.54  # the paper's text width
FONT_PT = 7.5  # every text of the figure (titles 8.5); the minimum is 7
CLAIM_MARKERS = ["*", "P", "X", "D"]
MARKER_NAMES = {"*": "star", "P": "plus", "X": "cross", "D": "diamond"}
BAND_DODGE = 0.07  # doublings between the band bars of neighbouring series
DODGE = 0.09  # coincident points are moved apart by this much of a doubling of the GPU count


def dodged(claims: pd.DataFrame) -> pd.DataFrame:
    """Claims with an x to draw at (`x`) and a marker index: claims of one panel at the same GPU count and the
    same value (to 3 decimals) are spread around it on the log axis, each with another marker."""
    claims = claims.copy()
    claims["x"] = claims["workers"].astype(float)
    claims["marker"] = 0
    claims["dodged"] = False
    for _, same in claims.groupby([claims["workers"], claims["efficiency"].round(3)]):
        if len(same) < 2:
            continue
        offsets = (np.arange(len(same)) - (len(same) - 1) / 2) * 2 * DODGE
        claims.loc[same.index, "x"] = same["workers"].to_numpy() * 2.0**offsets
        claims.loc[same.index, "marker"] = np.arange(len(same))
        claims.loc[same.index, "dodged"] = True
    return claims


def _band(ax, curve: pd.DataFrame, fit_max: int, color, position: float) -> None:
    """The model's envelope (what the fitted points allow inside the hardware's bounds) as a bar with caps at each
    power of two beyond the fit, the series side by side (`position` steps of BAND_DODGE doublings): translucent
    areas of several series overlap until none can be told apart."""
    workers = curve["workers"].to_numpy(dtype=float)
    bars = curve[(workers > fit_max) & np.isclose(np.log2(workers), np.round(np.log2(workers)))]
    if bars.empty:
        return
    x = bars["workers"] * 2.0 ** (position * BAND_DODGE)
    ax.vlines(x, bars["low"], bars["high"], color=color, lw=1.2, zorder=4)
    ax.plot(x, bars["low"], "_", x, bars["high"], "_", color=color, ms=3.6, mew=0.9, zorder=4)


def draw_scaling_model(fig_cfg: dict, table: pd.DataFrame, runs: pd.DataFrame):
    """Panels in the order of the derived table; in each, per series (one colour in the whole figure): the
    measured points (filled where fitted, open where held out), the model's curve and band, the claims."""
    plot = fig_cfg["plot"]
    panels = list(dict.fromkeys(table["panel"]))
    series = list(dict.fromkeys(table.loc[table["kind"] != "claim_text", "series"]))
    palette = [c for c in COLORS if not np.allclose(c[0], c[1:], atol=0.02)]  # no grey: the notes are grey
    color = {s: palette[i % len(palette)] for i, s in enumerate(series)}
    fit_max = int(fig_cfg["derive"]["scaling"]["fit_max_workers"])
    notes = [str(plot.get("note", "")).strip()]
    style = {"font.size": FONT_PT, "axes.titlesize": FONT_PT + 1, "axes.labelsize": FONT_PT}
    with plt.rc_context(style):
        fig, axes = plt.subplots(1, len(panels), figsize=(WIDTH_IN, float(plot.get("height_in", 4.1))), squeeze=False)
        fig.subplots_adjust(left=0.08, right=0.985, top=0.87, bottom=0.40, wspace=0.25)
        for ax, panel in zip(axes[0], panels):
            part = table[table["panel"] == panel]
            for name in [s for s in series if s in set(part["series"])]:
                rows = part[part["series"] == name]
                curve = rows[rows["kind"] == "model"].sort_values("workers")
                if len(curve):
                    ax.plot(curve["workers"], curve["efficiency"], color=color[name], ls="--", lw=1.1)
                    _band(ax, curve, fit_max, color[name], series.index(name) - (len(series) - 1) / 2)
                seen = rows[rows["kind"] == "observed"].sort_values("workers")
                if len(seen):
                    ax.plot(seen["workers"], seen["efficiency"], color=color[name], lw=1.1, label=name)
                    for held, face in ((False, color[name]), (True, "white")):
                        pts = seen[seen["held_out"] == held]
                        ax.plot(pts["workers"], pts["efficiency"], "o", ms=3.8, color=color[name], mfc=face)
                else:
                    ax.plot([], [], color=color[name], lw=1.1, ls="--", label=name)
            claims = dodged(part[part["kind"] == "claim"])
            for c in claims.itertuples():
                ax.plot(
                    c.x,
                    c.efficiency,
                    CLAIM_MARKERS[c.marker % len(CLAIM_MARKERS)],
                    ms=9 if c.marker == 0 else 7,
                    color=color[c.series],
                    mec="black",
                    mew=0.6,
                    zorder=5,
                )
            if claims["dodged"].any():
                both = claims[claims["dodged"]]
                markers = " and ".join(MARKER_NAMES[m] for m in CLAIM_MARKERS[: len(both)])
                notes.append(
                    f"{' and '.join(both['series'])}: the same claim ({100 * both['efficiency'].iloc[0]:.0f} %) at "
                    f"{int(both['workers'].iloc[0])} GPUs, drawn side by side ({markers})."
                )
            for t in part[part["kind"] == "claim_text"].itertuples():
                ax.annotate(
                    "",
                    xy=(t.workers, 0.84),
                    xytext=(1, 0.84),
                    xycoords=("data", "axes fraction"),
                    textcoords=("data", "axes fraction"),
                    arrowprops={"arrowstyle": "-|>", "color": "dimgray", "lw": 0.9},
                )
                ax.text(0.03, 0.97, textwrap.fill(t.text, 46), transform=ax.transAxes, va="top", color="dimgray")
            if (part["kind"] == "observed").any():
                ax.axvline(fit_max, color="gray", ls=":", lw=0.9)
                ax.text(fit_max * 0.9, 0.02, "fitted", transform=ax.get_xaxis_transform(), ha="right", color="gray")
                ax.text(fit_max * 1.1, 0.02, "held out", transform=ax.get_xaxis_transform(), ha="left", color="gray")
            ax.axhline(1.0, color="gray", lw=0.8, alpha=0.6)
            ax.set_xscale("log", base=2)
            ticks = [2**k for k in range(0, 10)]
            ax.set_xticks(ticks, [str(t) for t in ticks])
            ax.set_xlim(0.8, 700)
            low, high = plot.get("ylim", {}).get(panel, [0.3, 1.2])
            ax.set_ylim(low, high)
            step = 0.1 if high - low <= 0.8 else 0.2
            ax.set_yticks(np.round(np.arange(np.ceil(low / step) * step, high + 1e-4, step), 1))
            ax.set_xlabel("GPUs")
            ax.set_ylabel("scaling efficiency")
            ax.set_title(panel, loc="left")
            ax.grid(True, alpha=0.3)
            ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.16), ncol=2, frameon=False, handlelength=1.8)
        keys = [
            Line2D([], [], color="black", marker="o", lw=1.1, ms=3.8),
            Line2D([], [], color="black", marker="o", mfc="white", lw=0, ms=3.8),
            Line2D([], [], color="black", ls="--", lw=1.1, marker="|", ms=8, mew=0.9),
            Line2D([], [], color="white", marker="*", mfc="gray", mec="black", lw=0, ms=9),
        ]
        labels = ["measured, fitted", "measured, held out", "model, best fit; bars: what the data allow", "claimed"]
        fig.legend(keys, labels, loc="lower center", ncol=4, frameon=False, bbox_to_anchor=(0.5, 0.075))
        note = textwrap.fill(" ".join(n for n in notes if n), 118)
        fig.text(0.01, 0.008, note, ha="left", va="bottom", color="dimgray")
        fig.suptitle(fig_cfg["title"], fontsize=FONT_PT + 1.5)
    points = table.replace({np.nan: None}).to_dict("records")
    return fig, points
