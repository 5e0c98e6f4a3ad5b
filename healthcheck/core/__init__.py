"""The shared vocabulary and cheap helpers: what every layer, the hot path included, may import.

``model`` (Snapshot, Finding, Verdict, Status: what a reading and a judgement are), ``codec`` (plain
dicts back into the model), ``struct`` (the ``@record`` class shape the model is built with),
``exitcodes`` (the one exit-code table), ``extras`` (which optional extra a command needs), and the
hot path's lean stand-ins: ``lazyre``, ``lazylog``, ``jsonwrite``, ``strpath``, ``textsafe``,
``timespec``. Imports nothing above itself (``tests/test_import_graph.py``)."""
