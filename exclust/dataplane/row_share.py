"""A reduction of a pass over a pseudo-random share of the rows (``on_row_share``): statistics a sample gives to
the digits shown, at a fraction of a full sweep's kernel time, riding in the same pass as the others (the standing
table's trees at many rows)."""
from __future__ import annotations

from dataclasses import replace

import numpy as np

from exclust.dataplane._row_hash import rows_below
from exclust.dataplane.parts import Reduction


def on_row_share(reduction: Reduction, share: float, seed: int) -> Reduction:
    """``reduction`` over a pseudo-random ``share`` of the rows: a Bernoulli sample, each global row kept where its
    ``row_uniforms(seed, ...)`` number is below ``share`` (``_row_hash.rows_below``; so the same rows however the data
    are parted), its column blocks cut alike."""
    if reduction.with_offset or reduction.per_part is not None:
        raise ValueError("on_row_share takes a reduction of rows alone (no offset, no per-part values)")
    return replace(reduction, func=_on_kept_rows, with_offset=True,
                   args=(share, seed, reduction.func, tuple(reduction.args)))


def _on_kept_rows(offset: int, block, *rest):
    """``func(kept block rows, *kept column rows, *args)``; rest = (*column blocks, share, seed, func, args)."""
    columns, (share, seed, func, args) = rest[:-4], rest[-4:]
    keep = rows_below(seed, offset, offset + block.shape[0], share)
    return func(np.asarray(block)[keep], *[np.asarray(c)[keep] for c in columns], *args)
