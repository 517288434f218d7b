"""Shown figures of the gallery: a picture written by ``exclust.save_figure`` displayed through
matplotlib, so that sphinx-gallery keeps it beside the example's code."""
from __future__ import annotations

import tempfile
from pathlib import Path

import matplotlib.pyplot as plt

import exclust


def show_figure(tree=None, what: str = "tree", title: str | None = None, **options):
    """Write the figure with ``exclust.save_figure`` as PNG and show it in a matplotlib window."""
    with tempfile.TemporaryDirectory() as tmp:
        path = exclust.save_figure(Path(tmp) / "figure.png", tree, what=what, **options)
        image = plt.imread(path)
    height, width = image.shape[:2]
    fig = plt.figure(figsize=(min(9.0, width / 100), min(9.0, width / 100) * height / width))
    ax = fig.add_axes((0, 0, 1, 1))
    ax.imshow(image)
    ax.axis("off")
    if title:
        ax.set_title(title)
    return fig
