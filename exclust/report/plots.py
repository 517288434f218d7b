"""Pictures drawn from a sample: the scatter with the tree's cuts, the cost-vs-leaves curve, the
tree-by-reference contingency heat map. matplotlib is imported only when a plot is drawn; its
points are rasterized into the SVG to keep the page small.
"""
from __future__ import annotations

import hashlib
import io
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from exclust.tree import CATEGORY_SET, LEAF, ONE_SIDED, ThresholdTree
from exclust.tree.drawing import tree_layout
from exclust.tree.style import FONT_STACK, category_text, esc, fmt_num, palette_for, scoped_css


# ---------------------------------------------------------------------------- scatter with cuts
def choose_scatter_features(tree: ThresholdTree, X_sample: np.ndarray | None = None) -> tuple[int, int]:
    """The two features to plot: both when d = 2, else the first two distinct features met from the root."""
    d = tree.n_features
    if d == 1:
        return (0, 0)
    if d == 2:
        return (0, 1)
    seen: list[int] = []
    frontier = [0]
    while frontier and len(seen) < 2:
        nxt: list[int] = []
        for node in frontier:
            if tree.kind[node] != LEAF:
                f = int(tree.feature[node])
                if f not in seen:
                    seen.append(f)
                nxt.extend((int(tree.left[node]), int(tree.right[node])))
        frontier = nxt
    if len(seen) < 2:
        # fill with the most spread-out remaining feature, so the picture shows the data's shape
        if X_sample is not None and len(X_sample):
            spread = np.nanstd(np.asarray(X_sample, dtype=float), axis=0)
            candidates = [j for j in np.argsort(-spread) if j not in seen]
        else:
            candidates = [j for j in range(d) if j not in seen]
        seen.extend(int(j) for j in candidates[: 2 - len(seen)])
    return (seen[0], seen[1])


Box = tuple[float, float, float, float]  # xmin, xmax, ymin, ymax


def _clip_box(box: Box, axis: int, lo: float, hi: float) -> Box | None:
    b = list(box)
    i = 0 if axis == 0 else 2
    b[i], b[i + 1] = max(b[i], lo), min(b[i + 1], hi)
    return tuple(b) if b[i] < b[i + 1] else None  # type: ignore[return-value]


def cut_regions(tree: ThresholdTree, features: tuple[int, int], limits: Box) -> dict[int, list[Box]]:
    """For every node, the region of the plotted plane that reaches it, as a list of boxes.

    A cut on a feature that is not plotted leaves both children the parent's region (the plane
    is a projection). An interval cut's *outside* branch is the band's complement, which is up to
    two boxes; that is why a region is a list of boxes and not one box. A category-set cut is drawn as no line
    (its sides are sets of codes, not a half-plane): both children keep the parent's region.
    """
    fx, fy = features
    regions: dict[int, list[Box]] = {0: [limits]}
    stack = [0]
    while stack:
        node = stack.pop()
        if tree.kind[node] == LEAF:
            continue
        left, right = int(tree.left[node]), int(tree.right[node])
        f, t = int(tree.feature[node]), float(tree.threshold[node])
        axes = [a for a, fa in ((0, fx), (1, fy)) if fa == f]
        if fx == fy:
            axes = [0]
        if not axes or tree.kind[node] == CATEGORY_SET:
            regions[left], regions[right] = list(regions[node]), list(regions[node])
        elif tree.kind[node] == ONE_SIDED:
            a = axes[0]
            regions[left] = [b for b in (_clip_box(r, a, -math.inf, t) for r in regions[node]) if b]
            regions[right] = [b for b in (_clip_box(r, a, t, math.inf) for r in regions[node]) if b]
        else:
            a = axes[0]
            c = float(tree.center[node])
            lo, hi = c - t, c + t
            regions[left] = [b for b in (_clip_box(r, a, lo, hi) for r in regions[node]) if b]
            outside = []
            for r in regions[node]:
                for part in (_clip_box(r, a, -math.inf, lo), _clip_box(r, a, hi, math.inf)):
                    if part:
                        outside.append(part)
            regions[right] = outside
        stack.extend((left, right))
    return regions


def import_plotting() -> None:
    """Import what drawing a plot imports: matplotlib on its Agg backend, the figure, the patches and
    the SVG backend (about 0.5-0.7 CPU s in a fresh process, most of the explain job's report step),
    so that a caller with time to wait elsewhere pays for them there (the explain job: while the
    workers read its input, ``jobs.explain.held_load.import_later_steps``). Every plot and figure calls
    it first, so the backend is chosen in this one place."""
    import matplotlib

    matplotlib.use("Agg", force=False)
    import matplotlib.backends.backend_agg  # noqa: F401 - the scatter's points are rasterized by it
    import matplotlib.backends.backend_svg  # noqa: F401
    import matplotlib.figure  # noqa: F401
    import matplotlib.patches  # noqa: F401
    import matplotlib.ticker  # noqa: F401


def _svg_from_figure(fig, salt: str, css_class: str, label: str) -> str:
    """Render a matplotlib figure as an inline, responsive SVG without XML prolog or external references."""
    import matplotlib

    buf = io.StringIO()
    with matplotlib.rc_context({"svg.fonttype": "none", "svg.hashsalt": salt}):
        fig.savefig(buf, format="svg", bbox_inches="tight", dpi=144,
                    metadata={"Date": None, "Creator": None, "Format": None, "Type": None})
    svg = buf.getvalue()
    svg = svg[svg.index("<svg"):]
    # size comes from the page (width:100%), shape from the viewBox
    head_end = svg.index(">")
    head = svg[:head_end]
    head = re.sub(r'\s(width|height)="[^"]*"', "", head, count=2)
    vb = re.search(r'viewBox="[-0-9.]+ [-0-9.]+ ([0-9.]+)', head)
    # never blow a figure up much beyond its drawn size: its text would grow with it
    cap = f";max-width:{float(vb.group(1)) * 96 / 72 * 1.2:.0f}px;display:block;margin:0 auto" if vb else ""
    head += f' class="{css_class}" role="img" aria-label="{esc(label)}" style="width:100%;height:auto{cap}"'
    body = re.sub(r"(<style[^>]*>)(.*?)(</style>)",
                  lambda m: m.group(1) + scoped_css(m.group(2), f"svg.{css_class}") + m.group(3),
                  svg[head_end:], flags=re.S)
    return head + body


def scatter_svg(
    X_sample,
    labels=None,
    tree: ThresholdTree | None = None,
    features: tuple[int, int] | None = (0, 1),
    feature_names: Sequence[str] | None = None,
    title: str | None = None,
    *,
    cluster_colors: Sequence[str] | None = None,
    max_points: int = 5000,
    random_state: int = 0,
    as_figure: bool = False,
) -> Any:
    """A scatter of a sample on two features, coloured by cluster, with the tree's cuts drawn in their regions
    (SVG text; the matplotlib Figure when ``as_figure``, for ``exclust.report.save_figure``)."""
    import_plotting()
    from matplotlib.figure import Figure
    from matplotlib.patches import Rectangle

    if tree is None:
        raise ValueError("scatter_svg needs the tree whose cuts it draws (tree=...)")
    X = np.asarray(X_sample, dtype=float)
    if X.ndim != 2 or X.shape[1] != tree.n_features:
        raise ValueError(
            f"X_sample must be a (rows, {tree.n_features}) array like the tree's data; got shape {X.shape}"
        )
    if features is None:
        features = choose_scatter_features(tree, X)
    fx, fy = (int(features[0]), int(features[1]))
    for f in (fx, fy):
        if not 0 <= f < tree.n_features:
            raise ValueError(f"feature index {f} is outside [0, {tree.n_features}); pick two of the tree's features")
    names = list(feature_names) if feature_names is not None else list(tree.feature_names)
    labels = tree.predict(X) if labels is None else np.asarray(labels).astype(np.int64).ravel()
    if labels.shape[0] != X.shape[0]:
        raise ValueError(f"labels has {labels.shape[0]} entries for {X.shape[0]} sample rows")
    keep = np.isfinite(X[:, fx]) & np.isfinite(X[:, fy])
    X, labels = X[keep], labels[keep]
    if X.shape[0] > max_points:
        idx = np.random.default_rng(random_state).choice(X.shape[0], max_points, replace=False)
        X, labels = X[np.sort(idx)], labels[np.sort(idx)]

    one_d = fx == fy
    xs = X[:, fx]
    ys = (np.random.default_rng(random_state).uniform(0, 1, X.shape[0]) if one_d else X[:, fy])

    def lims(v: np.ndarray, cuts: Iterable[float]) -> tuple[float, float]:
        vals = (np.concatenate([v, np.asarray(list(cuts), dtype=float)]) if len(v)
                else np.asarray(list(cuts) or [0.0, 1.0]))
        lo, hi = float(np.min(vals)), float(np.max(vals))
        if hi <= lo:
            lo, hi = lo - 0.5, hi + 0.5
        pad = 0.05 * (hi - lo)
        return lo - pad, hi + pad

    internal = np.flatnonzero(tree.kind != LEAF)

    def cut_positions(feat: int) -> list[float]:
        out: list[float] = []
        for n in internal:
            if int(tree.feature[n]) != feat or tree.kind[n] == CATEGORY_SET:
                continue
            if tree.kind[n] == ONE_SIDED:
                out.append(float(tree.threshold[n]))
            else:
                out += [float(tree.center[n] - tree.threshold[n]), float(tree.center[n] + tree.threshold[n])]
        return out

    # cuts far outside the data would squash the points; only include cuts near the sample's range
    def near(v: np.ndarray, cuts: list[float]) -> list[float]:
        if not len(v):
            return cuts
        lo, hi = float(np.min(v)), float(np.max(v))
        span = max(hi - lo, 1e-12)
        return [c for c in cuts if lo - 0.25 * span <= c <= hi + 0.25 * span]

    xlim = lims(xs, near(xs, cut_positions(fx)))
    ylim = (-0.05, 1.05) if one_d else lims(ys, near(ys, cut_positions(fy)))
    regions = cut_regions(tree, (fx, fy), (xlim[0], xlim[1], ylim[0], ylim[1]))

    palette = palette_for(tree, cluster_colors)
    k = len(palette)
    fig = Figure(figsize=(6.4, 5.0) if not one_d else (6.4, 2.8))
    ax = fig.add_subplot(1, 1, 1)
    depths = tree_layout(tree)[1]
    max_depth = max(depths.values()) or 1

    for n in internal:
        f = int(tree.feature[n])
        if f not in (fx, fy) or tree.kind[n] == CATEGORY_SET:  # a set of categories is no line
            continue
        axis = 0 if f == fx else 1
        lw = 2.4 - 1.4 * depths[int(n)] / max_depth  # the root's cut is the boldest
        for (x0, x1, y0, y1) in regions[int(n)]:
            if tree.kind[n] == ONE_SIDED:
                t = float(tree.threshold[n])
                if axis == 0 and x0 < t < x1:
                    ax.plot([t, t], [y0, y1], color="#222222", lw=lw, zorder=4, solid_capstyle="butt",
                            gid=f"cut-node-{int(n)}")
                elif axis == 1 and y0 < t < y1:
                    ax.plot([x0, x1], [t, t], color="#222222", lw=lw, zorder=4, solid_capstyle="butt",
                            gid=f"cut-node-{int(n)}")
            else:
                c, t = float(tree.center[n]), float(tree.threshold[n])
                lo, hi = c - t, c + t
                if axis == 0:
                    a, b = max(lo, x0), min(hi, x1)
                    if a >= b:
                        continue
                    rect = Rectangle((a, y0), b - a, y1 - y0)
                    edges = [([lo, lo], [y0, y1]) if x0 < lo < x1 else None,
                             ([hi, hi], [y0, y1]) if x0 < hi < x1 else None]
                else:
                    a, b = max(lo, y0), min(hi, y1)
                    if a >= b:
                        continue
                    rect = Rectangle((x0, a), x1 - x0, b - a)
                    edges = [([x0, x1], [lo, lo]) if y0 < lo < y1 else None,
                             ([x0, x1], [hi, hi]) if y0 < hi < y1 else None]
                rect.set(facecolor="#4b4f8c", alpha=0.12, edgecolor="none", zorder=1,
                         gid=f"interval-band-node-{int(n)}")
                ax.add_patch(rect)
                for e in edges:
                    if e:
                        ax.plot(*e, color="#4b4f8c", lw=lw, ls=(0, (4, 2)), zorder=4, gid=f"cut-node-{int(n)}")

    size = 14.0 if X.shape[0] <= 1000 else (8.0 if X.shape[0] <= 3000 else 5.0)
    present = np.unique(labels)
    for c in present:
        m = labels == c
        color = palette[int(c) % k] if c >= 0 else "#9aa3ad"
        ax.scatter(xs[m], ys[m], s=size, c=color, alpha=0.75, linewidths=0, rasterized=True, zorder=2,
                   label=f"cluster {int(c)}" if c >= 0 else "noise (−1)")
    ax.set_xlim(*xlim)
    ax.set_ylim(*ylim)
    ax.set_xlabel(names[fx])
    if one_d:
        ax.set_yticks([])
        ax.set_ylabel("(spread out to show density)")
    else:
        ax.set_ylabel(names[fy])
    _category_ticks(ax, tree, fx, fy, one_d)
    for side in ("top", "right"):
        ax.spines[side].set_visible(False)
    ax.tick_params(colors="#444444", labelsize=9)
    ax.grid(True, color="#e8ebee", lw=0.6, zorder=0)
    ax.set_axisbelow(True)
    if title:
        ax.set_title(title, loc="left", fontsize=11)
    if 1 < len(present) <= 12:
        ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False, fontsize=8.5,
                  markerscale=1.8 if size < 10 else 1.0, handletextpad=0.3)
    if as_figure:
        return fig
    salt = hashlib.sha1(f"scatter{fx},{fy},{X.shape}{title}".encode()).hexdigest()[:10]
    label = (f"Scatter of {X.shape[0]:,} sample points on {names[fx]}" + ("" if one_d else f" and {names[fy]}")
             + " with the tree's cuts")
    return _svg_from_figure(fig, salt, "scatter-svg", label)


def _category_ticks(ax, tree: ThresholdTree, fx: int, fy: int, one_d: bool, most: int = 12) -> None:
    """A category feature's axis ticks at its codes, labelled with its values (up to ``most`` values)."""
    for f, axis in ((fx, ax.xaxis), (fy, None if one_d else ax.yaxis)):
        values = tree.categories.get(f)
        if axis is not None and values and len(values) <= most:
            axis.set_ticks(range(len(values)), labels=[category_text(v) for v in values])


# ---------------------------------------------------------------------------- cost curve
# The cost a curve shows, by its "cost" field (exclust.scoring.curves.CURVE_COSTS); a curve without one is k-means.
CURVE_COST_WORDS = {
    "kmeans": "k-means cost",
    "kmedians-surrogate": "k-medians surrogate cost (l1, each cluster to its cheapest reference center)",
}
_CURVE_AXIS = {"kmeans": "k-means cost ratio (tree / reference)",
               "kmedians-surrogate": "k-medians surrogate cost ratio (l1, tree / reference)"}


def curve_cost_words(curve: Mapping[str, Any]) -> str:
    """What the curve's ratios divide, in words: "k-means cost" unless its ``cost`` field says otherwise."""
    return CURVE_COST_WORDS.get(str(curve.get("cost", "kmeans")), f"{curve.get('cost')} cost")

_CURVE_STYLE = {
    "exkmc": dict(label="ExKMC", color="#111111", marker="o", ls="-", lw=2.2, zorder=5),
    "imm": dict(label="IMM", color="#CC79A7", marker="*", ls="none", ms=13, zorder=6),
    "cart": dict(label="CART", color="#E69F00", marker="s", ls="--", lw=1.6, zorder=4),
    "kdtree": dict(label="KDTree", color="#0072B2", marker="^", ls=":", lw=1.8, zorder=3),
    "exkmc_surrogate": dict(label="ExKMC, surrogate cost", color="#009E73", marker="v", ls="-", lw=1.4, zorder=4),
}
# The baselines: a curve is drawn to show the tree being explained, so a baseline far above it is
# cut off at the top (its legend entry says how high it goes) rather than squashing the others.
_CURVE_BASELINES = ("cart", "kdtree")


def _series_points(leaves: np.ndarray, series: Any) -> tuple[np.ndarray, np.ndarray]:
    if isinstance(series, Mapping):
        pairs = sorted((float(a), float("nan") if b is None else float(b)) for a, b in series.items())
        x = np.array([p[0] for p in pairs])
        y = np.array([p[1] for p in pairs])
    elif np.ndim(series) == 0:
        # one number: the tree exists at one size only (IMM has exactly k leaves)
        x = leaves[:1].astype(float)
        y = np.array([float("nan") if series is None else float(series)])
    else:
        y = np.array([float("nan") if v is None else float(v) for v in series])
        if y.shape[0] != leaves.shape[0]:
            raise ValueError(f"a curve series has {y.shape[0]} values for {leaves.shape[0]} leaf counts")
        x = leaves.astype(float)
    ok = np.isfinite(y)
    return x[ok], y[ok]


def cost_curve_svg(curve: Mapping[str, Any], *, title: str | None = None, as_figure: bool = False) -> Any:
    """Cost ratio (tree / reference) against the number of leaves, one line per method, a dashed line at 1
    (SVG text; the matplotlib Figure when ``as_figure``, for ``exclust.report.save_figure``)."""
    import_plotting()
    from matplotlib.figure import Figure

    if "leaves" not in curve:
        raise ValueError("the curve needs a 'leaves' list (number of leaves of each tree) besides its series")
    leaves = np.asarray(curve["leaves"], dtype=float)
    fig = Figure(figsize=(6.4, 3.8))
    ax = fig.add_subplot(1, 1, 1)
    skip = {"leaves", "k", "title", "dataset", "baselines", "cost", "reference_cost"}  # not series
    series = {}
    for name in list(_CURVE_STYLE) + [n for n in curve if n not in _CURVE_STYLE and n not in skip]:
        if name in curve and curve[name] is not None:
            x, y = _series_points(leaves, curve[name])
            if len(y):
                series[name] = (x, y)
    every = [y for _, y in series.values()]
    ymin = min([1.0] + [float(np.min(y)) for y in every])
    ymax = max([1.0] + [float(np.max(y)) for y in every])
    main = [y for name, (_, y) in series.items() if name not in _CURVE_BASELINES] or every
    main_top = max([1.0] + [float(np.max(y)) for y in main])
    # Clip the baselines above 1.5x the span of the explained tree's own curve (at least 0.1 above 1).
    clip = main_top + 1.5 * max(main_top - ymin, 0.1)
    top = min(ymax, clip)
    for name, (x, y) in series.items():
        style: dict[str, Any] = dict(
            _CURVE_STYLE.get(name, dict(label=str(name).replace("_", " "), marker="d", ls="-.", lw=1.4)))
        style.setdefault("ms", 5)
        above = y > top * 1.0001
        if above.any():
            style["label"] = f"{style['label']} (up to {fmt_num(float(np.max(y)))}, above the plot)"
        line, = ax.plot(x, y, gid=f"series-{name}", **style)
        if above.any():  # the points above, marked at the top edge
            ax.plot(x[above], np.full(int(above.sum()), top), ls="none", marker="^", ms=7, clip_on=False,
                    color=line.get_color(), zorder=6, gid=f"series-{name}-above")
    ax.axhline(1.0, color="#666666", ls="--", lw=1.1, zorder=1, gid="reference-line", label="reference clustering = 1")
    if curve.get("k") is not None:
        ax.axvline(float(curve["k"]), color="#bbbbbb", ls=":", lw=1, zorder=0)
        ax.text(float(curve["k"]), 1.0, " k", transform=ax.get_xaxis_transform(), va="top", fontsize=8.5,
                color="#777777")
    span = max(top - ymin, 0.02)
    ax.set_ylim(ymin - 0.06 * span, top + 0.06 * span)
    ax.set_xlabel("number of leaves")
    ax.set_ylabel(_CURVE_AXIS.get(str(curve.get("cost", "kmeans")), "cost ratio (tree / reference)"))
    for side in ("top", "right"):
        ax.spines[side].set_visible(False)
    ax.grid(True, color="#e8ebee", lw=0.6)
    ax.set_axisbelow(True)
    if leaves.size and np.all(leaves == np.round(leaves)):
        from matplotlib.ticker import MaxNLocator

        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    if title or curve.get("title"):
        ax.set_title(str(title or curve.get("title")), loc="left", fontsize=11)
    # under the plot, so that no entry hides a line and no line crosses a label (beside it, it would
    # widen the figure and shrink its text in the report's half-width column)
    ax.legend(frameon=False, fontsize=9, loc="upper center", bbox_to_anchor=(0.5, -0.2), ncol=2, borderaxespad=0.0)
    if as_figure:
        return fig
    salt = hashlib.sha1(f"curve{sorted(map(str, curve))}{leaves.tolist()}".encode()).hexdigest()[:10]
    what = curve_cost_words(curve).split(" (")[0]
    return _svg_from_figure(fig, salt, "curve-svg", f"{what[0].upper()}{what[1:]} ratio against number of leaves")




def contingency_svg(table, palette: Sequence[str], *, row_label: str = "tree cluster",
                    col_label: str = "reference cluster") -> str:
    """A heat map of a contingency table: one row per tree cluster, shaded by the share of that row."""
    t = np.asarray(table, dtype=float)
    if t.ndim != 2 or t.size == 0:
        raise ValueError(f"a contingency table must be a non-empty 2-D array, got shape {t.shape}")
    r, c = t.shape
    cell = 34.0 if max(r, c) <= 12 else (22.0 if max(r, c) <= 25 else 14.0)
    show_numbers = max(r, c) <= 12
    left, top = 70.0, 46.0
    width, height = left + c * cell + 10, top + r * cell + 10
    row_sums = t.sum(axis=1, keepdims=True)
    grid = "".join(
        f'<rect x="{left + j * cell:.1f}" y="{top + i * cell:.1f}" width="{cell - 2:.1f}" height="{cell - 2:.1f}" '
        'rx="3"/>'
        for i in range(r) for j in range(c)
    ) if r * c <= 400 else ""
    parts_bg = (f'<g fill="#f1f3f5">{grid}</g>' if grid else
                f'<rect x="{left:.1f}" y="{top:.1f}" width="{c * cell - 2:.1f}" height="{r * cell - 2:.1f}" '
                'fill="#f6f7f9"/>')
    share = np.divide(t, row_sums, out=np.zeros_like(t), where=row_sums > 0)
    parts = [
        parts_bg,
        f'<text x="{left + c * cell / 2:.1f}" y="14" class="axis">{esc(col_label)} →</text>',
        f'<text x="12" y="{top + r * cell / 2:.1f}" class="axis" transform="rotate(-90 12 {top + r * cell / 2:.1f})">'
        f"← {esc(row_label)}</text>",
    ]
    every = 1 if cell >= 20 else 5  # two-digit ids do not fit over narrow cells
    for j in range(0, c, every):
        parts.append(f'<text x="{left + (j + 0.5) * cell:.1f}" y="{top - 8:.1f}" class="tick">{j}</text>')
    for i in range(r):
        y = top + i * cell
        parts.append(f'<rect x="{left - 26:.1f}" y="{y + cell / 2 - 6:.1f}" width="12" height="12" rx="3" '
                     f'fill="{palette[i % len(palette)]}"/>')
        if i % every == 0:
            parts.append(f'<text x="{left - 6:.1f}" y="{y + cell / 2 + 4:.1f}" class="tick" '
                         f'text-anchor="end">{i}</text>')
        for j in range(c):
            v = share[i, j]
            if t[i, j] <= 0:
                continue  # the grid behind shows through: big tables stay small files
            parts.append(
                f'<rect class="cell" x="{left + j * cell:.1f}" y="{y:.1f}" width="{cell - 2:.1f}" '
                f'height="{cell - 2:.1f}" rx="3" fill="rgba(0,114,178,{0.06 + 0.94 * v:.3f})"><title>tree {i} · ref '
                f'{j}: {int(t[i, j]):,} ({v:.1%})</title></rect>'
            )
            if show_numbers and t[i, j] > 0:
                ink = "#fff" if v > 0.55 else "#1d2630"
                parts.append(f'<text x="{left + j * cell + cell / 2 - 1:.1f}" y="{y + cell / 2 + 3:.1f}" class="num" '
                             f'fill="{ink}">{esc(_compact_count(t[i, j]))}</text>')
    style = (f"text{{font-family:{FONT_STACK};text-anchor:middle}}.axis{{font-size:12px;fill:#5d6873}}"
             ".tick{font-size:11px;fill:#5d6873}.num{font-size:10px}")
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" class="contingency-svg" role="img" '
        f'aria-label="tree clusters against reference clusters" viewBox="0 0 {width:.0f} {height:.0f}" '
        f'style="display:block;width:100%;max-width:{width * 1.15:.0f}px;height:auto">'
        f"<style>{scoped_css(style, 'svg.contingency-svg')}</style>"
        + "".join(parts) + "</svg>"
    )


def _compact_count(v: float) -> str:
    v = float(v)
    if v >= 1e6:
        return f"{v / 1e6:.3g}M"
    if v >= 1e4:
        return f"{v / 1e3:.3g}k"
    return f"{int(v)}"


