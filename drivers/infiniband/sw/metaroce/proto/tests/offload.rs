//! The offload boundary (`offload.rs`): a second congestion engine, unlike
//! the software AIMD, carries a lossy, CE-marking, corrupting transfer
//! through the native core, and the NIC integrity implementation skips
//! software verification only when the NIC vouched for a packet.

use metaroce_proto::cc::{Aimd, Q16_ONE};
use metaroce_proto::conn::{Completion, Conn, ConnConfig, RxEvent, SendStatus};
use metaroce_proto::icrc::{icrc_compute, IcrcError, IPV4_HDR_LEN, IPV6_HDR_LEN, UDP_HDR_LEN};
use metaroce_proto::mrc_wire::{MrcOp, DATA_HDR_LEN, NATIVE_PORT};
use metaroce_proto::offload::{
    native_rx, roce_rx, ChecksumError, CongestionEngine, Integrity, NicIntegrity, RoceRxError,
    RxeFlushIntegrity, Sealed, SoftIntegrity, Window,
};
use metaroce_proto::packet::ICRC_LEN;
use metaroce_proto::stream::MsgDesc;
use std::cell::Cell;
use std::path::Path;

mod common;
use common::Rand;

/// Hook calls an engine saw.
#[derive(Clone, Debug, Default)]
struct Hooks {
    acks: u64,
    acked_bytes: u64,
    congestions: u64,
    decreases: u64,
    timeouts: u64,
    /// `cwnd` reads (through `&self`, hence a `Cell`).
    reads: Cell<u64>,
}

/// A "NIC" engine, DCTCP-like in Q16 fixed point and unlike the AIMD: no
/// slow start, one MSS more per window of acknowledged bytes, a decrease
/// by `alpha / 2` on congestion (at most once per RTT) where `alpha`
/// estimates the share of windows that saw congestion (gain 1/16), and
/// half the window, not one MSS, after a timeout.
#[derive(Debug)]
struct NicEngine {
    mss: u32,
    max: u32,
    cwnd: u32,
    alpha_q16: u32,
    acked: u32,
    marked: bool,
    hold_until: u64,
    prior: Option<u32>,
    hooks: Hooks,
}

impl CongestionEngine for NicEngine {
    fn start(_window: Window, mss: u32, init_pkts: u32, max_pkts: u32) -> Self {
        let max = mss.saturating_mul(max_pkts.max(1));
        NicEngine {
            mss,
            max,
            cwnd: mss.saturating_mul(init_pkts).clamp(mss, max),
            alpha_q16: Q16_ONE,
            acked: 0,
            marked: false,
            hold_until: 0,
            prior: None,
            hooks: Hooks::default(),
        }
    }

    fn cwnd(&self) -> u32 {
        self.hooks.reads.set(self.hooks.reads.get() + 1);
        self.cwnd
    }

    fn on_ack(&mut self, _now: u64, bytes: u32) {
        self.hooks.acks += 1;
        self.prior = None;
        self.hooks.acked_bytes += u64::from(bytes);
        self.acked = self.acked.saturating_add(bytes);
        if self.acked >= self.cwnd {
            self.acked -= self.cwnd;
            // alpha = 15/16 alpha + 1/16 F, F = 1 if the window saw a mark.
            let f = if self.marked { Q16_ONE } else { 0 };
            self.alpha_q16 = self.alpha_q16 - self.alpha_q16 / 16 + f / 16;
            self.marked = false;
            self.cwnd = self.cwnd.saturating_add(self.mss).min(self.max);
        }
    }

    fn on_congestion(&mut self, now: u64, rtt_ns: u64) -> bool {
        self.hooks.congestions += 1;
        self.prior = None;
        self.marked = true;
        if now < self.hold_until {
            return false;
        }
        self.hold_until = now.saturating_add(rtt_ns);
        let cut = (u64::from(self.cwnd) * u64::from(self.alpha_q16 / 2)) >> 16;
        self.cwnd = (self.cwnd - cut as u32).max(self.mss);
        self.hooks.decreases += 1;
        true
    }

    fn on_timeout(&mut self) {
        self.hooks.timeouts += 1;
        self.prior.get_or_insert(self.cwnd);
        self.cwnd = (self.cwnd / 2).max(self.mss);
        self.acked = 0;
    }

    fn undo_timeout(&mut self) {
        if let Some(cwnd) = self.prior.take() {
            self.cwnd = cwnd;
        }
    }
}

type NicConn = Conn<4, 128, 2, 1, 8, NicEngine>;

const SRC: [u8; 4] = [192, 0, 2, 1];
const DST: [u8; 4] = [192, 0, 2, 2];

/// An IPv4 + UDP datagram to the native port carrying `payload`, its UDP
/// checksum sealed by `integ`; `ce` marks the IP header Congestion
/// Experienced. The IP header checksum is not filled (nobody checks it here).
fn datagram(
    integ: &mut impl Integrity,
    from: [u8; 4],
    to: [u8; 4],
    port: u16,
    payload: &[u8],
    ce: bool,
) -> (Vec<u8>, Sealed) {
    let udp_len = UDP_HDR_LEN + payload.len();
    let mut d = vec![0u8; IPV4_HDR_LEN + udp_len];
    let (ip, udp) = d.split_at_mut(IPV4_HDR_LEN);
    ip[0] = 0x45;
    ip[1] = if ce { 3 } else { 2 };
    ip[2..4].copy_from_slice(&((IPV4_HDR_LEN + udp_len) as u16).to_be_bytes());
    ip[8] = 64;
    ip[9] = 17;
    ip[12..16].copy_from_slice(&from);
    ip[16..20].copy_from_slice(&to);
    udp[0..2].copy_from_slice(&port.to_be_bytes());
    udp[2..4].copy_from_slice(&NATIVE_PORT.to_be_bytes());
    udp[4..6].copy_from_slice(&(udp_len as u16).to_be_bytes());
    udp[UDP_HDR_LEN..].copy_from_slice(payload);
    let sealed = integ.seal_udp(&from, &to, udp).unwrap();
    (d, sealed)
}

/// Byte `i` of message `msn`.
fn pattern(msn: u32, i: u32) -> u8 {
    (msn * 29 + i * 11 + (i >> 8)) as u8
}

/// What the transfer saw besides delivery.
struct Run {
    corrupted: u64,
    refused: u64,
    a: Box<NicConn>,
}

/// `msgs` WRITEs of `len` bytes from `a` to `b` over IPv4/UDP with 2 %
/// loss, 10 % of DATA marked CE, 1 % of packets with a flipped bit and a
/// 1 ms blackout (once a third of the messages completed), both ends on the NIC engine; every datagram is sealed
/// and checked through [`SoftIntegrity`] before the core sees it. Checks
/// that every message completed and that `b`'s memory holds exactly what
/// was written.
fn transfer(msgs: u32, len: u32) -> Run {
    let mut cfg = ConnConfig::new(11);
    cfg.mss = 1024;
    cfg.paths = 4;
    let mut a = Box::new(NicConn::with_engine(cfg));
    cfg.conn_id = 22;
    let mut b = Box::new(NicConn::with_engine(cfg));
    assert!(a.open_stream(0, 100, 200));
    assert!(b.open_stream(0, 200, 100));
    let base = 0x1_0000u64;
    let mut memory = vec![0u8; (msgs * len) as usize];
    let mut r = Rand(0x9E37_79B9_7F4A_7C15);
    let mut wire: Vec<(u64, bool, Vec<u8>)> = Vec::new();
    let (mut now, mut posted, mut sent, mut received) = (0u64, 0u32, 0u32, 0u32);
    let (mut corrupted, mut refused) = (0u64, 0u64);
    // The blackout starts once a third of the messages completed.
    let mut blackout_from = None;
    while sent < msgs || received < msgs {
        assert!(
            now < 5_000_000_000,
            "stuck: {sent} sent, {received} received"
        );
        while posted < msgs {
            let m = MsgDesc {
                op: MrcOp::Write,
                len,
                va: base + u64::from(posted * len),
                rkey: 5,
                imm: 0,
                se: false,
            };
            if a.post(0, m).is_err() {
                break;
            }
            posted += 1;
        }
        for (to_b, c) in [(true, &mut a), (false, &mut b)] {
            let mut buf = [0u8; DATA_HDR_LEN];
            while let Some(t) = c.poll_transmit(now, &mut buf) {
                let mut bytes = buf[..t.hdr_len].to_vec();
                if let Some(p) = t.payload {
                    bytes.extend((0..u32::from(p.len)).map(|i| pattern(p.msn, p.offset + i)));
                }
                let (from, to) = if to_b { (SRC, DST) } else { (DST, SRC) };
                let ce = t.payload.is_some() && r.permille(100);
                let (mut d, _) = datagram(&mut SoftIntegrity, from, to, t.src_port, &bytes, ce);
                let blackout = blackout_from.is_some_and(|t| now >= t && now < t + 1_000_000);
                if blackout || r.permille(20) {
                    continue;
                }
                if r.permille(10) {
                    // One bit anywhere in the UDP datagram.
                    let at = IPV4_HDR_LEN + (r.next() as usize) % (d.len() - IPV4_HDR_LEN);
                    d[at] ^= 1 << (r.next() % 8);
                    corrupted += 1;
                }
                wire.push((now + 2_000 + r.next() % 3_000, to_b, d));
            }
        }
        let arrival = wire.iter().map(|w| w.0).min();
        let timer = [a.next_deadline(), b.next_deadline()]
            .into_iter()
            .flatten()
            .min();
        now = match (arrival, timer) {
            (Some(x), Some(y)) => x.min(y),
            (x, y) => x.or(y).expect("nothing in flight and no timer"),
        }
        .max(now);
        let (due, rest): (Vec<_>, Vec<_>) = wire.drain(..).partition(|w| w.0 <= now);
        wire = rest;
        for (_, to_b, d) in due {
            let (ip, udp) = d.split_at(IPV4_HDR_LEN);
            if native_rx(&mut SoftIntegrity, ip, udp).is_err() {
                refused += 1;
                continue;
            }
            let c = if to_b { &mut b } else { &mut a };
            let ce = ip[1] & 3 == 3;
            let port = u16::from_be_bytes([udp[0], udp[1]]);
            let payload = &udp[UDP_HDR_LEN..];
            match c.on_packet(now, payload, ce, port, 0) {
                Ok(RxEvent::Data(p)) => {
                    assert!(to_b);
                    let o = (p.va + u64::from(p.offset) - base) as usize;
                    let data = &payload[DATA_HDR_LEN..];
                    assert_eq!(data.len(), usize::from(p.len));
                    memory[o..o + data.len()].copy_from_slice(data);
                }
                Ok(_) => {}
                Err(e) => panic!("a checked packet was dropped: {e:?}"),
            }
        }
        a.on_timer(now);
        b.on_timer(now);
        while let Some(c) = a.poll_completion() {
            let Completion::Send { status, .. } = c else {
                panic!("{c:?} at the sender")
            };
            assert_eq!(status, SendStatus::Ok);
            sent += 1;
            if sent == msgs / 3 {
                blackout_from = Some(now);
            }
        }
        while let Some(c) = b.poll_completion() {
            assert!(
                matches!(c, Completion::Recv { .. }),
                "{c:?} at the receiver"
            );
            received += 1;
        }
    }
    for m in 0..msgs {
        for i in 0..len {
            let at = (m * len + i) as usize;
            assert_eq!(memory[at], pattern(m, i), "message {m} byte {i}");
        }
    }
    Run {
        corrupted,
        refused,
        a,
    }
}

#[test]
fn nic_engine_carries_a_lossy_transfer_and_every_hook_is_called() {
    let (msgs, len) = (48, 8 * 1024);
    let run = transfer(msgs, len);
    let a = &run.a;
    // Every corrupted datagram was refused by the checksum, nothing else.
    assert!(run.corrupted > 0);
    assert_eq!(run.refused, run.corrupted);
    assert!(a.stats.retransmits > 0);
    // The path engines saw exactly the path's events.
    let (mut timeouts, mut echoes, mut path_congestions, mut path_timeouts) = (0, 0, 0, 0);
    for i in 0..4 {
        let (_, _, st) = a.path_info(i).unwrap();
        let e = a.path_engine(i).unwrap();
        timeouts += st.timeouts;
        echoes += st.ecn_echoes;
        path_congestions += e.hooks.congestions;
        path_timeouts += e.hooks.timeouts;
        assert!(
            e.hooks.acks > 0 && e.hooks.reads.get() > 0,
            "path {i}: {:?}",
            e.hooks
        );
        // The core's window is the engine's.
        assert_eq!(a.path_rtt(i).unwrap().0, e.cwnd);
    }
    assert!(
        timeouts > 0 && echoes > 0,
        "no timeouts or ECN echoes: {timeouts} {echoes}"
    );
    assert_eq!(path_timeouts, timeouts);
    assert_eq!(path_congestions, echoes);
    // The connection's engine: every Dsn's bytes once, every echo, its
    // decreases counted by the core; no timeouts (those are per path).
    let c = a.conn_engine();
    assert_eq!(c.hooks.acked_bytes, u64::from(msgs * len));
    assert_eq!(c.hooks.congestions, echoes);
    assert!(c.hooks.decreases > 0);
    assert_eq!(c.hooks.decreases, a.stats.conn_ecn_decreases);
    assert_eq!(c.hooks.timeouts, 0);
    assert!(c.hooks.reads.get() > 0);
    assert_eq!(a.conn_window().0, c.cwnd);
    eprintln!(
        "NIC engine: {} corrupted (all refused), {} retransmissions, {timeouts} RTOs, \
         {echoes} ECN echoes, {} connection decreases, windows {:?} / {}",
        run.corrupted,
        a.stats.retransmits,
        c.hooks.decreases,
        (0..4).map(|i| a.path_rtt(i).unwrap().0).collect::<Vec<_>>(),
        c.cwnd
    );
}

#[test]
fn default_engine_through_the_trait_equals_new() {
    type C = Conn<4, 128, 2, 1, 8>;
    let mut cfg = ConnConfig::new(7);
    cfg.mss = 1024;
    cfg.paths = 4;
    cfg.init_cwnd_conn = 16;
    let (x, y) = (Box::new(C::new(cfg)), Box::new(C::with_engine(cfg)));
    for i in 0..4 {
        assert_eq!(x.path_engine(i), y.path_engine(i));
        assert_eq!(x.path_info(i), y.path_info(i));
    }
    assert_eq!(x.conn_engine(), y.conn_engine());
    // The roles' decreases differ (0.8 per path, 0.875 per connection).
    let mut p = *y.path_engine(0).unwrap();
    let mut c = *y.conn_engine();
    assert!(CongestionEngine::on_congestion(&mut p, 1, 1));
    assert!(CongestionEngine::on_congestion(&mut c, 1, 1));
    assert_eq!(p.cwnd(), 4 * 1024 * 4 / 5);
    assert_eq!(c.cwnd(), 16 * 1024 * 7 / 8);
    assert_eq!(
        Aimd::start(Window::Path, 1024, 4, 256),
        *x.path_engine(3).unwrap()
    );
}

fn load_fixtures() -> Vec<(String, Vec<u8>)> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../../../../tools/testing/selftests/drivers/infiniband/metaroce/fixtures");
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.extension() != Some(std::ffi::OsStr::new("hex")) {
            continue;
        }
        let hex: String = std::fs::read_to_string(&p)
            .unwrap()
            .lines()
            .filter(|l| !l.trim_start().starts_with('#'))
            .flat_map(|l| l.chars().filter(|c| !c.is_whitespace()))
            .collect();
        let bytes = (0..hex.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).unwrap())
            .collect();
        out.push((p.file_name().unwrap().to_string_lossy().into_owned(), bytes));
    }
    assert!(out.len() > 5);
    out
}

#[test]
fn icrc_is_skipped_only_when_the_nic_checked_it() {
    let nic_checked = NicIntegrity {
        icrc_checked: true,
        ..NicIntegrity::default()
    };
    for (name, pkt) in load_fixtures() {
        let ip_len = if pkt[0] >> 4 == 4 {
            IPV4_HDR_LEN
        } else {
            IPV6_HDR_LEN
        };
        let (ip, rest) = pkt.split_at(ip_len);
        let (udp, ib) = rest.split_at(UDP_HDR_LEN);
        assert!(roce_rx(&mut SoftIntegrity, ip, udp, ib).is_ok(), "{name}");
        assert!(
            roce_rx(&mut NicIntegrity::default(), ip, udp, ib).is_ok(),
            "{name}"
        );
        // One bit of the payload or trailer flipped: still well formed.
        let mut bad = ib.to_vec();
        let last = bad.len() - 1;
        bad[last] ^= 0x10;
        let mismatch = Err(RoceRxError::Icrc(IcrcError::Mismatch));
        assert_eq!(
            roce_rx(&mut SoftIntegrity, ip, udp, &bad).map(|_| ()),
            mismatch,
            "{name}"
        );
        // The NIC did not check it: software does, and refuses it.
        let unchecked = roce_rx(&mut NicIntegrity::default(), ip, udp, &bad).map(|_| ());
        assert_eq!(unchecked, mismatch, "{name}");
        // The NIC vouched for it: software does not look (were it to, it
        // would refuse this packet).
        assert!(
            roce_rx(&mut { nic_checked }, ip, udp, &bad).is_ok(),
            "{name}"
        );
        // Sealing: software writes the trailer the fixture carries (the
        // IBTA one for rdma_rxe's FLUSH requests, which carry rdma_rxe's
        // own: tests/fixtures.rs); a NIC that inserts it gets a zero
        // trailer to fill.
        let mut want = ib.to_vec();
        let n = want.len();
        if ib[0] == 0x1C {
            let icrc = icrc_compute(ip, udp, &ib[..n - ICRC_LEN]).unwrap();
            want[n - ICRC_LEN..].copy_from_slice(&icrc.to_le_bytes());
        }
        let mut out = ib.to_vec();
        out[n - ICRC_LEN..].fill(0xAA);
        let sealed = NicIntegrity::default().seal_icrc(ip, udp, &mut out);
        assert_eq!((sealed, &out[..]), (Ok(Sealed::Done), &want[..]), "{name}");
        // rdma_rxe's form: every fixture, FLUSH requests included, sealed to its captured
        // bytes; checking is software's.
        let mut rxe = ib.to_vec();
        rxe[n - ICRC_LEN..].fill(0xAA);
        let sealed = RxeFlushIntegrity.seal_icrc(ip, udp, &mut rxe);
        assert_eq!((sealed, &rxe[..]), (Ok(Sealed::Done), ib), "{name}");
        assert_eq!(
            roce_rx(&mut RxeFlushIntegrity, ip, udp, &bad).map(|_| ()),
            mismatch,
            "{name}"
        );
        let mut insert = NicIntegrity {
            icrc_insert: true,
            ..NicIntegrity::default()
        };
        assert_eq!(insert.seal_icrc(ip, udp, &mut out), Ok(Sealed::ByNic));
        assert_eq!(out[n - ICRC_LEN..], [0; ICRC_LEN], "{name}");
        let short = &mut [0u8; 15];
        assert_eq!(insert.seal_icrc(ip, udp, short), Err(IcrcError::Truncated));
        assert_eq!(
            SoftIntegrity.seal_icrc(ip, udp, short),
            Err(IcrcError::Truncated)
        );
        let icrc = icrc_compute(ip, udp, &out[..n - ICRC_LEN]).unwrap();
        assert_eq!(out[..n - ICRC_LEN], ib[..n - ICRC_LEN]);
        assert_eq!(icrc.to_le_bytes(), want[n - ICRC_LEN..], "{name}");
    }
}

/// A native DATA packet from a fresh connection.
fn native_data() -> Vec<u8> {
    let mut cfg = ConnConfig::new(3);
    cfg.mss = 256;
    cfg.paths = 1;
    let mut c = Box::new(Conn::<1, 64, 1, 1, 4>::new(cfg));
    assert!(c.open_stream(0, 1, 2));
    let m = MsgDesc {
        op: MrcOp::Send,
        len: 200,
        va: 0,
        rkey: 0,
        imm: 0,
        se: false,
    };
    c.post(0, m).unwrap();
    let mut buf = [0u8; DATA_HDR_LEN];
    let t = c.poll_transmit(0, &mut buf).unwrap();
    let mut bytes = buf[..t.hdr_len].to_vec();
    bytes.extend((0..200u32).map(|i| pattern(0, i)));
    bytes
}

#[test]
fn udp_checksum_is_skipped_only_when_the_nic_checked_it() {
    let payload = native_data();
    let (good, sealed) = datagram(&mut SoftIntegrity, SRC, DST, 50_000, &payload, false);
    assert_eq!(sealed, Sealed::Done);
    let (ip, udp) = good.split_at(IPV4_HDR_LEN);
    let checked = NicIntegrity {
        udp_checked: true,
        ..NicIntegrity::default()
    };
    assert_eq!(native_rx(&mut SoftIntegrity, ip, udp), Ok(()));
    assert_eq!(native_rx(&mut NicIntegrity::default(), ip, udp), Ok(()));
    // A flipped payload bit.
    let mut bad = udp.to_vec();
    bad[UDP_HDR_LEN + DATA_HDR_LEN + 7] ^= 4;
    let mismatch = Err(ChecksumError::Mismatch);
    assert_eq!(native_rx(&mut SoftIntegrity, ip, &bad), mismatch);
    assert_eq!(native_rx(&mut NicIntegrity::default(), ip, &bad), mismatch);
    assert_eq!(native_rx(&mut { checked }, ip, &bad), Ok(()));
    // No checksum is refused whatever the NIC said (section 2).
    let mut none = udp.to_vec();
    none[6..8].fill(0);
    assert_eq!(
        native_rx(&mut { checked }, ip, &none),
        Err(ChecksumError::Missing)
    );
    assert_eq!(
        native_rx(&mut SoftIntegrity, &ip[..10], udp),
        Err(ChecksumError::Malformed)
    );
    // The receiving core gets the datagram only after the check: the good
    // one is placed, the corrupted one never reaches it.
    let mut cfg = ConnConfig::new(4);
    cfg.mss = 256;
    cfg.paths = 1;
    let mut rx = Box::new(Conn::<1, 64, 1, 1, 4>::new(cfg));
    assert!(rx.open_stream(0, 2, 1));
    for d in [&bad[..], udp] {
        if native_rx(&mut NicIntegrity::default(), ip, d).is_ok() {
            let ev = rx.on_packet(0, &d[UDP_HDR_LEN..], false, 50_000, 0);
            assert!(matches!(ev, Ok(RxEvent::Data(p)) if p.len == 200), "{ev:?}");
        }
    }
    assert_eq!(rx.stats.data_placed, 1);
    // Transmit offload: the field holds the pseudo-header sum; the NIC's
    // sum over the datagram from the UDP header on completes it to the
    // value software computes.
    let mut insert = NicIntegrity {
        udp_insert: true,
        ..NicIntegrity::default()
    };
    let (mut partial, sealed) = datagram(&mut insert, SRC, DST, 50_000, &payload, false);
    assert_eq!(sealed, Sealed::ByNic);
    assert_ne!(partial, good);
    let udp = &mut partial[IPV4_HDR_LEN..];
    let mut sum: u64 = udp
        .chunks(2)
        .map(|w| u64::from(w[0]) << 8 | u64::from(*w.get(1).unwrap_or(&0)))
        .sum();
    while sum > 0xFFFF {
        sum = (sum & 0xFFFF) + (sum >> 16);
    }
    let c = !(sum as u16);
    udp[6..8].copy_from_slice(&(if c == 0 { 0xFFFF } else { c }).to_be_bytes());
    assert_eq!(partial, good);
    // IPv6 addresses, same rules.
    let (s6, d6) = (
        [0x20, 1, 0xd, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1],
        [0x20; 16],
    );
    let mut ip6 = [0u8; IPV6_HDR_LEN];
    ip6[0] = 0x60;
    ip6[8..24].copy_from_slice(&s6);
    ip6[24..40].copy_from_slice(&d6);
    let mut u6 = good[IPV4_HDR_LEN..].to_vec();
    u6[6..8].fill(0);
    assert_eq!(SoftIntegrity.seal_udp(&s6, &d6, &mut u6), Ok(Sealed::Done));
    assert_eq!(native_rx(&mut SoftIntegrity, &ip6, &u6), Ok(()));
    u6[UDP_HDR_LEN] ^= 1;
    assert_eq!(native_rx(&mut SoftIntegrity, &ip6, &u6), mismatch);
}
