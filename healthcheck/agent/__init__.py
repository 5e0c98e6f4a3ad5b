"""The resident agent (systemd) that serves the hooks in milliseconds: ``main`` (spare workers forked
ahead, the socket and the upgrade check), ``door`` (the FIFO the bash hooks knock at, and who may knock),
``work`` (what its processes run around the hook). It runs :mod:`healthcheck.hook.run`, never its own
judgement."""
