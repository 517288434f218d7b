"""What a node of a ``ThresholdTree`` is: the node kinds, the side missing values take, and the code of a
category the tree never saw; shared by the tree, its file format, the routing kernels and the report. Plain
constants, importing nothing, so numba kernels may read them."""

LEAF = 0
ONE_SIDED = 1  # go left when x[f] <= threshold
INTERVAL = 2  # go left when |x[f] - center| <= threshold (the point lies inside the band)
CATEGORY_SET = 3  # go left when the category code x[f] is in the node's set left_categories[node]

# Where a missing value (NaN; at a CATEGORY_SET node also an unseen category) goes at an internal node.
MISSING_LEFT = 0
MISSING_RIGHT = 1
MISSING_NONE = -1  # not learned (trees written before issue 28): such a row is not routed, its label is -1

UNSEEN_CATEGORY = -1.0  # the code of a category value not in the tree's vocabulary (at predict / label time)
# tree.meta key: the features that could hold missing values at fit. Where it is present, the rules and
# drawings say "or missing" only for those features (elsewhere a cut's side is a default, not learned).
MISSING_AT_FIT = "missing_at_fit"
