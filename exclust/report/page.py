"""The report page: one self-contained HTML file (inline CSS and SVG, nothing fetched), and its
Markdown digest. The styles are ``page.css`` beside this module, shipped as package data.
"""
from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from functools import lru_cache
from importlib import resources
from typing import Any

import numpy as np

from exclust.report.measures import metrics_table_html
from exclust.report.plots import choose_scatter_features, contingency_svg, cost_curve_svg, curve_cost_words, scatter_svg
from exclust.report.standing import standing_html
from exclust.scoring.scorecard import HEADLINE, INTEGER_KEYS, MEASURES
from exclust.tree import ThresholdTree
from exclust.tree.drawing import draw_tree
from exclust.tree.style import (
    FONT_STACK,
    MONO_STACK,
    cluster_colors,
    columns_text,
    esc,
    fmt_num,
    fmt_value,
    list_text,
    short,
)


@lru_cache(maxsize=1)
def page_css() -> str:
    """The page's styles: the font stacks the drawings use, then ``page.css``."""
    css = resources.files("exclust.report").joinpath("page.css").read_text(encoding="utf-8")
    return f":root{{--sans:{FONT_STACK};--mono:{MONO_STACK}}}\n{css}"


def _rule_conditions_html(rule: str) -> str:
    if rule in ("all points", "no leaf"):
        return f'<span class="empty">{esc(rule)}</span>'
    pretty = rule.replace("<=", "≤").replace(">=", "≥")
    conds = pretty.split(" and ")
    return '<span class="and">and</span>'.join(f'<span class="cond">{esc(c)}</span>' for c in conds)


def _rules_table_html(tree: ThresholdTree, palette: Sequence[str], leaf_counts: Mapping[int, float] | None,
                      cluster_names: Sequence[str] | None, cluster_sizes: Sequence[float] | None = None) -> str:
    by_cluster: dict[int, list[int]] = {c: [] for c in range(tree.n_clusters)}
    paths = tree.leaf_paths()
    for leaf in sorted(paths):
        by_cluster[int(tree.value[leaf])].append(leaf)
    if cluster_sizes is not None and len(cluster_sizes) >= tree.n_clusters:
        sizes = [float(v) for v in cluster_sizes]
    elif leaf_counts:
        sizes = [sum(float(leaf_counts.get(leaf, 0.0)) for leaf in by_cluster[c]) for c in range(tree.n_clusters)]
    else:
        sizes = None
    total = float(sum(sizes)) if sizes else 0.0
    rows = []
    for c, leaves in by_cluster.items():
        name = cluster_names[c] if cluster_names is not None else f"cluster {c}"
        if leaves:
            alts = "".join(
                f'<span class="alt">{_rule_conditions_html(tree.leaf_rule(paths[leaf]))}</span>' for leaf in leaves
            )
        else:
            alts = '<span class="empty">no leaf: the tree never assigns this cluster</span>'
        share = ""
        if sizes:
            cnt = sizes[c]
            share = f"{fmt_value(cnt, integer_like=True)}" + (f" · {cnt / total:.1%}" if total else "")
        rows.append(
            f'<tr data-cluster="{c}"><td class="cluster"><span class="swatch" '
            f'style="background:{palette[c % len(palette)]}"></span>'
            f"{esc(name)}</td><td>{alts}</td>" + (f'<td class="share">{esc(share)}</td>' if sizes else "") + "</tr>"
        )
    head = "<th scope='col'>cluster</th><th scope='col'>a point belongs to it when</th>" + (
        "<th scope='col'>points</th>" if sizes else ""
    )
    return f'<table class="rules"><thead><tr>{head}</tr></thead><tbody>{"".join(rows)}</tbody></table>'


_DIAG_HEADERS = {
    "node": "node (#, as in the tree)",
    "axis": "axis",
    "feature": "feature",
    "threshold": "threshold",
    "normalized_separation": "normalized separation",
    "separation": "normalized separation",
    "cutoff_share": "cut-off share",
    "cut_off_share": "cut-off share",
    "n_means": "means at node",
    "feature_name": "feature",
    "components": "components at node",
    "objective": "objective",
    "at_edge": "cut at search edge",
}


def _diagnostics_html(diagnostics: Sequence[Mapping[str, Any]], tree: ThresholdTree) -> str:
    cols: list[str] = []
    for row in diagnostics:
        for key in row:
            if key not in cols:
                cols.append(str(key))
    if "feature_name" in cols and "feature" in cols:
        cols.remove("feature_name")  # the name says what the index says, readably
        cols[cols.index("feature")] = "feature_name"
    head = "".join(f"<th scope='col'>{esc(_DIAG_HEADERS.get(c, c.replace('_', ' ')))}</th>" for c in cols)
    if all(isinstance(row.get("node"), (int, np.integer)) for row in diagnostics):
        diagnostics = sorted(diagnostics, key=lambda row: int(row["node"]))
    body = []
    for row in diagnostics:
        cells = []
        for c in cols:
            v = row.get(c)
            if c == "axis" and isinstance(v, (int, np.integer)) and 0 <= int(v) < tree.n_features:
                text = tree.feature_names[int(v)]
            elif isinstance(v, (list, tuple)):
                text = list_text(list(v), integer_like=True, head=6)
            elif c == "node" and isinstance(v, (int, np.integer)):
                text = f"#{int(v)}"  # the tag the tree drawing shows on that node
            elif c in ("threshold", "center") and isinstance(v, (float, np.floating)):
                text = fmt_num(float(v))  # as the tree drawing writes it
            else:
                text = fmt_value(v, integer_like=c in ("node", "n_means"))
            cells.append(f'<td class="{"num" if isinstance(v, (int, float, np.number)) else ""}">{esc(text)}</td>')
        body.append(f"<tr>{''.join(cells)}</tr>")
    return (f'<div class="scroll"><table class="diagnostics"><thead><tr>{head}</tr></thead>'
            f'<tbody>{"".join(body)}</tbody></table></div>')




# Why a price can be below 1: the reference is not the k-means optimum (a Gaussian mixture, a
# k-means local optimum, given labels), and the tree's clusters are scored by their own means.
_PRICE_BELOW_ONE = ("below 1: the tree's clusters, each scored by its own mean, cost less than the reference "
                    "clustering, which is not the best k-means clustering (a mixture's, labels' or a local optimum)")


def _kpis_html(metrics: Mapping[str, Any]) -> str:
    cards = []

    def add(key: str, label: str, bar: float | None = None, note: str = "") -> None:
        v = metrics.get(key)
        if v is None or (isinstance(v, float) and not math.isfinite(v)):
            return
        bar_html = ""
        if bar is not None and math.isfinite(bar):
            bar_html = f'<div class="bar"><span style="width:{max(0.0, min(1.0, bar)) * 100:.1f}%"></span></div>'
        note_html = f'<div class="note">{esc(note)}</div>' if note else ""
        cards.append(f'<div class="kpi" data-key="{key}"><div '
                     f'class="v">{esc(fmt_value(v, integer_like=key in INTEGER_KEYS))}</div><div '
                     f'class="l">{esc(label)}</div>{note_html}{bar_html}</div>')

    def num(key: str) -> float | None:
        v = metrics.get(key)
        return float(v) if isinstance(v, (int, float, np.number)) and not isinstance(v, bool) else None

    price = num("price_kmeans")
    add("price_kmeans", "price of explainability: the tree's k-means cost ÷ the reference's (1: no loss)",
        note=_PRICE_BELOW_ONE if price is not None and price < 1 else "")
    err = num("error_rate")
    if err is not None:
        cards.append(f'<div class="kpi" data-key="agreement"><div class="v">{1 - err:.1%}</div>'
                     f'<div class="l">points placed as the reference does</div>'
                     '<div class="bar"><span '
                     f'style="width:{max(0.0, min(1.0, 1 - err)) * 100:.1f}%"></span></div></div>')
    ari = num("ari_reference")
    add("ari_reference", "ARI vs reference", ari)
    ari_t = num("ari_truth")
    add("ari_truth", "ARI vs ground truth", ari_t)
    add("n_leaves", "leaves")
    add("depth", "depth")
    return f'<div class="kpis">{"".join(cards)}</div>' if cards else ""


def _algorithm_name(name: Any, titles: Mapping[str, str] | None) -> str | None:
    """The papers' spelling of an algorithm name given in any case (``mmdt`` -> ``MMDT``), from
    ``titles`` (the caller's registry: ``exclust.jobs.registry.titles()``); unknown names as given."""
    if name is None:
        return None
    key = str(name).strip().lower().replace("_", "-").replace(" ", "-")
    return (titles or {}).get(key, str(name))


def _article(word: str) -> str:
    """'a' or 'an' by sound: acronyms by their first letter's name (an MMDT, an IMM, a CART)."""
    w = str(word).strip()
    if not w:
        return "a"
    first = w.split()[0]
    if first.isupper() and len(first) > 1:
        return "an" if first[0] in "AEFHILMNORSX" else "a"
    return "an" if first[0].lower() in "aeiou" else "a"


def _summary_sentence(tree: ThresholdTree, metrics: Mapping[str, Any], dataset_info: Mapping[str, Any] | None,
                      titles: Mapping[str, str] | None = None) -> str:
    algo = _algorithm_name(metrics.get("algorithm") or tree.meta.get("algorithm"), titles) or "decision"
    k = metrics.get("k") or tree.n_clusters
    n = metrics.get("n") or (dataset_info or {}).get("n")
    d = metrics.get("d") or tree.n_features
    def count(v: Any, word: str) -> str:
        return f"{fmt_value(v, integer_like=True)} {word}{'' if v == 1 else 's'}"

    used = len(tree.features_used)
    s = (f"{_article(algo).capitalize()} {algo} tree with {count(tree.n_leaves, 'leaf').replace('leafs', 'leaves')} "
         f"and depth {tree.depth} explains {count(k, 'cluster')}"
         + (f" of {count(n, 'point')}" if n else "")
         + f" in {count(d, 'feature')}"
         + (f", using {used} of them." if d != 1 and used else "."))
    extras = []
    err = metrics.get("error_rate")
    if isinstance(err, (int, float, np.number)) and math.isfinite(float(err)):
        extras.append(f"it places {1 - float(err):.1%} of the points as the reference clustering does")
    price = metrics.get("price_kmeans")
    if isinstance(price, (int, float, np.number)) and math.isfinite(float(price)):
        where = " on the clustering columns" if metrics.get("cluster_on") else ""
        extras.append(f"its k-means cost{where} is {float(price):.3f}× the reference's"
                      + (" (less: the tree's clusters scored by their own means beat the reference)"
                         if float(price) < 1 else ""))
    if extras:
        s += " " + " and ".join(extras).capitalize() + "."
    if metrics.get("cluster_on"):  # clustered in one space, explained in another: both named
        features = metrics.get("features") or tree.feature_names
        s += f" Clustered on: {columns_text(metrics['cluster_on'])}; explained with: {columns_text(features)}."
    return s


_MAX_SAMPLE_ROWS = 200_000


def render_report(
    *,
    tree: ThresholdTree,
    metrics: Mapping[str, Any] | None,
    title: str = "exclust report",
    sample=None,
    sample_labels=None,
    scatter_features: tuple[int, int] | None = None,
    curve: Mapping[str, Any] | None = None,
    diagnostics: Sequence[Mapping[str, Any]] | None = None,
    dataset_info: Mapping[str, Any] | None = None,
    leaf_counts: Mapping[int, float] | None = None,
    cluster_names: Sequence[str] | None = None,
    titles: Mapping[str, str] | None = None,
) -> str:
    """The whole report as one self-contained HTML page (inline CSS and SVG, nothing fetched).

    ``titles`` spells algorithm names as the papers do (``exclust.jobs.registry.titles()``)."""
    from exclust import __version__

    metrics = dict(metrics or {})
    palette = cluster_colors(tree.n_clusters)
    if sample is not None and hasattr(sample, "dask") and len(sample) > _MAX_SAMPLE_ROWS:
        # a report is drawn on the driver: never pull a whole distributed dataset there
        raise ValueError(
            f"sample has {len(sample):,} rows; the report plots a sample of at most {_MAX_SAMPLE_ROWS:,} "
            "(take one first, e.g. X[::step].compute() or a random subset)"
        )
    sample_arr = None if sample is None else np.asarray(sample, dtype=float)
    counts_note = ""
    counts_from_user = leaf_counts is not None
    shares_only = False
    sizes = metrics.get("cluster_sizes_tree")
    one_leaf_each = np.bincount(tree.value[tree.leaves], minlength=tree.n_clusters).max(initial=0) <= 1
    if leaf_counts is not None:
        counts_note = " Each leaf shows its number of points and their share."
    elif sizes is not None and len(sizes) >= tree.n_clusters and one_leaf_each:
        # one leaf per cluster: the scored cluster sizes are the exact leaf counts over all the data
        leaf_counts = {int(leaf): float(sizes[int(tree.value[leaf])]) for leaf in tree.leaves}
        counts_note = " Each leaf shows its number of points and their share."
    elif sample_arr is not None and len(sample_arr):
        per_node = np.bincount(tree.apply(sample_arr), minlength=tree.node_count)
        leaf_counts = {int(leaf): int(per_node[leaf]) for leaf in tree.leaves}  # empty leaves show 0%
        shares_only = True
        counts_note = " Leaf shares are estimated from the plotted sample."
    leaf_counts = {int(a): float(b) for a, b in leaf_counts.items()} if leaf_counts else None

    algo = _algorithm_name(metrics.get("algorithm") or tree.meta.get("algorithm"), titles)
    chips = []
    for label, value in (
        ("algorithm", algo),
        ("reference", metrics.get("reference")),
        ("k", metrics.get("k") or tree.n_clusters),
        ("n", metrics.get("n") or (dataset_info or {}).get("n")),
        ("d", metrics.get("d") or tree.n_features),
        ("leaves", tree.n_leaves),
        ("depth", tree.depth),
    ):
        if value is not None:
            chips.append(f"<li>{esc(label)} <b>{esc(fmt_value(value, integer_like=True))}</b></li>")
    if dataset_info and dataset_info.get("source"):
        chips.append(f"<li>data <b>{esc(short(str(dataset_info['source']), 60))}</b></li>")

    drawing = draw_tree(tree, palette, leaf_counts, cluster_names=cluster_names, shares_only=shares_only)
    natural = drawing.width
    # a wide tree gets the whole window (still scrolling if even that is too narrow)
    bleed = (f' bleed" style="width:min(calc(100vw - 24px), {natural + 44:.0f}px)' if natural > 1140 else "")
    start = "left" if drawing.orientation == "left-right" else "top"
    sections = [
        f'<section class="card{bleed}" id="tree"><h2>The tree</h2><p class="lead">Start at the {start}; at each test '
        'go <b>yes</b> (solid edge) when the point satisfies it, <b>no</b> (dashed) otherwise. Every leaf names a '
        f'cluster.{esc(counts_note)}</p><div class="scroll tree-box">{drawing.svg}</div></section>'
    ]
    if counts_from_user:
        sizes = None  # the caller's leaf counts are the numbers to show
    rules_html = _rules_table_html(tree, palette, leaf_counts, cluster_names, sizes)
    sections.append(
        f'<section class="card" id="rules"><h2>Rules per cluster</h2><p class="lead">The same tree read leaf by leaf: '
        f'the conditions on each path, merged per feature.</p>{rules_html}'
        f'<details><summary>rules as plain text</summary><pre>{esc(tree.rules_text(cluster_names))}</pre>'
        '</details></section>'
    )

    pictures = []
    if sample_arr is not None and len(sample_arr):
        feats = scatter_features if scatter_features is not None else choose_scatter_features(tree, sample_arr)
        labels = tree.predict(sample_arr) if sample_labels is None else sample_labels
        svg = scatter_svg(sample_arr, labels, tree, features=feats, cluster_colors=palette)
        nm = tree.feature_names
        what = "the tree's clusters" if sample_labels is None else "the given labels"
        pictures.append(
            f'<section class="card" id="scatter"><h2>The cuts in the data</h2><p class="lead">{len(sample_arr):,} '
            f'sampled points on <b>{esc(nm[feats[0]])}</b>'
            + ("" if feats[0] == feats[1] else f' and <b>{esc(nm[feats[1]])}</b>')
            + f', coloured by {what}. Black lines are the tree\'s cuts, drawn only inside the region that reaches '
            'their node (bolder nearer the root); shaded bands are interval cuts. Cuts on other features are not '
            f'shown.</p><figure>{svg}</figure></section>'
        )
    if curve:
        pictures.append(
            '<section class="card" id="curve"><h2>Cost as the tree grows</h2><p '
            f'class="lead">{esc(curve_cost_words(curve))} of each method\'s tree divided by the reference cost, by '
            'number of leaves (as in ExKMC, paper 003 Figure 2). Lower is better; 1 matches the '
            f'reference.</p><figure>{cost_curve_svg(curve)}</figure></section>'
        )
    if len(pictures) == 2:
        sections.append(f'<div class="grid2">{"".join(pictures)}</div>')
    else:
        sections.extend(pictures)

    sections.append(
        '<section class="card" id="metrics"><h2>Measures</h2><p class="lead">What the numbers say, and what each one '
        f'means.</p><div class="scroll">{metrics_table_html(metrics)}</div></section>'
    )
    table = metrics.get("contingency_tree_reference")
    if table is not None and np.asarray(table).ndim == 2 and np.asarray(table).size:
        sections.append(
            f'<section class="card" id="contingency"><h2>Tree clusters against reference clusters</h2><p class="lead">'
            f'Each row is a tree cluster, shaded by where its points sit in the reference clustering; a faithful tree '
            'puts the dark cells on one cell per row.</p><div '
            f'class="scroll">{contingency_svg(table, palette)}</div></section>'
        )
    if diagnostics:
        sections.append(
            '<section class="card" id="diagnostics"><h2>Per-node diagnostics</h2><p class="lead">For every cut: the '
            'axis, the threshold, how far apart the node\'s means are on that axis in noise units, and the estimated '
            f'share of the node\'s mass cut off from its own mean. Nodes are named by the # tag the tree drawing shows '
            f'on them.</p>{_diagnostics_html(diagnostics, tree)}</section>'
        )
    if dataset_info:
        rows = "".join(
            f"<tr><th scope='row'>{esc(str(a).replace('_', ' '))}</th>"
            f"<td>{esc(fmt_value(b, integer_like=True))}</td></tr>"
            for a, b in dataset_info.items()
        )
        sections.append(f'<section class="card" id="data"><h2>Data</h2><table class="info">{rows}</table></section>')

    summary = _summary_sentence(tree, metrics, dataset_info, titles)
    return (
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
        "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
        f"<meta name=\"generator\" content=\"exclust {__version__}\">"
        f"<title>{esc(title)}</title><style>{page_css()}</style></head><body>"
        f'<header class="top"><div class="wrap"><h1>{esc(title)}</h1><p class="summary">{esc(summary)}</p>'
        f'<ul class="chips">{"".join(chips)}</ul></div></header>'
        f"<main>{_kpis_html(metrics)}{standing_html(metrics.get('standing'), titles)}{''.join(sections)}</main>"
        f"<footer>made by exclust {__version__} · one self-contained file: no scripts, no fonts or images "
        "fetched</footer></body></html>\n"
    )


def _md_cell(text: str) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def summary_markdown(tree: ThresholdTree, metrics: Mapping[str, Any] | None = None,
                     title: str = "exclust report", titles: Mapping[str, str] | None = None) -> str:
    """A short Markdown digest (summary, rules per cluster, headline metrics), e.g. for a Prefect artifact."""
    metrics = dict(metrics or {})
    lines = [f"# {title}", "", _summary_sentence(tree, metrics, None, titles), "", "| cluster | rule |",
             "| --- | --- |"]
    for c, rule in tree.rules().items():
        lines.append(f"| {c} | {_md_cell(rule)} |")
    rows = []
    for key in HEADLINE:  # the catalogue's headline measures
        if key in metrics and not isinstance(metrics[key], (Mapping, list, tuple)):
            info = MEASURES[key]
            rows.append(f"| {_md_cell(info.label)} | "
                        f"{_md_cell(fmt_value(metrics[key], integer_like=key in INTEGER_KEYS))} | "
                        f"{_md_cell(info.explanation)} |")
    if rows:
        lines += ["", "| measure | value | what it means |", "| --- | --- | --- |", *rows]
    return "\n".join(lines) + "\n"

