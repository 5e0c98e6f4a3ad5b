"""The node-local spool: the one shape of a run record and an action record (``entries``),
the lean durable append the prolog uses (``append``) and the reader and writer built on it (``store``).
The history ingests what is spooled here (``healthcheck.history``)."""
