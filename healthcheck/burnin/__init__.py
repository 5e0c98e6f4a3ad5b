"""Burn-in: GEMM stress, bandwidth tests, nccl-tests, DCGM diag, bad-node localisation."""
