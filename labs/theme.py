"""Shared look of every figure: a colour-blind-safe palette and a plain layout.

Okabe-Ito palette (Okabe & Ito, "Color Universal Design", 2008): eight
colours distinguishable under the common colour-vision deficiencies. The
lab card's "prefill red, decode black" maps to vermillion and black.
"""

from __future__ import annotations

from typing import Any

BLACK = "#000000"
ORANGE = "#E69F00"
SKY_BLUE = "#56B4E9"
GREEN = "#009E73"
YELLOW = "#F0E442"
BLUE = "#0072B2"
VERMILLION = "#D55E00"
PURPLE = "#CC79A7"
GREY = "#6B6B6B"

PREFILL = VERMILLION
DECODE = BLACK


def layout(title: str, x_title: str, y_title: str, **extra: Any) -> dict[str, Any]:
    """A Plotly layout dict with our fonts, margins and axis titles.

    ``uirevision`` keeps a user's zoom across ``Plotly.react`` updates.
    """
    base: dict[str, Any] = {
        "title": {"text": title, "x": 0.01, "xanchor": "left"},
        "template": "plotly_white",
        "font": {"family": "system-ui, sans-serif", "size": 14, "color": "#1a1a1a"},
        "margin": {"l": 70, "r": 20, "t": 50, "b": 100},
        "height": 420,
        "xaxis": {"title": {"text": x_title}, "showline": True, "linecolor": "#444", "mirror": True},
        "yaxis": {"title": {"text": y_title}, "showline": True, "linecolor": "#444", "mirror": True},
        "legend": {"orientation": "h", "x": 0, "y": -0.18, "yanchor": "top"},
        "uirevision": title,
        "hovermode": "closest",
    }
    for key, value in extra.items():
        if isinstance(value, dict) and isinstance(base.get(key), dict):
            base[key] = {**base[key], **value}
        else:
            base[key] = value
    return base
