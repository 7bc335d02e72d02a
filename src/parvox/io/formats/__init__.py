"""One module per format of :mod:`parvox.io`: a reader and, where parvox writes it, a writer.

The registry (:mod:`parvox.io.registry`) maps format names to these classes.
"""

__all__: list[str] = []
