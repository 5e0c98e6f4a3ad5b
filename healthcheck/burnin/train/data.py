"""The synthetic token stream: deterministic from a seed, with structure a small model can learn, no
download. Each sequence's first half walks a fixed sparse Markov chain (every token has 4 possible
successors, drawn once from the seed, with fixed unequal probabilities); its second half repeats the
first (a copy that only attention can predict). Step ``s``'s global batch comes from its own generator
seeded by (seed, s), so a resumed run sees the data an uninterrupted one saw, whatever the world size.
The probe sequence (row ``global_batch``) is forwarded by every rank and never trained on."""
from __future__ import annotations

import torch

SUCCESSORS = 4
_PROBS = (0.55, 0.25, 0.15, 0.05)


def chain(vocab: int, seed: int) -> torch.Tensor:
    """[vocab, SUCCESSORS] successor table of the Markov chain."""
    g = torch.Generator().manual_seed(seed * 7919 + 17)
    return torch.stack([torch.randperm(vocab, generator=g)[:SUCCESSORS] for _ in range(vocab)])


def global_batch(step: int, table: torch.Tensor, batch: int, seq_len: int, seed: int) -> torch.Tensor:
    """[batch + 1, seq_len + 1] int64 tokens of ``step`` (the last row is the probe, the same every step)."""
    vocab = table.shape[0]
    rows = [_sequences(torch.Generator().manual_seed(seed * 1_000_003 + step + 1), table, batch, seq_len),
            _sequences(torch.Generator().manual_seed(seed * 1_000_003), table, 1, seq_len)]
    out = torch.cat(rows)
    assert int(out.max()) < vocab
    return out


def _sequences(g: torch.Generator, table: torch.Tensor, n: int, seq_len: int) -> torch.Tensor:
    half = (seq_len + 2) // 2
    probs = torch.tensor(_PROBS)
    tokens = torch.empty(n, half, dtype=torch.int64)
    tokens[:, 0] = torch.randint(0, table.shape[0], (n,), generator=g)
    picks = torch.multinomial(probs.expand(n * half, -1), 1, replacement=True, generator=g).view(n, half)
    for t in range(1, half):
        tokens[:, t] = table[tokens[:, t - 1], picks[:, t]]
    return torch.cat([tokens, tokens], dim=1)[:, :seq_len + 1]


def shard(batch: torch.Tensor, rank: int, world: int) -> torch.Tensor:
    """This rank's rows: the probe first, then its contiguous slice of the global batch."""
    n = (batch.shape[0] - 1) // world
    return torch.cat([batch[-1:], batch[rank * n:(rank + 1) * n]])
