"""The standing table: the run's tree beside the other algorithms' trees on the same centers.

Reads metrics.json's ``standing`` (made by ``exclust.jobs.explain.standing``): one row per tree with its
price and weighted average depth, the run's own row highlighted, the cheapest marked, and the
exact optimum with each tree's gap to it where the instance was small enough, and the proven
lower bound (issue 30) with each tree's proven gap to it ("within 3.1% of the best possible
k-leaf tree", "optimal" when met). A run without a table has ``{"note": sentence}``, which is
shown as is; the algorithms left out of a table (``left_out``: a run clustered on other columns
than the features, which some builders cannot price cuts for) are named under it with the reason.
"""
from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from exclust.tree.style import esc, fmt_value

# What the price divides, by the cost the table shows (``standing["cost"]``).
_COST_WORDS = {
    "kmeans": "the k-means cost of the tree's clusters (each scored by its own mean) ÷ the reference "
              "clustering's, as the headline price",
    "kmedians-surrogate": "under k-medians, the ℓ1 surrogate cost (each cluster charged to its cheapest reference "
                          "center in ℓ1) ÷ the ℓ1 cost to the nearest center, as the cost curve shows it; the exact "
                          "k-medians price of the run's tree is in the measures",
}


# Why a price can be below 1, said under the table when a tree's is.
PRICE_BELOW_ONE = ("A price below 1 means the tree's clusters, each scored by its own mean, cost less than the "
                   "reference clusters scored the same way. That is no error: the reference is not the best "
                   "k-means clustering of these rows. k-means stops at a local optimum (and may be fitted on a "
                   "sample), a mixture's or k-medians' centers do not minimise the k-means cost, and the reference "
                   "clusters are the rows nearest each center, not the cheapest grouping for their own means; a "
                   "tree that regroups the rows can find a cheaper one.")
# Prices are shown with at least this many decimals, more (up to the most) when the best and the
# next price would otherwise read the same.
PRICE_DECIMALS = (3, 8)


def price_decimals(prices: list[float]) -> int:
    """Decimals that tell the best price from the next distinct one (within ``PRICE_DECIMALS``)."""
    least, most = PRICE_DECIMALS
    distinct = sorted({p for p in prices if math.isfinite(p)})
    if len(distinct) < 2:
        return least
    best = distinct[0]
    nearest = next((p for p in distinct[1:] if p > best * (1 + 1e-9)), None)
    if nearest is None:
        return least
    for decimals in range(least, most + 1):
        if f"{best:.{decimals}f}" != f"{nearest:.{decimals}f}":
            return decimals
    return most


def _price_text(price: float | None, decimals: int) -> str:
    return "—" if price is None else f"{price:.{decimals}f}"


def _number(v: Any) -> float | None:
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(float(v)) else None


def _bar(price: float | None, top: float) -> str:
    if price is None or top <= 0:
        return ""
    return f'<span class="pbar"><span style="width:{max(0.0, min(1.0, price / top)) * 100:.1f}%"></span></span>'


def _gap(gap: Any) -> str:
    g = _number(gap)
    if g is None:
        return ""
    return "optimal" if abs(g) < 5e-7 else f"{g:+.1%}"


def _sentence(text: str) -> str:
    """``text`` as a sentence: its first letter upper case (the rest as it is: names keep their case)."""
    return f"{text[:1].upper()}{text[1:]}." if text else ""


def standing_html(standing: Mapping[str, Any] | None, titles: Mapping[str, str] | None = None) -> str:
    """The standing section of the report ("" when the run has no ``standing``)."""
    if not standing:
        return ""
    if "rows" not in standing:
        return (f'<section class="card" id="standing"><h2>Where this tree stands</h2>'
                f'<p class="lead">{esc(str(standing.get("note", "")))}</p></section>')
    rows, optimum, bound = list(standing["rows"]), standing.get("optimum"), standing.get("bound")
    prices = [p for p in (_number(r.get("price")) for r in rows) if p is not None]
    opt_price = _number(optimum.get("price")) if optimum else None
    top = max(prices + ([opt_price] if opt_price is not None else []), default=0.0)
    decimals = price_decimals(prices + ([opt_price] if opt_price is not None else []))
    body = []
    any_sampled = any(r.get("sampled") for r in rows)
    for r in rows:
        name = (titles or {}).get(str(r["algorithm"]), r.get("title") or r["algorithm"])
        tags = ('<span class="tag own">this run</span>' if r.get("own") else "") + (
            '<span class="tag best">best</span>' if r.get("best") else "")
        price = _number(r.get("price"))
        # ≈: priced on a sample of the rows (``fitted_on`` says which and how); a mark's room in every row of a
        # table that has one, so the bars stay aligned.
        mark = ('<span class="approx" title="priced on a sample of the rows">≈</span>'
                if r.get("sampled") and price is not None else '<span class="approx"></span>' if any_sampled else "")
        cells = [f'<th scope="row">{esc(name)}{tags}</th>', f'<td class="num">{r["n_leaves"]}</td>',
                 f'<td class="num price">{mark}{esc(_price_text(price, decimals))}{_bar(price, top)}</td>',
                 f'<td class="num">{esc(fmt_value(_number(r.get("weighted_avg_depth"))))}</td>']
        if optimum:
            cells.append(f'<td class="num">{esc(_gap(r.get("gap")))}</td>')
        if bound:
            cells.append(f'<td class="num" title="{esc(_within(r.get("proven_gap")))}">'
                         f'{esc(_gap(r.get("proven_gap")))}</td>')
        kind = " ".join(c for c, on in (("own", r.get("own")), ("best", r.get("best"))) if on)
        body.append(f'<tr data-algorithm="{esc(str(r["algorithm"]))}" class="{kind}">{"".join(cells)}</tr>')
    if optimum:
        body.append(f'<tr data-algorithm="optimum" class="optimum"><th scope="row">optimum (exact)</th>'
                    f'<td class="num">{optimum["n_leaves"]}</td>'
                    f'<td class="num price">{esc(_price_text(opt_price, decimals))}{_bar(opt_price, top)}</td>'
                    f'<td class="num">{esc(fmt_value(_number(optimum.get("weighted_avg_depth"))))}</td>'
                    f'<td class="num">0</td>' + ('<td class="num"></td>' if bound else "") + '</tr>')
    if bound:
        bound_price = _number(bound.get("price"))
        body.append(f'<tr data-algorithm="bound" class="bound"><th scope="row">lower bound (proven)</th>'
                    f'<td class="num"></td><td class="num price">{esc(fmt_value(bound_price))}</td>'
                    '<td class="num"></td>'
                    + ('<td class="num"></td>' if optimum else "") + '<td class="num"></td></tr>')
    head = ("<th scope='col'>algorithm</th><th scope='col'>leaves</th><th scope='col'>price</th>"
            "<th scope='col'>weighted avg depth</th>" + ("<th scope='col'>gap to optimum</th>" if optimum else "")
            + ("<th scope='col'>proven gap</th>" if bound else ""))
    cost_words = _COST_WORDS.get(str(standing.get("cost")), "the tree cost ÷ the reference cost")
    notes = [f'Price: {cost_words}; lower is better, '
             f'1 matches the reference. Weighted average depth: the number of tests a point passes, averaged over '
             f'all rows. {_sentence(str(standing.get("fitted_on", "")))}']
    notes.extend(_left_out_sentences(standing.get("left_out") or [], titles))
    if any(p < 1 for p in prices):
        notes.append(PRICE_BELOW_ONE)
    if optimum:
        notes.append("The optimum is the best tree of k leaves by k-means cost, found by exhaustive search on all "
                     "rows; a tree with more leaves than clusters can beat it.")
    elif standing.get("optimum_note"):
        notes.append(str(standing["optimum_note"]))
    if bound or standing.get("bound_note"):
        notes.append(_bound_sentence(rows, bound, str(standing.get("bound_note") or "")))
    return (f'<section class="card" id="standing"><h2>Where this tree stands</h2><div class="scroll">'
            f'<table class="standing"><thead><tr>{head}</tr></thead><tbody>{"".join(body)}</tbody></table></div>'
            + "".join(f'<p class="note">{esc(n)}</p>' for n in notes) + "</section>")


def _left_out_sentences(left_out: list, titles: Mapping[str, str] | None) -> list[str]:
    """One sentence per reason some standing algorithms were left out of the table, naming them."""
    by_reason: dict[str, list[str]] = {}
    for r in left_out:
        name = (titles or {}).get(str(r.get("algorithm")), r.get("title") or str(r.get("algorithm")))
        by_reason.setdefault(str(r.get("reason", "")), []).append(str(name))
    out = []
    for reason, names in by_reason.items():
        who = names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]
        out.append(f"Left out: {who}" + (f": {reason}" if reason else "") + ".")
    return out


def _within(gap: Any) -> str:
    """A proven gap in words."""
    g = _number(gap)
    if g is None:
        return ""
    return "optimal: no k-leaf tree costs less" if abs(g) < 5e-7 else f"within {g:.1%} of the best possible k-leaf tree"


def _bound_sentence(rows: list, bound: Mapping[str, Any] | None, note: str) -> str:
    """The bound's note, and where the run's own tree stands against it."""
    own = next((r for r in rows if r.get("own")), None)
    if not bound or own is None or _number(own.get("proven_gap")) is None:
        return note
    return (f"This run's tree is {_within(own.get('proven_gap'))}. {note} "
            "Proven gap: the tree's cost over the bound, less 1.")
