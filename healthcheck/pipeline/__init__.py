"""The spine: a node's snapshot (``acquire``: a recorded bundle or live probes), the resolved
expectations for that node (``expectations``) and the judging of the one by the other (``judge``:
select the checks of a context, run them, build the Verdict)."""
