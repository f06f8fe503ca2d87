"""The arena report's figures, drawn from a stored report (never reads the database).

- ``leaderboard``: each system's score as a point with its 95% interval as a bar, best
  first (LMArena's "confidence intervals on model strength" plot, laid on its side so long
  system names stay readable on a phone).
- ``win-rate`` and ``battle-count``: the matrices, rows and columns in leaderboard order (a
  reader looks for the diagonal band of a clear ranking, which alphabetical order hides).

Cell labels are black or white, whichever contrasts more with the cell's colour (WCAG's
relative luminance): black was unreadable on the dark ends of both colour maps (issue 46,
row 7).
"""

from __future__ import annotations

import itertools
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from matplotlib.figure import Figure

NAMES = ("leaderboard", "win-rate", "battle-count")


def relative_luminance(rgb: tuple[float, ...]) -> float:
    """WCAG 2's relative luminance of an sRGB colour with channels in 0..1."""
    linear = [c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4 for c in rgb[:3]]
    return 0.2126 * linear[0] + 0.7152 * linear[1] + 0.0722 * linear[2]


def label_colour(background: tuple[float, ...]) -> str:
    """Black or white, whichever has the higher contrast ratio on ``background``. One of
    the two always reaches 4.58:1 (the ratios multiply to 21), above AA's 4.5."""
    lum = relative_luminance(background)
    on_black = (lum + 0.05) / 0.05
    on_white = 1.05 / (lum + 0.05)
    return "black" if on_black >= on_white else "white"


def rank_order(result: dict[str, Any]) -> list[int]:
    """Indices into ``result["matrices"]["systems"]`` in leaderboard order (best first);
    systems the leaderboard lacks keep their place after the ranked ones."""
    systems = result["matrices"]["systems"]
    ranked = [row["system"] for row in result.get("leaderboard") or []]
    position = {system: i for i, system in enumerate(ranked)}
    return sorted(range(len(systems)), key=lambda i: (position.get(systems[i], len(ranked)), i))


def leaderboard_figure(result: dict[str, Any]) -> Figure:
    from matplotlib.figure import Figure

    board = result.get("leaderboard") or []
    if not board:
        raise KeyError("leaderboard")
    rows = sorted(board, key=lambda row: (-row["score"], row["system"]))
    scores = np.array([row["score"] for row in rows])
    low = np.array([row["ci_low"] for row in rows])
    high = np.array([row["ci_high"] for row in rows])
    figure = Figure(figsize=(6.4, 1.2 + 0.4 * len(rows)))
    axes = figure.add_subplot()
    y = np.arange(len(rows))
    axes.errorbar(
        scores,
        y,
        xerr=np.vstack([scores - low, high - scores]),
        fmt="o",
        color="#1f4e79",
        ecolor="#1f4e79",
        capsize=4,
    )
    axes.set_yticks(y, [row["system"] for row in rows])
    # Best on top, as in the table.
    axes.invert_yaxis()
    axes.set_xlabel("score (95% interval)")
    axes.set_title("Leaderboard")
    axes.grid(axis="x", alpha=0.3)
    figure.tight_layout()
    return figure


def matrix_figure(name: str, result: dict[str, Any]) -> Figure:
    from matplotlib import colormaps
    from matplotlib.colors import Normalize
    from matplotlib.figure import Figure

    matrices = result["matrices"]
    order = rank_order(result)
    systems = [matrices["systems"][i] for i in order]
    key = "win_rate" if name == "win-rate" else "battles"
    full = np.array(
        [[np.nan if v is None else v for v in row] for row in matrices[key]], dtype=float
    )
    values = full[np.ix_(order, order)]
    cmap = colormaps["RdBu" if key == "win_rate" else "Blues"]
    finite = values[np.isfinite(values)]
    # Win rates are shares (white at one half); counts run from none to the most.
    if key == "win_rate":
        norm = Normalize(0, 1)
    else:
        norm = Normalize(0, float(finite.max()) if finite.size and finite.max() > 0 else 1)
    size = 2.5 + 0.45 * len(systems)
    figure = Figure(figsize=(size, size * 0.85))
    axes = figure.add_subplot()
    image = axes.imshow(np.ma.masked_invalid(values), cmap=cmap, norm=norm)
    axes.set_xticks(range(len(systems)), systems, rotation=45, ha="right")
    axes.set_yticks(range(len(systems)), systems)
    axes.set_xlabel("opponent")
    axes.set_ylabel("system (best first)")
    axes.set_title("Share of battles won (ties half)" if key == "win_rate" else "Battles")
    for i, j in itertools.product(range(len(systems)), repeat=2):
        if not np.isnan(values[i, j]):
            text = f"{values[i, j]:.2f}" if key == "win_rate" else f"{int(values[i, j])}"
            colour = label_colour(cmap(norm(values[i, j])))
            axes.text(j, i, text, ha="center", va="center", fontsize=7, color=colour)
    figure.colorbar(image, ax=axes)
    figure.tight_layout()
    return figure


def figure(name: str, result: dict[str, Any]) -> Figure:
    if name == "leaderboard":
        return leaderboard_figure(result)
    if name in ("win-rate", "battle-count") and result.get("matrices"):
        return matrix_figure(name, result)
    raise KeyError(name)
