"""The standing table's prices: enough digits to tell the best from the next, and a price below 1 explained."""
from __future__ import annotations

import re

from exclust.report.standing import PRICE_BELOW_ONE, price_decimals, standing_html
from exclust.tree.style import esc


def _table(prices: dict[str, float]) -> dict:
    rows = [{"algorithm": name, "title": name, "n_leaves": 10, "price": p, "weighted_avg_depth": 3.0,
             "own": name == "tree-search", "best": p == min(prices.values())} for name, p in prices.items()]
    return {"cost": "kmeans", "rows": rows, "optimum": None, "fitted_on": "every tree scored on all rows"}


def _shown_prices(html: str) -> dict[str, str]:
    cells = re.findall(r'data-algorithm="([^"]+)"[^>]*>.*?<td class="num price">([^<]+)<', html)
    return dict(cells)


def test_the_best_and_the_next_price_read_differently():
    html = standing_html(_table({"tree-search": 1.042912, "imm": 1.042931, "cart": 1.05}))
    shown = _shown_prices(html)
    assert shown == {"tree-search": "1.04291", "imm": "1.04293", "cart": "1.05000"}
    assert price_decimals([1.5, 1.7]) == 3  # at least three decimals
    assert price_decimals([1.0, 1.0 + 1e-12]) == 3  # the same tree twice: nothing to tell apart


def test_a_price_below_one_is_explained_and_only_then():
    below = standing_html(_table({"tree-search": 0.987, "imm": 1.01}))
    assert esc(PRICE_BELOW_ONE) in below and "local optimum" in PRICE_BELOW_ONE
    assert esc(PRICE_BELOW_ONE) not in standing_html(_table({"tree-search": 1.001, "imm": 1.01}))
