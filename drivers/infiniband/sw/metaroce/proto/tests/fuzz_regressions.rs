//! Reproducers of bugs the fuzz targets in `fuzz/` found (README,
//! "Fuzzing"), as plain tests that run on stable.

use metaroce_proto::bth::Bth;
use metaroce_proto::ext::Reth;
use metaroce_proto::opcode::{Opcode, Transport};
use metaroce_proto::packet::{build, pad_for, parse, Headers, Pmtu};
use metaroce_proto::psn::Psn;
use metaroce_proto::qp::{DropReason, Qp, QpConfig, RxOutcome};
use metaroce_proto::resp::{AccessError, MemAccess, RecvQueue};
use metaroce_proto::wr::{Access, AtomicOp, Place, RecvWqe, SendWqe, WcStatus};

/// Memory that refuses every access.
struct DenyMem;

impl MemAccess for DenyMem {
    fn check(&mut self, _: u32, _: u64, _: u32, _: Access) -> Result<(), AccessError> {
        Err(AccessError::Access)
    }
    fn atomic(&mut self, _: u32, _: u64, _: AtomicOp) -> Result<u64, AccessError> {
        Err(AccessError::Access)
    }
    fn atomic_write(&mut self, _: u32, _: u64, _: [u8; 8]) -> Result<(), AccessError> {
        Err(AccessError::Access)
    }
    fn flush(&mut self, _: u32, _: u64, _: u32, _: bool, _: Access) -> Result<(), AccessError> {
        Err(AccessError::Access)
    }
}

/// Receive WQEs with ids 0, 1, 2, ... of 4 KiB each.
struct Rq(u64);

impl RecvQueue for Rq {
    fn take(&mut self) -> Option<RecvWqe> {
        self.0 += 1;
        Some(RecvWqe {
            id: self.0 - 1,
            len: 4096,
        })
    }
}

fn packet(op: Opcode, psn: u32, payload: usize, reth: Option<Reth>) -> Vec<u8> {
    let mut h = Headers::new(Bth {
        opcode: op,
        solicited: false,
        mig_req: false,
        pad: pad_for(payload),
        pkey: 0xFFFF,
        resv8: 0,
        dest_qp: 5,
        ack_req: false,
        psn: Psn::new(psn),
    });
    h.reth = reth;
    let mut buf = vec![0u8; payload + 64];
    let n = build(&h, &vec![0x11; payload], &mut buf).unwrap();
    buf.truncate(n);
    buf
}

/// Found by the `responder` target: a UC WRITE without immediate data whose
/// memory check failed overwrote the receive WQE the responder held from an
/// abandoned SEND with `None`, so that WQE was never completed nor flushed
/// (lost to the application) and later SENDs completed younger WQEs first.
#[test]
fn uc_refused_write_keeps_the_held_receive_wqe() {
    let mut cfg = QpConfig::new(Transport::Uc, 5, 6);
    cfg.pmtu = Pmtu::Mtu256;
    cfg.rq_psn = Psn::new(100);
    let mut qp = Qp::<4>::new(cfg).unwrap();
    let mut sq = vec![SendWqe::default(); cfg.sq_depth as usize];
    let mut rq = Rq(0);
    let mut rx = |qp: &mut Qp<4>, buf: &[u8]| -> RxOutcome {
        qp.receive(0, &parse(buf).unwrap(), &mut sq, &mut DenyMem, &mut rq)
    };
    // A SEND starts in WQE 0; its last packet is lost.
    let out = rx(&mut qp, &packet(Opcode::UcSendFirst, 100, 256, None));
    assert_eq!(
        out.place,
        Some(Place::Recv {
            id: 0,
            offset: 0,
            len: 256
        })
    );
    // A WRITE starts after the gap: the SEND is abandoned (WQE 0 kept for
    // the next message) and the WRITE's memory check fails.
    let reth = Reth {
        va: 0x1000,
        rkey: 1,
        len: 256,
    };
    let out = rx(&mut qp, &packet(Opcode::UcWriteOnly, 102, 256, Some(reth)));
    assert_eq!(out.drop, Some(DropReason::AccessDenied));
    // The next SEND lands in, and completes, WQE 0.
    let out = rx(&mut qp, &packet(Opcode::UcSendOnly, 103, 8, None));
    assert_eq!(
        out.place,
        Some(Place::Recv {
            id: 0,
            offset: 0,
            len: 8
        })
    );
    let c = out.completion.unwrap();
    assert_eq!((c.id, c.status, c.byte_len), (0, WcStatus::Success, 8));
    assert_eq!(rq.0, 1, "a second WQE was taken");
    // And the same with the QP moved to the error state before the next
    // SEND: the held WQE is flushed, not lost.
    let mut qp = Qp::<4>::new(cfg).unwrap();
    let mut sq = vec![SendWqe::default(); cfg.sq_depth as usize];
    let mut rq = Rq(0);
    let mut rx = |qp: &mut Qp<4>, buf: &[u8]| -> RxOutcome {
        qp.receive(0, &parse(buf).unwrap(), &mut sq, &mut DenyMem, &mut rq)
    };
    rx(&mut qp, &packet(Opcode::UcSendFirst, 100, 256, None));
    rx(&mut qp, &packet(Opcode::UcWriteOnly, 102, 256, Some(reth)));
    qp.set_error();
    let c = qp.flush_recv().expect("held WQE not flushed");
    assert_eq!((c.id, c.status), (0, WcStatus::WrFlushErr));
    assert_eq!(qp.flush_recv(), None);
}

/// Found by the `conn` target: after a MetaRoCE connection failed, a
/// message later than the one reported `RetryExceeded` completed with
/// success because every packet of it had been acknowledged. Section 7 of
/// transport.rst: the oldest incomplete message completes with retry
/// exceeded "and every later one with flushed, in order".
#[test]
fn native_no_success_after_retry_exceeded() {
    use metaroce_proto::conn::{Completion, Conn, ConnConfig, ConnState, SendStatus};
    use metaroce_proto::mrc_wire::{MrcOp, DATA_HDR_LEN};
    use metaroce_proto::stream::MsgDesc;
    type C = Conn<1, 64, 1, 1, 4>;
    let mk = |id| {
        let mut cfg = ConnConfig::new(id);
        cfg.mss = 16;
        cfg.paths = 1;
        cfg.max_retx = 0;
        let mut c = Box::new(C::new(cfg));
        assert!(c.open_stream(
            0,
            if id == 1 { 100 } else { 200 },
            if id == 1 { 200 } else { 100 }
        ));
        c
    };
    let (mut a, mut b) = (mk(1), mk(2));
    let send = MsgDesc {
        op: MrcOp::Send,
        len: 4,
        va: 0,
        rkey: 0,
        imm: 0,
        se: false,
    };
    assert_eq!(a.post(0, send), Ok(0));
    assert_eq!(a.post(0, send), Ok(1));
    let mut wire = Vec::new();
    let mut buf = [0u8; DATA_HDR_LEN];
    while let Some(t) = a.poll_transmit(0, &mut buf) {
        let mut p = buf[..t.hdr_len].to_vec();
        p.resize(t.hdr_len + usize::from(t.payload.unwrap().len), 0);
        wire.push(p);
    }
    assert_eq!(wire.len(), 2);
    // Message 1 arrives first: B's ACK shows a gap at message 0's packet,
    // which A declares lost; with max_retx 0 its retransmission fails the
    // connection.
    b.on_packet(10, &wire[1], false, 50_000, 0).unwrap();
    let t = b.poll_transmit(10, &mut buf).unwrap();
    a.on_packet(20, &buf[..t.hdr_len], false, 50_000, 0)
        .unwrap();
    assert!(a.poll_transmit(20, &mut buf).is_none());
    assert_eq!(a.state(), ConnState::Failed);
    let done: Vec<_> = core::iter::from_fn(|| a.poll_completion()).collect();
    assert_eq!(
        done,
        [
            Completion::Send {
                stream: 0,
                msn: 0,
                status: SendStatus::RetryExceeded
            },
            Completion::Send {
                stream: 0,
                msn: 1,
                status: SendStatus::Flushed
            },
        ]
    );
}

/// The native connection of the rate-hint regressions: one path, one stream, MSS 16.
type OnePath = metaroce_proto::conn::Conn<1, 64, 1, 1, 4>;

/// Two connected [`OnePath`] connections (ids 1 and 2, stream 0 open between QPs 100 and 200).
fn one_path_pair() -> (Box<OnePath>, Box<OnePath>) {
    let mk = |id, local, remote| {
        let mut cfg = metaroce_proto::conn::ConnConfig::new(id);
        cfg.mss = 16;
        cfg.paths = 1;
        let mut c = Box::new(OnePath::new(cfg));
        assert!(c.open_stream(0, local, remote));
        c
    };
    (mk(1, 100, 200), mk(2, 200, 100))
}

/// A 4-byte SEND.
fn tiny_send() -> metaroce_proto::stream::MsgDesc {
    use metaroce_proto::mrc_wire::MrcOp;
    metaroce_proto::stream::MsgDesc {
        op: MrcOp::Send,
        len: 4,
        va: 0,
        rkey: 0,
        imm: 0,
        se: false,
    }
}

/// Found by the `conn` target: with a rate hint so small that the paced
/// rate `RateHint * scale` rounded down to 0 kbit/s after an ECN decrease
/// of `scale`, the sender stopped pacing altogether (as if there were no
/// hint) and sent at line rate. Section 6.4: only RateHint 0 means "not
/// paced"; any hint paces.
#[test]
fn native_tiny_rate_hint_still_paces() {
    use metaroce_proto::mrc_wire::DATA_HDR_LEN;
    let (mut a, mut b) = one_path_pair();
    let send = tiny_send();
    let mut buf = [0u8; DATA_HDR_LEN];
    a.post(0, send).unwrap();
    let t = a.poll_transmit(0, &mut buf).unwrap();
    let mut p = buf[..t.hdr_len].to_vec();
    p.resize(t.hdr_len + 4, 0);
    // Delivered CE-marked; the receiving device's fair share is 1 kbit/s.
    b.on_packet(10, &p, true, 50_000, 1).unwrap();
    let t = b.poll_transmit(10, &mut buf).unwrap();
    a.on_packet(20, &buf[..t.hdr_len], false, 50_000, 0)
        .unwrap();
    assert_eq!(a.conn_window().1, 1);
    // Two more messages: the first leaves, the second waits for the pacer
    // ((4 + 126) bytes at 1 kbit/s or less: at least 1.04 s).
    a.post(0, send).unwrap();
    a.post(0, send).unwrap();
    assert!(a.poll_transmit(100, &mut buf).is_some());
    assert!(
        a.poll_transmit(100, &mut buf).is_none(),
        "second packet not paced"
    );
    assert!(
        a.poll_transmit(100 + 1_000_000_000, &mut buf).is_none(),
        "paced faster than 1 kbit/s"
    );
    assert!(
        a.poll_transmit(100 + 130 * 8_000_000, &mut buf).is_some(),
        "pacer never lets it go"
    );
}

/// Found by reading the kernel's receive path for the native injector
/// (tools/testing/selftests/drivers/infiniband/metaroce/native_inject.py): an ACK with a tiny rate hint (a
/// forged one, or a stale one) set a pacing gap of seconds, and the genuine
/// hint arriving next did not shorten it: the sender stayed silent for the
/// whole gap. A new hint now re-times the gap running (never longer).
#[test]
fn a_new_rate_hint_retimes_the_running_gap() {
    use metaroce_proto::mrc_wire::DATA_HDR_LEN;
    let (mut a, mut b) = one_path_pair();
    let send = tiny_send();
    let mut buf = [0u8; DATA_HDR_LEN];
    // One message each way of the exchange: a sends, b ACKs with `hint`.
    let mut exchange = |a: &mut OnePath, b: &mut OnePath, now: u64, hint: u32| {
        let t = a.poll_transmit(now, &mut buf).expect("paced");
        let mut p = buf[..t.hdr_len].to_vec();
        p.resize(t.hdr_len + 4, 0);
        b.on_packet(now + 10, &p, false, 50_000, hint).unwrap();
        let t = b.poll_transmit(now + 10, &mut buf).unwrap();
        a.on_packet(now + 20, &buf[..t.hdr_len], false, 50_000, 0)
            .unwrap();
    };
    a.post(0, send).unwrap();
    exchange(&mut a, &mut b, 0, 1);
    assert_eq!(a.conn_window().1, 1);
    // Sent at 1 kbit/s: the next packet may leave (4 + 126) * 8 ms later.
    a.post(0, send).unwrap();
    a.post(0, send).unwrap();
    exchange(&mut a, &mut b, 100, 1_000_000);
    // The 1 Gbit/s hint arrived at 120 ns: the gap of that packet at 1
    // Gbit/s (1040 ns) is over by 2 us, not after 1.04 s.
    assert_eq!(a.conn_window().1, 1_000_000);
    assert!(
        a.poll_transmit(2_000, &mut buf).is_some(),
        "the stale 1 kbit/s gap still holds the sender"
    );
}

/// Found by the `requester` target once it modelled local WQEs: a local WQE
/// posted to a UC QP already in the error state completed with success
/// (an idle requester passes a local WQE as it is posted, and on UC that
/// completes it), where every WQE of a QP in the error state is flushed
/// (`SendOp::Local`: "flushed if the QP enters the error state first").
#[test]
fn local_wqe_posted_in_the_error_state_is_flushed() {
    use metaroce_proto::wr::{SendOp, SendWr};
    for t in [Transport::Uc, Transport::Rc] {
        let mut cfg = QpConfig::new(t, 5, 6);
        cfg.pmtu = Pmtu::Mtu256;
        let mut qp = Qp::<4>::new(cfg).unwrap();
        let mut sq = vec![SendWqe::default(); cfg.sq_depth as usize];
        qp.set_error();
        let wr = SendWr {
            wr_id: 7,
            op: SendOp::Local,
            len: 0,
            signaled: true,
            ..Default::default()
        };
        qp.post_send(&mut sq, wr).unwrap();
        let c = qp.poll_send_completion(&mut sq).expect("no completion");
        assert_eq!((c.wr_id, c.status), (7, WcStatus::WrFlushErr), "{t:?}");
        assert!(qp.poll_tx(0, &mut sq).is_none());
        assert_eq!(qp.sq_used(), 0);
    }
}

/// Found by the `requester` target once it modelled local WQEs: when the
/// retries of an RC QP ran out, the retry-exceeded error was given to the
/// oldest unretired WQE even when that was a local WQE already passed with
/// everything before it acknowledged (due for success, but no completion
/// poll had retired it yet), and the WQE whose packets went unanswered was
/// only flushed.
#[test]
fn retry_exceeded_is_not_given_to_a_local_wqe() {
    use metaroce_proto::wr::{SendOp, SendWr};
    let mut cfg = QpConfig::new(Transport::Rc, 5, 6);
    cfg.pmtu = Pmtu::Mtu256;
    cfg.timeout = 1;
    cfg.retry_cnt = 0;
    let mut qp = Qp::<4>::new(cfg).unwrap();
    let mut sq = vec![SendWqe::default(); cfg.sq_depth as usize];
    let wr = |id, op, len| SendWr {
        wr_id: id,
        op,
        len,
        signaled: true,
        ..Default::default()
    };
    // The local WQE is passed as it is posted (idle QP); the SEND is never
    // acknowledged and its ACK timer, with no retry left, fails the QP.
    qp.post_send(&mut sq, wr(1, SendOp::Local, 0)).unwrap();
    qp.post_send(&mut sq, wr(2, SendOp::Send, 8)).unwrap();
    while qp.poll_tx(0, &mut sq).is_some() {}
    let t = qp.next_deadline().expect("no ACK timer");
    qp.on_timer(t, &mut sq);
    assert!(qp.is_error());
    let st: Vec<_> = core::iter::from_fn(|| {
        qp.poll_send_completion(&mut sq)
            .map(|c| (c.wr_id, c.status))
    })
    .collect();
    assert_eq!(st, [(1, WcStatus::Success), (2, WcStatus::RetryExcErr)]);
}

#[test]
fn native_forged_cum_half_space_away_is_judged_per_seq() {
    // `sack` (path.rs): six transmissions in flight, a forged ACK with
    // CumSeq 2^31 + 6. Section 5.3 judges each in-flight seq against the
    // newest acknowledged one (CumSeq - 1 = 2^31 + 5): only seq 5 is
    // "before" it in the 2^31 window (exactly 2^31 away). The core's scan
    // from the base stopped at seq 0 (not before it) and missed seq 5.
    use metaroce_proto::cc::{Aimd, MD_ECN_PATH};
    use metaroce_proto::mrc_wire::AckPkt;
    use metaroce_proto::path::{PathEvent, SlotWindow, TxPath};
    let mut p = TxPath::new(50_000, Aimd::new(1000, 8, 256, MD_ECN_PATH));
    let mut w = SlotWindow::EMPTY;
    for d in 0..6 {
        p.on_send(&mut w, d, 1000, 0, 0);
    }
    let ack = AckPkt {
        path: 0,
        conn: 1,
        cum: (1 << 31) + 6,
        ack_seq: 1 << 31,
        rate_hint_kbps: 0,
        ce_count: 0,
        sack: [0; 4],
        rnr: false,
    };
    let mut ev = Vec::new();
    assert_eq!(
        p.on_ack(Some(&mut w), &ack, 10, |e| ev.push(e)),
        Some(false)
    );
    assert_eq!(ev, [PathEvent::Lost { dsn: 5, seq: 5 }]);
    assert_eq!((p.inflight_pkts(), p.floor()), (5, 0));
}

/// Found by the `conn` target on the native-read branch: an atomic request's
/// 16-byte operand block is payload on the wire, but the sender counted the
/// packet as empty in its path window and pacer (it left earlier than the
/// rate hint allows). `fuzz/regressions/conn/atomic-operands-paced`.
#[test]
fn atomic_operand_block_counts_as_payload() {
    use metaroce_proto::conn::{Conn, ConnConfig};
    use metaroce_proto::mrc_wire::{MrcOp, MAX_HDR_LEN};
    let mut cfg = ConnConfig::new(1);
    cfg.paths = 1;
    let mut c = Box::new(Conn::<1, 64, 1, 1, 4>::new(cfg));
    assert!(c.open_stream(0, 1, 2));
    c.post_atomic(0, MrcOp::FetchAdd, 0x1000, 5, 1, 0).unwrap();
    let mut buf = [0u8; MAX_HDR_LEN];
    let t = c.poll_transmit(0, &mut buf).unwrap();
    assert_eq!((t.hdr_len, t.payload), (MAX_HDR_LEN, None));
    let (_, _, stats) = c.path_info(0).unwrap();
    assert_eq!((stats.sent, stats.bytes), (1, 16));
}

/// Found by the `conn` target: a forged DATA packet whose Dsn was half the
/// sequence space from the receiver's cumulative Dsn (`seq_diff` =
/// i32::MIN: behind, a duplicate) still moved the Dsn window to "its" Dsn
/// − W, which is 2^31 − W *ahead*, every bit cleared; the same forgery
/// again, now within the bitmap, was taken as new, and a genuine
/// retransmission of a Dsn already placed was placed twice (a SEND could
/// consume a second receive, an atomic execute twice). A Dsn behind the
/// cumulative point no longer moves the window.
#[test]
fn native_forged_dsn_half_space_away_moves_nothing() {
    use metaroce_proto::conn::RxEvent;
    use metaroce_proto::mrc_wire::{parse, MrcPacket, DATA_HDR_LEN};
    let (mut a, mut b) = one_path_pair();
    let mut buf = [0u8; DATA_HDR_LEN + 4];
    let mut sent = Vec::new();
    for _ in 0..2 {
        a.post(0, tiny_send()).unwrap();
        let t = a.poll_transmit(0, &mut buf).unwrap();
        let mut p = buf[..t.hdr_len].to_vec();
        p.resize(t.hdr_len + 4, 0);
        sent.push(p);
    }
    for p in &sent {
        assert!(matches!(
            b.on_packet(10, p, false, 50_000, 0),
            Ok(RxEvent::Data(_))
        ));
    }
    // The same forgery twice, Dsn 2 + 2^31 (the cumulative Dsn is 2), then
    // one just inside half the space behind.
    let Ok(MrcPacket::Data(mut h, _)) = parse(&sent[1]) else {
        panic!()
    };
    let mut forged_results = Vec::new();
    for dsn in [2 + (1u32 << 31), 2 + (1 << 31), 2 + (1 << 31) + 10] {
        h.dsn = dsn;
        h.path_seq = 1;
        let mut forged = vec![0u8; DATA_HDR_LEN + 4];
        h.write(&mut forged).unwrap();
        forged_results.push(b.on_packet(20, &forged, false, 50_000, 0));
    }
    // The genuine packets again (retransmissions after a lost ACK): duplicates.
    for (i, p) in sent.iter().enumerate() {
        assert_eq!(
            b.on_packet(30, p, false, 50_000, 0),
            Ok(RxEvent::Duplicate),
            "Dsn {i} placed twice"
        );
    }
    assert_eq!(forged_results, [Ok(RxEvent::Duplicate); 3]);
}
