// SPDX-License-Identifier: GPL-2.0

//! The device's per-port counters and their `rdma statistic` names.

use kernel::rdma::device::StatDesc;

/// A per-port counter, reported by `rdma statistic` and in sysfs `hw_counters/` under rdma_rxe's
/// names (plus mlx5's `local_ack_timeout_err` and a `retransmits` count). The receive path counts
/// `Rcvd*`, the transmit worker `Sent*`/`SendErr`, the device `LinkDowned`; the sequence, RNR and
/// retry counters are the protocol core's per-QP statistics, added up by the QP glue.
#[derive(Clone, Copy)]
#[repr(usize)]
pub(crate) enum Counter {
    SentPkts,
    RcvdPkts,
    DuplicateRequest,
    OutOfSeqRequest,
    RcvdRnrErr,
    SendRnrErr,
    RcvdSeqErr,
    RetryExceededErr,
    RetryRnrExceededErr,
    CompleterRetryErr,
    SendErr,
    LinkDowned,
    RdmaSends,
    RdmaRecvs,
    SentBytes,
    RcvdBytes,
    /// Datagrams on port 4791 that are not a well-formed RoCEv2 packet (bad UDP length, headers,
    /// opcode, pad or reserved bits).
    RcvdMalformed,
    /// RoCEv2 packets whose invariant CRC does not verify.
    RcvdIcrcErr,
    /// Valid packets addressed to a queue pair the device does not have.
    RcvdNoQp,
    /// Valid packets a queue pair dropped (state, P_Key, Q_Key, sequence, no receive WQE,
    /// placement error).
    RcvdDropped,
    /// Local ACK timeouts that found unacknowledged packets.
    LocalAckTimeouts,
    /// Request packets sent again (go-back-N after a timeout or NAK); native DATA packets
    /// sent again (a SACK gap, an RTO or a probe).
    Retransmits,
    /// Native transport (`native.rs`): DATA packets sent for the first time.
    NativeDataSent,
    /// Native ACKs sent.
    NativeAcksSent,
    /// Native DATA packets found lost by a SACK gap.
    NativeSackLosses,
    /// Native path retransmission timeouts.
    NativeTimeouts,
    /// Native paths moved to another UDP source port.
    NativeRepaths,
    /// Native DATA packets received again (acknowledged, not placed again).
    NativeDuplicates,
    /// Native packets a connection dropped (window, stream, inconsistent, stale ACK).
    NativeDrops,
    /// Native DATA packets dropped because the receive queue had no request for them.
    NativeRnrDrops,
    /// Native connection-window decreases on ECN echoes.
    NativeEcnDecreases,
    /// Native ECN echoes: DATA packets of ours the network marked CE, as ACKs reported them.
    NativeEcnEchoes,
    /// Native rate-hint changes received in ACKs (the receiver's fair share for us changed).
    NativeRateHintChanges,
    /// Native ACKs that found their path's smoothed RTT beyond the delay target
    /// (`native_delay_target_us`) without an ECN echo: treated as one.
    NativeDelaySignals,
    /// Native DATA packets declared lost (SACK gap or RTO) that a later ACK proved received:
    /// their retransmission is not sent if it is still queued.
    NativeLateAcks,
    /// Native RTOs proven spurious (an original transmission acknowledged before anything
    /// sent after the RTO): the path's window reduction was undone.
    NativeSpuriousRtos,
    /// Native RTOs that found the whole connection silent (nothing sent after the path's
    /// oldest packet acknowledged on any path): the path probed and backed off instead of
    /// declaring its packets lost (`native_silence_probes`).
    NativeSilences,
    /// Gauge, not a count: the smallest RTT sample of any native path, in microseconds.
    NativeRttMinUs,
    /// Gauge: the mean RTT of the native paths with samples (each path's mean), in microseconds.
    NativeRttAvgUs,
    /// On-demand paging (`odp.rs`): ranges of ODP memory regions faulted in.
    OdpFaults,
    /// ODP faults that failed (the memory is not mapped, or not writable, in the process).
    OdpFaultErrors,
    /// ODP fault requests dropped because the queue was full (the retry asks again).
    OdpFaultDrops,
    /// READ responses and atomic results refused because this QP's own ODP buffers were not
    /// present (the requester waited for the fault and asked again).
    OdpResponseWaits,
    /// RC/UC packets whose source or destination address is not the QP's peer and its own
    /// (its address vector): dropped (also counted in `rcvd_dropped`).
    RcvdBadAddr,
    /// Native connections reaped (no QP bound, nothing in flight, no DATA from the peer for 2 s).
    NativePeersReaped,
    /// Native DATA packets with a new connection id from a quiet peer's address, dropped until
    /// proven (restart proof, transport.rst section 7.1).
    NativeUnproven,
    /// Native CHALLENGEs sent (restart proof).
    NativeChallenges,
    /// Native PROOFs refused: a wrong or expired cookie, or no challenge outstanding.
    NativeBadProofs,
    /// Native peers whose restart was proven: the connection's receiving half started over.
    NativeRestarts,
    /// Native packets refused by the authenticated mode: a tag that does not verify, no
    /// trailer or AUTH flag (a plain packet), a key that cannot be found (section 13.1).
    NativeAuthErrors,
    /// Packets of two or more native datagrams handed to the network stack as one GSO packet
    /// (`tx_gso`; their datagrams are in `sent_pkts`).
    SentGsoBatches,
    /// Flights (a native connection's state for packets in flight, about 60 KiB) lent to
    /// connections that started sending.
    NativeFlightsTaken,
    /// Flights connections gave back after `native_flight_idle_ms` with nothing in flight.
    NativeFlightsReturned,
    /// Gauge: flights that exist (lent or kept spare by the device's pool).
    NativeFlights,
    /// Gauge: flights lent now (connections sending or recently busy).
    NativeFlightsLent,
    /// Times the transmit worker stopped because the packets it had queued in the network
    /// stack filled the device's budget (`tx_budget_kb`); it goes on when they are freed.
    TxBudgetWaits,
}

pub(super) const NUM_COUNTERS: usize = Counter::TxBudgetWaits as usize + 1;

/// Descriptors of the counters, indexed by [`Counter`].
pub(super) static COUNTER_DESCS: [StatDesc; NUM_COUNTERS] = [
    StatDesc::new(c"sent_pkts"),
    StatDesc::new(c"rcvd_pkts"),
    StatDesc::new(c"duplicate_request"),
    StatDesc::new(c"out_of_seq_request"),
    StatDesc::new(c"rcvd_rnr_err"),
    StatDesc::new(c"send_rnr_err"),
    StatDesc::new(c"rcvd_seq_err"),
    StatDesc::new(c"retry_exceeded_err"),
    StatDesc::new(c"retry_rnr_exceeded_err"),
    StatDesc::new(c"completer_retry_err"),
    StatDesc::new(c"send_err"),
    StatDesc::new(c"link_downed"),
    StatDesc::new(c"rdma_sends"),
    StatDesc::new(c"rdma_recvs"),
    StatDesc::new(c"sent_bytes"),
    StatDesc::new(c"rcvd_bytes"),
    StatDesc::new(c"rcvd_malformed"),
    StatDesc::new(c"rcvd_icrc_err"),
    StatDesc::new(c"rcvd_no_qp"),
    StatDesc::new(c"rcvd_dropped"),
    StatDesc::new(c"local_ack_timeout_err"),
    StatDesc::new(c"retransmits"),
    StatDesc::new(c"native_data_sent"),
    StatDesc::new(c"native_acks_sent"),
    StatDesc::new(c"native_sack_losses"),
    StatDesc::new(c"native_timeouts"),
    StatDesc::new(c"native_repaths"),
    StatDesc::new(c"native_duplicates"),
    StatDesc::new(c"native_drops"),
    StatDesc::new(c"native_rnr_drops"),
    StatDesc::new(c"native_ecn_decreases"),
    StatDesc::new(c"native_ecn_echoes"),
    StatDesc::new(c"native_rate_hint_changes"),
    StatDesc::new(c"native_delay_signals"),
    StatDesc::new(c"native_late_acks"),
    StatDesc::new(c"native_spurious_rtos"),
    StatDesc::new(c"native_silences"),
    StatDesc::new(c"native_rtt_min_us"),
    StatDesc::new(c"native_rtt_avg_us"),
    StatDesc::new(c"odp_faults"),
    StatDesc::new(c"odp_fault_errors"),
    StatDesc::new(c"odp_fault_drops"),
    StatDesc::new(c"odp_response_waits"),
    StatDesc::new(c"rcvd_bad_addr"),
    StatDesc::new(c"native_peers_reaped"),
    StatDesc::new(c"native_unproven"),
    StatDesc::new(c"native_challenges"),
    StatDesc::new(c"native_bad_proofs"),
    StatDesc::new(c"native_restarts"),
    StatDesc::new(c"native_auth_errors"),
    StatDesc::new(c"sent_gso_batches"),
    StatDesc::new(c"native_flights_taken"),
    StatDesc::new(c"native_flights_returned"),
    StatDesc::new(c"native_flights"),
    StatDesc::new(c"native_flights_lent"),
    StatDesc::new(c"tx_budget_waits"),
];
