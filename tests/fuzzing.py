"""Hypothesis strategies shared by the parser fuzz tests: real inputs, damaged."""
from __future__ import annotations

from hypothesis import strategies as st


@st.composite
def mutated(draw, seeds: list[str], edits: int = 4) -> str:
    """A seed, maybe truncated, with up to ``edits`` spans replaced by random text."""
    text = draw(st.sampled_from(seeds))
    if draw(st.booleans()):
        text = text[: draw(st.integers(0, len(text)))]
    for _ in range(draw(st.integers(0, edits))):
        at = draw(st.integers(0, len(text)))
        drop = draw(st.integers(0, 40))
        text = text[:at] + draw(st.text(max_size=30)) + text[at + drop:]
    return text


@st.composite
def spliced(draw, seeds: list[str]) -> str:
    """A short seed (one sysfs value) cut somewhere, with a few random characters inserted or not."""
    base = draw(st.sampled_from(seeds))
    cut = draw(st.integers(0, len(base)))
    return base[:cut] + draw(st.text(max_size=4)) + base[cut:] if draw(st.booleans()) else base[:cut]
