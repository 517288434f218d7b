"""Data that exclust makes rather than reads: the papers' synthetic mixtures (``synthetic.py``) and
the digit-concept demonstration (``concepts_digits.py``, which needs ``scipy.ndimage``). Nothing in the
core library imports this package; import the module you need.
"""
