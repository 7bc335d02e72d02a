"""Text that parvox prints: counts in the number they ask for.

Examples
--------
>>> plural(1, "error"), plural(2, "warning")
('1 error', '2 warnings')
"""

from __future__ import annotations

__all__ = ["plural"]


def plural(n: int, word: str, words: str | None = None) -> str:
    """``n`` and ``word`` in the number ``n`` asks for: every count parvox prints goes here.

    Examples
    --------
    >>> plural(1, "component"), plural(3, "iteration"), plural(2, "pyramid level")
    ('1 component', '3 iterations', '2 pyramid levels')
    >>> plural(0, "extent"), plural(1, "rank"), plural(2, "index", "indices")
    ('0 extents', '1 rank', '2 indices')
    """
    return f"{n} {word if n == 1 else (words or word + 's')}"
