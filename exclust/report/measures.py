"""The measures table: each metric of a run with what it means (from ``exclust.scoring.scorecard.MEASURES``),
grouped, with paper 002's bounds spelled out."""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from exclust.scoring.scorecard import INTEGER_KEYS, MEASURES
from exclust.tree.style import esc, fmt_value, list_text

# ---------------------------------------------------------------------------- metrics
# Labels, meanings, directions and groups of every metric: the one catalogue, exclust.scoring.scorecard.
_GROUP_TITLES = {
    "faithfulness": "How faithful the tree is",
    "tree": "How small the tree is",
    "theory": "What theory promises",
    "cost": "What it cost",
    "run": "The run",
    "other": "Other values",
}


def _bound_explanation(key: str) -> str:
    k = key.lower()
    upper = "upper" in k or k.endswith("_ub") or "max" in k
    lower = "lower" in k or k.endswith("_lb") or "min" in k
    if "price" in k and upper:
        return "paper 002 Theorem 4: some tree has price ≤ 1 + (4 + 2π²/3)·α·β·K(K−1)/√q"
    if "price" in k and lower:
        return "paper 002 Theorem 5: worst-case mixtures force price ≥ Ω(α·β·log K/√q)"
    if "error" in k and upper:
        return "paper 002 Theorem 8: the MMDT tree misassigns at most (4 + 2π²/3)·α·K(K−1)/q of the mass"
    if "error" in k and lower:
        return "paper 002 Theorem 9: some mixtures force an error rate ≥ (K − 1)/(4q) for any K-leaf tree"
    if k in ("alpha", "α"):
        return "largest mixing weight times K (α ≥ 1; 1 for equal weights)"
    if k in ("beta", "β"):
        return "Assumption 3 constant linking the k-medians cost to the noise scales (1 for Gaussians)"
    if k in ("q", "enr"):
        return "the explainability-to-noise ratio the bounds were evaluated at"
    if "vacuous" in k or "note" in k:
        return "whether the bound says anything at this ENR"
    return ""


_BOUND_LABELS = {
    "K": "components K",
    "q": "ENR q used by the bounds",
    "q_paper000": "ENR q, paper 000 convention",
    "closest_pair": "closest pair of components",
    "alpha": "α (weight imbalance)",
    "beta": "β (Assumption 3)",
    "price_upper_theorem4": "price upper bound (Thm 4)",
    "price_upper_theorem4_gaussian": "price upper bound, Gaussian β (Thm 4)",
    "error_upper_theorem8": "error-rate upper bound (Thm 8)",
    "error_lower_theorem9": "error-rate lower bound (Thm 9)",
    "error_lower_paper000_theorem3": "error-rate lower bound (paper 000 Thm 3)",
    "not_evaluated": "not evaluated",
}


def _bounds_rows(bounds: Mapping[str, Any]) -> list[str]:
    """Rows for paper 002's bounds: each bound's value, its theorem, and whether it says anything here."""
    notes = {k: bounds[k] for k in ("q_convention", "alpha_source") if k in bounds}
    rows = []
    for bk, bv in bounds.items():
        if bk in notes:
            continue
        label = _BOUND_LABELS.get(str(bk), str(bk).replace("_", " "))
        expl = _bound_explanation(str(bk))
        if isinstance(bv, Mapping):
            value = bv.get("value")
            tags = []
            if bv.get("applies") is False:
                tags.append("condition not met" + (f": {bv['requires']}" if bv.get("requires") else ""))
            if bv.get("vacuous"):
                tags.append("vacuous here")
            shown = esc(fmt_value(value)) + "".join(f' <span class="tag">{esc(t)}</span>' for t in tags)
            expl = str(bv.get("name") or expl)
            if bv.get("requires") and bv.get("applies") is not False:
                expl += f" (requires {bv['requires']})"
        elif isinstance(bv, str):
            shown, expl = "", bv
        else:
            shown = _metric_value_html(str(bk), bv)
            if bk == "q" and "q_convention" in notes:
                expl = f"explainability-to-noise ratio, {notes['q_convention']}"
            elif bk == "alpha" and "alpha_source" in notes:
                expl = f"p_k ≤ α/K for every component; here {notes['alpha_source']}"
            elif bk == "K":
                expl = "mixture components the tree separates"
            elif bk == "q_paper000":
                expl = "the same ratio with paper 000's 2σ² denominator (half of q)"
            elif bk == "closest_pair":
                expl = "the two components that set q: hardest to tell apart along any single axis"
        rows.append(
            f'<tr data-key="bounds.{esc(bk)}"><th scope="row">{esc(label)}</th>'
            f'<td class="num">{shown}</td><td class="why">{esc(expl)}</td></tr>'
        )
    return rows


def _metric_value_html(key: str, value: Any) -> str:
    if isinstance(value, Mapping):
        if key == "seconds":
            items = [(str(a), b) for a, b in value.items()]
            total = sum(float(b) for _, b in items if isinstance(b, (int, float, np.integer, np.floating)))
            rows = "".join(
                f'<span class="kv"><span class="k">{esc(a)}</span> {esc(fmt_value(b))} s</span>' for a, b in items
            )
            return f'{rows}<span class="kv total"><span class="k">total</span> {esc(fmt_value(total))} s</span>'
        return "".join(
            f'<span class="kv"><span class="k">{esc(a)}</span> {esc(fmt_value(b))}</span>' for a, b in value.items()
        )
    if isinstance(value, (list, tuple, np.ndarray)):
        return esc(list_text(list(np.asarray(value).tolist()) if isinstance(value, np.ndarray) else list(value),
                               integer_like=key.startswith(("cluster_sizes", "closest"))))
    if key == "error_rate" and isinstance(value, (float, np.floating)) and np.isfinite(value):
        return f"{esc(fmt_value(value))} <span class='aside'>({float(value):.2%})</span>"
    return esc(fmt_value(value, integer_like=key in INTEGER_KEYS))


def metrics_table_html(metrics: Mapping[str, Any]) -> str:
    """The metrics as an HTML table, grouped, each with a one-line explanation; unknown keys shown plainly."""
    rows_by_group: dict[str, list[str]] = {g: [] for g in _GROUP_TITLES}
    metrics = dict(metrics or {})
    metrics.pop("standing", None)  # a table of its own near the headline (exclust.report.standing)
    convention = metrics.pop("enr_convention", None)
    # the scoring function and the flow both report some numbers; show each once
    if "d" in metrics and metrics.get("n_features") == metrics["d"]:
        metrics.pop("n_features")
    if metrics.get("n_scored") is not None and metrics.get("n_scored") == metrics.get("n"):
        metrics.pop("n_scored")
    if metrics.get("n_reference_noise") == 0:
        metrics.pop("n_reference_noise")
    for key, value in metrics.items():
        if key == "bounds" and isinstance(value, Mapping):
            rows_by_group["theory"].extend(_bounds_rows(value))
            continue
        info = MEASURES.get(key)
        label, expl, group = ((info.label, info.explanation, info.group) if info
                              else (key.replace("_", " "), "", "other"))
        if key == "enr":
            if isinstance(value, Mapping):
                convention = value.get("convention", convention)
                value = value.get("value", value.get("q"))
            if convention:
                expl += f". Convention used here: {convention}"
            else:
                expl += (". Paper 000 divides the squared gap by 2σ²; paper 002 by σ² (twice the value)")
        if value is None:
            expl = (expl + " — not computed for this run") if expl else "not computed for this run"
        rows_by_group[group].append(
            f'<tr data-key="{esc(key)}"><th scope="row">{esc(label)}</th>'
            f'<td class="num">{_metric_value_html(key, value)}</td><td class="why">{esc(expl)}</td></tr>'
        )
    body = []
    for group, rows in rows_by_group.items():
        if rows:
            body.append(f'<tbody class="group-{group}"><tr class="group"><th '
                        f'colspan="3">{esc(_GROUP_TITLES[group])}</th></tr>{"".join(rows)}</tbody>')
    return (
        '<table class="metrics"><colgroup><col class="c1"/><col class="c2"/><col/></colgroup><thead><tr><th '
        'scope="col">measure</th><th scope="col">value</th><th scope="col">what it means</th></tr></thead>'
        + "".join(body) + "</table>"
    )


