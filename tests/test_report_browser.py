"""The report in a real browser: headless Chromium draws the tree, and its SVG is parsed into the DOM.

Needs Debian's ``chromium`` (CI installs it with apt-get); skips with the reason when it is absent.
"""
from __future__ import annotations

import os
import shutil
import subprocess

import numpy as np
import pytest

from exclust.report import cluster_colors, render_report
from exclust.tree import TreeBuilder

pytestmark = pytest.mark.e2e

_CANDIDATES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")


def _chromium() -> str:
    for name in ("/usr/bin/chromium",) + _CANDIDATES:
        path = shutil.which(name) if not os.path.isabs(name) else (name if os.access(name, os.X_OK) else None)
        if path:
            return path
    pytest.skip("no headless Chromium found (install Debian's 'chromium' with apt-get to run the browser test)")


def _run_chromium(binary: str, tmp_path, *args: str, timeout: int = 120) -> subprocess.CompletedProcess:
    profile = tmp_path / "profile"
    profile.mkdir(exist_ok=True)
    cmd = [
        binary, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
        "--disable-background-networking", "--disable-component-update", "--disable-sync",
        "--disable-dev-shm-usage", "--hide-scrollbars", f"--user-data-dir={profile}", *args,
    ]
    try:
        return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        pytest.fail(f"headless Chromium did not finish within {timeout} s: {' '.join(cmd)}")


def _five_cluster_tree():
    """Five leaves in five Okabe-Ito colours, one interval cut."""
    b = TreeBuilder(n_features=3)
    root = b.add_node()
    a, bb = b.split(root, feature=0, threshold=0.0)
    a1, a2 = b.split(a, feature=1, threshold=-1.0)
    b.make_leaf(a1, 0)
    b.make_leaf(a2, 1)
    inside, outside = b.split_interval(bb, feature=2, center=0.5, half_width=1.5)
    b.make_leaf(inside, 2)
    o1, o2 = b.split(outside, feature=1, threshold=2.0)
    b.make_leaf(o1, 3)
    b.make_leaf(o2, 4)
    return b.build(["income", "age", "tenure_years"], 5, {"algorithm": "MMDT"})


def _render(tmp_path, **extra):
    tree = _five_cluster_tree()
    metrics = {"algorithm": "MMDT", "k": 5, "d": 3, "n": 250_000, "n_leaves": tree.n_leaves,
               "price_kmeans": 1.021, "error_rate": 0.0132, "ari_reference": 0.97, "ari_truth": None}
    html = render_report(tree=tree, metrics=metrics, title="browser check", **extra)
    page = tmp_path / "report.html"
    page.write_text(html, encoding="utf-8")
    return tree, page


def _pixels_near(img: np.ndarray, hex_color: str, tol: float = 0.06) -> int:
    target = np.array([int(hex_color[i : i + 2], 16) / 255.0 for i in (1, 3, 5)])
    return int((np.abs(img[:, :, :3] - target) <= tol).all(axis=2).sum())


def test_tree_drawing_appears_in_a_screenshot(tmp_path):
    from matplotlib.image import imread

    binary = _chromium()
    # no sample: the only large patches of cluster colour on the page are the tree's leaf boxes
    tree, page = _render(tmp_path)
    shot = tmp_path / "shot.png"
    proc = _run_chromium(binary, tmp_path, f"--screenshot={shot}", "--window-size=1280,2000", page.as_uri())
    assert shot.exists(), f"Chromium wrote no screenshot (rc={proc.returncode}): {proc.stderr[-2000:]}"
    img = imread(str(shot))
    assert img.shape[0] >= 1000 and img.shape[1] >= 1200
    assert float(img[:, :, :3].std()) > 0.05, "the screenshot is blank"
    for c, color in enumerate(cluster_colors(tree.n_clusters)):
        # a leaf box is about 80 x 40 px; a rules swatch is only 14 x 14
        assert _pixels_near(img, color) > 1200, f"cluster {c}'s colour {color} is missing from the drawn tree"
    # the dark header band is drawn (inline CSS applied)
    top = img[:60, :, :3].mean(axis=(0, 1))
    assert top.max() < 0.5, "the page header is not styled"


def test_svg_elements_are_parsed_into_the_dom(tmp_path):
    binary = _chromium()
    rng = np.random.default_rng(0)
    X = rng.normal(size=(2000, 3)) * [1.0, 2.0, 1.5]
    tree, page = _render(tmp_path, sample=X, scatter_features=(0, 2),
                         curve={"leaves": [5, 6, 8], "exkmc": [1.1, 1.05, 1.02], "cart": [1.3, 1.2, 1.1],
                                "kdtree": [1.5, 1.4, 1.3]})
    proc = _run_chromium(binary, tmp_path, "--dump-dom", page.as_uri())
    dom = proc.stdout
    assert "<svg" in dom, f"no SVG in the DOM (rc={proc.returncode}): {proc.stderr[-2000:]}"
    # Chromium re-serializes what it parsed: the tree's groups, the scatter's band and the curve's series survive
    assert dom.count('class="node leaf"') == tree.n_leaves
    assert dom.count('class="node internal') == tree.node_count - tree.n_leaves
    assert dom.count("<svg") >= 3
    assert 'id="interval-band-node-' in dom
    assert 'id="series-exkmc"' in dom
    for n in np.flatnonzero(tree.kind != 0):
        assert f"<title>{tree.describe_node(int(n)).replace('<', '&lt;').replace('>', '&gt;')}</title>" in dom


def test_the_issues_report_reads_right_in_a_browser(tmp_path):
    """The report of issue 19 (price 0.9708, a KDTree curve up to 3.6 over ExKMC, CART and the surrogate near
    1, per-node diagnostics, an interval cut), as Chromium draws and parses it. Set EXCLUST_SCREENSHOTS to a
    folder to keep the screenshot for a person to look at."""
    from matplotlib.image import imread

    binary = _chromium()
    rng = np.random.default_rng(1)
    X = rng.normal(size=(3000, 3)) * [1.0, 2.0, 1.5]
    curve = {"leaves": [5, 6, 8, 10], "exkmc": [1.02, 1.012, 1.006, 1.003], "cart": [1.05, 1.03, 1.02, 1.01],
             "kdtree": [3.6, 2.9, 2.2, 1.8], "exkmc_surrogate": [1.03, 1.02, 1.01, 1.005], "k": 5}
    diagnostics = [{"node": 0, "axis": 0, "threshold": 0.0, "normalized_separation": 4.2, "cutoff_share": 0.003},
                   {"node": 2, "axis": 2, "threshold": 1.5, "normalized_separation": 2.9, "cutoff_share": 0.02}]
    tree = _five_cluster_tree()
    metrics = {"algorithm": "ExKMC", "k": 5, "d": 3, "n": 30_000, "price_kmeans": 0.9708, "error_rate": 0.011}
    page = tmp_path / "report.html"
    page.write_text(render_report(tree=tree, metrics=metrics, title="issue 19 report", sample=X, curve=curve,
                                  diagnostics=diagnostics), encoding="utf-8")
    dom = _run_chromium(binary, tmp_path, "--dump-dom", page.as_uri()).stdout
    assert "below 1: the tree's clusters, each scored by its own mean" in dom.replace("&#x27;", "'")
    assert "KDTree (up to 3.6, above the plot)" in dom and "ExKMC, surrogate cost" in dom
    assert "exkmc_surrogate<" not in dom and "reference clustering = 1" in dom
    for n in (0, 2):  # the diagnostics' nodes carry the tags the drawing shows
        assert f">#{n}</td>" in dom and 'class="node-id"' in dom and f">#{n}</text>" in dom
    assert "in [-1, 2]" in dom and "|tenure_years" not in dom  # the interval cut as an interval
    shot = tmp_path / "shot.png"
    _run_chromium(binary, tmp_path, f"--screenshot={shot}", "--window-size=1280,3200", page.as_uri())
    img = imread(str(shot))
    assert float(img[:, :, :3].std()) > 0.05, "the screenshot is blank"
    assert _pixels_near(img, "#0072B2") > 1200  # KDTree's markers and cluster 0's colour are drawn
    keep = os.environ.get("EXCLUST_SCREENSHOTS")
    if keep:
        shutil.copyfile(shot, os.path.join(keep, "report_issue19.png"))


def test_the_standing_table_reads_right_in_a_browser(tmp_path):
    """The standing table (issue 21 item 5) as Chromium parses and draws it: one row per tree and the
    optimum, the run's own row highlighted, the best marked, under the headline figures."""
    from matplotlib.image import imread

    binary = _chromium()
    rows = [{"algorithm": name, "title": title, "n_leaves": 5, "cost": 10.0 * price, "price": price,
             "weighted_avg_depth": depth, "own": name == "exgreedy", "best": name == "exshallow",
             "gap": price / 1.01 - 1}
            for name, title, price, depth in (("exgreedy", "ExGreedy", 1.04, 2.6), ("imm", "IMM", 1.09, 2.8),
                                              ("exshallow", "ExShallow", 1.02, 2.1), ("cart", "CART", 1.31, 2.4))]
    standing = {"cost": "kmeans", "reference_cost": 10.0, "rows": rows, "fitted_on": "fitted on a sample",
                "optimum": {"cost": 10.1, "price": 1.01, "n_leaves": 5, "weighted_avg_depth": None}}
    tree, page = _five_cluster_tree(), tmp_path / "report.html"
    metrics = {"algorithm": "exgreedy", "k": 5, "d": 3, "n": 30_000, "price_kmeans": 1.04, "standing": standing}
    page.write_text(render_report(tree=tree, metrics=metrics, title="standing"), encoding="utf-8")
    dom = _run_chromium(binary, tmp_path, "--dump-dom", page.as_uri()).stdout
    table = dom[dom.index('<table class="standing">'):dom.index("</table>", dom.index('<table class="standing">'))]
    assert table.count("<tr data-algorithm=") == 5 and "optimum (exact)" in table
    assert '<tr data-algorithm="exgreedy" class="own">' in table and 'class="tag best">best' in table
    assert dom.index('id="standing"') < dom.index('id="tree"')
    shot = tmp_path / "standing.png"
    _run_chromium(binary, tmp_path, f"--screenshot={shot}", "--window-size=1280,900", page.as_uri())
    img = imread(str(shot))
    assert _pixels_near(img, "#eaf3fa", tol=0.01) > 3000, "the run's own row is not highlighted"
    assert _pixels_near(img, "#009E73", tol=0.02) > 100, "the best tree's tag is not drawn"
