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
}

/// Receive WQEs with ids 0, 1, 2, ... of 4 KiB each.
struct Rq(u64);

impl RecvQueue for Rq {
    fn take(&mut self) -> Option<RecvWqe> {
        self.0 += 1;
        Some(RecvWqe { id: self.0 - 1, len: 4096 })
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
    assert_eq!(out.place, Some(Place::Recv { id: 0, offset: 0, len: 256 }));
    // A WRITE starts after the gap: the SEND is abandoned (WQE 0 kept for
    // the next message) and the WRITE's memory check fails.
    let reth = Reth { va: 0x1000, rkey: 1, len: 256 };
    let out = rx(&mut qp, &packet(Opcode::UcWriteOnly, 102, 256, Some(reth)));
    assert_eq!(out.drop, Some(DropReason::AccessDenied));
    // The next SEND lands in, and completes, WQE 0.
    let out = rx(&mut qp, &packet(Opcode::UcSendOnly, 103, 8, None));
    assert_eq!(out.place, Some(Place::Recv { id: 0, offset: 0, len: 8 }));
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
