//! Packet-level tests of the transport state machines through the `Qp`
//! interface: exact wire behaviour of the requester and responder, and
//! robustness against arbitrary packets.

mod common;

use metaroce_proto::bth::Bth;
use metaroce_proto::ext::{
    Aeth, AtomicEth, Deth, Feth, NakCode, Reth, Syndrome, FLUSH_GLOBAL, FLUSH_MR, FLUSH_PERSISTENT,
    FLUSH_RANGE,
};
use metaroce_proto::opcode::{Opcode, Position, Transport};
use metaroce_proto::packet::{build, pad_for, parse, Headers, Packet, PayloadRef, Pmtu, TxDesc};
use metaroce_proto::psn::Psn;
use metaroce_proto::qp::{DropReason, Qp, QpConfig, RxOutcome};
use metaroce_proto::resp::{AccessError, MemAccess, RecvQueue};
use metaroce_proto::wr::{Access, AtomicOp, Place, RecvWqe, SendOp, SendWqe, SendWr};
use proptest::prelude::*;

/// Memory that allows everything and counts atomics.
struct AnyMem(u64);

impl MemAccess for AnyMem {
    fn check(&mut self, _: u32, _: u64, _: u32, _: Access) -> Result<(), AccessError> {
        Ok(())
    }
    fn atomic(&mut self, _: u32, _: u64, _: AtomicOp) -> Result<u64, AccessError> {
        self.0 += 1;
        Ok(self.0)
    }
    fn atomic_write(&mut self, _: u32, _: u64, value: [u8; 8]) -> Result<(), AccessError> {
        self.0 += u64::from_ne_bytes(value);
        Ok(())
    }
    fn flush(&mut self, _: u32, _: u64, _: u32, _: bool, _: Access) -> Result<(), AccessError> {
        self.0 += 1000;
        Ok(())
    }
}

/// Memory that records every FLUSH it is asked for and refuses those to `rkey` 666.
#[derive(Default)]
struct FlushMem(Vec<(u32, u64, u32, bool, Access)>);

impl MemAccess for FlushMem {
    fn check(&mut self, _: u32, _: u64, _: u32, _: Access) -> Result<(), AccessError> {
        Ok(())
    }
    fn atomic(&mut self, _: u32, _: u64, _: AtomicOp) -> Result<u64, AccessError> {
        Ok(0)
    }
    fn atomic_write(&mut self, _: u32, _: u64, _: [u8; 8]) -> Result<(), AccessError> {
        Ok(())
    }
    fn flush(
        &mut self,
        rkey: u32,
        va: u64,
        len: u32,
        whole: bool,
        a: Access,
    ) -> Result<(), AccessError> {
        if rkey == 666 {
            return Err(AccessError::Access);
        }
        self.0.push((rkey, va, len, whole, a));
        Ok(())
    }
}

/// A receive queue with `n` WQEs of 4 KiB.
struct Rq(u64);

impl RecvQueue for Rq {
    fn take(&mut self) -> Option<RecvWqe> {
        self.0.checked_sub(1).map(|n| {
            self.0 = n;
            RecvWqe { id: n, len: 4096 }
        })
    }
}

const START: u32 = 0xFF_FFFE;

fn config(t: Transport) -> QpConfig {
    let mut c = QpConfig::new(t, 5, 6);
    c.pmtu = Pmtu::Mtu256;
    c.sq_depth = 8;
    c.sq_psn = Psn::new(START);
    c.rq_psn = Psn::new(START);
    c.min_rnr_timer = 9;
    c.ack_every = 1000;
    c.ack_req_every = 1000;
    c
}

fn qp(t: Transport) -> (Qp<4>, Vec<SendWqe>) {
    (Qp::new(config(t)).unwrap(), vec![SendWqe::default(); 8])
}

fn psn(k: u32) -> Psn {
    Psn::new(START).add(k)
}

/// A request packet as the peer's requester would send it (an ACK opcode gives a plain ACK).
fn request(op: Opcode, k: u32, payload: usize) -> (Headers, Vec<u8>) {
    let mut h = Headers::new(Bth {
        opcode: op,
        solicited: false,
        mig_req: false,
        pad: pad_for(payload),
        pkey: 0xFFFF,
        resv8: 0,
        dest_qp: 5,
        ack_req: op.info().pos.is_end(),
        psn: psn(k),
    });
    let e = op.info().exts;
    use metaroce_proto::opcode::ExtSet;
    if e.contains(ExtSet::RETH) {
        h.reth = Some(Reth {
            va: 0x1000,
            rkey: 1,
            len: payload as u32,
        });
    }
    if e.contains(ExtSet::FETH) {
        h.feth = Some(Feth {
            placement: FLUSH_GLOBAL,
            selectivity: FLUSH_RANGE,
        });
    }
    if e.contains(ExtSet::IMM) {
        h.imm = Some(42);
    }
    if e.contains(ExtSet::DETH) {
        h.deth = Some(Deth { qkey: 0, src_qp: 9 });
    }
    if e.contains(ExtSet::AETH) {
        h.aeth = Some(Aeth {
            syndrome: Syndrome::Ack { credits: 0x1F },
            msn: 0,
        });
    }
    if e.contains(ExtSet::ATOMIC_ETH) {
        h.atomic_eth = Some(AtomicEth {
            va: 0x2000,
            rkey: 1,
            swap_add: 1,
            compare: 0,
        });
    }
    let mut buf = vec![0u8; 4200];
    let n = build(&h, &vec![0xAB; payload], &mut buf).unwrap();
    buf.truncate(n);
    (h, buf)
}

fn feed(q: &mut Qp<4>, sq: &mut [SendWqe], rq: &mut Rq, buf: &[u8]) -> RxOutcome {
    let p = parse(buf).unwrap();
    q.receive(0, &p, sq, &mut AnyMem(0), rq)
}

fn drain(q: &mut Qp<4>, sq: &mut [SendWqe]) -> Vec<TxDesc> {
    std::iter::from_fn(|| q.poll_tx(0, sq)).collect()
}

fn ack_of(d: &TxDesc) -> (Opcode, Psn, Syndrome) {
    (
        d.hdr.bth.opcode,
        d.hdr.bth.psn,
        d.hdr.aeth.unwrap().syndrome,
    )
}

#[test]
fn requester_segments_and_numbers_packets() {
    let (mut q, mut sq) = qp(Transport::Rc);
    let wr = |op, len| SendWr {
        wr_id: 1,
        op,
        len,
        signaled: true,
        fence: false,
        solicited: true,
        ud: None,
    };
    q.post_send(&mut sq, wr(SendOp::SendImm { imm: 7 }, 600))
        .unwrap();
    q.post_send(&mut sq, wr(SendOp::Read { va: 0x10, rkey: 3 }, 700))
        .unwrap();
    q.post_send(&mut sq, wr(SendOp::Write { va: 0x20, rkey: 4 }, 10))
        .unwrap();
    let d = drain(&mut q, &mut sq);
    let ops: Vec<(Opcode, Psn, bool)> = d
        .iter()
        .map(|d| (d.hdr.bth.opcode, d.hdr.bth.psn, d.hdr.bth.ack_req))
        .collect();
    use Opcode::*;
    assert_eq!(
        ops,
        [
            (RcSendFirst, psn(0), false),
            (RcSendMiddle, psn(1), false),
            (RcSendLastImm, psn(2), true),
            (RcReadRequest, psn(3), true),
            // The READ consumed ceil(700 / 256) = 3 PSNs.
            (RcWriteOnly, psn(6), true),
        ]
    );
    assert_eq!(d[2].hdr.imm, Some(7));
    assert!(d[2].hdr.bth.solicited && !d[0].hdr.bth.solicited);
    assert_eq!(
        d[2].payload,
        PayloadRef::Sq {
            slot: 0,
            offset: 512,
            len: 88
        }
    );
    assert_eq!(d[2].hdr.bth.pad, 0);
    assert_eq!(
        d[3].hdr.reth,
        Some(Reth {
            va: 0x10,
            rkey: 3,
            len: 700
        })
    );
    assert_eq!(
        d[4].hdr.reth,
        Some(Reth {
            va: 0x20,
            rkey: 4,
            len: 10
        })
    );
    assert_eq!(d[4].hdr.bth.pad, 2);
    assert!(d.iter().all(|d| d.hdr.bth.dest_qp == 6));
    // Every descriptor encodes.
    let mut buf = [0u8; 512];
    assert!(d
        .iter()
        .all(|d| build(&d.hdr, &vec![0; d.payload.len() as usize], &mut buf).is_ok()));
}

#[test]
fn responder_naks_a_gap_once_then_drops_silently() {
    let (mut q, mut sq) = qp(Transport::Rc);
    let mut rq = Rq(10);
    let (_, p1) = request(Opcode::RcSendOnly, 1, 4);
    let (_, p2) = request(Opcode::RcSendOnly, 2, 4);
    assert_eq!(
        feed(&mut q, &mut sq, &mut rq, &p1).drop,
        Some(DropReason::OutOfSequence)
    );
    assert_eq!(
        feed(&mut q, &mut sq, &mut rq, &p2).drop,
        Some(DropReason::OutOfSequence)
    );
    let d = drain(&mut q, &mut sq);
    assert_eq!(d.len(), 1);
    assert_eq!(
        ack_of(&d[0]),
        (Opcode::RcAck, psn(0), Syndrome::Nak(NakCode::PsnSeqErr))
    );
    // More packets ahead of the gap: no second NAK.
    assert_eq!(
        feed(&mut q, &mut sq, &mut rq, &p1).drop,
        Some(DropReason::OutOfSequence)
    );
    assert!(drain(&mut q, &mut sq).is_empty());
    // The gap is filled: ACK, and the next gap is NAKed again.
    let (_, p0) = request(Opcode::RcSendOnly, 0, 4);
    let out = feed(&mut q, &mut sq, &mut rq, &p0);
    assert_eq!(
        out.place,
        Some(Place::Recv {
            id: 9,
            offset: 0,
            len: 4
        })
    );
    assert_eq!(out.completion.map(|c| c.byte_len), Some(4));
    assert_eq!(
        ack_of(&drain(&mut q, &mut sq)[0]),
        (Opcode::RcAck, psn(0), Syndrome::Ack { credits: 0x1F })
    );
    feed(&mut q, &mut sq, &mut rq, &p2);
    assert_eq!(
        ack_of(&drain(&mut q, &mut sq)[0]).2,
        Syndrome::Nak(NakCode::PsnSeqErr)
    );
}

#[test]
fn duplicate_is_acked_with_the_latest_psn_and_not_executed() {
    let (mut q, mut sq) = qp(Transport::Rc);
    let mut rq = Rq(10);
    for k in 0..3 {
        let (_, p) = request(Opcode::RcSendOnly, k, 8);
        assert!(feed(&mut q, &mut sq, &mut rq, &p).completion.is_some());
    }
    let acks = drain(&mut q, &mut sq);
    assert_eq!(acks.len(), 1, "coalesced");
    assert_eq!(
        acks[0].hdr.aeth,
        Some(Aeth {
            syndrome: Syndrome::Ack { credits: 0x1F },
            msn: 3
        })
    );
    let (_, dup) = request(Opcode::RcSendOnly, 0, 8);
    let out = feed(&mut q, &mut sq, &mut rq, &dup);
    assert_eq!(
        (out.drop, out.place, out.completion),
        (Some(DropReason::Duplicate), None, None)
    );
    assert_eq!(rq.0, 7, "no receive WQE consumed");
    assert_eq!(ack_of(&drain(&mut q, &mut sq)[0]).1, psn(2));
}

#[test]
fn rnr_nak_carries_min_rnr_timer() {
    let (mut q, mut sq) = qp(Transport::Rc);
    let (_, p) = request(Opcode::RcSendFirst, 0, 256);
    let out = feed(&mut q, &mut sq, &mut Rq(0), &p);
    assert_eq!(out.drop, Some(DropReason::NoRecvWqe));
    assert_eq!(
        ack_of(&drain(&mut q, &mut sq)[0]),
        (Opcode::RcAck, psn(0), Syndrome::Rnr { timer: 9 })
    );
    // Retried with a WQE posted, it is accepted.
    assert_eq!(feed(&mut q, &mut sq, &mut Rq(1), &p).drop, None);
}

#[test]
fn read_responses_have_aeth_on_first_and_last_only() {
    let (mut q, mut sq) = qp(Transport::Rc);
    let mut rq = Rq(1);
    let (_, r) = request(Opcode::RcReadRequest, 0, 0);
    let mut r = r;
    // Patch the RETH length to 600 bytes: 3 responses at 256-byte MTU.
    r[12 + 12..12 + 16].copy_from_slice(&600u32.to_be_bytes());
    assert_eq!(feed(&mut q, &mut sq, &mut rq, &r).drop, None);
    let (_, s) = request(Opcode::RcSendOnly, 3, 4);
    assert_eq!(
        feed(&mut q, &mut sq, &mut rq, &s).drop,
        None,
        "next PSN after a 3-packet READ"
    );
    let d = drain(&mut q, &mut sq);
    let got: Vec<(Opcode, Psn, bool, PayloadRef)> = d
        .iter()
        .map(|d| {
            (
                d.hdr.bth.opcode,
                d.hdr.bth.psn,
                d.hdr.aeth.is_some(),
                d.payload,
            )
        })
        .collect();
    use Opcode::*;
    let mr = |off: u64, len| PayloadRef::Mr {
        rkey: 1,
        va: 0x1000 + off,
        len,
    };
    assert_eq!(
        got,
        [
            (RcReadRespFirst, psn(0), true, mr(0, 256)),
            (RcReadRespMiddle, psn(1), false, mr(256, 256)),
            (RcReadRespLast, psn(2), true, mr(512, 88)),
            // The SEND's ACK follows the READ responses.
            (RcAck, psn(3), true, PayloadRef::None),
        ]
    );
    assert_eq!(d[0].hdr.aeth.unwrap().msn, 1);
    assert_eq!(d[3].hdr.aeth.unwrap().msn, 2);
}

#[test]
fn atomic_replay_does_not_execute_again() {
    let (mut q, mut sq) = qp(Transport::Rc);
    let (_, buf) = request(Opcode::RcFetchAdd, 0, 0);
    let mut mem = AnyMem(100);
    let p = parse(&buf).unwrap();
    q.receive(0, &p, &mut sq, &mut mem, &mut Rq(0));
    let first = drain(&mut q, &mut sq);
    assert_eq!(
        q.receive(0, &p, &mut sq, &mut mem, &mut Rq(0)).drop,
        Some(DropReason::Duplicate)
    );
    let again = drain(&mut q, &mut sq);
    assert_eq!(mem.0, 101, "executed once");
    assert_eq!(first, again);
    assert_eq!(first[0].hdr.atomic_ack_eth.map(|a| a.orig), Some(101));
}

/// Encodes a descriptor with `payload` and parses it back, as the wire would.
fn wire(d: &TxDesc, payload: &[u8]) -> Vec<u8> {
    let mut buf = vec![0u8; 4200];
    let n = build(&d.hdr, payload, &mut buf).unwrap();
    buf.truncate(n);
    buf
}

/// Feeds request `req` (at `psn(0)`) to responder `b` twice: it is executed and answered by an
/// empty READ RESPONSE Only at its PSN; the retry is a duplicate, answered again with the same
/// packet from the resource. Returns that response.
fn answered_once(
    b: &mut Qp<4>,
    bsq: &mut [SendWqe],
    req: &[u8],
    mem: &mut impl MemAccess,
) -> Vec<TxDesc> {
    let p = parse(req).unwrap();
    assert_eq!(b.receive(0, &p, bsq, mem, &mut Rq(0)).drop, None);
    let resp = drain(b, bsq);
    assert_eq!(resp.len(), 1);
    assert_eq!(
        (resp[0].hdr.bth.opcode, resp[0].hdr.bth.psn, resp[0].payload),
        (Opcode::RcReadRespOnly, psn(0), PayloadRef::None)
    );
    assert_eq!(
        b.receive(0, &p, bsq, mem, &mut Rq(0)).drop,
        Some(DropReason::Duplicate)
    );
    assert_eq!(drain(b, bsq), resp);
    resp
}

#[test]
fn atomic_write_round_trip_is_executed_once() {
    let (mut a, mut asq) = qp(Transport::Rc);
    let (mut b, mut bsq) = qp(Transport::Rc);
    let wr = |len| SendWr {
        wr_id: 9,
        op: SendOp::AtomicWrite { va: 0x40, rkey: 7 },
        len,
        signaled: true,
        fence: false,
        solicited: false,
        ud: None,
    };
    assert!(
        a.post_send(&mut asq, wr(4)).is_err(),
        "ATOMIC WRITE carries exactly 8 bytes"
    );
    a.post_send(&mut asq, wr(8)).unwrap();
    let d = drain(&mut a, &mut asq);
    assert_eq!(d.len(), 1);
    assert_eq!(d[0].hdr.bth.opcode, Opcode::RcAtomicWrite);
    assert_eq!(
        d[0].hdr.reth,
        Some(Reth {
            va: 0x40,
            rkey: 7,
            len: 8
        })
    );
    assert_eq!(
        d[0].payload,
        PayloadRef::Sq {
            slot: 0,
            offset: 0,
            len: 8
        }
    );
    assert!(d[0].hdr.bth.ack_req);
    let req = wire(&d[0], &5u64.to_ne_bytes());

    let mut mem = AnyMem(0);
    let resp = answered_once(&mut b, &mut bsq, &req, &mut mem);
    assert_eq!(mem.0, 5, "written once");

    assert_eq!(
        a.poll_send_completion(&mut asq),
        None,
        "not complete before its response"
    );
    let r = wire(&resp[0], &[]);
    let out = a.receive(0, &parse(&r).unwrap(), &mut asq, &mut AnyMem(0), &mut Rq(0));
    assert_eq!((out.drop, out.place), (None, None));
    let c = a.poll_send_completion(&mut asq).unwrap();
    assert_eq!(
        (c.wr_id, c.status, c.byte_len),
        (9, metaroce_proto::wr::WcStatus::Success, 8)
    );
}

#[test]
fn atomic_write_needs_eight_aligned_bytes() {
    for (va, len) in [(0x1004u64, 8usize), (0x1000, 4), (0x1000, 12)] {
        let (mut q, mut sq) = qp(Transport::Rc);
        let (mut h, _) = request(Opcode::RcAtomicWrite, 0, 8);
        h.reth = Some(Reth {
            va,
            rkey: 1,
            len: 8,
        });
        h.bth.pad = pad_for(len);
        let mut buf = vec![0u8; 4200];
        let n = build(&h, &vec![1; len], &mut buf).unwrap();
        buf.truncate(n);
        let mut mem = AnyMem(0);
        let out = q.receive(0, &parse(&buf).unwrap(), &mut sq, &mut mem, &mut Rq(0));
        assert!(out.drop.is_some(), "va {va:#x} len {len}");
        assert_eq!(mem.0, 0, "nothing written");
        let d = drain(&mut q, &mut sq);
        assert_eq!(
            ack_of(&d[0]),
            (
                Opcode::RcAck,
                psn(0),
                Syndrome::Nak(NakCode::InvalidRequest)
            )
        );
    }
}

fn flush_wr(va: u64, rkey: u32, len: u32, placement: u8, selectivity: u8) -> SendWr {
    SendWr {
        wr_id: 11,
        op: SendOp::Flush {
            va,
            rkey,
            len,
            placement,
            selectivity,
        },
        len: 0,
        signaled: true,
        fence: false,
        solicited: false,
        ud: None,
    }
}

/// A FLUSH request as the peer's requester would send it.
fn flush_request(k: u32, rkey: u32, placement: u8, selectivity: u8) -> Vec<u8> {
    let (mut h, _) = request(Opcode::RcFlush, k, 0);
    h.feth = Some(Feth {
        placement,
        selectivity,
    });
    h.reth = Some(Reth {
        va: 0x1000,
        rkey,
        len: 4096,
    });
    encode(&h)
}

/// The wire bytes of a packet without payload.
fn encode(h: &Headers) -> Vec<u8> {
    let mut buf = vec![0u8; 4200];
    let n = build(h, &[], &mut buf).unwrap();
    buf.truncate(n);
    buf
}

#[test]
fn flush_round_trip_is_answered_like_an_empty_read() {
    let (mut a, mut asq) = qp(Transport::Rc);
    let mut cb = config(Transport::Rc);
    cb.access = cb.access.with(Access::FLUSH_GLOBAL);
    let mut b = Qp::<4>::new(cb).unwrap();
    let mut bsq = vec![SendWqe::default(); 8];
    a.post_send(&mut asq, flush_wr(0x40, 7, 4096, FLUSH_GLOBAL, FLUSH_RANGE))
        .unwrap();
    let d = drain(&mut a, &mut asq);
    assert_eq!(d.len(), 1);
    assert_eq!(d[0].hdr.bth.opcode, Opcode::RcFlush);
    assert_eq!(
        d[0].hdr.feth,
        Some(Feth {
            placement: FLUSH_GLOBAL,
            selectivity: FLUSH_RANGE
        })
    );
    assert_eq!(
        d[0].hdr.reth,
        Some(Reth {
            va: 0x40,
            rkey: 7,
            len: 4096
        })
    );
    assert_eq!(d[0].payload, PayloadRef::None);
    let req = wire(&d[0], &[]);
    // BTH, FETH, RETH, ICRC: the FETH sits between the BTH and the RETH.
    assert_eq!(req.len(), 12 + 4 + 16 + 4);
    assert_eq!(&req[12..16], &[0, 0, 0, 1]);
    assert_eq!(&req[16..24], &0x40u64.to_be_bytes());

    let mut mem = FlushMem::default();
    let resp = answered_once(&mut b, &mut bsq, &req, &mut mem);
    assert_eq!(
        mem.0,
        vec![(7, 0x40, 4096, false, Access::FLUSH_GLOBAL)],
        "flushed once"
    );

    assert_eq!(
        a.poll_send_completion(&mut asq),
        None,
        "not complete before its response"
    );
    // A plain ACK beyond it does not complete it either: it needs its own response.
    let r = wire(&resp[0], &[]);
    let out = a.receive(0, &parse(&r).unwrap(), &mut asq, &mut AnyMem(0), &mut Rq(0));
    assert_eq!((out.drop, out.place), (None, None));
    let c = a.poll_send_completion(&mut asq).unwrap();
    assert_eq!(
        (c.wr_id, c.status, c.byte_len),
        (11, metaroce_proto::wr::WcStatus::Success, 0)
    );

    // The whole region: the responder is told so and asks for the persistent right too.
    let mut cb = config(Transport::Rc);
    cb.access = cb
        .access
        .with(Access::FLUSH_GLOBAL)
        .with(Access::FLUSH_PERSISTENT);
    let mut b = Qp::<4>::new(cb).unwrap();
    let mut mem = FlushMem::default();
    let req = flush_request(0, 3, FLUSH_GLOBAL | FLUSH_PERSISTENT, FLUSH_MR);
    assert_eq!(
        b.receive(0, &parse(&req).unwrap(), &mut bsq, &mut mem, &mut Rq(0))
            .drop,
        None
    );
    let both = Access::FLUSH_GLOBAL.with(Access::FLUSH_PERSISTENT);
    assert_eq!(mem.0, vec![(3, 0x1000, 4096, true, both)]);
}

#[test]
fn flush_refusals() {
    // Requester: RC only, no local data, a known placement and selectivity.
    let (mut q, mut sq) = qp(Transport::Rc);
    for w in [
        flush_wr(0, 1, 8, 0, FLUSH_RANGE),
        flush_wr(0, 1, 8, 4, FLUSH_RANGE),
        flush_wr(0, 1, 8, FLUSH_GLOBAL, 2),
        SendWr {
            len: 8,
            ..flush_wr(0, 1, 8, FLUSH_GLOBAL, FLUSH_RANGE)
        },
    ] {
        assert!(q.post_send(&mut sq, w).is_err(), "{w:?}");
    }
    let (mut u, mut usq) = qp(Transport::Uc);
    assert!(u
        .post_send(&mut usq, flush_wr(0, 1, 8, FLUSH_GLOBAL, FLUSH_RANGE))
        .is_err());

    // Responder: each refusal is a NAK at the FLUSH's PSN, and nothing is flushed.
    let cases = [
        // (QP rights, rkey, placement, selectivity, NAK)
        (
            Access::NONE,
            1,
            FLUSH_GLOBAL,
            FLUSH_RANGE,
            NakCode::InvalidRequest,
        ),
        (
            Access::FLUSH_GLOBAL,
            1,
            FLUSH_PERSISTENT,
            FLUSH_RANGE,
            NakCode::InvalidRequest,
        ),
        (
            Access::FLUSH_GLOBAL,
            1,
            0,
            FLUSH_RANGE,
            NakCode::InvalidRequest,
        ),
        (
            Access::FLUSH_GLOBAL,
            1,
            FLUSH_GLOBAL | 4,
            FLUSH_RANGE,
            NakCode::InvalidRequest,
        ),
        (
            Access::FLUSH_GLOBAL,
            1,
            FLUSH_GLOBAL,
            2,
            NakCode::InvalidRequest,
        ),
        (
            Access::FLUSH_GLOBAL,
            666,
            FLUSH_GLOBAL,
            FLUSH_RANGE,
            NakCode::RemoteAccess,
        ),
    ];
    for (rights, rkey, placement, sel, nak) in cases {
        let mut c = config(Transport::Rc);
        c.access = c.access.with(rights);
        let mut q = Qp::<4>::new(c).unwrap();
        let mut sq = vec![SendWqe::default(); 8];
        let mut mem = FlushMem::default();
        let req = flush_request(0, rkey, placement, sel);
        let out = q.receive(0, &parse(&req).unwrap(), &mut sq, &mut mem, &mut Rq(0));
        assert!(out.drop.is_some(), "{placement} {sel}");
        assert!(mem.0.is_empty());
        let d = drain(&mut q, &mut sq);
        assert_eq!(
            ack_of(&d[0]),
            (Opcode::RcAck, psn(0), Syndrome::Nak(nak)),
            "{placement} {sel}"
        );
    }
}

#[test]
fn flushes_count_against_max_rd_atomic() {
    let mut c = config(Transport::Rc);
    c.max_rd_atomic = 2;
    let mut q = Qp::<4>::new(c).unwrap();
    let mut sq = vec![SendWqe::default(); 8];
    for _ in 0..3 {
        q.post_send(&mut sq, flush_wr(0, 1, 8, FLUSH_GLOBAL, FLUSH_MR))
            .unwrap();
    }
    let d = drain(&mut q, &mut sq);
    assert_eq!(d.len(), 2, "the third waits for a response");
    assert_eq!((d[0].hdr.bth.psn, d[1].hdr.bth.psn), (psn(0), psn(1)));
}

#[test]
fn uc_and_ud_never_acknowledge() {
    for t in [Transport::Uc, Transport::Ud] {
        let (mut q, mut sq) = qp(t);
        let op = if t == Transport::Uc {
            Opcode::UcSendOnly
        } else {
            Opcode::UdSendOnly
        };
        let (_, buf) = request(op, 0, 4);
        let out = feed(&mut q, &mut sq, &mut Rq(1), &buf);
        assert!(out.completion.is_some(), "{t:?}");
        assert!(drain(&mut q, &mut sq).is_empty(), "{t:?}");
    }
}

#[test]
fn wrong_transport_is_dropped() {
    let (mut q, mut sq) = qp(Transport::Uc);
    let (_, p) = request(Opcode::RcSendOnly, 0, 4);
    assert_eq!(
        feed(&mut q, &mut sq, &mut Rq(1), &p).drop,
        Some(DropReason::WrongTransport)
    );
    let (mut q, mut sq) = qp(Transport::Rc);
    let (_, p) = request(Opcode::Cnp, 0, 16);
    assert_eq!(
        feed(&mut q, &mut sq, &mut Rq(1), &p).drop,
        Some(DropReason::WrongTransport)
    );
}

#[test]
fn bad_send_queue_slice_is_refused() {
    let (mut q, _) = qp(Transport::Rc);
    let mut short = vec![SendWqe::default(); 4];
    let wr = SendWr {
        wr_id: 1,
        op: SendOp::Send,
        len: 1,
        signaled: true,
        fence: false,
        solicited: false,
        ud: None,
    };
    assert!(q.post_send(&mut short, wr).is_err());
    assert_eq!(q.poll_tx(0, &mut short), None);
}

fn arbitrary_packets() -> impl Strategy<Value = Vec<(Headers, usize, i32)>> {
    prop::collection::vec((common::headers(), 0usize..600, -4i32..6), 1..40)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    /// Whatever arrives, in whatever state, the QP neither panics nor
    /// produces a descriptor that cannot be encoded.
    #[test]
    fn qp_survives_arbitrary_packets(
        transport in prop::sample::select(vec![Transport::Rc, Transport::Uc, Transport::Ud]),
        pkts in arbitrary_packets(),
        posts in 0usize..6,
    ) {
        let (mut q, mut sq) = qp(transport);
        let ops = [
            SendOp::Send,
            SendOp::Write { va: 1, rkey: 1 },
            SendOp::Read { va: 1, rkey: 1 },
            SendOp::Atomic { va: 8, rkey: 1, op: AtomicOp::FetchAdd { add: 1 } },
        ];
        for (i, op) in ops.iter().cycle().take(posts).enumerate() {
            let len = if matches!(op, SendOp::Atomic { .. }) { 8 } else { 300 * i as u32 };
            let ud = (transport == Transport::Ud).then_some(metaroce_proto::wr::UdDest { qpn: 1, qkey: 0 });
            let _ = q.post_send(&mut sq, SendWr { wr_id: i as u64, op: *op, len, signaled: true, fence: false, solicited: false, ud });
        }
        let mut now = 0u64;
        let mut out = [0u8; 4200];
        for (mut h, len, delta) in pkts {
            let len = if h.bth.opcode.info().payload { len } else { 0 };
            h.bth.pad = pad_for(len);
            h.bth.psn = Psn::new(START).add(delta as u32);
            let mut buf = vec![0u8; 1024];
            let n = build(&h, &vec![7; len], &mut buf).unwrap();
            let p: Packet<'_> = parse(&buf[..n]).unwrap();
            let r = q.receive(now, &p, &mut sq, &mut AnyMem(0), &mut Rq(1));
            if let Some(Place::Recv { len: l, .. } | Place::Rdma { len: l, .. } | Place::ReadResp { len: l, .. }) = r.place {
                prop_assert_eq!(l as usize, p.payload.len());
            }
            while let Some(d) = q.poll_tx(now, &mut sq) {
                let plen = d.payload.len() as usize;
                prop_assert!(plen <= 256);
                prop_assert!(build(&d.hdr, &vec![0; plen], &mut out).is_ok());
                prop_assert!(d.hdr.bth.opcode.info().pos != Position::Middle || plen == 256);
            }
            while q.poll_send_completion(&mut sq).is_some() {}
            if let Some(t) = q.next_deadline() {
                now = now.max(t);
                q.on_timer(now, &mut sq);
            }
        }
    }
}

/// A send work request with `wr_id` and no local data unless `len`.
fn swr(wr_id: u64, op: SendOp, len: u32) -> SendWr {
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

/// Delivers `a`'s packets to `b` and `b`'s answers back to `a`.
fn exchange(a: &mut Qp<4>, asq: &mut [SendWqe], b: &mut Qp<4>, bsq: &mut [SendWqe]) {
    for d in drain(a, asq) {
        let pkt = wire(&d, &vec![0x5A; d.payload.len() as usize]);
        b.receive(0, &parse(&pkt).unwrap(), bsq, &mut AnyMem(0), &mut Rq(64));
    }
    for d in drain(b, bsq) {
        let pkt = wire(&d, &vec![0x5A; d.payload.len() as usize]);
        a.receive(0, &parse(&pkt).unwrap(), asq, &mut AnyMem(0), &mut Rq(0));
    }
}

fn completions(q: &mut Qp<4>, sq: &mut [SendWqe]) -> Vec<u64> {
    std::iter::from_fn(|| q.poll_send_completion(sq).map(|c| c.wr_id)).collect()
}

#[test]
fn local_wqe_sends_nothing_and_completes_in_posting_order() {
    let (mut a, mut asq) = qp(Transport::Rc);
    let (mut b, mut bsq) = qp(Transport::Rc);
    // Idle requester: a local WQE completes at once.
    a.post_send(&mut asq, swr(1, SendOp::Local, 0)).unwrap();
    assert!(
        drain(&mut a, &mut asq).is_empty(),
        "a local WQE sends no packet"
    );
    assert_eq!(completions(&mut a, &mut asq), [1]);
    // Behind an unacknowledged SEND it waits for the SEND's ACK.
    a.post_send(&mut asq, swr(2, SendOp::Send, 300)).unwrap();
    a.post_send(&mut asq, swr(3, SendOp::Local, 0)).unwrap();
    a.post_send(&mut asq, swr(4, SendOp::Write { va: 0, rkey: 1 }, 10))
        .unwrap();
    let d = drain(&mut a, &mut asq);
    assert_eq!(
        d.iter()
            .map(|d| (d.hdr.bth.opcode, d.hdr.bth.psn))
            .collect::<Vec<_>>(),
        [
            (Opcode::RcSendFirst, psn(0)),
            (Opcode::RcSendLast, psn(1)),
            (Opcode::RcWriteOnly, psn(2))
        ],
        "the local WQE takes no PSN"
    );
    assert_eq!(completions(&mut a, &mut asq), [] as [u64; 0]);
    for x in d {
        let pkt = wire(&x, &vec![0; x.payload.len() as usize]);
        b.receive(
            0,
            &parse(&pkt).unwrap(),
            &mut bsq,
            &mut AnyMem(0),
            &mut Rq(64),
        );
    }
    exchange(&mut a, &mut asq, &mut b, &mut bsq);
    assert_eq!(completions(&mut a, &mut asq), [2, 3, 4]);
    assert_eq!(a.sq_used(), 0);
}

#[test]
fn local_wqe_slots_are_not_reused_while_the_completer_needs_them() {
    // Send queue of 8: after a local WQE at every other slot the queue wraps
    // several times; every completion arrives once, in order.
    let (mut a, mut asq) = qp(Transport::Rc);
    let (mut b, mut bsq) = qp(Transport::Rc);
    let mut next = 0u64;
    let mut seen = Vec::new();
    for round in 0..10 {
        while a.sq_used() < 8 {
            let op = if next % 2 == 1 {
                SendOp::Local
            } else {
                SendOp::Send
            };
            a.post_send(
                &mut asq,
                swr(next, op, if op == SendOp::Local { 0 } else { 20 }),
            )
            .unwrap();
            next += 1;
        }
        assert!(
            a.post_send(&mut asq, swr(99, SendOp::Local, 0)).is_err(),
            "round {round}: full"
        );
        exchange(&mut a, &mut asq, &mut b, &mut bsq);
        seen.extend(completions(&mut a, &mut asq));
    }
    assert_eq!(seen, (0..next).collect::<Vec<_>>());
    // A local WQE posted on an idle QP, then a full queue of SENDs before
    // any ACK: the SENDs must not take the local WQE's slot early.
    let (mut a, mut asq) = qp(Transport::Rc);
    let (mut b, mut bsq) = qp(Transport::Rc);
    a.post_send(&mut asq, swr(100, SendOp::Local, 0)).unwrap();
    assert_eq!(completions(&mut a, &mut asq), [100]);
    for i in 0..8 {
        a.post_send(&mut asq, swr(101 + i, SendOp::Send, 20))
            .unwrap();
    }
    // Seven of the eight go out and are acknowledged; the eighth (in the
    // local WQE's old slot) has not been sent yet.
    for _ in 0..7 {
        let x = a.poll_tx(0, &mut asq).unwrap();
        let pkt = wire(&x, &vec![0; x.payload.len() as usize]);
        b.receive(
            0,
            &parse(&pkt).unwrap(),
            &mut bsq,
            &mut AnyMem(0),
            &mut Rq(64),
        );
    }
    for x in drain(&mut b, &mut bsq) {
        let pkt = wire(&x, &[]);
        a.receive(
            0,
            &parse(&pkt).unwrap(),
            &mut asq,
            &mut AnyMem(0),
            &mut Rq(0),
        );
    }
    assert_eq!(
        completions(&mut a, &mut asq),
        (101..108).collect::<Vec<_>>()
    );
    exchange(&mut a, &mut asq, &mut b, &mut bsq);
    assert_eq!(completions(&mut a, &mut asq), [108]);
}

#[test]
fn local_wqes_are_flushed_in_order_on_error_and_refused_on_ud() {
    let (mut a, mut asq) = qp(Transport::Rc);
    a.post_send(&mut asq, swr(1, SendOp::Send, 10)).unwrap();
    a.post_send(&mut asq, swr(2, SendOp::Local, 0)).unwrap();
    assert!(
        a.post_send(&mut asq, swr(3, SendOp::Local, 4)).is_err(),
        "no local data"
    );
    drain(&mut a, &mut asq);
    a.set_error();
    let st: Vec<_> = std::iter::from_fn(|| {
        a.poll_send_completion(&mut asq)
            .map(|c| (c.wr_id, c.status))
    })
    .collect();
    use metaroce_proto::wr::WcStatus::*;
    assert_eq!(st, [(1, WrFlushErr), (2, WrFlushErr)]);
    let (mut u, mut usq) = qp(Transport::Ud);
    assert!(u.post_send(&mut usq, swr(1, SendOp::Local, 0)).is_err());
    let (mut c, mut csq) = qp(Transport::Uc);
    c.post_send(&mut csq, swr(1, SendOp::Send, 10)).unwrap();
    c.post_send(&mut csq, swr(2, SendOp::Local, 0)).unwrap();
    assert_eq!(drain(&mut c, &mut csq).len(), 1);
    assert_eq!(completions(&mut c, &mut csq), [1, 2]);
}

/// The send side's attributes set at RTS (`set_send_attrs`) take effect although the QP was
/// built at RTR without them and has received a request meanwhile: the local ACK timeout
/// fires, retries run out with `RetryExcErr`, the send PSN is the new one, and the responder
/// kept its state. Once a request was posted the attributes cannot change.
#[test]
fn send_attrs_at_rts() {
    use metaroce_proto::qp::{ConfigError, SendAttrs};
    use metaroce_proto::wr::WcStatus;
    let mut cfg = config(Transport::Rc);
    cfg.timeout = 0; // RTR: no local ACK timeout yet.
    cfg.retry_cnt = 0;
    let mut q: Qp<4> = Qp::new(cfg).unwrap();
    let mut sq = vec![SendWqe::default(); 8];
    // A SEND arrives while the QP is in RTR.
    let (_, buf) = request(Opcode::RcSendOnly, 0, 16);
    let out = feed(&mut q, &mut sq, &mut Rq(1), &buf);
    assert!(out.completion.is_some());
    let attrs = SendAttrs {
        sq_psn: Psn::new(0x123),
        timeout: 14,
        retry_cnt: 2,
        rnr_retry: 7,
        max_rd_atomic: 1,
    };
    q.set_send_attrs(attrs, &sq).unwrap();
    // The responder still expects the next request: its ACK is pending, a duplicate is one.
    let acks = drain(&mut q, &mut sq);
    assert!(acks.iter().any(|d| ack_of(d).1 == psn(0)));
    q.post_send(
        &mut sq,
        swr(
            1,
            SendOp::Write {
                va: 0x1000,
                rkey: 1,
            },
            64,
        ),
    )
    .unwrap();
    assert_eq!(q.set_send_attrs(attrs, &sq), Err(ConfigError::InUse));
    let mut now = 0u64;
    let first = q.poll_tx(now, &mut sq).expect("WRITE");
    assert_eq!(first.hdr.bth.psn, Psn::new(0x123));
    // Nothing is ever acknowledged: 1 + retry_cnt transmissions, then RETRY_EXC.
    let mut sent = 1;
    let status = loop {
        let t = q.next_deadline().expect("a local ACK timeout is armed");
        assert!(
            t > now && t - now >= 60_000_000,
            "timeout 14 is about 67 ms"
        );
        now = t;
        q.on_timer(now, &mut sq);
        sent += std::iter::from_fn(|| q.poll_tx(now, &mut sq)).count();
        if let Some(c) = q.poll_send_completion(&mut sq) {
            break c.status;
        }
        assert!(sent <= 3, "more transmissions than retry_cnt allows");
    };
    assert_eq!(status, WcStatus::RetryExcErr);
    assert_eq!(sent, 3);
}

/// Memory that refuses every remote access.
struct NoMem;

impl MemAccess for NoMem {
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

/// A refused RDMA WRITE breaks the QP and queues a remote access NAK; the NAK is still sent
/// after the consumer (or the kernel glue, noticing the error) moves the QP to the error state
/// again, so the requester learns of the error.
/// A SEND whose payload the glue could not place into its receive WQE is answered with a NAK
/// (Remote Operational Error), not acknowledged, and breaks the QP; the next packets are dropped.
#[test]
fn unplaceable_send_is_nakked_remote_operational() {
    let (mut q, mut sq) = qp(Transport::Rc);
    let mut rq = Rq(2);
    // A first SEND lands and would be acknowledged.
    let (_, buf) = request(Opcode::RcSendOnly, 0, 64);
    let out = q.receive(0, &parse(&buf).unwrap(), &mut sq, &mut NoMem, &mut rq);
    assert!(matches!(out.place, Some(Place::Recv { .. })));
    // The second one cannot be placed.
    let (_, buf) = request(Opcode::RcSendOnly, 1, 64);
    let out = q.receive(0, &parse(&buf).unwrap(), &mut sq, &mut NoMem, &mut rq);
    assert!(matches!(out.place, Some(Place::Recv { .. })));
    q.placement_failed(psn(1), NakCode::RemoteOperational);
    assert!(q.is_error());
    // A later consumer move to the error state keeps the NAK.
    q.set_error();
    let sent = drain(&mut q, &mut sq);
    assert_eq!(sent.len(), 1);
    assert_eq!(
        ack_of(&sent[0]),
        (
            Opcode::RcAck,
            psn(1),
            Syndrome::Nak(NakCode::RemoteOperational)
        )
    );
    let (_, buf) = request(Opcode::RcSendOnly, 2, 64);
    let out = q.receive(0, &parse(&buf).unwrap(), &mut sq, &mut NoMem, &mut rq);
    assert!(out.place.is_none());
    assert!(drain(&mut q, &mut sq).is_empty());
}

/// UC has no one to tell: the QP breaks, nothing is sent.
#[test]
fn unplaceable_uc_send_breaks_the_qp_silently() {
    let (mut q, mut sq) = qp(Transport::Uc);
    let (_, buf) = request(Opcode::UcSendOnly, 0, 64);
    let out = q.receive(0, &parse(&buf).unwrap(), &mut sq, &mut NoMem, &mut Rq(1));
    assert!(matches!(out.place, Some(Place::Recv { .. })));
    q.placement_failed(psn(0), NakCode::RemoteOperational);
    assert!(q.is_error());
    assert!(drain(&mut q, &mut sq).is_empty());
}

#[test]
fn access_nak_survives_set_error() {
    let (mut q, mut sq) = qp(Transport::Rc);
    let (_, buf) = request(Opcode::RcWriteOnly, 0, 64);
    let p = parse(&buf).unwrap();
    let out = q.receive(0, &p, &mut sq, &mut NoMem, &mut Rq(0));
    assert_eq!(out.drop, Some(DropReason::AccessDenied));
    assert!(q.is_error());
    q.set_error();
    let sent = drain(&mut q, &mut sq);
    assert_eq!(sent.len(), 1);
    assert_eq!(
        ack_of(&sent[0]),
        (Opcode::RcAck, psn(0), Syndrome::Nak(NakCode::RemoteAccess))
    );
}

/// The NAK that broke the QP is lost on the way: each retransmission of the refused request
/// (the peer's requester retries after its ACK timeout) is answered with the same NAK again,
/// at most MAX_NAK_REPEATS times; other packets (a later PSN, an earlier one, an ACK) are not.
#[test]
fn retransmission_of_the_refused_request_gets_its_nak_again() {
    use metaroce_proto::resp::MAX_NAK_REPEATS;
    let (mut q, mut sq) = qp(Transport::Rc);
    let (_, first) = request(Opcode::RcWriteOnly, 0, 64);
    let out = feed(&mut q, &mut sq, &mut Rq(0), &first);
    assert_eq!(out.drop, None);
    let _ = drain(&mut q, &mut sq);
    let (_, refused) = request(Opcode::RcWriteOnly, 1, 64);
    let out = q.receive(
        0,
        &parse(&refused).unwrap(),
        &mut sq,
        &mut NoMem,
        &mut Rq(0),
    );
    assert_eq!(out.drop, Some(DropReason::AccessDenied));
    let nak = (Opcode::RcAck, psn(1), Syndrome::Nak(NakCode::RemoteAccess));
    let sent = drain(&mut q, &mut sq);
    assert_eq!(sent.iter().map(ack_of).collect::<Vec<_>>(), [nak]);
    // (lost) Not before the QP broke, nor for other packets.
    let (_, earlier) = request(Opcode::RcWriteOnly, 0, 64);
    let (_, later) = request(Opcode::RcWriteOnly, 2, 64);
    for other in [&earlier, &later] {
        assert!(!q.repeat_nak(&parse(other).unwrap()));
    }
    // Retransmissions of the refused request: the NAK again, one per packet, then no more.
    let p = parse(&refused).unwrap();
    for round in 0..MAX_NAK_REPEATS {
        assert!(q.repeat_nak(&p), "round {round}");
        // One at a time: a second copy before the first left queues nothing more.
        assert!(!q.repeat_nak(&p));
        let sent = drain(&mut q, &mut sq);
        assert_eq!(sent.iter().map(ack_of).collect::<Vec<_>>(), [nak]);
    }
    assert!(!q.repeat_nak(&p));
    assert!(drain(&mut q, &mut sq).is_empty());
    assert_eq!(q.stats().resp.nak_repeats, u64::from(MAX_NAK_REPEATS));
    // A QP the consumer moved to the error state (no NAK of its own) answers nothing.
    let (mut q, mut sq) = qp(Transport::Rc);
    q.set_error();
    assert!(!q.repeat_nak(&parse(&first).unwrap()));
    assert!(drain(&mut q, &mut sq).is_empty());
}

fn statuses(q: &mut Qp<4>, sq: &mut [SendWqe]) -> Vec<(u64, metaroce_proto::wr::WcStatus)> {
    std::iter::from_fn(|| q.poll_send_completion(sq).map(|c| (c.wr_id, c.status))).collect()
}

/// The source data of the second of three WQEs cannot be read mid-message (its MR went away):
/// nothing more is sent, the first WQE still completes with its ACK, then the second fails with
/// a local protection error and the third is flushed (rdma_rxe's completer order).
#[test]
fn rc_local_error_lets_earlier_wqes_complete_then_fails() {
    use metaroce_proto::wr::WcStatus::*;
    let (mut a, mut asq) = qp(Transport::Rc);
    let (mut b, mut bsq) = qp(Transport::Rc);
    a.post_send(&mut asq, swr(10, SendOp::Write { va: 0, rkey: 1 }, 300))
        .unwrap();
    a.post_send(&mut asq, swr(11, SendOp::Write { va: 0, rkey: 1 }, 600))
        .unwrap();
    a.post_send(&mut asq, swr(12, SendOp::Send, 10)).unwrap();
    let sent: Vec<_> = (0..3).map(|_| a.poll_tx(0, &mut asq).unwrap()).collect();
    assert!(matches!(
        sent[2].payload,
        PayloadRef::Sq {
            slot: 1,
            offset: 0,
            ..
        }
    ));
    a.local_error(1, LocProtErr, &mut asq);
    assert!(
        drain(&mut a, &mut asq).is_empty(),
        "nothing is sent from the failed WQE on"
    );
    assert!(!a.is_error(), "the first WQE is still waiting for its ACK");
    assert_eq!(statuses(&mut a, &mut asq), []);
    for x in sent {
        let pkt = wire(&x, &vec![0; x.payload.len() as usize]);
        b.receive(
            0,
            &parse(&pkt).unwrap(),
            &mut bsq,
            &mut AnyMem(0),
            &mut Rq(64),
        );
    }
    for x in drain(&mut b, &mut bsq) {
        a.receive(
            0,
            &parse(&wire(&x, &[])).unwrap(),
            &mut asq,
            &mut AnyMem(0),
            &mut Rq(0),
        );
    }
    assert!(a.is_error());
    assert_eq!(
        statuses(&mut a, &mut asq),
        [(10, Success), (11, LocProtErr), (12, WrFlushErr)]
    );
    assert!(drain(&mut a, &mut asq).is_empty());
}

/// A retry after a local error resends the WQEs before the failed one and stops there; a
/// failure of the oldest unacknowledged WQE breaks the QP at once; an index that is not an
/// outstanding WQE is ignored.
#[test]
fn rc_local_error_retry_stops_at_the_failed_wqe() {
    use metaroce_proto::wr::WcStatus::*;
    let (mut a, mut asq) = qp(Transport::Rc);
    a.post_send(&mut asq, swr(1, SendOp::Write { va: 0, rkey: 1 }, 10))
        .unwrap();
    a.post_send(&mut asq, swr(2, SendOp::Write { va: 0, rkey: 1 }, 10))
        .unwrap();
    assert_eq!(drain(&mut a, &mut asq).len(), 2);
    a.local_error(7, LocProtErr, &mut asq);
    a.local_error(2, LocProtErr, &mut asq);
    assert!(!a.is_error(), "ignored: not an outstanding WQE");
    a.local_error(1, LocProtErr, &mut asq);
    let t = a.next_deadline().expect("the local ACK timer runs");
    a.on_timer(t, &mut asq);
    let again = drain(&mut a, &mut asq);
    assert_eq!(
        again.len(),
        1,
        "only the WQE before the failed one is resent"
    );
    assert_eq!(again[0].hdr.bth.psn, psn(0));
    // A WQE already acknowledged keeps its status: nothing halts.
    let (mut d, mut dsq) = qp(Transport::Rc);
    let (mut e, mut esq) = qp(Transport::Rc);
    d.post_send(&mut dsq, swr(8, SendOp::Send, 10)).unwrap();
    exchange(&mut d, &mut dsq, &mut e, &mut esq);
    d.local_error(0, LocProtErr, &mut dsq);
    d.post_send(&mut dsq, swr(9, SendOp::Send, 10)).unwrap();
    exchange(&mut d, &mut dsq, &mut e, &mut esq);
    assert!(!d.is_error());
    assert_eq!(statuses(&mut d, &mut dsq), [(8, Success), (9, Success)]);
    // A local error on the oldest WQE breaks the QP at once.
    let (mut c, mut csq) = qp(Transport::Rc);
    c.post_send(&mut csq, swr(5, SendOp::Send, 600)).unwrap();
    c.poll_tx(0, &mut csq).unwrap();
    c.local_error(0, LocProtErr, &mut csq);
    assert!(c.is_error());
    assert_eq!(statuses(&mut c, &mut csq), [(5, LocProtErr)]);
}

/// UC completes on transmission: a local error fails the WQE at once.
#[test]
fn uc_local_error_fails_at_once() {
    use metaroce_proto::wr::WcStatus::*;
    let (mut c, mut csq) = qp(Transport::Uc);
    c.post_send(&mut csq, swr(1, SendOp::Send, 10)).unwrap();
    c.post_send(&mut csq, swr(2, SendOp::Send, 10)).unwrap();
    c.post_send(&mut csq, swr(3, SendOp::Send, 10)).unwrap();
    assert_eq!(
        c.poll_tx(0, &mut csq).map(|d| d.payload),
        Some(PayloadRef::Sq {
            slot: 0,
            offset: 0,
            len: 10
        })
    );
    assert!(c.poll_tx(0, &mut csq).is_some());
    c.local_error(1, LocProtErr, &mut csq);
    assert!(c.is_error());
    assert!(drain(&mut c, &mut csq).is_empty());
    assert_eq!(
        statuses(&mut c, &mut csq),
        [(1, Success), (2, LocProtErr), (3, WrFlushErr)]
    );
}

/// A READ whose local buffers went away while its responses arrived: it completes with the
/// local error even though its last response completed it; a WRITE's slot is ignored.
#[test]
fn read_response_that_cannot_be_placed_fails_the_read() {
    use metaroce_proto::wr::WcStatus::*;
    let (mut a, mut asq) = qp(Transport::Rc);
    let (mut b, mut bsq) = qp(Transport::Rc);
    a.post_send(&mut asq, swr(1, SendOp::Write { va: 0, rkey: 1 }, 10))
        .unwrap();
    a.post_send(&mut asq, swr(2, SendOp::Read { va: 0, rkey: 1 }, 300))
        .unwrap();
    a.post_send(&mut asq, swr(3, SendOp::Send, 10)).unwrap();
    let mut placed = Vec::new();
    for d in drain(&mut a, &mut asq) {
        let pkt = wire(&d, &vec![0x5A; d.payload.len() as usize]);
        b.receive(
            0,
            &parse(&pkt).unwrap(),
            &mut bsq,
            &mut AnyMem(0),
            &mut Rq(64),
        );
    }
    // The glue places each response as it comes; the last one (which completes the READ)
    // cannot be placed.
    for d in drain(&mut b, &mut bsq) {
        let pkt = wire(&d, &vec![0x5A; d.payload.len() as usize]);
        let out = a.receive(
            0,
            &parse(&pkt).unwrap(),
            &mut asq,
            &mut AnyMem(0),
            &mut Rq(0),
        );
        if let Some(p @ Place::ReadResp { slot, offset, .. }) = out.place {
            placed.push(p);
            if offset > 0 {
                a.response_failed(0, LocProtErr, &mut asq);
                assert!(!a.is_error(), "slot 0 is a WRITE: ignored");
                a.response_failed(slot, LocProtErr, &mut asq);
                assert!(a.is_error());
            }
        }
    }
    assert_eq!(placed.len(), 2);
    assert_eq!(
        statuses(&mut a, &mut asq),
        [(1, Success), (2, LocProtErr), (3, WrFlushErr)]
    );
}

/// Memory whose pages (256 bytes each here) may be missing, as on-demand paging memory: a
/// placement that touches a missing page is refused ([`AccessError::NotPresent`]) and the page
/// is "faulted in" (present for the retry); others are copied at once. The responder's WRITE
/// target is `bytes` (pages `missing`); the requester's READ sink is `read` and its atomic result
/// `atomic`, a placement at an offset in `missing_resp` refused once.
#[derive(Default)]
struct PagedMem {
    bytes: Vec<u8>,
    missing: Vec<u64>,
    read: Vec<u8>,
    atomic: Option<u64>,
    missing_resp: Vec<u32>,
    refused: u32,
}

impl PagedMem {
    fn touch(&mut self, va: u64, len: usize) -> Result<(), AccessError> {
        let pages = (va - 0x1000) / 256..(va - 0x1000 + len as u64).div_ceil(256);
        let before = self.missing.len();
        self.missing.retain(|p| !pages.contains(p));
        if self.missing.len() != before {
            return Err(AccessError::NotPresent);
        }
        Ok(())
    }
}

impl MemAccess for PagedMem {
    fn check(&mut self, _: u32, _: u64, _: u32, _: Access) -> Result<(), AccessError> {
        Ok(())
    }
    fn atomic(&mut self, _: u32, _: u64, _: AtomicOp) -> Result<u64, AccessError> {
        Ok(0)
    }
    fn atomic_write(&mut self, _: u32, _: u64, _: [u8; 8]) -> Result<(), AccessError> {
        Ok(())
    }
    fn flush(&mut self, _: u32, _: u64, _: u32, _: bool, _: Access) -> Result<(), AccessError> {
        Ok(())
    }
    fn place_write(&mut self, _: u32, va: u64, data: &[u8]) -> Result<bool, AccessError> {
        self.touch(va, data.len())?;
        let at = (va - 0x1000) as usize;
        self.bytes[at..at + data.len()].copy_from_slice(data);
        Ok(true)
    }
    fn place_response(&mut self, _: u32, offset: u32, data: &[u8]) -> Result<bool, AccessError> {
        if let Some(i) = self.missing_resp.iter().position(|&m| m == offset) {
            self.missing_resp.swap_remove(i);
            self.refused += 1;
            return Err(AccessError::NotPresent);
        }
        match <[u8; 8]>::try_from(data) {
            Ok(v) if self.read.is_empty() => self.atomic = Some(u64::from_ne_bytes(v)),
            _ => self.read[offset as usize..][..data.len()].copy_from_slice(data),
        }
        Ok(true)
    }
}

/// One request packet with `payload` and an optional RETH.
fn paged_request(op: Opcode, k: u32, payload: &[u8], reth: Option<Reth>) -> Vec<u8> {
    let (mut h, _) = request(op, k, payload.len());
    h.reth = reth;
    let mut buf = vec![0u8; 4200];
    let n = build(&h, payload, &mut buf).unwrap();
    buf.truncate(n);
    buf
}

#[test]
fn write_into_missing_pages_is_rnr_nakked_and_placed_on_retry() {
    let (mut q, mut sq) = qp(Transport::Rc);
    let mut rq = Rq(0);
    // Three 256-byte packets; the middle one's page is missing.
    let mut mem = PagedMem {
        bytes: vec![0; 768],
        missing: vec![1],
        ..Default::default()
    };
    let data: Vec<u8> = (0..768).map(|i| (i * 7) as u8).collect();
    let reth = Reth {
        va: 0x1000,
        rkey: 1,
        len: 768,
    };
    let first = paged_request(Opcode::RcWriteFirst, 0, &data[..256], Some(reth));
    let middle = paged_request(Opcode::RcWriteMiddle, 1, &data[256..512], None);
    let last = paged_request(Opcode::RcWriteLast, 2, &data[512..], None);
    let mut feed_mem = |q: &mut Qp<4>, sq: &mut [SendWqe], p: &[u8]| {
        q.receive(0, &parse(p).unwrap(), sq, &mut mem, &mut rq)
    };
    let out = feed_mem(&mut q, &mut sq, &first);
    assert_eq!(
        (out.drop, out.place),
        (None, None),
        "placed by the glue, no Place"
    );
    let out = feed_mem(&mut q, &mut sq, &middle);
    assert_eq!(out.drop, Some(DropReason::NoRecvWqe));
    assert_eq!(
        ack_of(&drain(&mut q, &mut sq)[0]),
        (Opcode::RcAck, psn(1), Syndrome::Rnr { timer: 9 })
    );
    // The last packet, ahead of the refused one, is dropped without a second NAK.
    assert_eq!(
        feed_mem(&mut q, &mut sq, &last).drop,
        Some(DropReason::OutOfSequence)
    );
    assert!(drain(&mut q, &mut sq).is_empty());
    // The requester's retry from the refused PSN finds the page.
    for p in [&middle, &last] {
        let out = feed_mem(&mut q, &mut sq, p);
        assert_eq!((out.drop, out.place), (None, None));
    }
    assert_eq!(mem.bytes, data, "every byte placed once the page was there");
    let (op, p, syn) = ack_of(&drain(&mut q, &mut sq)[0]);
    assert_eq!((op, p), (Opcode::RcAck, psn(2)));
    assert!(matches!(syn, Syndrome::Ack { .. }));
}

/// A receive queue of `n` 4 KiB WQEs whose buffers are missing until a placement asked once.
struct PagedRq {
    n: u64,
    missing: bool,
    placed: usize,
}

impl RecvQueue for PagedRq {
    fn take(&mut self) -> Option<RecvWqe> {
        self.n.checked_sub(1).map(|n| {
            self.n = n;
            RecvWqe { id: n, len: 4096 }
        })
    }
    fn place(&mut self, _: &RecvWqe, _: u32, data: &[u8]) -> Result<bool, AccessError> {
        if std::mem::take(&mut self.missing) {
            return Err(AccessError::NotPresent);
        }
        self.placed += data.len();
        Ok(true)
    }
}

#[test]
fn send_into_missing_pages_keeps_its_wqe_for_the_retry() {
    let (mut q, mut sq) = qp(Transport::Rc);
    let mut rq = PagedRq {
        n: 1,
        missing: true,
        placed: 0,
    };
    let (_, p) = request(Opcode::RcSendOnly, 0, 200);
    let out = q.receive(0, &parse(&p).unwrap(), &mut sq, &mut AnyMem(0), &mut rq);
    assert_eq!(out.drop, Some(DropReason::NoRecvWqe));
    assert_eq!(
        ack_of(&drain(&mut q, &mut sq)[0]).2,
        Syndrome::Rnr { timer: 9 }
    );
    assert_eq!(rq.n, 0, "the WQE was taken");
    // The retry uses the same WQE (none is left in the queue) and completes it.
    let out = q.receive(0, &parse(&p).unwrap(), &mut sq, &mut AnyMem(0), &mut rq);
    assert_eq!((out.drop, out.place), (None, None));
    let c = out.completion.expect("the SEND completes");
    assert_eq!((c.id, c.byte_len), (0, 200));
    assert_eq!(rq.placed, 200);
}

/// Responder memory whose READ source byte at `va` is `va as u8` (see [`mr_bytes`]).
fn mr_bytes(d: &TxDesc) -> Vec<u8> {
    match d.payload {
        PayloadRef::Mr { va, len, .. } => (va..va + u64::from(len)).map(|a| a as u8).collect(),
        _ => vec![0x5A; d.payload.len() as usize],
    }
}

/// Runs `a` against responder `b` (with `bmem`) until nothing moves, the clock stepping by
/// `step` ns whenever `a` waits; returns the time reached.
fn run_until_quiet(
    a: &mut Qp<4>,
    asq: &mut [SendWqe],
    amem: &mut PagedMem,
    b: &mut Qp<4>,
    bsq: &mut [SendWqe],
    bmem: &mut AnyMem,
    step: u64,
) -> u64 {
    let mut now = 0;
    for _ in 0..20 {
        let reqs: Vec<_> = std::iter::from_fn(|| a.poll_tx(now, asq)).collect();
        for d in &reqs {
            let pkt = wire(d, &vec![0x5A; d.payload.len() as usize]);
            b.receive(now, &parse(&pkt).unwrap(), bsq, bmem, &mut Rq(64));
        }
        let resps: Vec<_> = std::iter::from_fn(|| b.poll_tx(now, bsq)).collect();
        for d in &resps {
            let pkt = wire(d, &mr_bytes(d));
            let out = a.receive(now, &parse(&pkt).unwrap(), asq, amem, &mut Rq(0));
            assert_eq!(out.place, None, "placed through place_response");
        }
        if reqs.is_empty() && resps.is_empty() {
            match a.next_deadline() {
                Some(t) if t > now && t - now <= step => now = t,
                _ => break,
            }
            a.on_timer(now, asq);
        }
    }
    now
}

/// A READ response that finds its local page missing (on-demand paging memory the mm dropped
/// after the doorbell faulted it in) is not accepted: the requester waits for the fault and asks
/// again from the first byte not placed, and the READ completes with every byte, consuming no
/// retry (rdma_rxe's completer would fault synchronously; softirq cannot).
#[test]
fn read_response_into_a_missing_page_is_asked_for_again() {
    use metaroce_proto::comp::LOCAL_FAULT_WAIT_NS;
    use metaroce_proto::wr::WcStatus::*;
    let (mut a, mut asq) = qp(Transport::Rc);
    let (mut b, mut bsq) = qp(Transport::Rc);
    a.post_send(
        &mut asq,
        swr(
            1,
            SendOp::Read {
                va: 0x3000,
                rkey: 1,
            },
            600,
        ),
    )
    .unwrap();
    a.post_send(&mut asq, swr(2, SendOp::Send, 10)).unwrap();
    // The middle response (offset 256) is refused once.
    let mut amem = PagedMem {
        read: vec![0; 600],
        missing_resp: vec![256],
        ..Default::default()
    };
    let mut bmem = AnyMem(0);
    // Nothing is resent before the wait is over.
    let reqs = drain(&mut a, &mut asq);
    for d in &reqs {
        let pkt = wire(d, &vec![0x5A; d.payload.len() as usize]);
        b.receive(0, &parse(&pkt).unwrap(), &mut bsq, &mut bmem, &mut Rq(64));
    }
    let outs: Vec<_> = drain(&mut b, &mut bsq)
        .iter()
        .map(|d| {
            a.receive(
                0,
                &parse(&wire(d, &mr_bytes(d))).unwrap(),
                &mut asq,
                &mut amem,
                &mut Rq(0),
            )
            .drop
        })
        .collect();
    assert_eq!(
        outs,
        [None, Some(DropReason::NotPresent), Some(DropReason::OutOfSequence), None],
        "READ first, middle (refused), last (after the gap), the SEND's ACK (an implied NAK: no retry)"
    );
    assert!(drain(&mut a, &mut asq).is_empty(), "the requester waits");
    assert_eq!(a.next_deadline(), Some(LOCAL_FAULT_WAIT_NS));
    a.on_timer(LOCAL_FAULT_WAIT_NS, &mut asq);
    let again: Vec<_> = std::iter::from_fn(|| a.poll_tx(LOCAL_FAULT_WAIT_NS, &mut asq)).collect();
    assert_eq!(
        again[0].hdr.bth.psn,
        psn(1),
        "asked again from the refused response"
    );
    assert_eq!(
        again[0].hdr.reth.map(|r| (r.va, r.len)),
        Some((0x3000 + 256, 344))
    );
    assert_eq!(again.len(), 2, "the READ's rest and the SEND");
    for d in &again {
        let pkt = wire(d, &vec![0x5A; d.payload.len() as usize]);
        b.receive(
            LOCAL_FAULT_WAIT_NS,
            &parse(&pkt).unwrap(),
            &mut bsq,
            &mut bmem,
            &mut Rq(64),
        );
    }
    run_until_quiet(&mut a, &mut asq, &mut amem, &mut b, &mut bsq, &mut bmem, 0);
    let want: Vec<u8> = (0x3000u64..0x3000 + 600).map(|v| v as u8).collect();
    assert_eq!(amem.read, want, "every byte placed");
    assert_eq!(statuses(&mut a, &mut asq), [(1, Success), (2, Success)]);
    let s = a.stats().comp;
    assert_eq!((s.sink_waits, s.retries, amem.refused), (1, 0, 1));
}

/// A long READ whose first response loses one packet: the responder (like rdma_rxe) finishes
/// that response before it reads the repeated request, so the rest of it keeps arriving, out of
/// sequence, for many ACK timeouts. Each such packet shows the responder alive and restarts the
/// timer: one retry, then the READ completes with every byte. (Timing out meanwhile spent
/// retry_cnt on a live responder and failed 4 MiB READs from rdma_rxe with RETRY_EXC_ERR.)
#[test]
fn stale_read_response_stream_restarts_the_ack_timer() {
    use metaroce_proto::timer::ack_timeout_ns;
    use metaroce_proto::wr::WcStatus::*;
    const N: usize = 40;
    let (mut a, mut asq) = qp(Transport::Rc);
    let (mut b, mut bsq) = qp(Transport::Rc);
    let to = ack_timeout_ns(config(Transport::Rc).timeout).unwrap();
    a.post_send(
        &mut asq,
        swr(
            1,
            SendOp::Read {
                va: 0x3000,
                rkey: 1,
            },
            256 * N as u32,
        ),
    )
    .unwrap();
    let mut amem = PagedMem {
        read: vec![0; 256 * N],
        ..Default::default()
    };
    let mut bmem = AnyMem(0);
    for d in &drain(&mut a, &mut asq) {
        b.receive(
            0,
            &parse(&wire(d, &[])).unwrap(),
            &mut bsq,
            &mut bmem,
            &mut Rq(64),
        );
    }
    let resps = drain(&mut b, &mut bsq);
    assert_eq!(resps.len(), N);
    // The second response is lost; the rest arrive half a timeout apart (N/2 timeouts in all),
    // and the requests sent meanwhile reach the responder only after the stream.
    let (mut now, mut held) = (0, Vec::new());
    for (i, d) in resps.iter().enumerate() {
        now += to / 2;
        a.on_timer(now, &mut asq);
        held.extend(std::iter::from_fn(|| a.poll_tx(now, &mut asq)));
        if i != 1 {
            a.receive(
                now,
                &parse(&wire(d, &mr_bytes(d))).unwrap(),
                &mut asq,
                &mut amem,
                &mut Rq(0),
            );
        }
        held.extend(std::iter::from_fn(|| a.poll_tx(now, &mut asq)));
    }
    assert_eq!(statuses(&mut a, &mut asq), [], "still waiting for the rest");
    assert_eq!(held.len(), 1, "one repeated request");
    assert_eq!(
        held[0].hdr.reth.map(|r| (r.va, r.len)),
        Some((0x3000 + 256, 256 * (N as u32 - 1)))
    );
    b.receive(
        now,
        &parse(&wire(&held[0], &[])).unwrap(),
        &mut bsq,
        &mut bmem,
        &mut Rq(64),
    );
    run_until_quiet(&mut a, &mut asq, &mut amem, &mut b, &mut bsq, &mut bmem, 0);
    let want: Vec<u8> = (0x3000u64..0x3000 + 256 * N as u64)
        .map(|v| v as u8)
        .collect();
    assert!(amem.read == want, "every byte placed");
    assert_eq!(statuses(&mut a, &mut asq), [(1, Success)]);
    assert_eq!(a.stats().comp.retries, 1);
}

/// An atomic whose result finds its local page missing is answered again after the wait from
/// the responder's saved result: executed once, completed with the original value.
#[test]
fn atomic_result_into_a_missing_page_is_asked_for_again_not_executed_twice() {
    use metaroce_proto::wr::WcStatus::*;
    let (mut a, mut asq) = qp(Transport::Rc);
    let (mut b, mut bsq) = qp(Transport::Rc);
    let op = SendOp::Atomic {
        va: 0x2000,
        rkey: 1,
        op: AtomicOp::FetchAdd { add: 5 },
    };
    a.post_send(&mut asq, swr(7, op, 8)).unwrap();
    let mut amem = PagedMem {
        missing_resp: vec![0, 0],
        ..Default::default()
    };
    let mut bmem = AnyMem(40);
    run_until_quiet(
        &mut a,
        &mut asq,
        &mut amem,
        &mut b,
        &mut bsq,
        &mut bmem,
        u64::MAX,
    );
    assert_eq!(bmem.0, 41, "executed once");
    assert_eq!(amem.atomic, Some(41));
    assert_eq!(statuses(&mut a, &mut asq), [(7, Success)]);
    assert_eq!(
        (
            a.stats().comp.sink_waits,
            a.stats().comp.retries,
            amem.refused
        ),
        (2, 0, 2)
    );
}

/// A READ whose responses fill the PSN window no longer holds the next READ back until it has
/// completed: like rdma_rxe's requester, the next READ request leaves once its first PSN is inside
/// the window (`max_inflight`), so the responder already has it when the first READ's response
/// stream ends. (Before, perftest's `ib_read_bw` 1 MiB, 1024 PSNs at MTU 1024 against a
/// 1024-PSN window, paid a full round trip between READs: 0.48x rdma_rxe's bandwidth.)
#[test]
fn next_read_request_leaves_once_its_first_psn_is_in_the_window() {
    use metaroce_proto::wr::WcStatus::*;
    const W: u32 = 16; // window, in PSNs; each READ takes W PSNs (W x 256 bytes)
    let mut cfg = config(Transport::Rc);
    cfg.max_inflight = W;
    let (mut a, mut asq) = (Qp::<4>::new(cfg).unwrap(), vec![SendWqe::default(); 8]);
    let (mut b, mut bsq) = qp(Transport::Rc);
    for id in 1..=3 {
        a.post_send(
            &mut asq,
            swr(
                id,
                SendOp::Read {
                    va: 0x3000,
                    rkey: 1,
                },
                256 * W,
            ),
        )
        .unwrap();
    }
    let mut amem = PagedMem {
        read: vec![0; 256 * W as usize],
        ..Default::default()
    };
    let mut bmem = AnyMem(0);
    let first = drain(&mut a, &mut asq);
    assert_eq!(
        first.len(),
        1,
        "the window is full after the first READ request"
    );
    b.receive(
        0,
        &parse(&wire(&first[0], &[])).unwrap(),
        &mut bsq,
        &mut bmem,
        &mut Rq(64),
    );
    let resps = drain(&mut b, &mut bsq);
    assert_eq!(resps.len(), W as usize);
    // One response retires one PSN: the second READ's first PSN is now inside the window.
    a.receive(
        0,
        &parse(&wire(&resps[0], &mr_bytes(&resps[0]))).unwrap(),
        &mut asq,
        &mut amem,
        &mut Rq(0),
    );
    let second = drain(&mut a, &mut asq);
    assert_eq!(
        second.len(),
        1,
        "second READ request while the first's responses stream"
    );
    assert_eq!(second[0].hdr.bth.psn, psn(W));
    // The third READ's first PSN (2W) enters the window only with the second READ's first
    // response: nothing more leaves while the rest of the first READ's responses arrive.
    for (i, d) in resps[1..].iter().enumerate() {
        a.receive(
            0,
            &parse(&wire(d, &mr_bytes(d))).unwrap(),
            &mut asq,
            &mut amem,
            &mut Rq(0),
        );
        assert_eq!(drain(&mut a, &mut asq).len(), 0, "after response {}", i + 1);
    }
    b.receive(
        0,
        &parse(&wire(&second[0], &[])).unwrap(),
        &mut bsq,
        &mut bmem,
        &mut Rq(64),
    );
    let resps = drain(&mut b, &mut bsq);
    a.receive(
        0,
        &parse(&wire(&resps[0], &mr_bytes(&resps[0]))).unwrap(),
        &mut asq,
        &mut amem,
        &mut Rq(0),
    );
    let third = drain(&mut a, &mut asq);
    assert_eq!(
        third.iter().map(|d| d.hdr.bth.psn).collect::<Vec<_>>(),
        [psn(2 * W)]
    );
    for d in &resps[1..] {
        a.receive(
            0,
            &parse(&wire(d, &mr_bytes(d))).unwrap(),
            &mut asq,
            &mut amem,
            &mut Rq(0),
        );
    }
    b.receive(
        0,
        &parse(&wire(&third[0], &[])).unwrap(),
        &mut bsq,
        &mut bmem,
        &mut Rq(64),
    );
    run_until_quiet(&mut a, &mut asq, &mut amem, &mut b, &mut bsq, &mut bmem, 0);
    let want: Vec<u8> = (0x3000u64..0x3000 + 256 * u64::from(W))
        .map(|v| v as u8)
        .collect();
    assert!(amem.read == want, "every byte placed");
    assert_eq!(
        statuses(&mut a, &mut asq),
        [(1, Success), (2, Success), (3, Success)]
    );
    assert_eq!(a.stats().comp.retries, 0);
}

/// A timeout rewinds the requester to a local WQE (a memory registration or invalidation
/// posted first); a late ACK then retires that WQE, whose slot is reused by a new SEND. The
/// requester must resume after the retired WQE: before, it stayed at the retired index and
/// sent the new SEND from the reused slot at the PSN of the atomic that followed the local
/// WQE (found by the `requester` fuzz target on 2026-12-04).
#[test]
fn ack_retiring_the_local_wqe_a_retry_restarts_at_moves_the_requester_on() {
    use metaroce_proto::timer::ack_timeout_ns;
    use metaroce_proto::wr::WcStatus::*;
    let (mut a, mut asq) = qp(Transport::Rc);
    a.post_send(&mut asq, swr(0, SendOp::Local, 0)).unwrap();
    let cs = SendOp::Atomic {
        va: 0x2000,
        rkey: 1,
        op: AtomicOp::CmpSwap {
            compare: 0,
            swap: 1,
        },
    };
    a.post_send(&mut asq, swr(1, cs, 8)).unwrap();
    for id in 2..8 {
        a.post_send(&mut asq, swr(id, SendOp::Send, 4)).unwrap();
    }
    assert_eq!(drain(&mut a, &mut asq).len(), 7);
    let to = ack_timeout_ns(config(Transport::Rc).timeout).unwrap();
    a.on_timer(to + 1, &mut asq);
    // A plain ACK at the atomic's PSN: the local WQE before it is done (the atomic still
    // waits for its result).
    let (_, ack) = request(Opcode::RcAck, 0, 0); // a plain ACK at the atomic's PSN
    a.receive(
        to + 2,
        &parse(&ack).unwrap(),
        &mut asq,
        &mut AnyMem(0),
        &mut Rq(0),
    );
    assert_eq!(statuses(&mut a, &mut asq), [(0, Success)]);
    a.post_send(&mut asq, swr(8, SendOp::Send, 4)).unwrap(); // slot of WQE 0
    let sent: Vec<_> = std::iter::from_fn(|| a.poll_tx(to + 3, &mut asq))
        .map(|d| (d.hdr.bth.opcode, d.hdr.bth.psn))
        .collect();
    let mut want = vec![(Opcode::RcCmpSwap, psn(0))];
    want.extend((1..=7).map(|k| (Opcode::RcSendOnly, psn(k))));
    assert_eq!(
        sent, want,
        "the atomic again, the six SENDs again, then the new SEND"
    );
}

/// Rights revoked on a live QP (RTS→RTS with `IB_QP_ACCESS_FLAGS`) apply to the next request:
/// a WRITE, READ and atomic granted before are refused after (an Invalid Request NAK, as
/// rdma_rxe answers an operation the QP does not enable), and granted again after the rights
/// are restored (issue 32, finding 5).
#[test]
fn revoked_access_applies_to_the_next_request() {
    for (op, granted) in [
        (Opcode::RcWriteOnly, Access::WRITE),
        (Opcode::RcReadRequest, Access::READ),
        (Opcode::RcFetchAdd, Access::ATOMIC),
    ] {
        let (mut q, mut sq) = qp(Transport::Rc);
        let (_, first) = request(op, 0, if op == Opcode::RcWriteOnly { 64 } else { 0 });
        let out = feed(&mut q, &mut sq, &mut Rq(0), &first);
        assert_eq!(out.drop, None, "{op:?} granted at first");
        let _ = drain(&mut q, &mut sq);
        q.set_access(Access::NONE);
        assert!(!q.config().access.contains(granted));
        let k = 1;
        let (_, second) = request(op, k, if op == Opcode::RcWriteOnly { 64 } else { 0 });
        let out = feed(&mut q, &mut sq, &mut Rq(0), &second);
        assert_eq!(
            out.drop,
            Some(DropReason::QpAccess),
            "{op:?} after revocation"
        );
        let d = drain(&mut q, &mut sq);
        assert_eq!(
            ack_of(d.last().unwrap()),
            (
                Opcode::RcAck,
                psn(k),
                Syndrome::Nak(NakCode::InvalidRequest)
            ),
            "{op:?}"
        );
    }
    // Restored before any refused request: granted again.
    let (mut q, mut sq) = qp(Transport::Rc);
    q.set_access(Access::NONE);
    q.set_access(Access::WRITE);
    let (_, w) = request(Opcode::RcWriteOnly, 0, 64);
    assert_eq!(feed(&mut q, &mut sq, &mut Rq(0), &w).drop, None);
}
