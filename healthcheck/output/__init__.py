"""Output writers of a verdict: text and the JSON contract (``render``), the Prometheus
exposition (``prometheus``)."""
