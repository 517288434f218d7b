"""Human-readable concepts of small digit images, computed from the pixels themselves.

Paper 000 explains clusters of MNIST embeddings with four concepts taken from Crabbé and van der
Schaar (2022): loops, vertical lines, horizontal lines and curvature. There the concept labels come
from annotated images; here they are measured on the images, so the demonstration on
scikit-learn's 8x8 digits (``bench/paper_concepts.py``) needs no labelling by hand:

| concept | kind | measured as |
| --- | --- | --- |
| ``loop`` | binary | the image (upsampled 4x, thresholded) encloses background: a closed region off the border |
| ``vertical_line`` | binary | some column holds a run of dark pixels covering most of the image height |
| ``horizontal_line`` | binary | some row holds a run of ink covering most of the image width |
| ``curvature`` | continuous | how much the stroke turns locally: 1 - coherence of edge orientation, mean over edges |
| ``ink`` | continuous | mean pixel intensity |
| ``width`` | continuous | width of the ink's bounding box, as a share of the image width |

Images are scaled to [0, 1] by their maximum possible value (16 for scikit-learn's digits).
"""
from __future__ import annotations

import numpy as np
from scipy import ndimage as ndi

from exclust.errors import InputError

PAPER_CONCEPTS = ("loop", "vertical_line", "horizontal_line", "curvature")
ALL_CONCEPTS = PAPER_CONCEPTS + ("ink", "width")


def _as_images(images, max_value: float) -> np.ndarray:
    images = np.asarray(images, dtype=np.float64)
    if images.ndim != 3 or images.shape[0] == 0 or min(images.shape[1:]) < 3:
        raise InputError(f"expected a stack of images (n x height x width, at least 3x3), got shape {images.shape}")
    if not np.isfinite(images).all():
        raise InputError("images hold NaN or infinite pixels")
    if max_value <= 0:
        raise InputError(f"max_value must be positive, got {max_value}")
    return np.clip(images / max_value, 0.0, 1.0)


def longest_run(mask: np.ndarray) -> np.ndarray:
    """Per image (n x h x w mask), the longest run of True along any row."""
    n, h, w = mask.shape
    run = np.zeros((n, h), dtype=np.int64)
    best = np.zeros(n, dtype=np.int64)
    for j in range(w):
        run = np.where(mask[:, :, j], run + 1, 0)
        np.maximum(best, run.max(axis=1), out=best)
    return best


def count_loops(images, *, max_value: float = 16.0, upsample: int = 4, ink_level: float = 0.35,
                min_area: int = 3) -> np.ndarray:
    """Number of closed background regions (holes enclosed by ink) per image.

    The image is upsampled (bilinear) before thresholding so that a one-pixel gap at 8x8 does not
    decide alone whether a stroke closes; holes smaller than ``min_area`` upsampled pixels are noise.
    """
    images = _as_images(images, max_value)
    counts = np.zeros(images.shape[0], dtype=np.int64)
    for i, image in enumerate(images):
        ink = ndi.zoom(image, upsample, order=1) > ink_level
        regions, n = ndi.label(~ink)  # 4-connected background regions
        if n == 0:
            continue
        edge = np.unique(np.concatenate([regions[0], regions[-1], regions[:, 0], regions[:, -1]]))
        areas = np.bincount(regions.ravel(), minlength=n + 1)
        enclosed = np.ones(n + 1, dtype=bool)
        enclosed[0] = False
        enclosed[edge] = False
        counts[i] = int(np.count_nonzero(enclosed & (areas >= min_area)))
    return counts


def line_lengths(images, *, max_value: float = 16.0, level: float = 0.5) -> tuple[np.ndarray, np.ndarray]:
    """(longest horizontal run, longest vertical run) of pixels >= ``level``, as shares of width and height."""
    images = _as_images(images, max_value)
    ink = images >= level
    horizontal = longest_run(ink) / images.shape[2]
    vertical = longest_run(ink.transpose(0, 2, 1)) / images.shape[1]
    return horizontal, vertical


def curvature(
    images, *, max_value: float = 16.0, upsample: int = 4, smooth: float = 3.0, scale: float = 3.0
) -> np.ndarray:
    """1 - local coherence of edge orientation, averaged over edges weighted by edge strength.

    The structure tensor of the upsampled image, smoothed at ``scale`` (upsampled pixels), has
    coherence 1 where all nearby edges point one way (a straight stroke) and less where their
    direction turns (a curve; also a stroke's end). The image is blurred by ``smooth`` first so
    that the pixel staircase of a thin diagonal stroke does not count as turning.
    """
    images = _as_images(images, max_value)
    out = np.zeros(images.shape[0])
    for i, image in enumerate(images):
        big = ndi.gaussian_filter(ndi.zoom(image, upsample, order=1), smooth)
        gx, gy = ndi.sobel(big, axis=1), ndi.sobel(big, axis=0)
        jxx = ndi.gaussian_filter(gx * gx, scale)
        jyy = ndi.gaussian_filter(gy * gy, scale)
        jxy = ndi.gaussian_filter(gx * gy, scale)
        energy = jxx + jyy
        coherence = np.sqrt((jxx - jyy) ** 2 + 4 * jxy**2) / np.maximum(energy, 1e-12)
        strength = np.hypot(gx, gy)
        total = strength.sum()
        out[i] = float(((1.0 - coherence) * strength).sum() / total) if total > 0 else 0.0
    return out


def ink_width(images, *, max_value: float = 16.0, level: float = 0.25) -> np.ndarray:
    """Width of the bounding box of pixels >= ``level``, as a share of the image width (0 when blank)."""
    images = _as_images(images, max_value)
    columns = (images >= level).any(axis=1)
    width = np.zeros(images.shape[0])
    for i, used in enumerate(columns):
        idx = np.flatnonzero(used)
        if idx.size:
            width[i] = (idx[-1] - idx[0] + 1) / images.shape[2]
    return width


def digit_concepts(
    images,
    *,
    max_value: float = 16.0,
    names: tuple[str, ...] = ALL_CONCEPTS,
    vertical_share: float = 0.75,
    horizontal_share: float = 0.6,
) -> dict[str, np.ndarray]:
    """Concept labels per image: binary ones as 0/1 floats, continuous ones as floats (see module table).

    ``vertical_line`` uses dark pixels (>= 0.7) because the thick vertical strokes of small digits
    would otherwise make almost every digit tall enough; ``horizontal_line`` uses pixels >= 0.5.
    """
    unknown = [n for n in names if n not in ALL_CONCEPTS]
    if unknown:
        raise InputError(f"unknown digit concept(s) {unknown}; choose from {list(ALL_CONCEPTS)}")
    images = _as_images(images, max_value)
    out: dict[str, np.ndarray] = {}
    for name in names:
        if name == "loop":
            out[name] = (count_loops(images, max_value=1.0) >= 1).astype(np.float64)
        elif name == "vertical_line":
            _, vertical = line_lengths(images, max_value=1.0, level=0.7)
            out[name] = (vertical >= vertical_share).astype(np.float64)
        elif name == "horizontal_line":
            horizontal, _ = line_lengths(images, max_value=1.0, level=0.5)
            out[name] = (horizontal >= horizontal_share).astype(np.float64)
        elif name == "curvature":
            out[name] = curvature(images, max_value=1.0)
        elif name == "ink":
            out[name] = images.mean(axis=(1, 2))
        elif name == "width":
            out[name] = ink_width(images, max_value=1.0)
    return out
