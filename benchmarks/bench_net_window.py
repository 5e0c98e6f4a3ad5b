"""What issue 32's network reads cost the prolog: the Ethernet ports' sysfs counters (probes.netdev) and
the hooks' memory of their growth (hook.net_window: read, update, atomic write of net-counters.txt),
on this machine's /sys and on a fixture tree of an HGX-like node (8 RoCE ports, 8 RDMA ports).

    .venv/bin/python benchmarks/bench_net_window.py [--repeat 200]
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from healthcheck.core.model import IbPort, Snapshot  # noqa: E402
from healthcheck.hook.net_window import keep_readings  # noqa: E402
from healthcheck.probes.netdev import probe_net_ports  # noqa: E402
from tests.probes.test_netdev import add_netdev  # noqa: E402


def timed(fn, repeat: int) -> float:
    samples = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - start)
    return statistics.median(samples) * 1000.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=200)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "sys"
        for i in range(8):
            add_netdev(root, f"ens{i}np0", addr=f"0000:{0x1a + i:02x}:00.0", rdma=f"mlx5_{i}",
                       stats={"rx_crc_errors": 0, "rx_frame_errors": 0, "rx_length_errors": 0,
                              "tx_carrier_errors": 0, "rx_missed_errors": 0, "rx_fifo_errors": 0,
                              "rx_over_errors": 0})
        live = timed(lambda: probe_net_ports("/sys"), args.repeat)
        fixture = timed(lambda: probe_net_ports(str(root)), args.repeat)
        ports = probe_net_ports(str(root))
        ib = [IbPort(f"mlx5_{i}", 1, counters={c: 0 for c in ("symbol_error", "port_rcv_errors", "link_downed",
                                                               "link_error_recovery", "hw_out_of_sequence",
                                                               "hw_local_ack_timeout_err")}) for i in range(8)]
        state = os.path.join(tmp, "state")
        clock = [1.78e9]

        def keep():
            clock[0] += 60
            keep_readings(state, Snapshot("n", "x", ib_ports=ib, net_ports=ports), now_s=clock[0])

        memory = timed(keep, args.repeat)
        size = os.path.getsize(os.path.join(state, "net-counters.txt"))
    print(f"probe_net_ports on this machine's /sys ({len(probe_net_ports('/sys'))} physical Ethernet ports): "
          f"{live:.3f} ms")
    print(f"probe_net_ports on an 8-port fixture tree: {fixture:.3f} ms")
    print(f"keep_readings, 16 ports (8 RDMA + 8 Ethernet): {memory:.3f} ms, file {size} bytes")


if __name__ == "__main__":
    main()
