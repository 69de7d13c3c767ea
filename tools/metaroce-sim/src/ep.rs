//! Endpoints: a MetaRoCE sender and receiver around `metaroce_proto::conn`,
//! and a RoCEv2-style go-back-N sender and receiver model for comparison.
//!
//! Every endpoint checks what it can: the MetaRoCE receiver checks each
//! payload's tag against its placement, that receive completions come in
//! message order with the right lengths, and the sender that send
//! completions come in posting order, all successful.

use metaroce_proto::conn::{Completion, Conn, ConnConfig, RxEvent, SendStatus};
use metaroce_proto::mrc_wire::{MrcOp, DATA_HDR_LEN};
use metaroce_proto::stream::{MsgDesc, PostError};

/// The connection type the simulator uses: up to 64 paths, 1024 Dsn
/// descriptors, 4 streams, 64 messages per stream.
pub type SimConn = Conn<64, 1024, 16, 4, 64>;

/// A packet an endpoint wants to send.
pub struct Out {
    /// IP payload (UDP payload plus 8 bytes of UDP header are added by the
    /// network when it counts wire bytes).
    pub bytes: Vec<u8>,
    /// UDP source port.
    pub src_port: u16,
    /// ECN-capable transport.
    pub ect: bool,
}

/// Tag written into the first 8 payload bytes of each packet.
pub fn tag(stream: usize, msn: u32, offset: u32) -> u64 {
    ((stream as u64) << 56) ^ (u64::from(msn) << 28) ^ u64::from(offset)
}

/// Transfer description for one sender.
#[derive(Clone, Copy, Debug)]
pub struct Workload {
    /// Bytes to transfer.
    pub bytes: u64,
    /// Message size.
    pub msg: u32,
    /// Streams used (1..=4).
    pub streams: usize,
}

impl Workload {
    /// Number of messages.
    pub fn messages(&self) -> u64 {
        self.bytes.div_ceil(u64::from(self.msg.max(1)))
    }

    fn msg_len(&self, i: u64) -> u32 {
        let start = i * u64::from(self.msg);
        (self.bytes - start).min(u64::from(self.msg)) as u32
    }
}

/// The sending side of one MetaRoCE connection.
pub struct MetaSender {
    /// The connection.
    pub conn: Box<SimConn>,
    wl: Workload,
    posted: u64,
    completed: u64,
    next_done: [u32; 4],
    /// Time of the last send completion.
    pub done_at: Option<u64>,
    /// First invariant violation.
    pub error: Option<String>,
}

fn new_conn(cfg: ConnConfig) -> Box<SimConn> {
    // Boxed directly: the value is large.
    Box::new(SimConn::new(cfg))
}

impl MetaSender {
    /// A sender with `cfg` running `wl`.
    pub fn new(cfg: ConnConfig, wl: Workload) -> Self {
        let mut conn = new_conn(cfg);
        for s in 0..wl.streams {
            conn.open_stream(s, 100 + s as u32, 200 + s as u32);
        }
        let mut me = MetaSender {
            conn,
            wl,
            posted: 0,
            completed: 0,
            next_done: [0; 4],
            done_at: None,
            error: None,
        };
        me.post_more();
        me
    }

    fn post_more(&mut self) {
        while self.posted < self.wl.messages() {
            let i = self.posted;
            let stream = (i % self.wl.streams as u64) as usize;
            let len = self.wl.msg_len(i);
            let desc = MsgDesc {
                op: if i & 1 == 0 {
                    MrcOp::Write
                } else {
                    MrcOp::Send
                },
                len,
                va: 0x10_0000 + i * u64::from(self.wl.msg),
                rkey: 0x77,
                imm: 0,
                se: false,
            };
            match self.conn.post(stream, desc) {
                Ok(_) => self.posted += 1,
                Err(PostError::Full) => break,
                Err(e) => {
                    self.error.get_or_insert(format!("post: {e:?}"));
                    break;
                }
            }
        }
    }

    /// True when every message completed.
    pub fn done(&self) -> bool {
        self.completed == self.wl.messages()
    }

    /// Handles a packet (an ACK).
    pub fn on_packet(&mut self, now: u64, bytes: &[u8]) {
        // Dropped ACKs are counted by the connection.
        let _ = self.conn.on_packet(now, bytes, false, 0, 0);
        self.drain(now);
    }

    fn drain(&mut self, now: u64) {
        while let Some(c) = self.conn.poll_completion() {
            match c {
                Completion::Send {
                    stream,
                    msn,
                    status,
                } => {
                    let want = self.next_done.get(stream).copied();
                    if status != SendStatus::Ok || want != Some(msn) {
                        self.error.get_or_insert(format!(
                            "send completion {stream}/{msn} {status:?}, expected msn {want:?}"
                        ));
                    }
                    if let Some(n) = self.next_done.get_mut(stream) {
                        *n = msn.wrapping_add(1);
                    }
                    self.completed += 1;
                    if self.done() {
                        self.done_at = Some(now);
                    }
                }
                Completion::Recv { .. } => {
                    self.error
                        .get_or_insert("receive completion at a sender".into());
                }
            }
        }
        self.post_more();
    }

    /// The next packet to send.
    pub fn poll(&mut self, now: u64) -> Option<Out> {
        let mut hdr = [0u8; DATA_HDR_LEN];
        let t = self.conn.poll_transmit(now, &mut hdr)?;
        let mut bytes = hdr[..t.hdr_len].to_vec();
        if let Some(p) = t.payload {
            let mut payload = vec![0u8; usize::from(p.len)];
            let tg = tag(p.stream, p.msn, p.offset).to_le_bytes();
            let n = payload.len().min(8);
            payload[..n].copy_from_slice(&tg[..n]);
            bytes.extend_from_slice(&payload);
        }
        Some(Out {
            bytes,
            src_port: t.src_port,
            ect: t.ect,
        })
    }

    /// Runs the timers.
    pub fn on_timer(&mut self, now: u64) {
        self.conn.on_timer(now);
        self.drain(now);
    }
}

/// The receiving side of one MetaRoCE connection.
pub struct MetaReceiver {
    /// The connection.
    pub conn: Box<SimConn>,
    wl: Workload,
    next_msn: [u32; 4],
    /// Messages completed.
    pub completed: u64,
    /// Payload bytes of completed messages.
    pub bytes_completed: u64,
    /// (time, payload bytes) of every newly placed packet.
    pub placed: Vec<(u64, u32)>,
    /// Time of the last receive completion.
    pub done_at: Option<u64>,
    /// First invariant violation.
    pub error: Option<String>,
}

impl MetaReceiver {
    /// A receiver for a sender running `wl`.
    pub fn new(cfg: ConnConfig, wl: Workload) -> Self {
        let mut conn = new_conn(cfg);
        for s in 0..wl.streams {
            conn.open_stream(s, 200 + s as u32, 100 + s as u32);
        }
        MetaReceiver {
            conn,
            wl,
            next_msn: [0; 4],
            completed: 0,
            bytes_completed: 0,
            placed: Vec::new(),
            done_at: None,
            error: None,
        }
    }

    /// True when every message completed.
    pub fn done(&self) -> bool {
        self.completed == self.wl.messages()
    }

    /// Handles a DATA packet.
    pub fn on_packet(&mut self, now: u64, bytes: &[u8], ce: bool, port: u16, hint: u32) {
        match self.conn.on_packet(now, bytes, ce, port, hint) {
            Ok(RxEvent::Data(p)) => {
                let payload = bytes.get(DATA_HDR_LEN..).unwrap_or(&[]);
                let n = payload.len().min(8).min(usize::from(p.len));
                let mut tg = [0u8; 8];
                tg[..n].copy_from_slice(&payload[..n]);
                let want = tag(p.stream, p.msn, p.offset).to_le_bytes();
                if tg[..n] != want[..n] {
                    self.error.get_or_insert(format!("misplaced payload {p:?}"));
                }
                self.placed.push((now, u32::from(p.len)));
            }
            Ok(_) => {}
            Err(e) => {
                self.error
                    .get_or_insert(format!("receiver dropped a packet: {e:?}"));
            }
        }
        while let Some(c) = self.conn.poll_completion() {
            match c {
                Completion::Recv { stream, done } => {
                    let want = self.next_msn.get(stream).copied();
                    // Message i is on stream i % streams, its msn i / streams.
                    let i = u64::from(done.msn) * self.wl.streams as u64 + stream as u64;
                    if want != Some(done.msn) || done.len != self.wl.msg_len(i) {
                        self.error.get_or_insert(format!(
                            "receive completion {stream}/{} len {}, expected {want:?}",
                            done.msn, done.len
                        ));
                    }
                    if let Some(m) = self.next_msn.get_mut(stream) {
                        *m = done.msn.wrapping_add(1);
                    }
                    self.completed += 1;
                    self.bytes_completed += u64::from(done.len);
                    if self.done() {
                        self.done_at = Some(now);
                    }
                }
                Completion::Send { .. } => {
                    self.error
                        .get_or_insert("send completion at a receiver".into());
                }
            }
        }
    }

    /// The next packet (ACK) to send.
    pub fn poll(&mut self, now: u64) -> Option<Out> {
        let mut hdr = [0u8; DATA_HDR_LEN];
        let t = self.conn.poll_transmit(now, &mut hdr)?;
        Some(Out {
            bytes: hdr[..t.hdr_len].to_vec(),
            src_port: t.src_port,
            ect: t.ect,
        })
    }
}

/// RoCEv2 header bytes per data packet in the model (BTH + RETH + ICRC).
const GBN_HDR: usize = 12 + 16 + 4;

/// A RoCEv2 RC requester model: one UDP source port (one ECMP route), a
/// fixed window of `window` packets, go-back-N on a NAK or a timeout.
pub struct GbnSender {
    total: u32,
    mss: u32,
    window: u32,
    una: u32,
    next: u32,
    rto_ns: u64,
    progress_at: u64,
    /// UDP source port.
    pub port: u16,
    /// Packets sent, including go-back-N resends.
    pub sent: u64,
    /// Resent packets.
    pub retransmits: u64,
    /// Timeouts.
    pub timeouts: u64,
    /// When every packet was acknowledged.
    pub done_at: Option<u64>,
}

impl GbnSender {
    /// A sender of `bytes` in `mss`-byte packets.
    pub fn new(bytes: u64, mss: u32, window: u32, rto_ns: u64, port: u16) -> Self {
        GbnSender {
            total: bytes.div_ceil(u64::from(mss)) as u32,
            mss,
            window: window.max(1),
            una: 0,
            next: 0,
            rto_ns,
            progress_at: 0,
            port,
            sent: 0,
            retransmits: 0,
            timeouts: 0,
            done_at: None,
        }
    }

    /// True when everything was acknowledged.
    pub fn done(&self) -> bool {
        self.una >= self.total
    }

    /// Handles an ACK (`kind` 1, up to and including `psn`) or NAK (`kind`
    /// 2: resend from `psn`).
    fn on_packet(&mut self, now: u64, bytes: &[u8]) {
        let (Some(&kind), Some(psn)) = (bytes.first(), bytes.get(1..5)) else {
            return;
        };
        let psn = u32::from_be_bytes(psn.try_into().unwrap());
        match kind {
            1 if psn + 1 > self.una => {
                self.una = psn + 1;
                self.progress_at = now;
            }
            2 if psn >= self.una => {
                self.una = psn;
                self.next = psn;
                self.progress_at = now;
            }
            _ => {}
        }
        if self.next < self.una {
            self.next = self.una;
        }
        if self.done() && self.done_at.is_none() {
            self.done_at = Some(now);
        }
    }

    /// The next data packet.
    pub fn poll(&mut self, now: u64) -> Option<Out> {
        if self.next >= self.total || self.next - self.una >= self.window {
            return None;
        }
        if self.una == self.next {
            self.progress_at = now;
        }
        let psn = self.next;
        self.next += 1;
        self.sent += 1;
        let mut bytes = vec![0u8; GBN_HDR + self.mss as usize];
        bytes[0] = 0;
        bytes[1..5].copy_from_slice(&psn.to_be_bytes());
        Some(Out {
            bytes,
            src_port: self.port,
            ect: true,
        })
    }

    /// The retransmission deadline.
    pub fn next_deadline(&self) -> Option<u64> {
        (self.una < self.next).then_some(self.progress_at + self.rto_ns)
    }

    /// Timeout: go back to the oldest unacknowledged packet.
    pub fn on_timer(&mut self, now: u64) {
        if self.next_deadline().is_some_and(|t| t <= now) {
            self.retransmits += u64::from(self.next - self.una);
            self.timeouts += 1;
            self.next = self.una;
            self.progress_at = now;
        }
    }

    /// Notes that `n` packets were resent after a NAK (for statistics).
    fn count_rewind(&mut self, from: u32) {
        self.retransmits += u64::from(self.next.saturating_sub(from));
    }

    /// Handles an ACK or NAK, counting go-back-N resends.
    pub fn on_ack(&mut self, now: u64, bytes: &[u8]) {
        if bytes.first() == Some(&2) {
            if let Some(psn) = bytes.get(1..5) {
                let psn = u32::from_be_bytes(psn.try_into().unwrap());
                if psn >= self.una && psn < self.next {
                    self.count_rewind(psn);
                }
            }
        }
        self.on_packet(now, bytes);
    }
}

/// A RoCEv2 RC responder model: accepts only the expected PSN, NAKs the
/// first gap once, acknowledges every in-order packet.
#[derive(Default)]
pub struct GbnReceiver {
    expected: u32,
    nak_sent: bool,
    pending: Option<(u8, u32)>,
    /// Payload bytes accepted in order, with their time.
    pub placed: Vec<(u64, u32)>,
    mss: u32,
}

impl GbnReceiver {
    /// A receiver of `mss`-byte packets.
    pub fn new(mss: u32) -> Self {
        GbnReceiver {
            mss,
            ..Default::default()
        }
    }

    /// Handles a data packet.
    pub fn on_packet(&mut self, now: u64, bytes: &[u8]) {
        let Some(psn) = bytes.get(1..5) else { return };
        let psn = u32::from_be_bytes(psn.try_into().unwrap());
        if psn == self.expected {
            self.expected += 1;
            self.nak_sent = false;
            self.placed.push((now, self.mss));
            self.pending = Some((1, psn));
        } else if psn > self.expected {
            if !self.nak_sent {
                self.nak_sent = true;
                self.pending = Some((2, self.expected));
            }
        } else if self.expected > 0 {
            self.pending = Some((1, self.expected - 1));
        }
    }

    /// The ACK or NAK owed, if any.
    pub fn poll(&mut self, port: u16) -> Option<Out> {
        let (kind, psn) = self.pending.take()?;
        let mut bytes = vec![kind];
        bytes.extend_from_slice(&psn.to_be_bytes());
        bytes.resize(12 + 4 + 4, 0);
        Some(Out {
            bytes,
            src_port: port,
            ect: false,
        })
    }
}
