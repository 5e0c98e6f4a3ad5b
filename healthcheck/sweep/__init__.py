"""The nightly sweep: burn-in of idle nodes and of nodes we drained, within a budget, then drain or
resume under the ownership rules and the blast-radius limit, and the readiness report."""
