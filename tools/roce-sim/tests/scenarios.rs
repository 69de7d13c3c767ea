//! Targeted protocol scenarios between two endpoints, with packets dropped
//! on purpose: every NAK code, RNR, retries, replay of READs and atomics,
//! ordering rules, UC and UD.

use metaroce_proto::ext::{NakCode, Reth, Syndrome};
use metaroce_proto::opcode::{Opcode, Transport};
use metaroce_proto::packet::{parse, Pmtu};
use metaroce_proto::psn::Psn;
use metaroce_proto::qp::QpConfig;
use metaroce_proto::req::PostError;
use metaroce_proto::resp::GRH_LEN;
use metaroce_proto::timer::rnr_timer_ns;
use metaroce_proto::wr::{
    Access, AtomicOp, RecvCompletion, RecvKind, SendCompletion, SendOp, SendWr, UdDest, WcStatus,
};
use roce_sim::endpoint::{Endpoint, Memory};

const A: usize = 0;
const B: usize = 1;
const BASE: u64 = 0x1000;
const RKEY: u32 = 0x77;

/// A packet as seen on the wire.
#[derive(Clone, Debug)]
struct Seen {
    from: usize,
    opcode: Opcode,
    psn: u32,
    syndrome: Option<Syndrome>,
    reth: Option<Reth>,
    dropped: bool,
}

struct Pair {
    ep: [Endpoint; 2],
    now: u64,
    seen: Vec<Seen>,
    recvs: [Vec<RecvCompletion>; 2],
}

fn cfg(transport: Transport, me: usize) -> QpConfig {
    let mut c = QpConfig::new(transport, 0x10 + me as u32, 0x10 + 1 - me as u32);
    c.pmtu = Pmtu::Mtu256;
    c.sq_depth = 16;
    // Start just below the PSN wrap so that every scenario crosses it.
    c.sq_psn = Psn::new(0xFF_FFFE);
    c.rq_psn = Psn::new(0xFF_FFFE);
    c.min_rnr_timer = 3;
    c.timeout = 8;
    c.qkey = 0x1111;
    c
}

fn memory() -> Memory {
    let data = (0..8192u32).map(|i| (i * 7 + 3) as u8).collect();
    Memory {
        rkey: RKEY,
        base: BASE,
        data,
        access: Access::READ.with(Access::WRITE).with(Access::ATOMIC),
        atomics: 0,
        fail_next_atomic: false,
        flushes: 0,
    }
}

impl Pair {
    fn new(a: QpConfig, b: QpConfig) -> Pair {
        let ep = [
            Endpoint::new(a, memory(), [10, 0, 0, 1], [10, 0, 0, 2]).unwrap(),
            Endpoint::new(b, memory(), [10, 0, 0, 2], [10, 0, 0, 1]).unwrap(),
        ];
        Pair {
            ep,
            now: 0,
            seen: Vec::new(),
            recvs: [Vec::new(), Vec::new()],
        }
    }

    fn rc() -> Pair {
        Pair::new(cfg(Transport::Rc, A), cfg(Transport::Rc, B))
    }

    fn post(&mut self, i: usize, wr: SendWr) {
        let data = (0..wr.len).map(|k| (k as u64 ^ wr.wr_id) as u8).collect();
        self.ep[i].post_send(wr, data).unwrap();
    }

    /// Delivers packets instantly, one per endpoint in turn, until nothing
    /// moves, firing timers up to `until`; `drop` decides which packets
    /// are lost.
    fn run(&mut self, until: u64, mut drop: impl FnMut(&Seen) -> bool) {
        loop {
            let mut moved = false;
            for i in 0..2 {
                if let Some(pkt) = self.ep[i].poll_packet(self.now).unwrap() {
                    moved = true;
                    let p = parse(&pkt[28..]).unwrap();
                    let mut s = Seen {
                        from: i,
                        opcode: p.hdr.bth.opcode,
                        psn: p.hdr.bth.psn.get(),
                        syndrome: p.hdr.aeth.map(|a| a.syndrome),
                        reth: p.hdr.reth,
                        dropped: false,
                    };
                    s.dropped = drop(&s);
                    if !s.dropped {
                        let out = self.ep[1 - i].receive_packet(self.now, &pkt).unwrap();
                        self.recvs[1 - i].extend(out.completion);
                    }
                    self.seen.push(s);
                }
            }
            if moved {
                continue;
            }
            let next = self.ep.iter().filter_map(|e| e.qp.next_deadline()).min();
            match next {
                Some(t) if t <= until => {
                    self.now = self.now.max(t);
                    for e in &mut self.ep {
                        e.qp.on_timer(self.now, &mut e.sq);
                    }
                }
                _ => return,
            }
        }
    }

    fn deliver_all(&mut self) {
        self.run(u64::MAX, |_| false);
    }

    fn completions(&mut self, i: usize) -> Vec<SendCompletion> {
        let e = &mut self.ep[i];
        std::iter::from_fn(|| e.qp.poll_send_completion(&mut e.sq)).collect()
    }

    fn statuses(&mut self, i: usize) -> Vec<(u64, WcStatus)> {
        self.completions(i)
            .iter()
            .map(|c| (c.wr_id, c.status))
            .collect()
    }

    fn count(&self, from: usize, f: impl Fn(&Seen) -> bool) -> usize {
        self.seen.iter().filter(|s| s.from == from && f(s)).count()
    }
}

fn wr(wr_id: u64, op: SendOp, len: u32) -> SendWr {
    SendWr {
        wr_id,
        op,
        len,
        signaled: true,
        fence: false,
        solicited: false,
        ud: None,
    }
}

fn naks(code: NakCode) -> impl Fn(&Seen) -> bool {
    move |s| s.syndrome == Some(Syndrome::Nak(code))
}

#[test]
fn send_crosses_psn_wrap() {
    let mut p = Pair::rc();
    let id = p.ep[B].rq.post(2000);
    p.post(A, wr(1, SendOp::SendImm { imm: 0xABCD }, 1000));
    p.deliver_all();
    assert_eq!(p.statuses(A), [(1, WcStatus::Success)]);
    let c = p.recvs[B][0];
    assert_eq!(
        (c.id, c.status, c.kind, c.byte_len, c.imm),
        (id, WcStatus::Success, RecvKind::Send, 1000, Some(0xABCD))
    );
    let want: Vec<u8> = (0..1000u64).map(|k| (k ^ 1) as u8).collect();
    assert_eq!(&p.ep[B].rq.bufs[&id][..1000], &want[..]);
    // 4 packets: PSNs 0xFFFFFE, 0xFFFFFF, 0, 1.
    let psns: Vec<u32> = p
        .seen
        .iter()
        .filter(|s| s.from == A)
        .map(|s| s.psn)
        .collect();
    assert_eq!(psns, [0xFF_FFFE, 0xFF_FFFF, 0, 1]);
}

#[test]
fn lost_packet_gets_one_sequence_nak_and_go_back_n() {
    let mut p = Pair::rc();
    p.ep[B].rq.post(2000);
    p.post(A, wr(1, SendOp::Send, 1200)); // 5 packets
    let mut first = true;
    p.run(u64::MAX, |s| {
        let lose = s.from == A && s.opcode == Opcode::RcSendMiddle && first;
        first &= !lose;
        lose
    });
    assert_eq!(p.statuses(A), [(1, WcStatus::Success)]);
    assert_eq!(p.count(B, naks(NakCode::PsnSeqErr)), 1, "one NAK per gap");
    let st = p.ep[A].qp.stats();
    assert_eq!(st.comp.seq_naks, 1);
    assert_eq!(
        st.comp.timeouts, 0,
        "the NAK, not the timer, triggers the retry"
    );
    assert!(st.req.retransmits >= 1);
    assert_eq!(p.recvs[B].len(), 1);
}

#[test]
fn rnr_nak_waits_for_the_rnr_timer() {
    let mut p = Pair::rc();
    p.post(A, wr(1, SendOp::Send, 10));
    p.deliver_all_until(0);
    assert_eq!(
        p.count(B, |s| s.syndrome == Some(Syndrome::Rnr { timer: 3 })),
        1
    );
    assert_eq!(p.ep[A].qp.next_deadline(), Some(rnr_timer_ns(3)));
    // Nothing is resent before the timer expires.
    let sent = p.count(A, |_| true);
    p.ep[B].rq.post(100);
    p.run(rnr_timer_ns(3) - 1, |_| false);
    assert_eq!(p.count(A, |_| true), sent);
    p.deliver_all();
    assert_eq!(p.statuses(A), [(1, WcStatus::Success)]);
    assert_eq!(p.now, rnr_timer_ns(3));
    assert_eq!(p.recvs[B].len(), 1);
}

impl Pair {
    fn deliver_all_until(&mut self, t: u64) {
        self.run(t, |_| false);
    }
}

#[test]
fn rnr_retry_exhausted_flushes_the_rest() {
    let mut a = cfg(Transport::Rc, A);
    a.rnr_retry = 2;
    let mut p = Pair::new(a, cfg(Transport::Rc, B));
    p.post(A, wr(1, SendOp::Send, 10));
    p.post(
        A,
        wr(
            2,
            SendOp::Write {
                va: BASE,
                rkey: RKEY,
            },
            10,
        ),
    );
    p.deliver_all();
    assert_eq!(
        p.count(B, |s| matches!(s.syndrome, Some(Syndrome::Rnr { .. }))),
        3
    );
    assert_eq!(
        p.statuses(A),
        [(1, WcStatus::RnrRetryExcErr), (2, WcStatus::WrFlushErr)]
    );
    assert!(p.ep[A].qp.is_error());
    // Work posted in the error state is flushed too.
    p.post(A, wr(3, SendOp::Send, 1));
    assert_eq!(p.statuses(A), [(3, WcStatus::WrFlushErr)]);
}

#[test]
fn retry_exhausted_when_link_is_cut() {
    let mut p = Pair::rc();
    for i in 1..=3 {
        p.post(
            A,
            wr(
                i,
                SendOp::Write {
                    va: BASE,
                    rkey: RKEY,
                },
                300,
            ),
        );
    }
    p.run(u64::MAX, |s| s.from == A);
    let st = p.ep[A].qp.stats();
    assert_eq!(
        st.comp.timeouts, 8,
        "initial timeout plus retry_cnt = 7 retries"
    );
    assert_eq!(st.comp.retries, 7);
    assert_eq!(
        p.statuses(A),
        [
            (1, WcStatus::RetryExcErr),
            (2, WcStatus::WrFlushErr),
            (3, WcStatus::WrFlushErr)
        ]
    );
    assert!(p.ep[A].qp.is_error());
    assert_eq!(p.ep[A].qp.sq_used(), 0);
}

#[test]
fn remote_access_error() {
    let mut p = Pair::rc();
    p.post(
        A,
        wr(
            1,
            SendOp::Write {
                va: BASE,
                rkey: RKEY,
            },
            8,
        ),
    );
    p.post(
        A,
        wr(
            2,
            SendOp::Write {
                va: BASE,
                rkey: RKEY + 1,
            },
            8,
        ),
    );
    p.post(A, wr(3, SendOp::Send, 8));
    p.deliver_all();
    assert_eq!(p.count(B, naks(NakCode::RemoteAccess)), 1);
    assert_eq!(
        p.statuses(A),
        [
            (1, WcStatus::Success),
            (2, WcStatus::RemAccessErr),
            (3, WcStatus::WrFlushErr)
        ]
    );
    assert!(p.ep[A].qp.is_error() && p.ep[B].qp.is_error());
}

#[test]
fn misaligned_atomic_is_an_invalid_request() {
    let mut p = Pair::rc();
    p.post(
        A,
        wr(
            1,
            SendOp::Atomic {
                va: BASE + 4,
                rkey: RKEY,
                op: AtomicOp::FetchAdd { add: 1 },
            },
            8,
        ),
    );
    p.deliver_all();
    assert_eq!(p.count(B, naks(NakCode::InvalidRequest)), 1);
    assert_eq!(p.statuses(A), [(1, WcStatus::RemInvReqErr)]);
    assert_eq!(p.ep[B].mem.atomics, 0);
}

#[test]
fn disabled_remote_read_is_an_invalid_request() {
    let mut b = cfg(Transport::Rc, B);
    b.access = Access::WRITE;
    let mut p = Pair::new(cfg(Transport::Rc, A), b);
    p.post(
        A,
        wr(
            1,
            SendOp::Read {
                va: BASE,
                rkey: RKEY,
            },
            16,
        ),
    );
    p.deliver_all();
    assert_eq!(p.statuses(A), [(1, WcStatus::RemInvReqErr)]);
}

#[test]
fn failed_atomic_is_a_remote_operational_error() {
    let mut p = Pair::rc();
    p.ep[B].mem.fail_next_atomic = true;
    p.post(
        A,
        wr(
            1,
            SendOp::Atomic {
                va: BASE,
                rkey: RKEY,
                op: AtomicOp::FetchAdd { add: 1 },
            },
            8,
        ),
    );
    p.deliver_all();
    assert_eq!(p.count(B, naks(NakCode::RemoteOperational)), 1);
    assert_eq!(p.statuses(A), [(1, WcStatus::RemOpErr)]);
}

#[test]
fn too_small_receive_buffer() {
    let mut p = Pair::rc();
    let id = p.ep[B].rq.post(100);
    p.post(A, wr(1, SendOp::Send, 300));
    p.deliver_all();
    assert_eq!(p.statuses(A), [(1, WcStatus::RemInvReqErr)]);
    let c = p.recvs[B][0];
    assert_eq!((c.id, c.status), (id, WcStatus::LocLenErr));
}

#[test]
fn lost_read_response_reissues_the_rest_of_the_read() {
    let mut p = Pair::rc();
    p.post(
        A,
        wr(
            1,
            SendOp::Read {
                va: BASE + 100,
                rkey: RKEY,
            },
            1000,
        ),
    ); // 4 responses
    let mut lost = false;
    p.run(u64::MAX, |s| {
        let lose = s.opcode == Opcode::RcReadRespMiddle && !lost;
        lost |= lose;
        lose
    });
    assert_eq!(p.statuses(A), [(1, WcStatus::Success)]);
    assert_eq!(p.ep[A].local(0), &p.ep[B].mem.data[100..1100]);
    // The second READ request starts at the lost response's PSN, one MTU in.
    let reqs: Vec<_> = p
        .seen
        .iter()
        .filter(|s| s.opcode == Opcode::RcReadRequest)
        .collect();
    assert_eq!(reqs.len(), 2);
    assert_eq!(reqs[1].psn, Psn::new(reqs[0].psn).add(1).get());
    let r = reqs[1].reth.unwrap();
    assert_eq!((r.va, r.len), (BASE + 100 + 256, 1000 - 256));
    // The new request arrives while the first stream is still being sent:
    // the responder restarts the stream at the requested PSN (First,
    // Middle, Last) instead of finishing the old one.
    let resp: Vec<(Opcode, u32)> = p
        .seen
        .iter()
        .filter(|s| s.from == B)
        .map(|s| (s.opcode, s.psn))
        .collect();
    let psn = |k| Psn::new(reqs[0].psn).add(k).get();
    use Opcode::*;
    assert_eq!(
        resp,
        [
            (RcReadRespFirst, psn(0)),
            (RcReadRespMiddle, psn(1)),
            (RcReadRespMiddle, psn(2)),
            (RcReadRespFirst, psn(1)),
            (RcReadRespMiddle, psn(2)),
            (RcReadRespLast, psn(3)),
        ]
    );
}

#[test]
fn duplicate_atomic_is_answered_from_the_replay_cache() {
    let mut p = Pair::rc();
    p.ep[B].mem.data[..8].copy_from_slice(&41u64.to_le_bytes());
    p.post(
        A,
        wr(
            1,
            SendOp::Atomic {
                va: BASE,
                rkey: RKEY,
                op: AtomicOp::FetchAdd { add: 1 },
            },
            8,
        ),
    );
    let mut lost = false;
    p.run(u64::MAX, |s| {
        let lose = s.opcode == Opcode::RcAtomicAck && !lost;
        lost |= lose;
        lose
    });
    assert_eq!(p.statuses(A), [(1, WcStatus::Success)]);
    assert_eq!(p.ep[A].qp.stats().comp.timeouts, 1);
    assert_eq!(p.ep[B].mem.atomics, 1, "executed exactly once");
    assert_eq!(p.ep[B].qp.stats().resp.duplicates, 1);
    assert_eq!(p.ep[A].local(0), &41u64.to_le_bytes());
    assert_eq!(&p.ep[B].mem.data[..8], &42u64.to_le_bytes());
}

#[test]
fn later_ack_completes_earlier_requests() {
    let mut p = Pair::rc();
    p.post(
        A,
        wr(
            1,
            SendOp::Write {
                va: BASE,
                rkey: RKEY,
            },
            4,
        ),
    );
    p.post(
        A,
        wr(
            2,
            SendOp::Write {
                va: BASE + 8,
                rkey: RKEY,
            },
            4,
        ),
    );
    let mut acks = 0;
    p.run(u64::MAX, |s| {
        acks += usize::from(s.opcode == Opcode::RcAck);
        s.opcode == Opcode::RcAck && acks == 1
    });
    assert_eq!(
        p.statuses(A),
        [(1, WcStatus::Success), (2, WcStatus::Success)]
    );
    assert_eq!(p.ep[A].qp.stats().req.retransmits, 0);
}

#[test]
fn unsignaled_requests_complete_silently_in_order() {
    let mut p = Pair::rc();
    let mut w = wr(
        1,
        SendOp::Write {
            va: BASE,
            rkey: RKEY,
        },
        4,
    );
    w.signaled = false;
    p.post(A, w);
    p.post(
        A,
        wr(
            2,
            SendOp::Write {
                va: BASE,
                rkey: RKEY,
            },
            4,
        ),
    );
    w.wr_id = 3;
    p.post(A, w);
    p.deliver_all();
    assert_eq!(p.statuses(A), [(2, WcStatus::Success)]);
    assert_eq!(p.ep[A].qp.sq_used(), 0);
}

#[test]
fn max_rd_atomic_limits_outstanding_reads() {
    let mut a = cfg(Transport::Rc, A);
    a.max_rd_atomic = 1;
    let mut p = Pair::new(a, cfg(Transport::Rc, B));
    for i in 1..=3 {
        p.post(
            A,
            wr(
                i,
                SendOp::Read {
                    va: BASE,
                    rkey: RKEY,
                },
                8,
            ),
        );
    }
    let first = p.ep[A].poll_packet(0).unwrap();
    assert!(first.is_some());
    assert!(
        p.ep[A].poll_packet(0).unwrap().is_none(),
        "second READ must wait"
    );
    p.ep[B].receive_packet(0, &first.unwrap()).unwrap();
    p.deliver_all();
    assert_eq!(p.statuses(A).len(), 3);
}

#[test]
fn fence_waits_for_earlier_reads() {
    let mut p = Pair::rc();
    p.ep[B].rq.post(100);
    p.post(
        A,
        wr(
            1,
            SendOp::Read {
                va: BASE,
                rkey: RKEY,
            },
            8,
        ),
    );
    let mut fenced = wr(2, SendOp::Send, 8);
    fenced.fence = true;
    p.post(A, fenced);
    assert!(p.ep[A].poll_packet(0).unwrap().is_some());
    assert!(
        p.ep[A].poll_packet(0).unwrap().is_none(),
        "fenced SEND waits"
    );
    p.deliver_all();
    assert_eq!(
        p.statuses(A),
        [(1, WcStatus::Success), (2, WcStatus::Success)]
    );
}

#[test]
fn ack_coalescing_every_n_packets() {
    let mut a = cfg(Transport::Rc, A);
    a.ack_req_every = 1000;
    let mut b = cfg(Transport::Rc, B);
    b.ack_every = 4;
    let mut p = Pair::new(a, b);
    p.post(
        A,
        wr(
            1,
            SendOp::Write {
                va: BASE,
                rkey: RKEY,
            },
            10 * 256,
        ),
    );
    p.deliver_all();
    assert_eq!(
        p.count(B, |s| s.opcode == Opcode::RcAck),
        3,
        "after packets 4, 8 and the last"
    );
    assert_eq!(p.statuses(A), [(1, WcStatus::Success)]);
}

#[test]
fn set_error_flushes_everything() {
    let mut p = Pair::rc();
    p.post(A, wr(1, SendOp::Send, 4));
    p.post(A, wr(2, SendOp::Send, 4));
    assert!(p.ep[A].poll_packet(0).unwrap().is_some());
    p.ep[A].qp.set_error();
    assert!(p.ep[A].poll_packet(0).unwrap().is_none());
    assert_eq!(
        p.statuses(A),
        [(1, WcStatus::WrFlushErr), (2, WcStatus::WrFlushErr)]
    );
}

#[test]
fn post_validation() {
    let mut p = Pair::new(cfg(Transport::Uc, A), cfg(Transport::Uc, B));
    let e = &mut p.ep[A];
    assert_eq!(
        e.post_send(wr(1, SendOp::Read { va: 0, rkey: 0 }, 4), vec![0; 4]),
        Err(PostError::InvalidOp)
    );
    let mut rc = Pair::rc();
    let e = &mut rc.ep[A];
    let atomic = SendOp::Atomic {
        va: 0,
        rkey: 0,
        op: AtomicOp::FetchAdd { add: 1 },
    };
    assert_eq!(
        e.post_send(wr(1, atomic, 4), vec![0; 4]),
        Err(PostError::InvalidLength)
    );
    for i in 0..16 {
        e.post_send(wr(i, SendOp::Send, 0), Vec::new()).unwrap();
    }
    assert_eq!(
        e.post_send(wr(16, SendOp::Send, 0), Vec::new()),
        Err(PostError::QueueFull)
    );
    let mut ud = Pair::new(cfg(Transport::Ud, A), cfg(Transport::Ud, B));
    assert_eq!(
        ud.ep[A].post_send(wr(1, SendOp::Send, 4), vec![0; 4]),
        Err(PostError::MissingDest)
    );
}

#[test]
fn uc_gap_drops_the_message_and_reuses_the_receive_wqe() {
    let mut p = Pair::new(cfg(Transport::Uc, A), cfg(Transport::Uc, B));
    let id = p.ep[B].rq.post(1000);
    p.post(A, wr(1, SendOp::Send, 600)); // First, Middle, Last
    p.post(A, wr(2, SendOp::SendImm { imm: 5 }, 100));
    p.run(u64::MAX, |s| s.opcode == Opcode::UcSendMiddle);
    // UC completes on transmission; nothing is acknowledged or resent.
    assert_eq!(
        p.statuses(A),
        [(1, WcStatus::Success), (2, WcStatus::Success)]
    );
    assert_eq!(p.count(B, |_| true), 0);
    assert_eq!(p.ep[A].qp.next_deadline(), None);
    // The broken message is dropped; its WQE receives the next message.
    assert_eq!(p.recvs[B].len(), 1);
    let c = p.recvs[B][0];
    assert_eq!((c.id, c.byte_len, c.imm), (id, 100, Some(5)));
    let want: Vec<u8> = (0..100u64).map(|k| (k ^ 2) as u8).collect();
    assert_eq!(&p.ep[B].rq.bufs[&id][..100], &want[..]);
}

#[test]
fn uc_write_is_placed() {
    let mut p = Pair::new(cfg(Transport::Uc, A), cfg(Transport::Uc, B));
    p.post(
        A,
        wr(
            1,
            SendOp::Write {
                va: BASE + 10,
                rkey: RKEY,
            },
            700,
        ),
    );
    p.deliver_all();
    let want: Vec<u8> = (0..700u64).map(|k| (k ^ 1) as u8).collect();
    assert_eq!(&p.ep[B].mem.data[10..710], &want[..]);
}

#[test]
fn ud_delivers_with_grh_space_and_checks_qkey() {
    let mut p = Pair::new(cfg(Transport::Ud, A), cfg(Transport::Ud, B));
    let small = p.ep[B].rq.post(GRH_LEN + 10);
    let big = p.ep[B].rq.post(GRH_LEN + 256);
    let dest = |qkey| Some(UdDest { qpn: 0x11, qkey });
    let mut w = wr(1, SendOp::Send, 20);
    w.ud = dest(0x2222);
    p.post(A, w); // wrong Q_Key: dropped
    w.wr_id = 2;
    w.ud = dest(0x8000_0000); // "use the QP's Q_Key"
    p.post(A, w); // too long for `small`
    w.wr_id = 3;
    w.op = SendOp::SendImm { imm: 9 };
    p.post(A, w);
    let mut too_big = wr(4, SendOp::Send, 257);
    too_big.ud = dest(0x1111);
    assert_eq!(
        p.ep[A].post_send(too_big, vec![0; 257]),
        Err(PostError::InvalidLength)
    );
    p.deliver_all();
    assert_eq!(p.statuses(A).len(), 3);
    let r = &p.recvs[B];
    assert_eq!(r.len(), 2);
    assert_eq!((r[0].id, r[0].status), (small, WcStatus::LocLenErr));
    assert_eq!(
        (r[1].id, r[1].status, r[1].byte_len, r[1].imm, r[1].src_qp),
        (big, WcStatus::Success, GRH_LEN + 20, Some(9), Some(0x10))
    );
    let want: Vec<u8> = (0..20u64).map(|k| (k ^ 3) as u8).collect();
    assert_eq!(&p.ep[B].rq.bufs[&big][GRH_LEN as usize..][..20], &want[..]);
}

#[test]
fn send_with_invalidate_and_write_with_immediate() {
    let mut p = Pair::rc();
    p.ep[B].rq.post(100);
    p.ep[B].rq.post(100);
    p.post(A, wr(1, SendOp::SendInv { rkey: 0xBEEF }, 600));
    p.post(
        A,
        wr(
            2,
            SendOp::WriteImm {
                va: BASE,
                rkey: RKEY,
                imm: 7,
            },
            600,
        ),
    );
    p.ep[B].rq.bufs.values_mut().for_each(|b| b.resize(1000, 0));
    p.ep[B].rq.posted.iter_mut().for_each(|w| w.len = 1000);
    p.deliver_all();
    assert_eq!(
        p.statuses(A),
        [(1, WcStatus::Success), (2, WcStatus::Success)]
    );
    let r = &p.recvs[B];
    assert_eq!(
        (r[0].kind, r[0].invalidate, r[0].byte_len),
        (RecvKind::Send, Some(0xBEEF), 600)
    );
    assert_eq!(
        (r[1].kind, r[1].imm, r[1].byte_len),
        (RecvKind::WriteImm, Some(7), 600)
    );
}
