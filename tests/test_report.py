"""The report: SVG drawings are well-formed and complete, cuts land in their regions, the page is self-contained."""
from __future__ import annotations

import itertools
import re
import xml.etree.ElementTree as ET
from html.parser import HTMLParser

import numpy as np
import pytest

from exclust.reference.summary import MixtureSummary
from exclust.report import (
    choose_scatter_features,
    cluster_colors,
    cost_curve_svg,
    cut_regions,
    metrics_table_html,
    render_report,
    scatter_svg,
    tree_svg,
)
from exclust.tree import ThresholdTree, TreeBuilder

SVG = "{http://www.w3.org/2000/svg}"


# ---------------------------------------------------------------------------- trees to draw
def interval_tree() -> ThresholdTree:
    """Iris-shaped: a one-sided root cut, then an interval cut on another feature."""
    b = TreeBuilder(n_features=4)
    root = b.add_node()
    left, right = b.split(root, feature=2, threshold=2.45)
    b.make_leaf(left, 1)
    inside, outside = b.split_interval(right, feature=3, center=1.3, half_width=0.45)
    b.make_leaf(inside, 0)
    b.make_leaf(outside, 2)
    return b.build(["sepal_length", "sepal_width", "petal_length", "petal_width"], 3, {"algorithm": "MMDT"})


def balanced_tree(n_leaves: int, n_features: int = 3, n_clusters: int | None = None) -> ThresholdTree:
    """A tree with exactly n_leaves leaves, cuts cycling through the features (cluster = leaf order)."""
    b = TreeBuilder(n_features=n_features)
    counter = itertools.count()

    def grow(node: int, leaves: int, lo: float, hi: float, depth: int) -> None:
        if leaves == 1:
            c = next(counter)
            b.make_leaf(node, c if n_clusters is None else c % n_clusters)
            return
        mid = (lo + hi) / 2
        left, right = b.split(node, feature=depth % n_features, threshold=round(mid, 3))
        grow(left, leaves // 2, lo, mid, depth + 1)
        grow(right, leaves - leaves // 2, mid, hi, depth + 1)

    grow(b.add_node(), n_leaves, 0.0, 100.0, 0)
    return b.build([f"feature_{j}" for j in range(n_features)], n_clusters or n_leaves)


def one_leaf_tree() -> ThresholdTree:
    b = TreeBuilder(n_features=2)
    b.make_leaf(b.add_node(), 0)
    return b.build(["a", "b"], 1)


def iris_like_sample(rng, n=600) -> np.ndarray:
    X = rng.normal(size=(n, 4))
    X[:, 2] = rng.uniform(1, 7, n)
    X[:, 3] = rng.uniform(0, 2.5, n)
    return X


def parse_svg(text: str) -> ET.Element:
    return ET.fromstring(text)


def groups(root: ET.Element, cls: str) -> list[ET.Element]:
    return [g for g in root.iter(f"{SVG}g") if cls in g.get("class", "").split()]


def title_of(g: ET.Element) -> str:
    return g.find(f"{SVG}title").text


def rects(root: ET.Element) -> list[tuple[float, float, float, float]]:
    out = []
    for g in groups(root, "node"):
        r = g.find(f"{SVG}rect")
        out.append(tuple(float(r.get(a)) for a in ("x", "y", "width", "height")))
    return out


# ---------------------------------------------------------------------------- colours
def test_cluster_colors_are_distinct_for_every_k():
    for k in (1, 3, 7, 8, 10, 11, 20, 21, 40, 60):
        colors = cluster_colors(k)
        assert len(colors) == k
        assert len(set(colors)) == k
        assert all(re.fullmatch(r"#[0-9a-fA-F]{6}", c) for c in colors)
    # up to seven clusters: the colour-blind-safe Okabe-Ito palette
    assert cluster_colors(3) == ["#0072B2", "#E69F00", "#009E73"]


# ---------------------------------------------------------------------------- tree drawing
def test_tree_svg_has_one_box_per_node_with_the_tests_written_in():
    tree = interval_tree()
    root = parse_svg(tree_svg(tree))
    leaves, internal = groups(root, "leaf"), groups(root, "internal")
    assert len(leaves) == tree.n_leaves == 3
    assert len(internal) == tree.node_count - tree.n_leaves == 2
    for g in internal:
        node = int(g.get("data-node"))
        assert title_of(g) == tree.describe_node(node)
    titles = {title_of(g) for g in internal}
    assert titles == {"petal_length <= 2.45", "0.85 <= petal_width <= 1.75"}  # |x - 1.3| <= 0.45 as its interval
    visible = " ".join(t.text for g in internal for t in g.iter(f"{SVG}text"))
    assert "petal_length" in visible and "≤ 2.45" in visible and "petal_width in [0.85, 1.75]" in visible
    # every box carries its node id, the one the per-node diagnostics name
    tags = {t.text for t in root.iter(f"{SVG}text") if t.get("class") == "node-id"}
    assert tags == {f"#{n}" for n in range(tree.node_count)}
    # the interval node is marked so it can be styled apart
    assert len(groups(root, "interval")) == 1
    palette = cluster_colors(3)
    for g in leaves:
        c = int(g.get("data-cluster"))
        assert f"cluster {c}" in " ".join(t.text for t in g.iter(f"{SVG}text"))
        assert g.find(f"{SVG}rect").get("fill") == palette[c]


def test_tree_svg_labels_every_edge_yes_or_no():
    tree = balanced_tree(6)
    root = parse_svg(tree_svg(tree))
    labels = [t.text for t in root.iter(f"{SVG}text") if "edge-label" in t.get("class", "")]
    n_internal = tree.node_count - tree.n_leaves
    assert labels.count("yes") == n_internal and labels.count("no") == n_internal
    assert len([p for p in root.iter(f"{SVG}path") if "edge" in p.get("class", "")]) == 2 * n_internal


def test_tree_svg_shows_leaf_counts_and_shares():
    tree = interval_tree()
    counts = {int(leaf): n for leaf, n in zip(tree.leaves, (50, 54, 46), strict=True)}
    root = parse_svg(tree_svg(tree, leaf_counts=counts))
    texts = " | ".join(t.text for g in groups(root, "leaf") for t in g.iter(f"{SVG}text"))
    assert "50 · 33.3%" in texts and "54 · 36.0%" in texts and "46 · 30.7%" in texts


@pytest.mark.parametrize("n_leaves,orientation", [(8, "top-down"), (40, "auto"), (40, "top-down"), (25, "left-right")])
def test_tree_layout_never_overlaps_boxes_and_scales_with_leaves(n_leaves, orientation):
    tree = balanced_tree(n_leaves, n_clusters=min(n_leaves, 30))
    svg = tree_svg(tree, leaf_counts={int(v): 1000 + int(v) for v in tree.leaves}, orientation=orientation)
    root = parse_svg(svg)
    assert len(groups(root, "leaf")) == n_leaves
    assert len(groups(root, "internal")) == n_leaves - 1
    boxes = rects(root)
    for (x1, y1, w1, h1), (x2, y2, w2, h2) in itertools.combinations(boxes, 2):
        apart = x1 + w1 <= x2 or x2 + w2 <= x1 or y1 + h1 <= y2 or y2 + h2 <= y1
        assert apart, "two node boxes overlap"
    vb = [float(v) for v in root.get("viewBox").split()]
    assert all(x >= 0 and y >= 0 and x + w <= vb[2] + 1e-6 and y + h <= vb[3] + 1e-6 for x, y, w, h in boxes)


def test_tree_layout_centres_parents_over_children():
    tree = balanced_tree(8)
    root = parse_svg(tree_svg(tree, orientation="top-down"))
    centre = {}
    for g in groups(root, "node"):
        r = g.find(f"{SVG}rect")
        centre[int(g.get("data-node"))] = float(r.get("x")) + float(r.get("width")) / 2
    for n in np.flatnonzero(tree.kind != 0):
        mid = (centre[int(tree.left[n])] + centre[int(tree.right[n])]) / 2
        assert centre[int(n)] == pytest.approx(mid, abs=0.2)
    leaf_x = sorted(centre[int(v)] for v in tree.leaves)
    assert np.allclose(np.diff(leaf_x), leaf_x[1] - leaf_x[0], atol=0.2)  # leaves evenly spaced


def caterpillar_tree(n_leaves: int) -> ThresholdTree:
    """The deepest tree with n_leaves leaves: every cut peels off one cluster (depth n_leaves - 1)."""
    b = TreeBuilder(n_features=4)
    node = b.add_node()
    for c in range(n_leaves - 1):
        left, node = b.split(node, feature=c % 4, threshold=float(c))
        b.make_leaf(left, c)
    b.make_leaf(node, n_leaves - 1)
    return b.build(["alpha", "beta", "gamma", "delta"], n_leaves)


def test_layout_follows_the_tree_shape():
    assert "top-down" in tree_svg(balanced_tree(5)).split(">", 1)[0]
    assert "left-right" in tree_svg(balanced_tree(40)).split(">", 1)[0]  # wide but shallow
    assert "outline" in tree_svg(caterpillar_tree(40)).split(">", 1)[0]  # deep: an indented list


@pytest.mark.parametrize("tree", [balanced_tree(5), balanced_tree(40), caterpillar_tree(40)], ids=["5", "40", "deep"])
def test_draw_tree_reports_the_size_and_orientation_it_drew(tree):
    from exclust.report import draw_tree

    drawing = draw_tree(tree)
    root = parse_svg(drawing.svg)
    _, _, width, height = (float(v) for v in root.get("viewBox").split())
    assert (drawing.width, drawing.height) == (width, height)
    assert root.get("class") == f"tree-svg {drawing.orientation}"
    assert drawing.svg == tree_svg(tree)


def test_report_page_ships_its_stylesheet_as_package_data():
    from importlib import resources

    css = resources.files("exclust.report").joinpath("page.css").read_text(encoding="utf-8")
    html = render_report(tree=interval_tree(), metrics={})
    assert "table.metrics" in css and css in html
    assert re.search(r"--sans:[^;]*sans-serif", html)  # the font stacks the page's var(--sans) reads


def test_outline_layout_of_a_deep_tree_keeps_boxes_apart_and_fits_the_page():
    tree = caterpillar_tree(40)
    root = parse_svg(tree_svg(tree, leaf_counts={int(v): 10 for v in tree.leaves}))
    assert len(groups(root, "leaf")) == 40 and len(groups(root, "internal")) == 39
    boxes = rects(root)
    for (x1, y1, w1, h1), (x2, y2, w2, h2) in itertools.combinations(boxes, 2):
        assert x1 + w1 <= x2 or x2 + w2 <= x1 or y1 + h1 <= y2 or y2 + h2 <= y1, "two node boxes overlap"
    assert float(root.get("viewBox").split()[2]) < 2200  # 39 levels deep, still about a page wide
    labels = [t.text for t in root.iter(f"{SVG}text") if "edge-label" in t.get("class", "")]
    assert labels.count("yes") == 39 and labels.count("no") == 39


def test_one_leaf_tree_draws_a_single_box():
    root = parse_svg(tree_svg(one_leaf_tree()))
    assert len(groups(root, "leaf")) == 1 and not groups(root, "internal")


def test_feature_names_are_escaped_in_the_drawing():
    b = TreeBuilder(n_features=2)
    left, right = b.split(b.add_node(), 0, 1.0)
    b.make_leaf(left, 0)
    b.make_leaf(right, 1)
    tree = b.build(["<script>alert(1)</script>", "a&b"], 2)
    svg = tree_svg(tree)
    assert "<script>" not in svg
    assert title_of(groups(parse_svg(svg), "internal")[0]) == "<script>alert(1)</script> <= 1"


def test_too_few_colours_is_an_error_naming_the_fix():
    with pytest.raises(ValueError, match="one per cluster"):
        tree_svg(interval_tree(), ["#000000"])


# ---------------------------------------------------------------------------- scatter with cuts
def test_choose_scatter_features():
    assert choose_scatter_features(balanced_tree(4, n_features=2)) == (0, 1)
    assert choose_scatter_features(interval_tree()) == (2, 3)  # root's feature, then its child's
    # one feature used: the other is the most spread-out remaining one
    b = TreeBuilder(n_features=3)
    left, right = b.split(b.add_node(), 1, 0.0)
    b.make_leaf(left, 0)
    b.make_leaf(right, 1)
    X = np.random.default_rng(0).normal(size=(100, 3)) * [1.0, 1.0, 9.0]
    assert choose_scatter_features(b.build(), X) == (1, 2)


def test_cut_regions_match_where_points_really_go():
    """On a d=2 tree every grid point must lie inside its own leaf's region and no other's."""
    b = TreeBuilder(n_features=2)
    root = b.add_node()
    inside, outside = b.split_interval(root, feature=0, center=0.0, half_width=1.0)
    l1, r1 = b.split(inside, feature=1, threshold=0.5)
    b.make_leaf(l1, 0)
    b.make_leaf(r1, 1)
    l2, r2 = b.split(outside, feature=1, threshold=-0.5)
    b.make_leaf(l2, 2)
    i3, o3 = b.split_interval(r2, feature=1, center=1.5, half_width=0.4)
    b.make_leaf(i3, 3)
    b.make_leaf(o3, 4)
    tree = b.build()
    limits = (-3.0, 3.0, -3.0, 3.0)
    regions = cut_regions(tree, (0, 1), limits)
    assert len(regions[outside]) == 2  # the band's complement is two boxes
    g = np.linspace(-2.97, 2.97, 61)
    pts = np.array([(x, y) for x in g for y in g])
    leaf_of = tree.apply(pts)

    def inside_boxes(p, boxes):
        return any(x0 <= p[0] <= x1 and y0 <= p[1] <= y1 for x0, x1, y0, y1 in boxes)

    for p, leaf in zip(pts, leaf_of, strict=True):
        assert inside_boxes(p, regions[int(leaf)])
        for other in tree.leaves:
            if other != leaf:
                boxes = regions[int(other)]
                strictly = [(x0 + 1e-9, x1 - 1e-9, y0 + 1e-9, y1 - 1e-9) for x0, x1, y0, y1 in boxes]
                assert not inside_boxes(p, strictly)


def test_cut_on_an_unplotted_feature_keeps_the_region():
    tree = interval_tree()
    regions = cut_regions(tree, (0, 1), (0.0, 1.0, 0.0, 1.0))
    assert all(r == [(0.0, 1.0, 0.0, 1.0)] for r in regions.values())


def test_scatter_draws_interval_band_and_one_sided_cut(rng):
    tree = interval_tree()
    X = iris_like_sample(rng)
    svg = scatter_svg(X, None, tree, features=(2, 3), title="iris-like")
    root = parse_svg(svg)
    ids = {el.get("id") for el in root.iter() if el.get("id")}
    assert "interval-band-node-2" in ids
    assert "cut-node-0" in ids and "cut-node-2" in ids
    # points are rasterized into one embedded image, not thousands of vector marks
    images = list(root.iter(f"{SVG}image"))
    assert images and all(im.get("{http://www.w3.org/1999/xlink}href", im.get("href", "")).startswith("data:image/png")
                          for im in images)
    assert len(svg) < 400_000
    # the legend carries the cluster colours shared with the tree drawing
    for color in cluster_colors(3):
        assert color.lower() in svg.lower()


def test_scatter_leaves_out_cuts_on_features_not_plotted(rng):
    tree = interval_tree()
    svg = scatter_svg(iris_like_sample(rng), None, tree, features=(0, 2))
    ids = {el.get("id") for el in parse_svg(svg).iter() if el.get("id")}
    assert "cut-node-0" in ids
    assert not any(i.startswith("interval-band") for i in ids)


def test_scatter_thousands_of_points_and_bad_shape(rng):
    tree = balanced_tree(10, n_features=2)
    X = rng.uniform(0, 100, size=(8000, 2))
    svg = scatter_svg(X, tree.predict(X), tree, features=(0, 1))
    parse_svg(svg)
    assert len(svg) < 500_000
    with pytest.raises(ValueError, match="shape"):
        scatter_svg(X[:, :1], None, tree)


# ---------------------------------------------------------------------------- cost curve
def test_cost_curve_has_every_series_and_the_reference_line():
    curve = {"leaves": [3, 4, 6, 9], "exkmc": [1.3, 1.1, 1.04, 1.01], "cart": [1.5, 1.3, None, 1.1],
             "kdtree": [1.9, 1.6, 1.4, 1.2], "imm": 1.3, "k": 3}
    root = parse_svg(cost_curve_svg(curve))
    ids = {el.get("id") for el in root.iter() if el.get("id")}
    assert {"series-exkmc", "series-cart", "series-kdtree", "series-imm", "reference-line"} <= ids
    with pytest.raises(ValueError, match="values for 4 leaf counts"):
        cost_curve_svg({"leaves": [3, 4, 6, 9], "exkmc": [1.0, 1.0]})


def test_cost_curve_stays_readable_when_a_baseline_runs_far_above():
    """The issue's curve: KDTree up to 3.6 squashed ExKMC, CART and the surrogate into one line at 1."""
    curve = {"leaves": [5, 6, 8, 10], "exkmc": [1.02, 1.012, 1.006, 1.003], "cart": [1.05, 1.03, 1.02, 1.01],
             "kdtree": [3.6, 2.9, 2.2, 1.8], "exkmc_surrogate": [1.03, 1.02, 1.01, 1.005], "k": 5}
    svg = cost_curve_svg(curve)
    texts = [t.text or "" for t in parse_svg(svg).iter(f"{SVG}text")]
    assert "KDTree (up to 3.6, above the plot)" in texts
    assert "ExKMC, surrogate cost" in texts and not any("exkmc_surrogate" in t for t in texts)
    assert "reference clustering = 1" in texts  # in the legend, where no series crosses it
    y_ticks = [float(t.replace("\u2212", "-")) for t in texts if re.fullmatch("\u2212?[0-9]+[.][0-9]+", t)]
    assert y_ticks and max(y_ticks) < 1.2  # the y axis spans the explained tree's curve, not the baseline's 3.6


def test_cost_curve_names_the_cost_it_shows_on_its_axis():
    curve = {"leaves": [3, 4], "exkmc": [1.2, 1.1], "kdtree": [1.5, 1.3], "reference_cost": 1234.5,
             "baselines": "CART and KDTree fitted on a uniform sample"}
    kmeans = cost_curve_svg(curve)
    medians = cost_curve_svg({**curve, "cost": "kmedians-surrogate"})
    assert "k-means cost ratio (tree / reference)" in kmeans and "k-medians" not in kmeans
    assert "k-medians surrogate cost ratio (l1, tree / reference)" in medians and "k-means" not in medians
    for svg in (kmeans, medians):  # the curve's other fields are not drawn as series
        ids = {el.get("id") for el in parse_svg(svg).iter() if el.get("id")}
        assert {"series-exkmc", "series-kdtree"} <= ids
        assert not {"series-cost", "series-reference_cost", "series-baselines"} & ids


# ---------------------------------------------------------------------------- metrics
def test_metrics_table_formats_values_and_explains_them():
    from exclust.algorithms.mmdt.bounds import mmdt_bounds

    summary = MixtureSummary(means=np.array([[0.0, 0.0], [5.0, 0.0], [0.0, 6.0]]), sigma=np.array([1.0, 1.0]))
    metrics = {
        "n": 1234567, "n_leaves": 3, "price_kmeans": 1.04213, "surrogate_price": None, "price_kmedians": float("nan"),
        "error_rate": 0.01234, "ari_reference": 0.95, "ari_truth": None, "passes": 2,
        "kmeans_cost_tree": 123456.789, "kmeans_cost_reference": 120000.0, "algorithm": "MMDT", "k": 3, "d": 2,
        "enr": 12.5, "seconds": {"reference": 1.5, "tree": 0.002}, "bounds": mmdt_bounds(summary),
        "my_new_metric": 7.123456,
    }
    html = metrics_table_html(metrics)
    assert "1,234,567" in html
    assert "1.042" in html and "1.04213" not in html
    assert "not computed for this run" in html  # surrogate_price is None
    assert "my new metric" in html and "7.123" in html
    assert "Theorem 4" in html and "Theorem 8" in html and "Theorem 9" in html
    assert "paper 002" in html
    for key in ("price_kmeans", "error_rate", "ari_reference", "passes", "enr", "seconds"):
        row = re.search(rf'<tr data-key="{key}">.*?</tr>', html).group(0)
        assert re.search(r'<td class="why">[^<]{20,}</td>', row), f"{key} has no explanation"
    parse_svg(f'<div xmlns="http://www.w3.org/2000/svg">{html}</div>')  # balanced markup


# ---------------------------------------------------------------------------- the page
class _Refs(HTMLParser):
    def __init__(self):
        super().__init__()
        self.refs, self.tags = [], []

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)
        for name, value in attrs:
            if name in ("src", "href", "xlink:href", "srcset", "action", "poster", "data") and value:
                self.refs.append(value)


def _assert_self_contained(html: str) -> None:
    parser = _Refs()
    parser.feed(html)
    for ref in parser.refs:
        assert ref.startswith(("data:", "#")), f"external reference {ref[:60]}"
    assert "script" not in parser.tags and "link" not in parser.tags and "iframe" not in parser.tags
    assert not re.search(r"@import|url\(\s*['\"]?(https?:)?//", html)
    for svg in re.findall(r"<svg\b.*?</svg>", html, flags=re.S):
        parse_svg(svg)


def test_report_is_self_contained_and_holds_every_rule(rng):
    tree = interval_tree()
    X = iris_like_sample(rng)
    curve = {"leaves": [3, 4, 5], "exkmc": [1.2, 1.1, 1.05], "cart": [1.4, 1.3, 1.2], "kdtree": [1.6, 1.4, 1.3]}
    diagnostics = [{"node": 0, "axis": 2, "threshold": 2.45, "normalized_separation": 5.1, "cutoff_share": 0.0012}]
    html = render_report(tree=tree, metrics={"algorithm": "MMDT", "n": 600, "error_rate": 0.02, "price_kmeans": 1.03},
                         title="iris <test>", sample=X, curve=curve, diagnostics=diagnostics,
                         dataset_info={"source": "iris.parquet"})
    _assert_self_contained(html)
    assert html.startswith("<!DOCTYPE html>")
    assert "<title>iris &lt;test&gt;</title>" in html
    for path in tree.leaf_paths().values():
        for cond in tree.leaf_rule(path).split(" and "):
            assert cond.replace("<=", "≤").replace(">=", "≥").replace("<", "&lt;").replace(">", "&gt;") in html
    for line in tree.rules_text().splitlines():
        assert line.replace("<", "&lt;").replace(">", "&gt;") in html
    for section in ('id="tree"', 'id="rules"', 'id="scatter"', 'id="curve"', 'id="metrics"', 'id="diagnostics"'):
        assert section in html
    diag = re.search(r'id="diagnostics".*?</table>', html, flags=re.S).group(0)
    assert "petal_length" in diag  # axis by name
    # the node is named by the tag the drawing puts on it
    assert re.search(r"<td[^>]*>#0</td>", diag) and re.search(r'class="node-id"[^>]*>#0</text>', html)
    assert "98.0%" in html  # the summary reads the error rate as agreement
    # one colour per cluster, shared by leaves, rule swatches and scatter
    for c, color in enumerate(cluster_colors(3)):
        assert f'data-cluster="{c}"><td class="cluster"><span class="swatch" style="background:{color}"' in html
        assert f'fill="{color}"' in html


def test_report_for_one_leaf_tree_and_none_metrics():
    html = render_report(tree=one_leaf_tree(), metrics={"price_kmeans": None, "error_rate": None, "n": None})
    _assert_self_contained(html)
    assert "all points" in html and "—" in html


def test_report_for_forty_leaves_with_sample(rng):
    tree = balanced_tree(40, n_features=3, n_clusters=20)
    X = rng.uniform(0, 100, size=(3000, 3))
    html = render_report(tree=tree, metrics={"n_leaves": 40, "k": 20}, sample=X)
    _assert_self_contained(html)
    assert html.count('class="node leaf"') == 40
    assert html.count("<tr data-cluster=") == 20
    # two leaves per cluster: leaf boxes can only show the sample's shares, and say so
    leaf_boxes = re.findall(r'<g class="node leaf".*?</g>', html)
    assert len(leaf_boxes) == 40 and all("≈ " in g for g in leaf_boxes)
    assert "estimated from the plotted sample" in html
    assert len(html) < 1_000_000


def test_report_of_a_real_mmdt_run_with_score_output(rng):
    """The page takes score()'s dict and MMDT's diagnostics as they come: tables, lists and None alike."""
    from exclust.algorithms.mmdt.bounds import mmdt_bounds
    from exclust.algorithms.mmdt.mmdt import MMDT
    from exclust.scoring.metrics import score

    means = np.array([[0.0, 0.0, 0.0], [8.0, 0.0, 1.0], [0.0, 9.0, -1.0], [8.0, 9.0, 0.0]])
    y = rng.integers(0, 4, 2000)
    X = means[y] + rng.normal(size=(2000, 3))
    summary = MixtureSummary(means=means, sigma=np.ones(3), weights=np.full(4, 0.25), feature_names=["u", "v", "w"])
    model = MMDT(threshold="gaussian", random_state=0).fit(summary)
    metrics = score(model.tree_, X, reference_labels=y, centers=means, y_true=y)
    metrics.update(algorithm="MMDT", k=4, d=3, enr=model.enr_, bounds=mmdt_bounds(summary),
                   seconds={"tree": 0.001, "score": 0.2})
    html = render_report(tree=model.tree_, metrics=metrics, sample=X[:500], diagnostics=model.node_diagnostics_)
    _assert_self_contained(html)
    assert 'id="contingency"' in html and "4 × 4 table" in html
    sizes = metrics["cluster_sizes_tree"]
    for c, size in enumerate(sizes):  # rules table and leaf boxes count the full data, not the plotted sample
        row = re.search(rf'<tr data-cluster="{c}">.*?</tr>', html).group(0)
        assert f"{size:,}" in row
        leaf_box = re.search(rf'<g class="node leaf" data-node="\d+" data-cluster="{c}">.*?</g>', html).group(0)
        assert f">{size:,} · " in leaf_box
    diag = re.search(r'id="diagnostics".*?</table>', html, flags=re.S).group(0)
    for d in model.node_diagnostics_:
        assert f">{d['feature_name']}<" in diag
        assert f"{d['threshold']:.6g}" in diag  # thresholds written as in the tree drawing


def test_report_refuses_a_whole_distributed_dataset_as_sample():
    import dask.array as da

    tree = balanced_tree(4, n_features=2)
    big = da.zeros((300_000, 2), chunks=(50_000, 2))
    with pytest.raises(ValueError, match="take one first"):
        render_report(tree=tree, metrics={}, sample=big)
    small = da.random.random((2000, 2), chunks=(500, 2)) * 100
    assert 'id="scatter"' in render_report(tree=tree, metrics={}, sample=small)


def test_summary_markdown_lists_rules_and_headline_metrics():
    from exclust.report import summary_markdown

    tree = interval_tree()
    md = summary_markdown(tree, {"price_kmeans": 1.0421, "error_rate": 0.05, "n": 150000, "seconds": {"a": 1}}, "iris")
    assert md.startswith("# iris\n")
    for c, rule in tree.rules().items():
        assert f"| {c} | {rule} |" in md
    assert "| price of explainability (k-means) | 1.042 |" in md and "| points n | 150,000 |" in md
    assert "95.0%" in md and "seconds" not in md


@pytest.mark.parametrize("algo,article", [("MMDT", "An"), ("IMM", "An"), ("CART", "A"), ("KDTree", "A"),
                                          ("ExKMC", "An"), ("kernel MMDT", "A")])
def test_summary_sentence_reads_naturally(algo, article):
    html = render_report(tree=interval_tree(), metrics={"algorithm": algo})
    assert f"{article} {algo} tree with 3 leaves" in html


def test_one_feature_data_gets_a_strip_plot_with_its_cuts(rng):
    b = TreeBuilder(n_features=1)
    left, right = b.split(b.add_node(), 0, 0.0)
    b.make_leaf(left, 0)
    inside, outside = b.split_interval(right, 0, center=3.0, half_width=1.0)
    b.make_leaf(inside, 1)
    b.make_leaf(outside, 2)
    tree = b.build(["score"], 3)
    X = rng.normal(2.0, 2.0, size=(500, 1))
    assert choose_scatter_features(tree, X) == (0, 0)
    html = render_report(tree=tree, metrics={}, sample=X)
    _assert_self_contained(html)
    svg = re.search(r'<svg[^>]*class="scatter-svg.*?</svg>', html, flags=re.S).group(0)
    ids = {el.get("id") for el in parse_svg(svg).iter() if el.get("id")}
    assert {"cut-node-0", "interval-band-node-2"} <= ids


def test_summary_sentence_counts_in_singular_and_plural():
    html = render_report(tree=one_leaf_tree(), metrics={"algorithm": "IMM", "n": 1, "d": 1, "k": 1})
    assert "An IMM tree with 1 leaf and depth 0 explains 1 cluster of 1 point in 1 feature." in html
    html = render_report(tree=interval_tree(), metrics={"n": 1500})
    assert "with 3 leaves and depth 2 explains 3 clusters of 1,500 points in 4 features, using 2 of them." in html


def test_algorithm_names_are_spelled_as_in_the_papers():
    from exclust.jobs.registry import titles  # the report is below the jobs: they hand it the spelling

    tree = interval_tree()
    tree.meta["algorithm"] = "mmdt"
    assert "An MMDT tree" in render_report(tree=tree, metrics={}, titles=titles())
    assert "A kernel MMDT tree" in render_report(tree=tree, metrics={"algorithm": "kernel_mmdt"}, titles=titles())
    assert "A mmdt tree" in render_report(tree=tree, metrics={})  # no spelling given: the name as it is


def test_a_price_below_one_is_explained_where_it_is_shown():
    tree = interval_tree()
    below = render_report(tree=tree, metrics={"price_kmeans": 0.9708, "n": 100})
    kpi = re.search(r'<div class="kpi" data-key="price_kmeans">.*?</div></div>', below, flags=re.S).group(0)
    assert "0.9708" in kpi and "below 1: the tree&#x27;s clusters, each scored by its own mean, cost less" in kpi
    assert "1 is perfect" not in below
    above = render_report(tree=tree, metrics={"price_kmeans": 1.02, "n": 100})
    assert "below 1:" not in above and 'data-key="price_kmeans"' in above


def test_a_tree_shows_its_drawing_in_a_notebook_and_every_picture_saves_as_svg_and_png(tmp_path, rng):
    import matplotlib.image

    import exclust
    from exclust.errors import InputError

    tree = interval_tree()
    assert tree._repr_svg_() == tree_svg(tree)  # what Jupyter shows for a fitted tree
    X = iris_like_sample(rng)
    curve = {"leaves": [3, 4, 6], "exkmc": [1.1, 1.05, 1.0], "kdtree": [3.6, 2.0, 1.5]}
    for what, extra in (("tree", {}), ("scatter", {"sample": X}), ("curve", {"curve": curve})):
        svg = exclust.save_figure(tmp_path / f"{what}.svg", tree, what=what, **extra)
        text = svg.read_text()
        assert text.startswith('<?xml version="1.0"') and parse_svg(text[text.index("<svg"):]) is not None
        png = exclust.save_figure(tmp_path / f"{what}.png", tree, what=what, **extra)
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        pixels = matplotlib.image.imread(png)
        assert pixels.shape[0] > 100 and pixels.shape[1] > 100
        assert (pixels[..., :3] < 0.5).any(axis=-1).mean() > 0.005  # drawn on, not a blank page
    drawn = parse_svg((tmp_path / "tree.svg").read_text().split("\n", 1)[1])
    assert len(groups(drawn, "leaf")) == 3 and drawn.get("width") and drawn.get("height")
    assert not list(tmp_path.glob(".*tmp*"))
    with pytest.raises(InputError, match="name the file .svg or .png"):
        exclust.save_figure(tmp_path / "tree.pdf", tree)
