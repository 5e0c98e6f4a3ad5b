"""Bundles: a node's readings recorded as a directory or tarball so the same judgement runs anywhere:
the layout and its reading back into a Snapshot (``archive``), the files recorded and the safe copy of an
untrusted folder (``files``), and ``healthcheck collect`` (``collect``: probe live, record a bundle)."""
