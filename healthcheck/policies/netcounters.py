"""The network error counters judged as growth over a window (issue 32), as data with their sources:
which counter, which reading it comes from, how much growth in the window WARNs and FAILs, and why.

Three readings (the ``group`` of each rule):

- ``rdma``: the RDMA port's counters as ``probes.infiniband`` reads them from
  ``/sys/class/infiniband/<dev>/ports/<n>/``: ``counters/*`` (IBA PortCounters, Linux
  Documentation/infiniband/sysfs.txt) and ``hw_counters/*`` (driver counters, prefixed ``hw_``; mlx5's
  are described in NVIDIA's "Understanding mlx5 Linux Counters and Status Parameters" and the kernel's
  drivers/infiniband/hw/mlx5/counters.c). InfiniBand and RoCE ports alike.
- ``netdev``: ``/sys/class/net/<if>/statistics/*`` and ``carrier_down_count`` of a physical Ethernet
  port (kernel Documentation/ABI/testing/sysfs-class-net-statistics, sysfs-class-net): every driver.
- ``ethtool``: what mlx5 keeps only in ``ethtool -S`` (the PPCNT physical-layer and pause counters:
  kernel Documentation/networking/device_drivers/ethernet/mellanox/mlx5/counters.rst; the driver
  commits that added them: "net/mlx5e: Expose physical layer statistical counters to ethtool",
  "net/mlx5e: Add link down events counter", and the pause-storm counters' commit by Inbar Karmy).

A rule is ``counter: (group, warn, fail, reason)``: growth within the window at or above ``warn`` WARNs,
at or above ``fail`` FAILs (None: never). Per-class overrides: the checks' thresholds
``<counter>_warn`` / ``<counter>_fail`` and ``window_h``.

How the error rates were chosen (growth per hour, the checks' default window):
- post-FEC physical errors (``symbol_error``, ``port_rcv_errors``, ``rx_crc_errors``,
  ``rx_symbol_err_phy``, ...): FAIL at 400 an hour. A link at the 1e-12 bit error ratio that IEEE 802.3
  (25GBASE-R and up) and the InfiniBand specification hold a link to makes 0.1 errors a second at
  100 Gb/s full load, 360 an hour; 400 an hour is a link out of that class even at 100 Gb/s, and
  ~10,000 a day, the rate ``ib.port.errors`` fails at (and ``data/fabric_counters.toml``'s 420 an hour).
  WARN at 10: a good link shows none.
- ``link_error_recovery``: FAIL at 3 an hour (each a retrain that stalls the link; ``ib.port.errors``
  fails at 25 a day, ~1 an hour). ``local_link_integrity_errors`` / ``excessive_buffer_overrun_errors``:
  each already means a threshold of physical errors / overruns was passed in the port: FAIL at 2
  (``fabric_counters.toml``: 0.5 an hour).
- ``tx_pause_storm_error_events``: FAIL at 1: the device sent pause frames past the storm timeout and
  disabled pause transmission (mlx5 commit message): this host's receive path stalled, the lossless
  class it protected now drops. ``tx_pause_storm_warning_events`` WARN at 1.
- ``hw_local_ack_timeout_err``: an RC QP waited its whole ACK timeout before retransmitting (recoverable
  until the retry limit, NVIDIA's mlx5 counters doc): WARN at 10, FAIL at 1000 an hour (a retransmission
  stall every 3.6 s: the path drops packets and every job over it crawls). ``hw_rx_icrc_encapsulated``:
  RoCE packets with a bad ICRC, corrupted on the wire: WARN at 1, FAIL at 400 like the CRC errors.
- Loss and congestion that another node, the switch or the job can cause (``out_of_sequence``,
  ``packet_seq_err``, ``rnr_nak_retry_err``, ``roce_adp_retrans``, discards, out-of-buffer): WARN only.
  A job that floods a port with small packets raises them on a healthy node (the corpus' XDP benchmark:
  58 billion ``rx_discards_phy``), so they never drain by default.
- Congestion notifications (``np_cnp_sent``, ``rp_cnp_handled``, ``np_ecn_marked_roce_packets``, ...)
  are DCQCN doing its job: :data:`INFORMATIONAL`, reported, never judged.

Link downs are strikes, not a rate: :data:`LINK_DOWN` names the counter per reading, and ``net.link.flaps``
counts how many times a port went down within ``window_h`` hours (FAIL at :data:`LINK_DOWN_FAIL` = 3
within :data:`LINK_DOWN_WINDOW_H` = 3 h: a port that went down three times in three hours has a bad
cable, transceiver or switch port; once in a month is nothing). The same spirit as Azure's HPC health
checks (an IB link that flapped 5 times in 24 h fails the node), on a shorter window.

Counters whose sysfs value saturates at its PortCounters width instead of growing (:data:`WIDTH_BITS`;
IBA 1.3, PortCounters attribute) cannot show growth once at their maximum: the memory says so.
Lean: no imports (the prolog reads this).
"""

GROUPS = ("rdma", "netdev", "ethtool")

# counter: (group, warn, fail, reason)
RULES = {
    # --- rdma: IBA PortCounters (counters/*)
    "symbol_error": ("rdma", 10, 400, "minor link errors left after FEC: cable, transceiver or switch port"),
    "port_rcv_errors": ("rdma", 10, 400, "received packets with errors (physical, malformed, overrun)"),
    "link_error_recovery": ("rdma", 1, 3, "link retrained after errors: each stalls the link"),
    "local_link_integrity_errors": ("rdma", 1, 2, "local physical errors passed the port's threshold"),
    "excessive_buffer_overrun_errors": ("rdma", 1, 2, "flow-control periods with overruns"),
    "port_rcv_remote_physical_errors": ("rdma", 10, None, "packets marked bad upstream: a peer's link"),
    "port_xmit_discards": ("rdma", 1000, None, "packets dropped for lack of a way out: congestion or a stuck peer"),
    # --- rdma: driver counters (hw_counters/*, mlx5 names)
    "hw_local_ack_timeout_err": ("rdma", 10, 1000, "RC ACK timeouts: the sender retransmitted after waiting"),
    "hw_rx_icrc_encapsulated": ("rdma", 1, 400, "RoCE packets with a bad ICRC: corrupted on the wire"),
    "hw_out_of_sequence": ("rdma", 1000, None, "out-of-sequence packets received: loss on the path"),
    "hw_packet_seq_err": ("rdma", 1000, None, "NAK sequence errors received: the peer saw loss"),
    "hw_implied_nak_seq_err": ("rdma", 1000, None, "implied NAK sequence errors: loss on the path"),
    "hw_duplicate_request": ("rdma", 1000, None, "duplicate requests: the peer retransmitted"),
    "hw_rnr_nak_retry_err": ("rdma", 1000, None, "receiver-not-ready NAKs: the receiving application"),
    "hw_roce_adp_retrans": ("rdma", 1000, None, "RoCE adaptive retransmissions: loss on the path"),
    "hw_roce_adp_retrans_to": ("rdma", 100, None, "RoCE adaptive retransmission timeouts"),
    "hw_out_of_buffer": ("rdma", 1000, None, "no receive WQE posted: the application lagged"),
    # --- netdev: /sys/class/net/<if>/statistics
    "rx_crc_errors": ("netdev", 10, 400, "frames received with a bad CRC: cable, transceiver or switch port"),
    "rx_frame_errors": ("netdev", 10, 400, "misaligned frames received: the physical layer"),
    "rx_length_errors": ("netdev", 100, None, "frames of a bad length received"),
    "tx_carrier_errors": ("netdev", 10, None, "transmit aborted for loss of carrier"),
    "rx_missed_errors": ("netdev", 1000, None, "frames the NIC had no room for: the host lagged"),
    "rx_fifo_errors": ("netdev", 1000, None, "receive FIFO overruns: the host lagged"),
    "rx_over_errors": ("netdev", 1000, None, "receive ring overruns: the host lagged"),
    # --- ethtool -S (mlx5)
    "rx_crc_errors_phy": ("ethtool", 10, 400, "frames with a bad CRC at the port: cable, transceiver or switch port"),
    "rx_symbol_err_phy": ("ethtool", 10, 400, "symbol errors FEC did not correct"),
    "rx_pcs_symbol_err_phy": ("ethtool", 10, 400, "PCS symbol errors FEC did not correct"),
    "tx_pause_storm_error_events": ("ethtool", 1, 1, "pause storm: pause transmission disabled, the host's receive stalled"),
    "tx_pause_storm_warning_events": ("ethtool", 1, None, "the device stalled past the pause-storm watermark"),
    "rx_discards_phy": ("ethtool", 100000, None, "frames discarded for lack of receive buffer: congestion or a lagging host"),
    "tx_discards_phy": ("ethtool", 1000, None, "frames discarded on transmit: congestion"),
    "rx_out_of_buffer": ("ethtool", 100000, None, "no receive buffer posted: the host lagged"),
    "rx_pci_signal_integrity": ("ethtool", 10, None, "PCIe link recoveries seen by the NIC (try another slot)"),
    "tx_pci_signal_integrity": ("ethtool", 10, None, "PCIe link recoveries seen by the NIC (try another slot)"),
}

# The counter that counts a port's link downs, per reading. carrier_down_count also counts an admin's
# `ip link set down` and a driver reload's; the memory rebases on a reload (its counters start over).
LINK_DOWN = {"rdma": "link_downed", "netdev": "carrier_down_count", "ethtool": "link_down_events_phy"}
LINK_DOWN_WARN = 2  # link downs within the window that WARN (one alone passes: a switch reboot, a re-cable)
LINK_DOWN_FAIL = 3  # ... and FAIL: three in three hours is a bad cable, transceiver or port
LINK_DOWN_WINDOW_H = 3.0
ERROR_WINDOW_H = 1.0  # the error counters' window
MAX_WINDOW_H = 24.0  # the memory keeps 24 h of growth: no window may be longer

# Reported as metrics, never judged: congestion control doing its job, the application's own errors.
INFORMATIONAL = frozenset({
    "hw_np_cnp_sent", "hw_rp_cnp_handled", "hw_rp_cnp_ignored", "hw_np_ecn_marked_roce_packets",
    "hw_req_cqe_error", "hw_resp_cqe_error", "hw_req_cqe_flush_error", "hw_resp_cqe_flush_error",
    "rx_corrected_bits_phy", "tx_pause_ctrl_phy", "rx_pause_ctrl_phy",
})

# PortCounters widths (IBA): a sysfs value at 2**bits - 1 stopped counting.
WIDTH_BITS = {"symbol_error": 16, "port_rcv_errors": 16, "link_error_recovery": 8, "link_downed": 8,
              "local_link_integrity_errors": 4, "excessive_buffer_overrun_errors": 4,
              "port_rcv_remote_physical_errors": 16, "port_xmit_discards": 16}


def kept(group: str) -> frozenset:
    """The counters of ``group`` the memory keeps: the judged ones and the link-down counter."""
    return frozenset([name for name, rule in RULES.items() if rule[0] == group] + [LINK_DOWN[group]])


def thresholds(group_names) -> dict:
    """The default thresholds of the checks judging ``group_names``: ``<counter>_warn``/``_fail``."""
    out = {}
    for name, (group, warn, fail, _reason) in RULES.items():
        if group in group_names:
            out[name + "_warn"] = warn
            out[name + "_fail"] = fail
    return out
