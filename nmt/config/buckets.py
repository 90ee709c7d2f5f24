"""The source-length bucket syntax of reports and options: ``1-10,11-20,21-``."""

from __future__ import annotations


def parse_buckets(text: str, option: str = "--buckets") -> tuple[tuple[int, int | None], ...]:
    """Parse ``"1-10,11-20,21-30,31-"`` (a trailing ``-`` or ``+`` means no upper bound).

    Raises:
        ValueError: malformed, empty, overlapping or unordered ranges.
    """
    buckets: list[tuple[int, int | None]] = []
    for part in text.split(","):
        part = part.strip()
        if not part:
            raise ValueError(f"{option}: empty range in {text!r}")
        if part.endswith("+") or part.endswith("-"):
            lo, hi = part[:-1], None
        elif "-" in part:
            lo, hi_s = part.split("-", 1)
            hi = int(hi_s) if hi_s.strip().isdigit() else None
            if hi is None:
                raise ValueError(f"{option}: bad range {part!r}; use e.g. 1-10,11-20,21-")
        else:
            raise ValueError(f"{option}: bad range {part!r}; use e.g. 1-10,11-20,21-")
        if not lo.strip().isdigit():
            raise ValueError(f"{option}: bad range {part!r}; use e.g. 1-10,11-20,21-")
        lo_i = int(lo)
        if lo_i < 1:
            raise ValueError(f"{option}: range {part!r} starts below 1 word")
        if hi is not None and hi < lo_i:
            raise ValueError(f"{option}: range {part!r} ends before it starts")
        if buckets and (buckets[-1][1] is None or lo_i <= buckets[-1][1]):
            raise ValueError(f"{option}: range {part!r} overlaps or precedes the one before")
        buckets.append((lo_i, hi))
    if not buckets:
        raise ValueError(f"{option}: no range given")
    return tuple(buckets)
