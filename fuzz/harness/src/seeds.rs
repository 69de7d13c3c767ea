// SPDX-License-Identifier: GPL-2.0
//! The checked-in seed corpus (`fuzz/seeds/<target>/`), generated from the
//! fixtures and from hand-made sequences written as Rust values. The
//! harness test `seeds_are_current` compares the files with this module's
//! output (and rewrites them with `METAROCE_FUZZ_WRITE_SEEDS=1`).

use super::enc::{Enc, Wire};
use super::fixtures::all;
use super::headers::{all_opcodes, Input as HdrInput};
use super::requester::{Cfg as ReqCfg, Input as ReqInput, Post, Resp, Step as ReqStep};
use super::responder::{Cfg as RespCfg, Input as RespInput, Pkt, Step as RespStep};
use metaroce_proto::opcode::{Opcode, Transport};

/// Seeds of one target: (file name, bytes).
pub type Seeds = Vec<(String, Vec<u8>)>;

/// Every target's seeds.
pub fn all_targets() -> Vec<(&'static str, Seeds)> {
    vec![
        ("packet", packet()),
        ("headers", headers()),
        ("psn", psn()),
        ("responder", responder()),
        ("requester", requester()),
        ("icrc_mutate", icrc_mutate()),
        ("mrc_packet", mrc_packet()),
        ("sack", sack()),
        ("conn", conn()),
    ]
}

fn stem(name: &str) -> &str {
    name.trim_end_matches(".hex")
}

/// `packet`: each fixture's UDP payload and one built packet per opcode.
pub fn packet() -> Seeds {
    let mut v: Seeds = all()
        .iter()
        .map(|f| (format!("fixture-{}", stem(f.name)), f.ib().to_vec()))
        .collect();
    for (i, op) in all_opcodes().into_iter().enumerate() {
        let input = HdrInput {
            op: i as u8,
            plen: 5,
            fill: 0xA5,
            psn: 0xFF_FFFF,
            dest_qp: 0x11,
            ..Default::default()
        };
        let (h, plen) = super::headers::headers_of(&input);
        let mut buf = vec![0u8; 128];
        let n = metaroce_proto::packet::build(&h, &vec![0xA5; plen], &mut buf).unwrap();
        buf.truncate(n);
        v.push((format!("op{:02x}", op as u8), buf));
    }
    v
}

/// `headers`: one consistent input per opcode and one per inconsistency.
pub fn headers() -> Seeds {
    let mut v = Seeds::new();
    for (i, op) in all_opcodes().into_iter().enumerate() {
        let input = HdrInput {
            op: i as u8,
            flags: 4,
            pkey: 0xFFFF,
            dest_qp: 0x12,
            psn: 0xFF_FFFE,
            va: 0x1000,
            rkey: 7,
            len: 300,
            syndrome: 0x1F,
            plen: 300,
            fill: 0x7B,
            tweak: 0,
            ..Default::default()
        };
        let mut e = Enc::default();
        input.encode(&mut e);
        v.push((format!("op{:02x}", op as u8), e.0));
    }
    for tweak in 1..=4u8 {
        let input = HdrInput {
            op: 10,
            plen: 7,
            tweak,
            ..Default::default()
        };
        let mut e = Enc::default();
        input.encode(&mut e);
        v.push((format!("tweak{tweak}"), e.0));
    }
    v
}

/// `psn`: the wrap and window edges.
pub fn psn() -> Seeds {
    let cases: [(&str, u32, u32, u32, u32, u8); 5] = [
        ("wrap", 0xFF_FFFE, 3, 5, 0, 0),
        ("antipode", 0, 0x80_0000, 0x7F_FFFF, 256, 1),
        (
            "high-bits",
            0xFFFF_FFFF,
            0x0100_0000,
            u32::MAX,
            u32::MAX,
            31,
        ),
        ("window", 0x7F_FFFF, 0, 1 << 24, 1 << 31, 4),
        ("equal", 12345, 12345, 0, 4097, 0x20),
    ];
    cases
        .iter()
        .map(|&(n, a, b, s, len, code)| {
            let mut e = Enc::default();
            e.u32(a).u32(b).u32(s).u32(len).u8(code);
            (n.to_string(), e.0)
        })
        .collect()
}

/// `icrc_mutate`: every fixture with each kind of mutation.
pub fn icrc_mutate() -> Seeds {
    let mut v = Seeds::new();
    for (i, f) in all().iter().enumerate() {
        let i = i as u8;
        let s = stem(f.name);
        v.push((format!("{s}-flip"), vec![i, 0, 1, 40, 0, 3, 8, 0, 5]));
        v.push((
            format!("{s}-burst"),
            vec![i, 1, 30, 0, 0xEF, 0xBE, 0xAD, 0xDE],
        ));
        v.push((format!("{s}-masked"), vec![i, 0, 0, 8, 0, 2, 0, 0, 0]));
        v.push((format!("{s}-truncate"), vec![i, 2, 4, 0]));
        v.push((format!("{s}-extend"), vec![i, 3, 4, 1, 2, 3, 4]));
    }
    v
}

fn op_index(t: Transport, op: Opcode) -> u8 {
    let ours: Vec<Opcode> = all_opcodes()
        .into_iter()
        .filter(|o| o.info().transport == t && o.info().kind.is_request())
        .collect();
    ours.iter().position(|&o| o == op).unwrap() as u8
}

fn rc(op: Opcode) -> Pkt {
    Pkt {
        op: op_index(Transport::Rc, op),
        flags: 4,
        ..Default::default()
    }
}

fn with_len(mut p: Pkt, len: u16) -> Pkt {
    p.plen = (len << 2) | 2;
    p
}

fn resp_seed(name: &str, cfg: RespCfg, steps: Vec<RespStep>) -> (String, Vec<u8>) {
    (name.to_string(), RespInput { cfg, steps }.encode())
}

/// `responder`: hand-made request sequences.
pub fn responder() -> Seeds {
    use Opcode::*;
    use RespStep::{PollTx, PostRecv, SetError};
    let p = RespStep::Pkt;
    // RC, 256-byte MTU, PSNs about to wrap.
    let rc_cfg = RespCfg {
        transport: 0,
        pmtu: 0,
        rq_psn: 0xFF_FFFE,
        ..Default::default()
    };
    let mut v = vec![
        resp_seed(
            "rc-send-in-order",
            rc_cfg,
            vec![
                PostRecv(1000),
                PostRecv(64),
                p(rc(RcSendFirst)),
                p(rc(RcSendMiddle)),
                p(with_len(rc(RcSendLastImm), 100)),
                PollTx(4),
                p(with_len(rc(RcSendOnly), 64)),
                PollTx(4),
            ],
        ),
        resp_seed(
            "rc-gap-nak-duplicate",
            rc_cfg,
            vec![
                PostRecv(512),
                PostRecv(512),
                p(Pkt {
                    dpsn: 2,
                    ..with_len(rc(RcSendOnly), 8)
                }),
                p(Pkt {
                    dpsn: 1,
                    ..with_len(rc(RcSendOnly), 8)
                }),
                PollTx(2),
                p(with_len(rc(RcSendOnly), 8)),
                p(Pkt {
                    dpsn: -1,
                    ..with_len(rc(RcSendOnly), 8)
                }),
                PollTx(2),
            ],
        ),
        resp_seed(
            "rc-read-and-replay",
            rc_cfg,
            vec![
                p(Pkt {
                    key: 0x10,
                    off: 16,
                    rlen: 2,
                    ..rc(RcReadRequest)
                }),
                PollTx(1),
                p(Pkt {
                    dpsn: -3,
                    key: 0x10,
                    off: 16,
                    rlen: 2,
                    ..rc(RcReadRequest)
                }),
                PollTx(8),
            ],
        ),
        resp_seed(
            "rc-atomics-and-replay",
            rc_cfg,
            vec![
                p(Pkt {
                    off: 8,
                    swap: 5,
                    ..rc(RcFetchAdd)
                }),
                p(Pkt {
                    off: 8,
                    swap: 7,
                    compare: 5,
                    ..rc(RcCmpSwap)
                }),
                PollTx(4),
                p(Pkt {
                    dpsn: -2,
                    off: 8,
                    swap: 5,
                    ..rc(RcFetchAdd)
                }),
                PollTx(4),
                p(Pkt {
                    off: 9,
                    ..rc(RcFetchAdd)
                }),
                PollTx(4),
            ],
        ),
        resp_seed(
            "rc-atomic-write-and-replay",
            rc_cfg,
            vec![
                // 8 bytes to an aligned address, RETH length 8 (the payload
                // length), executed; the same PSN again is only answered.
                p(Pkt {
                    off: 0x18,
                    ..with_len(rc(RcAtomicWrite), 8)
                }),
                p(Pkt {
                    off: 0x20,
                    swap: 5,
                    ..rc(RcFetchAdd)
                }),
                PollTx(4),
                p(Pkt {
                    dpsn: -2,
                    off: 0x18,
                    ..with_len(rc(RcAtomicWrite), 8)
                }),
                PollTx(4),
                p(Pkt {
                    off: 0x28,
                    ..with_len(rc(RcAtomicWrite), 8)
                }),
                PollTx(4),
            ],
        ),
        resp_seed(
            "rc-atomic-write-misaligned",
            RespCfg { res: 1, ..rc_cfg },
            vec![
                p(Pkt {
                    off: 0x1C,
                    ..with_len(rc(RcAtomicWrite), 8)
                }),
                PollTx(2),
            ],
        ),
        resp_seed(
            "rc-atomic-write-short",
            rc_cfg,
            vec![
                p(Pkt {
                    off: 0x10,
                    ..with_len(rc(RcAtomicWrite), 4)
                }),
                PollTx(2),
            ],
        ),
        resp_seed(
            "rc-flush-and-replay",
            rc_cfg,
            vec![
                // GLOBAL over 0x100 bytes of the R/W/A region (granted by
                // the QP and the region), then GLOBAL over the whole region
                // (RETH length 0); the first again is only answered; then
                // PERSISTENT, which the region does not grant (Remote
                // Access NAK, error state).
                p(Pkt {
                    key: 0x20,
                    off: 0x40,
                    rlen: 0x100,
                    ..rc(RcFlush)
                }),
                p(Pkt {
                    swap: 0x10,
                    ..rc(RcFlush)
                }),
                PollTx(4),
                p(Pkt {
                    dpsn: -2,
                    key: 0x20,
                    off: 0x40,
                    rlen: 0x100,
                    ..rc(RcFlush)
                }),
                PollTx(4),
                p(Pkt {
                    swap: 2,
                    ..rc(RcFlush)
                }),
                PollTx(2),
            ],
        ),
        resp_seed(
            "rc-flush-not-granted",
            // READ, WRITE and ATOMIC only.
            RespCfg {
                access: 0x87,
                ..rc_cfg
            },
            vec![
                p(Pkt {
                    off: 0x40,
                    ..rc(RcFlush)
                }),
                PollTx(2),
            ],
        ),
        resp_seed(
            "rc-flush-bad-placement",
            rc_cfg,
            // Placement 4 (reserved), range.
            vec![
                p(Pkt {
                    swap: 0x84,
                    ..rc(RcFlush)
                }),
                PollTx(2),
            ],
        ),
        resp_seed(
            "rc-flush-bad-selectivity",
            RespCfg { res: 1, ..rc_cfg },
            // Placement GLOBAL, selectivity 2 (reserved).
            vec![
                p(Pkt {
                    swap: 0xA1,
                    ..rc(RcFlush)
                }),
                PollTx(2),
            ],
        ),
        resp_seed(
            "rc-flush-outside-region",
            rc_cfg,
            // GLOBAL over 0x100 bytes from 0x3F80 into the 0x4000-byte
            // region: past its end.
            vec![
                p(Pkt {
                    key: 0x20,
                    off: 0x3F80,
                    rlen: 0x100,
                    ..rc(RcFlush)
                }),
                PollTx(2),
            ],
        ),
        resp_seed(
            "rc-write-then-imm",
            rc_cfg,
            vec![
                PostRecv(0),
                p(Pkt {
                    key: 0x10,
                    rlen: 1,
                    ..rc(RcWriteFirst)
                }),
                p(rc(RcWriteMiddle)),
                p(with_len(rc(RcWriteLast), 0)),
                p(Pkt {
                    key: 0x00,
                    off: 0x100,
                    ..with_len(rc(RcWriteOnlyImm), 40)
                }),
                PollTx(4),
            ],
        ),
        resp_seed(
            "rc-rnr-then-retry",
            rc_cfg,
            vec![
                p(with_len(rc(RcSendOnly), 4)),
                PollTx(1),
                PostRecv(4),
                p(with_len(rc(RcSendOnly), 4)),
                PollTx(1),
            ],
        ),
        resp_seed(
            "rc-access-error-flush",
            rc_cfg,
            vec![
                PostRecv(300),
                p(rc(RcSendFirst)),
                p(Pkt {
                    key: 0x12,
                    ..with_len(rc(RcWriteOnly), 16)
                }),
                PollTx(2),
                p(with_len(rc(RcSendLast), 4)),
                SetError,
            ],
        ),
        resp_seed(
            "rc-too-long-send",
            rc_cfg,
            vec![PostRecv(10), p(with_len(rc(RcSendOnly), 11)), PollTx(2)],
        ),
        resp_seed(
            "rc-readonly-region-write",
            RespCfg { res: 1, ..rc_cfg },
            vec![
                p(Pkt {
                    key: 0x01,
                    ..with_len(rc(RcWriteOnly), 32)
                }),
                PollTx(2),
            ],
        ),
    ];
    let uc = |op| Pkt {
        op: op_index(Transport::Uc, op),
        ..Default::default()
    };
    let uc_cfg = RespCfg {
        transport: 2,
        pmtu: 0,
        rq_psn: 100,
        ..Default::default()
    };
    v.push(resp_seed(
        "uc-gap-resync",
        uc_cfg,
        vec![
            PostRecv(2000),
            PostRecv(2000),
            p(uc(UcSendFirst)),
            p(Pkt {
                dpsn: 1,
                ..uc(UcSendMiddle)
            }),
            p(with_len(uc(UcSendLast), 3)),
            p(uc(UcSendFirst)),
            p(with_len(uc(UcSendLastImm), 3)),
            p(Pkt {
                key: 0x10,
                rlen: 2,
                ..uc(UcWriteFirst)
            }),
            p(uc(UcWriteMiddle)),
        ],
    ));
    let ud = |op, flags| Pkt {
        op: op_index(Transport::Ud, op),
        flags,
        ..Default::default()
    };
    let ud_cfg = RespCfg {
        transport: 3,
        pmtu: 2,
        ..Default::default()
    };
    v.push(resp_seed(
        "ud-qkey-and-length",
        ud_cfg,
        vec![
            PostRecv(1100),
            PostRecv(50),
            p(with_len(ud(UdSendOnly, 0), 100)),
            p(with_len(ud(UdSendOnlyImm, 8), 4)),
            p(with_len(ud(UdSendOnlyImm, 0), 20)),
            PollTx(1),
        ],
    ));
    // The captured packets, raw, at an RC responder.
    let fx: Vec<RespStep> = all()
        .iter()
        .map(|f| RespStep::Raw(f.ib().iter().copied().take(255).collect()))
        .collect();
    v.push(resp_seed(
        "rc-raw-fixtures",
        RespCfg { pmtu: 2, ..rc_cfg },
        fx,
    ));
    v
}

fn post(op: u8, len: u16, flags: u8) -> ReqStep {
    ReqStep::Post(Post {
        op,
        len,
        flags,
        va: 0x1000,
        key: 0x100,
    })
}

fn ack(kind: u8, k: u16, j: u16) -> ReqStep {
    ReqStep::Resp(Resp {
        kind,
        k,
        j,
        aux: 0x1F,
        ..Default::default()
    })
}

fn req_seed(name: &str, cfg: ReqCfg, steps: Vec<ReqStep>) -> (String, Vec<u8>) {
    (name.to_string(), ReqInput { cfg, steps }.encode())
}

/// `requester`: hand-made WR and response sequences.
pub fn requester() -> Seeds {
    use ReqStep::{PollComp, PollTx, SetError, Timer};
    const LAST: u16 = 0x8000;
    // RC, 256-byte MTU, 16-entry send queue, timeout on, 3 retries.
    let rc_cfg = ReqCfg {
        transport: 0,
        pmtu: 0,
        sq_psn: 0xFF_FFFD,
        sq_depth_log: 4,
        max_rd_atomic: 2,
        timeout: 10,
        retry_cnt: 3,
        rnr_retry: 2,
        max_inflight: 4,
        ack_req_every: 3,
    };
    let read_resp = |k, j, pos| {
        ReqStep::Resp(Resp {
            kind: 3,
            k,
            j,
            aux: pos,
            ..Default::default()
        })
    };
    vec![
        req_seed(
            "rc-send-ack",
            rc_cfg,
            vec![
                post(0, 600, 1),
                post(1, 0, 1),
                PollTx(8),
                ack(0, 0, LAST),
                ack(0, 0, LAST),
                PollComp(4),
            ],
        ),
        req_seed(
            "rc-read-responses",
            rc_cfg,
            vec![
                post(5, 600, 1),
                post(0, 10, 0),
                PollTx(4),
                read_resp(0, 0, 0),
                read_resp(0, 1, 1),
                read_resp(0, 2, 2),
                PollComp(2),
                ack(5, 0, 0),
                PollComp(2),
            ],
        ),
        req_seed(
            "rc-atomic-ack",
            rc_cfg,
            vec![
                post(6, 8, 1),
                post(7, 8, 1),
                PollTx(4),
                ReqStep::Resp(Resp {
                    kind: 4,
                    k: 0,
                    value: 41,
                    aux: 0x1F,
                    ..Default::default()
                }),
                ReqStep::Resp(Resp {
                    kind: 4,
                    k: 0,
                    value: 42,
                    aux: 0x1F,
                    ..Default::default()
                }),
                PollComp(4),
            ],
        ),
        req_seed(
            "rc-atomic-write",
            rc_cfg,
            vec![
                post(8, 8, 1),
                post(0, 10, 1),
                post(8, 8, 1),
                PollTx(8),
                // The first one's empty READ RESPONSE Only (the right
                // length for it is 0), then the SEND's ACK, then the last
                // one answered like a correct responder would.
                read_resp(0, 0, 0),
                ack(0, 1, LAST),
                ReqStep::Resp(Resp {
                    kind: 6,
                    k: 2,
                    aux: 0x1F,
                    ..Default::default()
                }),
                PollComp(4),
            ],
        ),
        req_seed(
            "rc-atomic-write-bad-response",
            rc_cfg,
            vec![
                post(8, 8, 1),
                PollTx(2),
                // A READ response with data is no answer to an ATOMIC WRITE.
                ReqStep::Resp(Resp {
                    kind: 3,
                    plen: 1,
                    ..Default::default()
                }),
                PollComp(2),
            ],
        ),
        req_seed(
            "rc-flush",
            rc_cfg,
            vec![
                // GLOBAL over 64 bytes, a SEND, PERSISTENT over the whole
                // region, GLOBAL|PERSISTENT over 0 bytes.
                ReqStep::Post(Post {
                    op: 0xE0,
                    len: 64,
                    flags: 1,
                    va: 0x1000,
                    key: 0x100,
                }),
                post(0, 10, 1),
                ReqStep::Post(Post {
                    op: 0xE5,
                    len: 0,
                    flags: 1,
                    va: 0x1000,
                    key: 0x100,
                }),
                ReqStep::Post(Post {
                    op: 0xE2,
                    len: 0,
                    flags: 1,
                    va: 0x2000,
                    key: 0x100,
                }),
                PollTx(8),
                // The first one's empty READ RESPONSE Only, the SEND's
                // ACK, then the others answered like a correct responder.
                read_resp(0, 0, 0),
                ack(0, 1, LAST),
                ReqStep::Resp(Resp {
                    kind: 6,
                    k: 2,
                    aux: 0x1F,
                    ..Default::default()
                }),
                PollTx(8),
                ReqStep::Resp(Resp {
                    kind: 6,
                    k: 3,
                    aux: 0x1F,
                    ..Default::default()
                }),
                PollComp(8),
            ],
        ),
        req_seed(
            "rc-flush-max-rd-atomic",
            ReqCfg {
                max_rd_atomic: 1,
                ..rc_cfg
            },
            vec![
                // One response outstanding at a time: the READ waits for
                // the FLUSH's answer, the second FLUSH for the READ's.
                ReqStep::Post(Post {
                    op: 0xE0,
                    len: 8,
                    flags: 1,
                    va: 0x1000,
                    key: 0x100,
                }),
                post(5, 10, 1),
                ReqStep::Post(Post {
                    op: 0xE1,
                    len: 8,
                    flags: 1,
                    va: 0x1000,
                    key: 0x100,
                }),
                PollTx(8),
                ReqStep::Resp(Resp {
                    kind: 6,
                    k: 0,
                    aux: 0x1F,
                    ..Default::default()
                }),
                PollTx(8),
                ReqStep::Resp(Resp {
                    kind: 6,
                    k: 1,
                    aux: 0x1F,
                    ..Default::default()
                }),
                PollTx(8),
                ReqStep::Resp(Resp {
                    kind: 6,
                    k: 2,
                    aux: 0x1F,
                    ..Default::default()
                }),
                PollComp(8),
            ],
        ),
        req_seed(
            "rc-flush-invalid",
            rc_cfg,
            vec![
                // Placement 0, placement 4, selectivity 2 (raw FETH from
                // the key); a WR length of 5; then a bad response to a
                // valid one.
                ReqStep::Post(Post {
                    op: 0xF0,
                    len: 8,
                    flags: 1,
                    va: 0x1000,
                    key: 0x0000_0100,
                }),
                ReqStep::Post(Post {
                    op: 0xF0,
                    len: 8,
                    flags: 1,
                    va: 0x1000,
                    key: 0x0400_0100,
                }),
                ReqStep::Post(Post {
                    op: 0xF0,
                    len: 8,
                    flags: 1,
                    va: 0x1000,
                    key: 0x2100_0100,
                }),
                ReqStep::Post(Post {
                    op: 0xE0,
                    len: 5,
                    flags: 0x21,
                    va: 0x1000,
                    key: 0x100,
                }),
                ReqStep::Post(Post {
                    op: 0xF0,
                    len: 8,
                    flags: 1,
                    va: 0x1000,
                    key: 0x1300_0100,
                }),
                PollTx(2),
                ReqStep::Resp(Resp {
                    kind: 3,
                    plen: 1,
                    ..Default::default()
                }),
                PollComp(2),
            ],
        ),
        req_seed(
            "uc-flush-refused",
            ReqCfg {
                transport: 3,
                ..rc_cfg
            },
            vec![
                ReqStep::Post(Post {
                    op: 0xE0,
                    len: 8,
                    flags: 1,
                    va: 0x1000,
                    key: 0x100,
                }),
                post(0, 8, 1),
                PollTx(2),
                PollComp(2),
            ],
        ),
        req_seed(
            "rc-timeout-retransmit",
            rc_cfg,
            vec![
                post(3, 1000, 1),
                PollTx(8),
                Timer(0, 0),
                PollTx(8),
                ack(5, 0, 0),
                PollComp(2),
            ],
        ),
        req_seed(
            "rc-seq-nak",
            rc_cfg,
            vec![
                post(0, 1000, 1),
                PollTx(8),
                ReqStep::Resp(Resp {
                    kind: 1,
                    k: 0,
                    j: 2,
                    aux: 0,
                    ..Default::default()
                }),
                PollTx(8),
                ack(5, 0, 0),
                PollComp(2),
            ],
        ),
        req_seed(
            "rc-rnr",
            rc_cfg,
            vec![
                post(0, 10, 1),
                PollTx(2),
                ReqStep::Resp(Resp {
                    kind: 2,
                    k: 0,
                    j: 0,
                    aux: 1,
                    ..Default::default()
                }),
                PollTx(2),
                Timer(0, 0),
                PollTx(2),
                ack(5, 0, 0),
                PollComp(2),
            ],
        ),
        req_seed(
            "rc-remote-access-error",
            rc_cfg,
            vec![
                post(3, 10, 0),
                post(0, 10, 1),
                post(0, 10, 0),
                PollTx(8),
                ReqStep::Resp(Resp {
                    kind: 1,
                    k: 1,
                    aux: 2,
                    ..Default::default()
                }),
                PollComp(8),
            ],
        ),
        req_seed(
            "rc-retry-exhausted",
            ReqCfg {
                retry_cnt: 1,
                ..rc_cfg
            },
            vec![
                post(0, 10, 1),
                PollTx(2),
                Timer(0, 0),
                PollTx(2),
                Timer(0, 0),
                PollComp(2),
            ],
        ),
        req_seed(
            "rc-window-and-fence",
            ReqCfg {
                max_inflight: 1,
                ..rc_cfg
            },
            vec![
                post(5, 300, 1),
                post(0, 10, 3),
                post(0, 10, 1),
                PollTx(8),
                read_resp(0, 0, 0),
                read_resp(0, 1, 2),
                PollTx(8),
                ack(5, 0, 0),
                PollTx(8),
                ack(5, 0, 0),
                PollComp(8),
                SetError,
            ],
        ),
        req_seed("rc-honest-peer", rc_cfg, {
            let honest = |k| {
                ReqStep::Resp(Resp {
                    kind: 6,
                    k,
                    aux: 0x1F,
                    ..Default::default()
                })
            };
            let mut v = vec![
                post(5, 700, 1),
                post(6, 8, 0),
                post(0, 300, 1),
                post(5, 100, 1),
                post(7, 8, 1),
            ];
            for _ in 0..4 {
                v.extend([PollTx(8), honest(0), honest(0), honest(1), PollComp(1)]);
            }
            v.push(PollComp(8));
            v
        }),
        req_seed(
            "rc-local-in-order",
            rc_cfg,
            vec![
                // Idle: completes at once; behind a SEND: after its ACK.
                post(9, 0, 1),
                PollComp(2),
                post(0, 300, 1),
                post(9, 0, 1),
                post(9, 0, 0),
                post(3, 10, 1),
                post(9, 4, 0x21),
                PollTx(8),
                PollComp(4),
                ack(0, 0, LAST),
                PollComp(4),
                ReqStep::Resp(Resp {
                    kind: 6,
                    k: 1,
                    aux: 0x1F,
                    ..Default::default()
                }),
                PollComp(4),
                post(5, 10, 1),
                post(9, 0, 1),
                PollTx(4),
                read_resp(0, 0, 0),
                PollComp(4),
            ],
        ),
        req_seed(
            "rc-local-flushed",
            rc_cfg,
            vec![
                post(0, 10, 1),
                post(9, 0, 1),
                post(9, 0, 0),
                PollTx(4),
                SetError,
                PollComp(4),
            ],
        ),
        req_seed(
            "uc-local-posted-in-error",
            ReqCfg {
                transport: 3,
                ..rc_cfg
            },
            vec![SetError, post(9, 0, 1), post(0, 8, 1), PollComp(4)],
        ),
        req_seed(
            "uc-local",
            ReqCfg {
                transport: 3,
                ..rc_cfg
            },
            vec![
                post(0, 700, 1),
                post(9, 0, 1),
                PollComp(2),
                PollTx(1),
                PollComp(2),
                PollTx(8),
                PollComp(4),
            ],
        ),
        req_seed(
            "uc-sends",
            ReqCfg {
                transport: 3,
                ..rc_cfg
            },
            vec![
                post(0, 700, 1),
                post(4, 20, 0),
                post(5, 8, 1),
                PollTx(8),
                PollComp(4),
                SetError,
                PollComp(4),
            ],
        ),
        req_seed(
            "ud-sends",
            ReqCfg {
                transport: 4,
                ..rc_cfg
            },
            vec![
                post(0, 200, 1),
                post(1, 20, 9),
                post(0, 300, 1),
                post(0, 1, 0x41),
                PollTx(8),
                PollComp(4),
            ],
        ),
    ]
}

/// `mrc_packet`: a DATA packet of each opcode, an ACK, and packets that
/// break one rule each.
pub fn mrc_packet() -> Seeds {
    use metaroce_proto::mrc_wire::{AckPkt, DataHdr, MrcOp, DATA_HDR_LEN};
    let data = |op: MrcOp, len: u16| {
        let w = op.is_write();
        let h = DataHdr {
            retx: len % 2 == 1,
            se: op.consumes_recv(),
            path: 3,
            op,
            conn: 0x0102_0304,
            path_seq: 0xFFFF_FFFF,
            path_floor: 0xFFFF_FF00,
            stream: 0x00AB_CDEF,
            dsn: 7,
            msn: 2,
            rsn: if op == MrcOp::Write { 0 } else { 1 },
            msg_len: 3000,
            offset: 1000,
            va: if w { 0x7000_0000_1000 } else { 0 },
            rkey: if w || op.invalidates() { 0x55 } else { 0 },
            imm: if op.has_imm() { 0xFEED } else { 0 },
            len,
        };
        let mut b = vec![0u8; DATA_HDR_LEN];
        h.write(&mut b).unwrap();
        b.extend((0..len).map(|i| i as u8));
        b
    };
    let mut v: Seeds = Vec::new();
    for op in [
        MrcOp::Send,
        MrcOp::SendImm,
        MrcOp::Write,
        MrcOp::WriteImm,
        MrcOp::SendInv,
    ] {
        v.push((format!("data-op{}", op.to_u8()), data(op, 40)));
    }
    // READ, READ_RESP, NAK, CMP_SWAP, FETCH_ADD, ATOMIC_RESP (section 3.1).
    let req = |op: MrcOp, msg_len: u32, len: u16, va: u64, rkey: u32, imm: u32| {
        let mut b = data(MrcOp::Write, 0);
        b[3] = op.to_u8();
        b[28..32].copy_from_slice(&0u32.to_be_bytes());
        b[32..36].copy_from_slice(&msg_len.to_be_bytes());
        b[36..40].copy_from_slice(&(if op == MrcOp::ReadResp { 1000u32 } else { 0 }).to_be_bytes());
        b[40..48].copy_from_slice(&va.to_be_bytes());
        b[48..52].copy_from_slice(&rkey.to_be_bytes());
        b[52..56].copy_from_slice(&imm.to_be_bytes());
        b[56..58].copy_from_slice(&len.to_be_bytes());
        b.extend((0..len).map(|i| i as u8));
        b
    };
    v.push((
        "data-op4".into(),
        req(MrcOp::Read, 70_000, 0, 0x7000_0000_1000, 0x55, 0),
    ));
    v.push(("data-op5".into(), req(MrcOp::ReadResp, 3000, 40, 0, 0, 0)));
    v.push(("data-op6".into(), req(MrcOp::Nak, 0, 0, 0, 0, 1)));
    v.push((
        "data-op7".into(),
        req(MrcOp::CmpSwap, 16, 16, 0x7000_0000_1008, 0x55, 0),
    ));
    v.push((
        "data-op8".into(),
        req(MrcOp::FetchAdd, 16, 16, 0x7000_0000_1010, 0x55, 0),
    ));
    v.push((
        "data-op9".into(),
        req(MrcOp::AtomicResp, 8, 0, 0xDEAD_BEEF_0000_0001, 0, 0),
    ));
    v.push(("data-empty".into(), data(MrcOp::Send, 0)));
    let mut t = data(MrcOp::Write, 16);
    t.extend_from_slice(&[9, 9, 9]);
    v.push(("data-trailing".into(), t));
    let ack = AckPkt {
        path: 1,
        conn: 9,
        cum: 0xFFFF_FFF0,
        ack_seq: 5,
        rate_hint_kbps: 1_000_000,
        ce_count: 3,
        sack: [1, 0, 1 << 63, 0x55],
        rnr: false,
    };
    let mut a = vec![0u8; 56];
    ack.write(&mut a).unwrap();
    v.push(("ack".into(), a.clone()));
    let mut broken = |name: &str, mut b: Vec<u8>, f: &dyn Fn(&mut Vec<u8>)| {
        f(&mut b);
        v.push((name.to_string(), b));
    };
    // The largest payload, and one byte more (also lifts libFuzzer's
    // default input length above 4096).
    let mut big = data(MrcOp::Write, 4096);
    big[32..36].copy_from_slice(&8192u32.to_be_bytes());
    broken("payload-4096", big, &|_| {});
    broken("payload-4097", data(MrcOp::Write, 4096), &|b| {
        b[32..36].copy_from_slice(&8192u32.to_be_bytes());
        b[56..58].copy_from_slice(&4097u16.to_be_bytes());
        b.push(0xAB);
    });
    broken("bad-version", data(MrcOp::Send, 4), &|b| b[0] = 0x21);
    broken("bad-type", data(MrcOp::Send, 4), &|b| b[0] = 0x13);
    broken("bad-opcode", data(MrcOp::Send, 4), &|b| b[3] = 11);
    broken("read-with-payload", data(MrcOp::Write, 4), &|b| b[3] = 4);
    broken("nak-bad-code", req(MrcOp::Nak, 0, 0, 0, 0, 4), &|_| {});
    broken(
        "atomic-short",
        req(MrcOp::FetchAdd, 16, 16, 8, 1, 0),
        &|b| {
            b[56..58].copy_from_slice(&8u16.to_be_bytes());
            b.truncate(b.len() - 8);
        },
    );
    broken("reserved-flag", data(MrcOp::Send, 4), &|b| b[1] |= 1);
    broken("reserved-stream", data(MrcOp::Send, 4), &|b| b[16] = 1);
    broken("past-message", data(MrcOp::Send, 4), &|b| {
        b[36..40].copy_from_slice(&2999u32.to_be_bytes())
    });
    broken("offset-wraps", data(MrcOp::Send, 4), &|b| {
        b[36..40].copy_from_slice(&u32::MAX.to_be_bytes())
    });
    broken("msg-too-long", data(MrcOp::Send, 4), &|b| {
        b[32..36].copy_from_slice(&0x8000_0001u32.to_be_bytes())
    });
    broken("send-with-va", data(MrcOp::Send, 4), &|b| b[47] = 1);
    broken("send-inv-with-va", data(MrcOp::SendInv, 4), &|b| b[47] = 1);
    broken("send-inv-with-imm", data(MrcOp::SendInv, 4), &|b| b[55] = 1);
    broken("write-with-rsn", data(MrcOp::Write, 4), &|b| b[31] = 1);
    broken("truncated-payload", data(MrcOp::Send, 4), &|b| {
        b.truncate(b.len() - 1)
    });
    broken("ack-reserved", a.clone(), &|b| b[3] = 1);
    broken("ack-truncated", a, &|b| b.truncate(55));
    v
}

/// `sack`: windows across the wrap, SACK gaps, RTOs, forged ACKs.
pub fn sack() -> Seeds {
    use super::sack::{Cfg, Input, Sel, Step};
    let rel = |v: i16| Sel {
        mode: 0,
        v: v as u16 as u32,
    };
    let next = |v: i16| Sel {
        mode: 1,
        v: v as u16 as u32,
    };
    let seed =
        |name: &str, cfg: Cfg, steps: Vec<Step>| (name.to_string(), Input { cfg, steps }.encode());
    let cfg = Cfg {
        start: 0xFFFF_FF80,
        mss: 999,
        init: 3,
        flags: 0,
    };
    let sends = |n: usize| (0..n).map(|_| Step::Send(1000)).collect::<Vec<_>>();
    let mut v = Vec::new();
    // Marks around the wrap, a floor across it, the window's far edge.
    v.push(seed(
        "window-wrap",
        cfg,
        vec![
            Step::Mark(rel(0)),
            Step::Mark(rel(2)),
            Step::Mark(rel(256)),
            Step::Mark(rel(257)),
            Step::Mark(rel(1024)),
            Step::Mark(rel(-1)),
            Step::Advance(rel(200)),
            Step::Mark(Sel { mode: 3, v: 0 }),
            Step::Advance(Sel { mode: 2, v: 0 }),
            Step::Mark(rel(1)),
            Step::Mark(rel(0)),
        ],
    ));
    // Gaps found by SACK, honest and forged ACKs.
    let mut s = sends(8);
    s.extend([
        Step::Deliver(7, false),
        Step::Deliver(6, false),
        Step::Deliver(4, true),
        Step::Deliver(1, false),
        Step::Wait(5000),
        Step::AckHonest,
        Step::AckHonest,
        Step::AckForged {
            cum: rel(0),
            ack_seq: next(-1),
            sack: [0b1010, 0, 0, 0],
            ce: 1,
        },
        Step::Send(10),
        Step::Deliver(0, false),
        Step::AckHonest,
    ]);
    v.push(seed("sack-gaps", cfg, s));
    // Three RTOs in a row, then recovery.
    let mut s = sends(4);
    s.extend([
        Step::Timeout,
        Step::Send(1),
        Step::Timeout,
        Step::Send(1),
        Step::Timeout,
        Step::Send(1),
        Step::Send(1),
    ]);
    s.extend([Step::Deliver(0, false), Step::AckHonest]);
    v.push(seed("rto-thrice", cfg, s));
    // ACKs far out of the window, and beyond what was sent.
    let mut s = sends(6);
    s.extend([
        Step::AckForged {
            cum: next(1),
            ack_seq: rel(0),
            sack: [0; 4],
            ce: 0,
        },
        Step::AckForged {
            cum: Sel { mode: 3, v: 0 },
            ack_seq: Sel { mode: 3, v: 2 },
            sack: [u64::MAX; 4],
            ce: 0x8000_0000,
        },
        Step::AckForged {
            cum: Sel {
                mode: 4,
                v: 0xFFFF_FFFF,
            },
            ack_seq: next(5),
            sack: [0, 0, 0, 1 << 63],
            ce: 0,
        },
        Step::AckForged {
            cum: rel(2),
            ack_seq: rel(3),
            sack: [1, 0, 0, 0],
            ce: 1,
        },
    ]);
    v.push(seed("forged-far", cfg, s));
    // 256 outstanding, cwnd ignored, then 64 losses in one epoch.
    let big = Cfg {
        start: 0,
        mss: 0,
        init: 7,
        flags: 1,
    };
    let mut s: Vec<Step> = (0..260).map(|_| Step::Send(1)).collect();
    s.extend((0..64u16).map(|i| Step::Deliver(i * 4, false)));
    s.push(Step::AckHonest);
    s.extend((0..70).map(|_| Step::Send(1)));
    s.push(Step::AckForged {
        cum: next(0),
        ack_seq: next(-1),
        sack: [0; 4],
        ce: 0,
    });
    v.push(seed("window-limit-and-epoch", big, s));
    // 19 of 20 sends lost: repath at once, not after 64 sends.
    let mut s: Vec<Step> = (0..20).map(|_| Step::Send(1)).collect();
    s.extend([Step::Deliver(0, false), Step::AckHonest]);
    s.extend((0..30).map(|_| Step::Send(1)));
    s.extend([Step::Deliver(0, false), Step::AckHonest]);
    v.push(seed("early-repath", big, s));
    v
}

/// `conn`: clean exchanges both ways, loss/duplication/reordering, forged
/// ACKs and DATA, a failure by `max_retx`, corrupted packets.
pub fn conn() -> Seeds {
    use super::conn::{Cfg, Input, Step};
    let post = |side: u8, stream: u8, op: u8, len: u16| Step::Post {
        side,
        stream,
        op,
        len,
        flags: 1,
    };
    let dl = |idx: u16, action: u8| Step::Deliver {
        idx,
        action,
        arg: 0,
        ce: false,
        hint: 0,
    };
    let first = |n: usize| (0..n).map(|_| dl(0, 0)).collect::<Vec<_>>();
    let seed =
        |name: &str, cfg: Cfg, steps: Vec<Step>| (name.to_string(), Input { cfg, steps }.encode());
    let cfg = Cfg {
        mss: 1,
        paths: 3,
        max_retx: 0x80,
    };
    let mut v = Vec::new();
    // Every opcode both ways, delivered in order.
    let mut s = vec![
        post(0, 0, 0, 200),
        post(0, 1, 2, 64),
        post(0, 0, 1, 0),
        post(0, 1, 3, 130),
        post(1, 0, 0, 5),
        post(1, 1, 1, 257),
    ];
    s.extend([Step::Pump(0, 15), Step::Pump(1, 15)]);
    s.extend(first(16));
    s.extend([Step::Pump(0, 15), Step::Pump(1, 15)]);
    s.extend(first(16));
    s.extend([Step::Poll(0), Step::Poll(1)]);
    v.push(seed("clean-both-ways", cfg, s));
    // Loss, duplication, reordering, CE and a rate hint, then timers.
    let mut s = vec![post(0, 0, 0, 250), post(0, 1, 2, 250), post(0, 0, 1, 33)];
    s.push(Step::Pump(0, 15));
    s.extend([
        dl(2, 4),
        dl(0, 3),
        dl(3, 0),
        Step::Deliver {
            idx: 1,
            action: 0,
            arg: 0,
            ce: true,
            hint: 1_000_000,
        },
        dl(0, 0),
        dl(1, 0),
    ]);
    s.extend([
        Step::Pump(1, 15),
        dl(1, 0),
        dl(0, 0),
        dl(0, 0),
        Step::Pump(0, 15),
    ]);
    s.extend([Step::Timer(0, 0), Step::Pump(0, 15)]);
    s.extend(first(8));
    s.extend([
        Step::Pump(1, 15),
        Step::Pump(0, 15),
        Step::Poll(0),
        Step::Poll(1),
    ]);
    v.push(seed("loss-dup-reorder", cfg, s));
    // Forged ACKs (far ahead, behind, bitmaps, hints) and forged DATA.
    let mut s = vec![post(0, 0, 0, 300), post(0, 1, 3, 40), Step::Pump(0, 15)];
    s.push(Step::ForgeAck {
        side: 0,
        path: 0,
        cum: 5,
        ack_seq: 0,
        mode: 0,
        sack: [0b101, 0, 0, 0],
        hint: 77,
        ce: 1,
    });
    s.push(Step::ForgeAck {
        side: 0,
        path: 1,
        cum: 0x8000_0000,
        ack_seq: 3,
        mode: 3,
        sack: [0; 4],
        hint: 5,
        ce: 0,
    });
    s.push(Step::ForgeAck {
        side: 0,
        path: 2,
        cum: 0xFFFF,
        ack_seq: 0xFFFF,
        mode: 0,
        sack: [0, 0, 0, 1 << 63],
        hint: 0,
        ce: 0,
    });
    s.push(Step::ForgeData {
        side: 1,
        sel: 0x11,
        seq: 3,
        dsn: 2,
        msn: 0x11,
        len: 0x0000_2010,
    });
    s.extend(first(6));
    s.extend([Step::Pump(1, 15), Step::Pump(0, 15)]);
    s.extend(first(8));
    s.extend([Step::Poll(0), Step::Poll(1)]);
    v.push(seed("forged", cfg, s));
    // max_retx 0: a lost packet fails the connection; completions flush.
    let mut s = vec![
        post(0, 0, 0, 100),
        post(0, 0, 2, 20),
        post(0, 1, 0, 20),
        post(0, 0, 0, 20),
        Step::Pump(0, 15),
    ];
    s.extend([
        dl(0, 4),
        dl(0, 0),
        dl(0, 0),
        Step::Pump(1, 15),
        dl(0, 0),
        dl(0, 0),
    ]);
    s.extend([
        Step::Timer(0, 0),
        Step::Pump(0, 15),
        Step::Timer(0, 0),
        Step::Pump(0, 15),
        Step::Poll(0),
        post(0, 0, 0, 1),
        Step::Poll(1),
    ]);
    v.push(seed(
        "fail-by-max-retx",
        Cfg {
            mss: 0,
            paths: 0,
            max_retx: 0,
        },
        s,
    ));
    // Corrupted packets: a bit flip, a truncation, trailing bytes.
    let mut s = vec![post(1, 0, 1, 90), post(1, 1, 2, 10), Step::Pump(1, 15)];
    s.extend([
        Step::Deliver {
            idx: 0,
            action: 7,
            arg: 3,
            ce: false,
            hint: 0,
        },
        Step::Deliver {
            idx: 0,
            action: 6,
            arg: 30,
            ce: false,
            hint: 0,
        },
        Step::Deliver {
            idx: 0,
            action: 5,
            arg: 8 * 26 + 1,
            ce: false,
            hint: 0,
        },
    ]);
    s.extend(first(8));
    s.extend([Step::Pump(0, 15), Step::Poll(1), Step::Poll(0)]);
    v.push(seed(
        "corrupted",
        Cfg {
            mss: 0,
            paths: 1,
            max_retx: 2,
        },
        s,
    ));
    // Posting limits: K messages, then Full; beyond 2^31 bytes.
    let mut s: Vec<Step> = (0..5).map(|_| post(0, 0, 0, 3)).collect();
    s.push(Step::Post {
        side: 0,
        stream: 1,
        op: 2,
        len: 1,
        flags: 2,
    });
    s.extend([Step::Pump(0, 15), Step::Pump(0, 15)]);
    s.extend(first(5));
    s.extend([Step::Pump(1, 3), Step::Timer(1, 1_000_000)]);
    s.extend(first(5));
    s.extend([Step::Poll(0), post(0, 0, 0, 3)]);
    v.push(seed(
        "post-limits",
        Cfg {
            mss: 2,
            paths: 1,
            max_retx: 1,
        },
        s,
    ));
    // READ and atomics (section 11): flags bit 2 selects READ, CMP_SWAP,
    // FETCH_ADD; bit 3 a refused key, bit 4 a misaligned atomic.
    let req = |side: u8, stream: u8, op: u8, len: u16, flags: u8| Step::Post {
        side,
        stream,
        op,
        len,
        flags: 4 | flags,
    };
    let mut s = vec![
        post(0, 0, 2, 100),
        req(0, 0, 0, 300, 0),
        req(0, 0, 0, 0, 0),
        post(0, 0, 0, 20),
        req(0, 1, 1, 2, 0),
        req(0, 1, 2, 7, 0),
        req(0, 1, 1, 3, 0),
        req(1, 0, 3, 64, 0),
        post(1, 1, 3, 10),
        req(1, 1, 2, 1, 0),
    ];
    for _ in 0..6 {
        s.extend([Step::Pump(0, 15), Step::Pump(1, 15)]);
        s.extend(first(16));
        s.extend([Step::Poll(0), Step::Poll(1)]);
    }
    v.push(seed("read-atomic-both-ways", cfg, s));
    // Lost, duplicated and reordered requests and responses, then timers.
    let mut s = vec![
        req(0, 0, 0, 700, 0),
        req(0, 0, 3, 250, 0),
        req(0, 1, 2, 4, 0),
        req(0, 1, 1, 6, 0),
        Step::Pump(0, 15),
    ];
    s.extend([
        dl(0, 4),
        dl(0, 3),
        dl(1, 0),
        Step::Pump(1, 15),
        dl(1, 4),
        dl(0, 3),
        dl(2, 0),
        dl(0, 0),
    ]);
    s.extend([
        Step::Timer(0, 0),
        Step::Pump(1, 15),
        Step::Pump(0, 15),
        dl(3, 0),
        dl(0, 0),
        Step::Poll(0),
    ]);
    v.push(seed("read-atomic-loss", cfg, s));
    // Refused: a wrong key (READ and atomic), a misaligned atomic; a WRITE
    // behind them.
    let s = vec![
        req(0, 0, 0, 50, 8),
        req(0, 1, 2, 3, 16),
        req(0, 1, 1, 4, 8),
        post(0, 1, 2, 9),
        Step::Pump(0, 15),
        dl(0, 0),
        dl(0, 0),
        Step::Pump(1, 15),
        dl(0, 0),
        dl(0, 0),
        Step::Poll(0),
    ];
    v.push(seed("read-atomic-refused", cfg, s));
    // SEND with invalidate (section 9.2): flags bit 5; bit 3 a key the
    // receiver refuses. Behind a WRITE (the fence), several packets, one
    // empty, packets lost, duplicated and reordered, then timers.
    let inv = |side: u8, stream: u8, len: u16, flags: u8| Step::Post {
        side,
        stream,
        op: 0,
        len,
        flags: 32 | flags,
    };
    let mut s = vec![
        post(0, 0, 2, 250),
        inv(0, 0, 700, 1),
        inv(0, 1, 0, 0),
        post(0, 1, 0, 30),
        inv(0, 1, 300, 8),
        inv(1, 0, 90, 0),
    ];
    for _ in 0..6 {
        s.extend([Step::Pump(0, 15), Step::Pump(1, 15)]);
        s.extend([dl(2, 0), dl(0, 3), dl(1, 4), dl(0, 0)]);
        s.extend(first(12));
        s.extend([Step::Timer(0, 0), Step::Poll(0), Step::Poll(1)]);
    }
    v.push(seed("send-inv", cfg, s));
    v
}
