"""A deliberately wrong kernel function for tests/test_crosshair.py.

Same contract as collspec.spec.kernel.block_bounds, with an off-by-one in the
start of every block after the first. CrossHair must find it.
"""


def block_bounds(counts: list[int], index: int) -> tuple[int, int]:
    """
    pre: all(c >= 0 for c in counts)
    pre: 0 <= index < len(counts)
    post: 0 <= __return__[0] <= __return__[1] <= sum(counts)
    post: __return__[1] - __return__[0] == counts[index]
    post: __return__[0] == sum(counts[:index])
    """
    start = sum(counts[:index]) + (1 if index > 0 else 0)
    return start, start + counts[index]
