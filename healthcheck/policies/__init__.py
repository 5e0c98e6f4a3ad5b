"""Policies as data: the Xid table (``xid``), the host-event classes (``host_events``), the
clock-event reasons per context (``throttle``); the one loader of the packaged policy files
(``loader``) and the vetting of every pattern matched against others' text (``regexvet``)."""
