"""What a node of a ``ThresholdTree`` is: the node kinds, shared by the tree, its file format,
the routing kernels and the report. Plain constants, importing nothing, so numba kernels may read them."""

LEAF = 0
ONE_SIDED = 1  # go left when x[f] <= threshold
INTERVAL = 2  # go left when |x[f] - center| <= threshold (the point lies inside the band)
