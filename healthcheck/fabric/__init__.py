"""Commissioning the cluster as a whole, not node by node: the InfiniBand fabric graph and its declared
design (``graph``, ``design``, ``compare``), port counters across the fabric, node topology and P2P
bandwidth. Pure modules (data in, findings out); the I/O lives in the CLI modules. See docs/fabric.md."""
