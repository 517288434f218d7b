"""What a person looks at: the drawn tree, rules per cluster, scatter plots with the cuts,
cost-vs-leaves curves, a measures table that says what each number means, and the HTML page
that holds them all.

Every function here is pure: it takes a tree and small summaries and returns text (SVG or
HTML). Nothing is fetched from the network when the page is opened: styles are inline,
plots are inline SVG, so the report can be mailed, archived or attached to a Prefect run as
one file. Lives here: ``plots.py`` (scatter, curve, contingency), ``measures.py`` (the metrics
table), ``standing.py`` (the standing table), ``page.py`` (the page, its ``page.css``, and the
Markdown digest), ``figures.py`` (``save_figure``: one picture as an SVG or PNG file). The tree's
drawing and the colours, numbers and text are ``exclust.tree.drawing`` and ``exclust.tree.style``.
"""
from __future__ import annotations

from exclust.report.figures import save_figure
from exclust.report.measures import metrics_table_html
from exclust.report.page import render_report, summary_markdown
from exclust.report.plots import choose_scatter_features, contingency_svg, cost_curve_svg, cut_regions, scatter_svg
from exclust.tree.drawing import TreeDrawing, draw_tree, tree_svg
from exclust.tree.style import cluster_colors

__all__ = [
    "cluster_colors",
    "choose_scatter_features",
    "cut_regions",
    "tree_svg",
    "draw_tree",
    "TreeDrawing",
    "scatter_svg",
    "cost_curve_svg",
    "metrics_table_html",
    "contingency_svg",
    "render_report",
    "summary_markdown",
    "save_figure",
]
