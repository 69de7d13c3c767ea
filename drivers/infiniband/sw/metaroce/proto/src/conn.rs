// SPDX-License-Identifier: GPL-2.0
//! The sans-I/O MetaRoCE connection (`transport.rst`): one sending half
//! (paths, Dsn descriptors, retransmission queue, congestion control,
//! stream scheduler) and one receiving half (per-path SACK state, Dsn
//! deduplication, per-stream completion order) towards one peer.
//!
//! Inputs: [`Conn::post`], [`Conn::on_packet`], [`Conn::on_timer`].
//! Outputs, pulled by the caller: [`Conn::poll_transmit`] (headers written
//! into the caller's buffer plus a reference to the payload),
//! [`Conn::poll_completion`] and [`Conn::next_deadline`]. Time is `u64`
//! nanoseconds of any monotonic clock. Storage is sized by const generics:
//! `P` paths, `D` Dsn descriptors (`D = 64 * DW`), `S` streams, `K` messages
//! per stream. Everything but the streams and the packets in flight is inside the
//! value; the streams' state is in a [`StreamStore`] (by default inline,
//! `[Stream<K>; S]`), whose slots a caller may fill only while a stream is open
//! ([`Conn::open_stream_in`], [`Conn::close_stream_out`]); the state of the packets in
//! flight is in a [`FlightStore`] (by default inline, [`Flight`]), which a caller may
//! lend only while the connection is busy ([`Conn::lend_flight`],
//! [`Conn::reclaim_flight`]).
//!
//! # RDMA READ and atomics (`transport.rst`, section 11)
//!
//! The same value is requester (its sending half carries the request, its
//! receiving half takes the response) and responder (the reverse). What the
//! caller (the kernel glue) does:
//!
//! * **Requester, posting.** A READ is [`Conn::post`] with a [`MsgDesc`] of
//!   op [`MrcOp::Read`], `len` bytes from the peer's (`rkey`, `va`); an
//!   atomic is [`Conn::post_atomic`] (op [`MrcOp::CmpSwap`] with compare and
//!   swap, or [`MrcOp::FetchAdd`] with the addend). Both return the Msn, as
//!   for any message; the caller keeps its work request under (stream, Msn).
//!   Their transmits have `payload: None` (an atomic's 16 operand bytes are
//!   part of `hdr_len`: give `poll_transmit` a buffer of
//!   [`super::mrc_wire::MAX_HDR_LEN`] bytes; with a shorter one atomics
//!   wait and everything else is sent).
//! * **Requester, response.** [`Conn::on_packet`] returns
//!   [`RxEvent::Data`] with [`Place::op`] [`MrcOp::ReadResp`]: copy the
//!   packet's payload (`len` bytes) to byte `offset` of the scatter list of
//!   READ (`stream`, `msn`); or [`MrcOp::AtomicResp`]: write [`Place::va`]
//!   (the original value, in host order) to the atomic's 8-byte local
//!   buffer. [`RxEvent::Nak`] needs nothing. Do **not** check a receive
//!   queue for these (they consume no receive:
//!   [`MrcOp::consumes_recv`] is false).
//! * **Requester, completion.** [`Completion::Send`] for the READ/atomic's
//!   Msn, in posting order, only once every READ byte was placed (resp. the
//!   value delivered); a refused request completes with
//!   [`SendStatus::RemoteAccess`], [`SendStatus::RemoteInvalid`] or
//!   [`SendStatus::RemoteOperation`] (verbs: remote access / invalid request
//!   / operation error; the QP then goes to the error state, as for any
//!   status but `Ok`).
//! * **Responder, request.** [`Conn::on_packet`] returns
//!   [`RxEvent::Request`] once per request (never again for a duplicate):
//!   check (`rkey`, `va`, `len`) against the QP's memory with
//!   `REMOTE_READ` (READ) or `REMOTE_ATOMIC` (atomics); for an atomic
//!   perform it now (compare-and-swap / fetch-and-add on the aligned 8-byte
//!   word at `va`). Then, before releasing the connection's lock, call
//!   [`Conn::respond`] with [`Response::Read`], [`Response::Atomic`] (the
//!   original value) or [`Response::Nak`] (e.g.
//!   [`NakCode::RemoteAccess`]). A misaligned atomic is answered by the
//!   core ([`RxEvent::Refused`]). The request also produces a
//!   [`Completion::Recv`] whose op is not receive-consuming: skip it like a
//!   plain WRITE's.
//! * **Responder, data.** A READ response's [`Transmit::payload`] has
//!   [`PayloadRef::mr`] `Some(MrRef { rkey, va })`: read `len` bytes from
//!   that key and address (`va` already includes the offset), not from a
//!   send request. The same happens for a retransmission.
//!
//! # Refusing a data message (`transport.rst`, section 9.1)
//!
//! * **Receiver.** When [`RxEvent::Data`] names a SEND/WRITE the QP cannot
//!   take (bad RKey, receive buffer too short), do not place it and call
//!   [`Conn::refuse`] (`place.stream`, `place.msn`, code) before releasing
//!   the lock (no [`Conn::poll_transmit`] in between). Its later packets
//!   come as [`RxEvent::Refused`] (place nothing) or are dropped
//!   ([`RxDrop::NakPending`]); its [`Completion::Recv`] comes in order with
//!   [`RecvDone::refused`] `Some(code)`: complete a receive-consuming one
//!   in error, skip a plain WRITE's.
//! * **Requester.** The message's [`Completion::Send`] carries the NAK's
//!   status, exactly as for a refused READ.
//! * **Loopback.** A device whose QPs talk to each other has one connection
//!   whose DATA comes back to it: its refusal right after the packet sends
//!   no NAK (the NAK would need a Dsn of the window the held packet
//!   blocks) and marks the requesting stream's message directly.
//!
//! # SEND with invalidate (`transport.rst`, section 9.2)
//!
//! * **Requester.** [`Conn::post`] a [`MsgDesc`] of op [`MrcOp::SendInv`]
//!   with `rkey` = the key to invalidate (verbs `ex.invalidate_rkey`); it
//!   is a SEND in every other way (a posted receive, payload, SE). The core
//!   starts it only when every older message of its stream completed.
//! * **Receiver.** Its packets come as [`RxEvent::Data`] and are placed
//!   like a SEND's, by (`stream`, `rsn`, `offset`). The one packet that
//!   completes the message has [`Place::invalidate`] `Some(key)`: check
//!   what a SEND needs (the receive's length) and that `key` can be
//!   invalidated by this QP (exists, the QP's PD, a fast-register MR or a
//!   type 2 window); then place and invalidate it before releasing the
//!   lock, or place nothing and [`Conn::refuse`] the message (e.g.
//!   [`NakCode::InvalidRequest`] for a bad key). Its [`Completion::Recv`]
//!   comes later, in Msn order, with [`RecvDone::invalidated`]
//!   `Some(key)` (report `IB_WC_WITH_INVALIDATE`) or, if refused,
//!   [`RecvDone::refused`] set.

use super::auth::{mark, ReplayWindow, Sealed};
use super::cc::{pace_gap_ns, Aimd, MD_ECN_CONN, MD_ECN_PATH, Q16_ONE};
use super::flight::{Desc, DescState};
pub use super::flight::{Flight, FlightStore};
pub use super::mrc_wire::NakCode;
use super::mrc_wire::{
    parse, parse_auth, AckPkt, DataHdr, MrcError, MrcOp, MrcPacket, ProbeKind, ProbePkt,
    ATOMIC_OPERANDS_LEN, MAX_HDR_LEN,
};
use super::offload::{CongestionEngine, Window};
use super::path::{
    PathEvent, PathState, PathStats, RxPath, SlotWindow, TxPath, PATH_WINDOW, SLOW_PATH_FACTOR,
    SLOW_PATH_SAMPLES,
};
use super::restart::{Proven, RestartGuard, RestartStats};
use super::sack::{seq_diff, Mark, SeqWindow};
pub use super::stream::{MsgDesc, PostError, Request, Response};
use super::stream::{
    RecvDone, RespRing, RespSegment, RxStream, Segment, Stream, StreamDrop, StreamStore, TxStream,
};
use core::cell::Cell;

/// Connection parameters (`transport.rst`, section 10).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct ConnConfig {
    /// Our connection id (non-zero), carried in our DATA packets.
    pub conn_id: u32,
    /// Payload bytes per packet (the port MTU).
    pub mss: u16,
    /// Paths in use (1..=P).
    pub paths: u8,
    /// Seed of the source-port sequence.
    pub port_seed: u32,
    /// Smallest RTO.
    pub rto_min_ns: u64,
    /// Largest RTO.
    pub rto_max_ns: u64,
    /// RTO before the first RTT sample.
    pub rto_init_ns: u64,
    /// Smallest tail-loss probe timeout.
    pub pto_min_ns: u64,
    /// Retransmissions of one packet before the connection fails (its
    /// stream alone if the peer still acknowledges later data).
    pub max_retx: u8,
    /// Initial path window in packets.
    pub init_cwnd_path: u32,
    /// Initial connection window in packets.
    pub init_cwnd_conn: u32,
    /// Largest connection window in packets.
    pub max_cwnd_conn: u32,
    /// Delay signal (**our choice**, off by default: 0): a path whose
    /// smoothed RTT exceeds its smallest sample by more than this is treated
    /// as if its ACK had echoed ECN marks (section 6.2), for links that mark
    /// nothing and queue instead.
    pub delay_target_ns: u64,
    /// Late acknowledgments and spurious-RTO undo (section 5.5.1, **our
    /// choice**, on by default); off only to measure what they change.
    pub late_acks: bool,
    /// Pacer credit (section 6.4, **our choice**, 0 by default): a sender
    /// polled later than its pacing schedule allows (a coarse timer, an
    /// idle spell) may catch up on at most this much sending time at once.
    pub pace_burst_ns: u64,
    /// Key of the restart-proof cookies (section 7.1): random per connection (the kernel
    /// draws it from its CRNG).
    pub restart_key: [u64; 2],
    /// DATA with a new ConnId starts a restart proof only once the peer sent no DATA for
    /// this long (section 7); until then it is dropped as [`RxDrop::WrongConn`].
    pub restart_idle_ns: u64,
    /// ACK coalescing of the receive path (section 4, step 5, **our choice**):
    /// [`Conn::poll_control`] and [`Conn::poll_receive_path`] send a path's ACK
    /// once this many DATA packets wait on it, or at once for a packet that ends
    /// a message or carries a request, comes out of order, is a retransmission,
    /// or leaves or closes a gap; the rest wait for [`Conn::poll_transmit`].
    /// 1 (default): every owed ACK at once.
    pub ack_every: u16,
    /// Authenticated mode (section 13.1): every packet is sealed ([`Conn::poll_transmit`]
    /// writes the AUTH flag and gives each packet its Seq; the caller adds the trailer) and only
    /// sealed packets whose tag the caller verified are taken ([`Conn::on_sealed`]).
    pub auth: bool,
    /// New DATA packets sent on one path in a row while its window allows (section 10,
    /// **our choice**; 1, the default: every packet on the least loaded path): runs of
    /// packets a host stack can hand its network layer as one segmentation batch (the
    /// kernel's fraglist UDP GSO), at the cost of coarser spraying.
    pub path_run: u8,
    /// How long a connection whose flight is lent ([`FlightStore::LENDS`]) keeps it with
    /// nothing in flight and nothing to send before [`Conn::reclaim_flight`] gives it back
    /// (section 10.1, **our choice**; 0: never).
    pub flight_idle_ns: u64,
    /// Silence probes (section 5.5.2, **our choice**, on by default): a path whose RTO fires
    /// while nothing sent after its oldest transmission was acknowledged on any path probes
    /// and backs off instead of declaring its window lost; off only to measure what they
    /// change.
    pub silence_probes: bool,
    /// ACK-train wait (section 5.5.2, **our choice**; 0, the default: none): a path's RTO
    /// deadline that falls less than this after the arrival of the connection's newest
    /// acknowledgment (on any path) waits until this long after that arrival, and never more
    /// than this long past the deadline. A receiver that sends the ACKs of all paths in one
    /// run of its transmitter may have them reach the sender spread over a few ms; an RTO
    /// judged in the middle of such a train finds the path unheard while another was heard.
    pub ack_train_ns: u64,
}

impl ConnConfig {
    /// The defaults of `transport.rst` for connection `conn_id`.
    pub const fn new(conn_id: u32) -> Self {
        ConnConfig {
            conn_id,
            mss: 4096,
            paths: 8,
            port_seed: conn_id,
            rto_min_ns: 50_000,
            rto_max_ns: 100_000_000,
            rto_init_ns: 1_000_000,
            pto_min_ns: 10_000,
            max_retx: 16,
            init_cwnd_path: 4,
            init_cwnd_conn: 8,
            max_cwnd_conn: 4096,
            delay_target_ns: 0,
            late_acks: true,
            pace_burst_ns: 0,
            restart_key: [0; 2],
            restart_idle_ns: 1_000_000_000,
            ack_every: 1,
            auth: false,
            path_run: 1,
            flight_idle_ns: 100_000_000,
            silence_probes: true,
            ack_train_ns: 0,
        }
    }
}

/// Connection state of the sending half.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum ConnState {
    /// No stream open yet.
    Idle,
    /// Carrying data.
    Active,
    /// A packet exceeded `max_retx`; no more data.
    Failed,
}

/// Where the payload of a transmitted DATA packet comes from.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct PayloadRef {
    /// Stream index.
    pub stream: usize,
    /// Message (of a READ response: the requester's Msn).
    pub msn: u32,
    /// Offset within the message.
    pub offset: u32,
    /// Bytes.
    pub len: u16,
    /// `None`: bytes `offset ..` of our message `msn` (its send request).
    /// `Some`: a READ response: the bytes are read from local memory.
    pub mr: Option<MrRef>,
}

/// Local memory a READ response packet's payload is read from.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct MrRef {
    /// The key the requester named.
    pub rkey: u32,
    /// Address of the packet's first byte (the request's address + offset).
    pub va: u64,
}

/// A packet to send: `hdr_len` header bytes were written to the caller's
/// buffer; the caller appends the payload and sends it from UDP source port
/// `src_port` to the native port.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct Transmit {
    /// Path index.
    pub path: u8,
    /// UDP source port.
    pub src_port: u16,
    /// Header bytes written.
    pub hdr_len: usize,
    /// Payload of a DATA packet (`None` for an ACK, a CHALLENGE or a PROOF).
    pub payload: Option<PayloadRef>,
    /// Send ECT(0) (DATA) or Not-ECT (ACK).
    pub ect: bool,
    /// A retransmission.
    pub retx: bool,
    /// Authenticated mode: the packet's Seq (its trailer, section 13.1); 0 otherwise.
    pub seq: u64,
}

/// Placement of a received DATA packet's payload.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct Place {
    /// Stream index.
    pub stream: usize,
    /// Operation.
    pub op: MrcOp,
    /// Message.
    pub msn: u32,
    /// Posted receive (receive-consuming opcodes).
    pub rsn: u32,
    /// Offset within the message (sends, READ responses) or from `va`
    /// (writes).
    pub offset: u32,
    /// Remote address of message byte 0 (writes); the original value of
    /// the word ([`MrcOp::AtomicResp`]).
    pub va: u64,
    /// Remote key (writes); the key to invalidate (SEND_INV, every
    /// packet).
    pub rkey: u32,
    /// Payload bytes.
    pub len: u16,
    /// The whole message's length (every packet carries it): a responder
    /// checks the message's full range on each packet, so a message it
    /// refuses is refused by all of them and nothing of it is written.
    pub msg_len: u32,
    /// SEND_INV only: `Some(key)` on the one packet whose placement
    /// completes the message (every byte placed, this packet's included):
    /// after placing it, invalidate `key` before releasing the lock, or, if
    /// the key cannot be invalidated, [`Conn::refuse`] the message instead
    /// (section 9.2). `None` on every other packet; never repeated (a
    /// duplicate is [`RxEvent::Duplicate`]).
    pub invalidate: Option<u32>,
}

/// What a received packet did.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum RxEvent {
    /// New data: copy the payload as `Place` says.
    Data(Place),
    /// Data already received: acknowledged, not placed again.
    Duplicate,
    /// An ACK was processed.
    Ack,
    /// A new READ or atomic request: the caller checks it (and carries out
    /// an atomic) and answers with [`Conn::respond`].
    Request(Request),
    /// A CHALLENGE or PROOF of the restart proof was handled (section 7.1).
    Probe,
    /// A request the core refused itself (a misaligned atomic), or a packet
    /// of a data message refused with [`Conn::refuse`]: a NAK is on its
    /// way, nothing to do (nothing to place).
    Refused(NakCode),
    /// The responder refused our request `msn`: nothing to place; its
    /// completion carries the error.
    Nak {
        /// Stream index.
        stream: usize,
        /// Our message.
        msn: u32,
        /// Why.
        code: NakCode,
    },
}

/// Why a received packet was dropped.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum RxDrop {
    /// Not a valid MetaRoCE packet.
    Malformed(MrcError),
    /// Connection id not ours (ACK) or not our peer's (DATA).
    WrongConn,
    /// Path id beyond the paths of this connection.
    BadPath,
    /// PathSeq beyond the receiver's 256-bit window.
    PathWindow,
    /// Dsn beyond the deduplication window.
    DsnWindow,
    /// No open stream with that id.
    NoStream,
    /// Refused by the stream.
    Stream(StreamDrop),
    /// ACK inconsistent with what the path sent.
    BadAck,
    /// DATA of a message we refused, held until the requester acknowledged
    /// our NAK (section 9.1).
    NakPending,
    /// A packet of the other mode: plain in the authenticated mode, or the reverse.
    Unauthenticated,
    /// An authenticated ACK whose Seq was taken before (a replay), or too old to tell.
    Replay,
    /// DATA with a new ConnId after the peer went quiet: not placed, not acknowledged, until
    /// a PROOF shows the device at the peer's address sends with it (section 7.1).
    Unproven,
    /// A PROOF with a wrong or expired cookie, or none expected.
    BadProof,
}

/// Completion status of a sent message.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum SendStatus {
    /// Every packet acknowledged.
    Ok,
    /// The connection, or the stream alone ([`TxStream::failed`]), failed
    /// with this message incomplete (the oldest).
    RetryExceeded,
    /// The connection or the stream failed before this message completed.
    Flushed,
    /// The responder refused the message (a READ or atomic, or a data
    /// message with [`Conn::refuse`]): key, range or rights.
    RemoteAccess,
    /// The responder refused a malformed request (misaligned atomic).
    RemoteInvalid,
    /// The responder could not carry out the request.
    RemoteOperation,
}

impl SendStatus {
    const fn of_nak(c: NakCode) -> SendStatus {
        match c {
            NakCode::RemoteAccess => SendStatus::RemoteAccess,
            NakCode::InvalidRequest => SendStatus::RemoteInvalid,
            NakCode::RemoteOperation => SendStatus::RemoteOperation,
        }
    }
}

/// A completion, in verbs order per stream.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Completion {
    /// A sent message.
    Send {
        /// Stream index.
        stream: usize,
        /// Message.
        msn: u32,
        /// Status.
        status: SendStatus,
    },
    /// A received message (also plain WRITEs, which hold the order but
    /// need no receive completion: the caller skips them).
    Recv {
        /// Stream index.
        stream: usize,
        /// What completed.
        done: RecvDone,
    },
}

/// Connection counters.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default)]
pub struct ConnStats {
    /// DATA packets sent (first transmissions).
    pub data_sent: u64,
    /// Retransmissions.
    pub retransmits: u64,
    /// ACKs sent.
    pub acks_sent: u64,
    /// DATA packets refused because their receive was not posted, answered by RNR ACKs.
    pub rnr_refused: u64,
    /// RNR ACKs received: our transmissions the peer refused, resent without counting
    /// towards `max_retx`.
    pub rnr_acks: u64,
    /// DATA packets placed.
    pub data_placed: u64,
    /// Payload bytes placed.
    pub bytes_placed: u64,
    /// Duplicate DATA packets.
    pub duplicates: u64,
    /// Dropped packets.
    pub drops: u64,
    /// Repaths.
    pub repaths: u64,
    /// Repaths of paths whose route was much slower than the others' (included in
    /// `repaths`).
    pub slow_repaths: u64,
    /// Connection-window decreases on ECN.
    pub conn_ecn_decreases: u64,
    /// ACKs that found a path's smoothed RTT beyond its delay target
    /// ([`ConnConfig::delay_target_ns`]) and no new ECN mark.
    pub delay_signals: u64,
    /// Rate hint changes received.
    pub rate_hint_changes: u64,
    /// Flights lent to the connection ([`Conn::lend_flight`]).
    pub flights_lent: u64,
    /// Flights given back ([`Conn::reclaim_flight`]).
    pub flights_returned: u64,
}

impl ConnStats {
    /// All counters zero.
    pub const ZERO: ConnStats = ConnStats {
        data_sent: 0,
        retransmits: 0,
        acks_sent: 0,
        rnr_refused: 0,
        rnr_acks: 0,
        data_placed: 0,
        bytes_placed: 0,
        duplicates: 0,
        drops: 0,
        repaths: 0,
        slow_repaths: 0,
        conn_ecn_decreases: 0,
        delay_signals: 0,
        rate_hint_changes: 0,
        flights_lent: 0,
        flights_returned: 0,
    };
}

struct SizeCheck<const D: usize, const DW: usize>;

impl<const D: usize, const DW: usize> SizeCheck<D, DW> {
    const OK: () = assert!(D == DW * 64 && D > 0 && D <= 1 << 20, "D must be 64 * DW");
}

struct ShapeCheck<const P: usize, const S: usize, const K: usize>;

impl<const P: usize, const S: usize, const K: usize> ShapeCheck<P, S, K> {
    const OK: () = assert!(
        P >= 1 && P <= 256 && S >= 1 && S <= 65536 && K >= 1,
        "1..=256 paths, 1..=65536 streams, at least one message slot"
    );
}

/// A MetaRoCE connection to one peer; `C` keeps the windows of its paths
/// and of the connection (the software AIMD by default, see
/// [`super::offload`]).
pub struct Conn<
    const P: usize,
    const D: usize,
    const DW: usize,
    const S: usize,
    const K: usize,
    C = Aimd,
    St = [Stream<K>; S],
    Fl = Flight<P, D>,
> {
    cfg: ConnConfig,
    state: ConnState,
    paths: [TxPath<C>; P],
    /// Descriptors, retransmission queue and path slots ([`FlightStore`]). Absent only while
    /// nothing is in flight: `dsn_base == dsn_next` and no path has a transmission out.
    flight: Fl,
    /// When the sending half last sent DATA or took an ACK, or was lent its flight: a lent
    /// flight goes back [`ConnConfig::flight_idle_ns`] after it.
    busy_at: u64,
    dsn_base: u32,
    dsn_next: u32,
    cc: C,
    min_rtt: u64,
    rate_hint: u32,
    pace_next: u64,
    /// When the pacing gap now running started and the wire bytes it is
    /// for: a new hint re-times it (section 6.4).
    pace_from: u64,
    pace_len: u32,
    /// Share of the rate hint the pacer uses (Q16), the connection's AIMD
    /// applied to its rate.
    pace_scale: u32,
    pace_ai_at: u64,
    pace_blocked: bool,
    rr_path: usize,
    /// New DATA packets sent in a row on the path before `rr_path` ([`ConnConfig::path_run`]).
    run: u8,
    rr_stream: usize,
    rr_ack: usize,
    rr_done: usize,
    port_rng: u32,
    /// Each stream's state ([`StreamStore`]).
    streams: St,
    /// Our QP number of each open stream (the StreamId we accept), to find a packet's stream
    /// without visiting every stream's state.
    qpns: [u32; S],
    /// One past the highest open stream: scans of the streams stop there (slots are taken
    /// lowest first, so a connection with few QPs scans few).
    hi: usize,
    /// The last stream [`Self::stream_of`] found: (our QP number, index). A DATA packet's
    /// stream is looked up by the glue, then by [`Self::admits`], then by
    /// [`Self::on_packet`]; the first finds it, the others check this entry (checked on use:
    /// a stale entry is never returned). A cache behind `&self`, hence the `Cell`.
    found: Cell<(u32, usize)>,
    rx_paths: [RxPath; P],
    rx_dsn: SeqWindow<DW>,
    peer: Option<u32>,
    rx_hint: u32,
    /// The newest Dsn acknowledged: whether the peer still answers when a
    /// packet runs out of retransmissions ([`Self::poll_retx`]).
    newest_acked: Option<u32>,
    /// The last [`RxEvent::Data`]: stream, Msn, path and that path's state
    /// before the packet, so that [`Self::refuse`] in the same lock hold
    /// can take back its acknowledgement; and our stream that sent it, if
    /// the connection talks to itself ([`Self::own_stream`]).
    last_data: Option<(usize, u32, usize, RxPath, Option<usize>)>,
    /// When the receiving half last took DATA of its peer (placed, duplicate or refused).
    last_rx: Option<u64>,
    /// The restart proof (section 7.1).
    guard: RestartGuard,
    /// Authenticated mode: the next packet's Seq.
    tx_seq: u64,
    /// Authenticated mode: the peer's ACKs taken.
    ack_window: ReplayWindow,
    /// Counters.
    pub stats: ConnStats,
}

/// A connection whose streams are inline (every slot holds storage: the host's tests and
/// simulators).
impl<
        const P: usize,
        const D: usize,
        const DW: usize,
        const S: usize,
        const K: usize,
        C: CongestionEngine,
        St: StreamStore<K, Slot = ()>,
        Fl: FlightStore<P, D>,
    > Conn<P, D, DW, S, K, C, St, Fl>
{
    /// Opens stream `idx` between our QP `local_qpn` and the peer's QP `remote_qpn`
    /// ([`Self::open_stream_in`]); `false` if there is no stream `idx` or it is open.
    pub fn open_stream(&mut self, idx: usize, local_qpn: u32, remote_qpn: u32) -> bool {
        self.open_stream_in(idx, local_qpn, remote_qpn, ()).is_ok()
    }

    /// Closes stream `idx` ([`Self::close_stream_out`]); `false` if there is no stream `idx`.
    pub fn close_stream(&mut self, idx: usize) -> bool {
        self.close_stream_out(idx).is_some()
    }
}

/// What [`Conn::vet`] found out about a DATA packet.
struct Vetted {
    path: usize,
    /// The path's receive window, moved up to the packet's PathFloor.
    win: SeqWindow<4>,
    /// The packet's Dsn less the Dsn window's cumulative point.
    ahead: i32,
    /// The stream of new DATA.
    stream: Option<usize>,
    /// New DATA for a stream that is not open.
    no_stream: bool,
    /// A response to a message flushed by a failure.
    stale: bool,
    /// The stream of a refused message whose NAK is pending: the packet is held.
    held: Option<usize>,
}

/// How far past the Dsn window's cumulative point a DATA packet may be:
/// beyond the bitmap it moves the window, beyond this it is dropped
/// ([`RxDrop::DsnWindow`]).
const DSN_REACH: u32 = 1 << 24;

/// Silent timeouts a path takes in a row (no acknowledgment between) before its next timeout
/// is an RTO again (section 5.5.2, **our choice**): with the backoff, seven RTOs of silence.
pub const MAX_SILENCES: u8 = 3;

/// First port of the source-port range.
const PORT_BASE: u16 = 49152;
/// Ports in the range.
const PORT_SPAN: u32 = 16384;

impl<
        const P: usize,
        const D: usize,
        const DW: usize,
        const S: usize,
        const K: usize,
        St: StreamStore<K>,
        Fl: FlightStore<P, D>,
    > Conn<P, D, DW, S, K, Aimd, St, Fl>
{
    /// A connection with `cfg` and the software AIMD.
    ///
    /// A `const fn`, so that a caller without room for the value on its stack (the kernel)
    /// can copy a constant into its allocation and then [`Self::set_config`] it.
    pub const fn new(cfg: ConnConfig) -> Self {
        let mss = if cfg.mss == 0 { 1 } else { cfg.mss as u32 };
        let mut paths = [const { TxPath::new(0, Aimd::new(1, 1, 1, MD_ECN_PATH)) }; P];
        let mut i = 0;
        while i < P {
            paths[i] = TxPath::new(
                initial_port(cfg.port_seed, i as u32),
                Aimd::new(mss, cfg.init_cwnd_path, PATH_WINDOW, MD_ECN_PATH),
            );
            i += 1;
        }
        let cc = Aimd::new(mss, cfg.init_cwnd_conn, cfg.max_cwnd_conn, MD_ECN_CONN);
        Self::assemble(cfg, paths, cc)
    }
}

impl<
        const P: usize,
        const D: usize,
        const DW: usize,
        const S: usize,
        const K: usize,
        C: CongestionEngine,
        St: StreamStore<K>,
        Fl: FlightStore<P, D>,
    > Conn<P, D, DW, S, K, C, St, Fl>
{
    /// A connection with `cfg` whose windows engine `C` keeps: equal to
    /// [`Self::new`] for the default engine, but not a `const fn` (trait
    /// functions are not).
    pub fn with_engine(cfg: ConnConfig) -> Self {
        let mss = u32::from(cfg.mss.max(1));
        let paths = core::array::from_fn(|i| {
            TxPath::new(
                initial_port(cfg.port_seed, u32::try_from(i).unwrap_or(0)),
                C::start(Window::Path, mss, cfg.init_cwnd_path, PATH_WINDOW),
            )
        });
        let cc = C::start(Window::Conn, mss, cfg.init_cwnd_conn, cfg.max_cwnd_conn);
        Self::assemble(cfg, paths, cc)
    }

    /// The connection of `cfg` with these paths and connection window.
    const fn assemble(cfg: ConnConfig, mut paths: [TxPath<C>; P], cc: C) -> Self {
        let () = SizeCheck::<D, DW>::OK;
        let () = ShapeCheck::<P, S, K>::OK;
        let mut i = 0;
        while i < P {
            paths[i].late_acks = cfg.late_acks;
            i += 1;
        }
        Conn {
            cfg,
            state: ConnState::Idle,
            paths,
            flight: Fl::EMPTY,
            busy_at: 0,
            dsn_base: 0,
            dsn_next: 0,
            cc,
            min_rtt: 0,
            rate_hint: 0,
            pace_next: 0,
            pace_from: 0,
            pace_len: 0,
            pace_scale: Q16_ONE,
            pace_ai_at: 0,
            pace_blocked: false,
            rr_path: 0,
            run: 0,
            rr_stream: 0,
            rr_ack: 0,
            rr_done: 0,
            port_rng: cfg.port_seed | 1,
            streams: St::EMPTY,
            qpns: [0; S],
            hi: 0,
            found: Cell::new((0, usize::MAX)),
            rx_paths: [RxPath::EMPTY; P],
            rx_dsn: SeqWindow::new(0),
            peer: None,
            rx_hint: 0,
            newest_acked: None,
            last_data: None,
            last_rx: None,
            guard: RestartGuard::new(cfg.restart_key),
            tx_seq: cfg.restart_key[1] >> 2,
            ack_window: ReplayWindow::EMPTY,
            stats: ConnStats::ZERO,
        }
    }

    /// Gives a connection that was never used (no stream opened, nothing received) the
    /// configuration `cfg`, in place: afterwards it equals `Self::new(cfg)`. Returns `false`
    /// (and changes nothing) if the connection was used.
    pub fn set_config(&mut self, cfg: ConnConfig) -> bool {
        let fresh = self.state == ConnState::Idle
            && self.dsn_next == 0
            && self.peer.is_none()
            && self.hi == 0;
        if !fresh {
            return false;
        }
        let mss = u32::from(cfg.mss.max(1));
        for (i, p) in self.paths.iter_mut().enumerate() {
            p.port = initial_port(cfg.port_seed, u32::try_from(i).unwrap_or(0));
            p.cc = C::start(Window::Path, mss, cfg.init_cwnd_path, PATH_WINDOW);
            p.late_acks = cfg.late_acks;
        }
        self.cc = C::start(Window::Conn, mss, cfg.init_cwnd_conn, cfg.max_cwnd_conn);
        self.port_rng = cfg.port_seed | 1;
        self.guard = RestartGuard::new(cfg.restart_key);
        self.tx_seq = cfg.restart_key[1] >> 2;
        self.cfg = cfg;
        true
    }

    /// The configuration.
    pub const fn config(&self) -> &ConnConfig {
        &self.cfg
    }

    /// The sending half's state.
    pub const fn state(&self) -> ConnState {
        self.state
    }

    fn npaths(&self) -> usize {
        usize::from(self.cfg.paths).clamp(1, P.max(1)).min(P)
    }

    /// The peer's connection id the receiving half accepted (`None` before its first DATA).
    pub const fn peer_conn(&self) -> Option<u32> {
        self.peer
    }

    /// Forgets the receiving half's state (the peer restarted with a new connection id,
    /// section 7): the next DATA packet's connection id is accepted; per-path windows, the Dsn
    /// window and every open stream's incomplete messages start over (the streams stay open
    /// for their QPs). The sending half is untouched.
    pub fn reset_receiver(&mut self) {
        self.peer = None;
        self.last_rx = None;
        self.ack_window = ReplayWindow::EMPTY;
        self.rx_hint = 0;
        self.last_data = None;
        self.rx_dsn = SeqWindow::new(0);
        for p in self.rx_paths.iter_mut() {
            *p = RxPath::EMPTY;
        }
        for i in 0..self.hi {
            if let Some(s) = self.streams.slot_mut(i) {
                s.resp.forget_refusals();
                let (open, qpn) = (s.rx.open, s.rx.local_qpn);
                s.rx = RxStream::EMPTY;
                s.rx.open = open;
                s.rx.local_qpn = qpn;
            }
        }
    }

    /// When the receiving half last took DATA of its peer, if it did.
    pub const fn last_rx(&self) -> Option<u64> {
        self.last_rx
    }

    /// The restart proof's counters (section 7.1).
    pub const fn restart_stats(&self) -> &RestartStats {
        &self.guard.stats
    }

    /// Whether the connection holds its flight ([`FlightStore`]).
    pub fn has_flight(&self) -> bool {
        self.flight.get().is_some()
    }

    /// Whether the connection has something to send that needs a flight it does not hold:
    /// the caller lends one ([`Self::lend_flight`]) before polling, else no new DATA leaves.
    pub fn flight_wanted(&self) -> bool {
        self.state == ConnState::Active && self.flight.get().is_none() && self.unsent()
    }

    /// Whether any open stream has something to send.
    fn unsent(&self) -> bool {
        (0..self.hi.min(S)).any(|i| self.stream_has_unsent(i))
    }

    /// Lends the connection flight `f` at `now` (empty, as [`Flight::EMPTY`] or as
    /// [`Self::reclaim_flight`] gave it back). Gives `f` back if it holds one.
    pub fn lend_flight(&mut self, now: u64, f: Fl::Lent) -> Result<(), Fl::Lent> {
        self.flight.put(f)?;
        self.busy_at = now;
        self.stats.flights_lent = self.stats.flights_lent.saturating_add(1);
        Ok(())
    }

    /// Nothing in flight or queued for retransmission (every descriptor acknowledged).
    fn flight_quiet(&self) -> bool {
        self.dsn_base == self.dsn_next
            && self.paths.iter().all(|p| p.inflight_pkts() == 0)
            && self.flight.get().is_some_and(|f| f.retx.is_empty())
    }

    /// When a lent flight may go back: [`ConnConfig::flight_idle_ns`] after the sending half
    /// was last busy, while nothing is in flight ([`Self::next_deadline`] includes it, so
    /// that the caller's timer asks [`Self::reclaim_flight`]).
    fn release_at(&self) -> Option<u64> {
        let idle = self.cfg.flight_idle_ns;
        (Fl::LENDS && idle != 0 && self.flight_quiet()).then(|| self.busy_at.saturating_add(idle))
    }

    /// Takes the lent flight back, emptied, if the connection had nothing in flight and
    /// nothing to send for [`ConnConfig::flight_idle_ns`] at `now` (section 10.1). A connection
    /// with something to send keeps it and counts as busy.
    pub fn reclaim_flight(&mut self, now: u64) -> Option<Fl::Lent> {
        if self.release_at().is_none_or(|t| t > now) {
            return None;
        }
        if self.unsent() {
            self.busy_at = now;
            return None;
        }
        self.give_back()
    }

    /// Takes the lent flight back at once, emptied, if nothing is in flight, queued for
    /// retransmission or waiting to be sent: what a caller does when the connection's last
    /// stream closed (nothing is sent on it before a stream opens again). The paths forget
    /// what their slots still knew of lost transmissions (a late ACK can no longer prove one
    /// received).
    pub fn release_flight(&mut self) -> Option<Fl::Lent> {
        if !Fl::LENDS || !self.flight_quiet() || self.unsent() {
            return None;
        }
        self.give_back()
    }

    /// Empties and takes out the flight of a quiet connection with nothing to send (checked by
    /// the callers, [`Self::reclaim_flight`] and [`Self::release_flight`]).
    fn give_back(&mut self) -> Option<Fl::Lent> {
        for p in self.paths.iter_mut() {
            if !p.forget_slots() {
                return None;
            }
        }
        self.flight.get_mut()?.clear();
        self.stats.flights_returned = self.stats.flights_returned.saturating_add(1);
        self.flight.take()
    }

    /// Whether DATA packet `h` would pass every check of [`Self::on_packet`] that comes before
    /// its placement, at `now`, changing nothing: a caller that must set something aside for
    /// the packet first (a posted receive) asks this before.
    pub fn admits(&self, now: u64, h: &DataHdr) -> Result<(), RxDrop> {
        self.conn_rule(now, h.conn)?;
        self.vet(h).map(|_| ())
    }

    /// The ConnId rule (sections 7 and 7.1): the first ConnId is accepted; another is
    /// dropped while the peer is active, and must be proven once it went quiet.
    fn conn_rule(&self, now: u64, conn: u32) -> Result<(), RxDrop> {
        match self.peer {
            Some(p) if p != conn => {
                let quiet = self
                    .last_rx
                    .is_none_or(|t| now.saturating_sub(t) > self.cfg.restart_idle_ns);
                Err(if quiet {
                    RxDrop::Unproven
                } else {
                    RxDrop::WrongConn
                })
            }
            _ => Ok(()),
        }
    }

    /// Opens stream `idx`, in storage `slot`, between our QP `local_qpn` and the peer's QP
    /// `remote_qpn`. Gives `slot` back (and changes nothing) if there is no stream `idx`, it
    /// is open, or another open stream is our QP `local_qpn`'s.
    pub fn open_stream_in(
        &mut self,
        idx: usize,
        local_qpn: u32,
        remote_qpn: u32,
        slot: St::Slot,
    ) -> Result<(), St::Slot> {
        // One open stream per QP number: a packet's StreamId names exactly one.
        let taken = self.stream_of(local_qpn & 0x00FF_FFFF).is_some();
        if idx >= S || taken || self.rx(idx).is_some_and(|r| r.open) {
            return Err(slot);
        }
        self.streams.put(idx, slot)?;
        let (Some(s), Some(q)) = (self.streams.slot_mut(idx), self.qpns.get_mut(idx)) else {
            // A store that took the slot but shows no storage for it (none of ours).
            return Ok(());
        };
        *s = Stream::EMPTY;
        s.tx.open = true;
        s.tx.remote_qpn = remote_qpn & 0x00FF_FFFF;
        s.rx.open = true;
        s.rx.local_qpn = local_qpn & 0x00FF_FFFF;
        *q = s.rx.local_qpn;
        self.hi = self.hi.max(idx + 1);
        if self.state == ConnState::Idle {
            self.state = ConnState::Active;
        }
        Ok(())
    }

    /// Closes stream `idx` (its QP left RTS/RTR or was destroyed): its messages not yet
    /// acknowledged are abandoned (never sent or resent again, no completion), the
    /// receiving half stops accepting data for it. The slot may be opened again. Returns its
    /// storage (`None`: there is no stream `idx`, or its slot held none).
    pub fn close_stream_out(&mut self, idx: usize) -> Option<St::Slot> {
        let slot = self.streams.take(idx)?;
        if let Some(q) = self.qpns.get_mut(idx) {
            *q = 0;
        }
        while self.hi > 0 && self.stream_qpn(self.hi - 1).is_none() {
            self.hi -= 1;
        }
        self.abandon(idx, true);
        Some(slot)
    }

    /// Whether stream `idx` is open, and our QP number on it.
    pub fn stream_qpn(&self, idx: usize) -> Option<u32> {
        self.rx(idx).filter(|r| r.open).map(|r| r.local_qpn)
    }

    /// One past the highest open stream (0: none is open).
    pub const fn streams_hi(&self) -> usize {
        self.hi
    }

    /// The streams' store (read only: its slots' state is the connection's).
    pub const fn store(&self) -> &St {
        &self.streams
    }

    /// The open stream whose QP is `local_qpn` (StreamId on the wire).
    pub fn stream_of(&self, local_qpn: u32) -> Option<usize> {
        let open = |i: usize, q: u32| q == local_qpn && self.rx(i).is_some_and(|r| r.open);
        let (q, i) = self.found.get();
        if i < self.hi && q == local_qpn && self.qpns.get(i).is_some_and(|&q| open(i, q)) {
            return Some(i);
        }
        let i = self
            .qpns
            .get(..self.hi)?
            .iter()
            .enumerate()
            .position(|(i, &q)| open(i, q))?;
        self.found.set((local_qpn, i));
        Some(i)
    }

    fn tx(&self, i: usize) -> Option<&TxStream<K>> {
        self.streams.slot(i).map(|s| &s.tx)
    }

    fn tx_mut(&mut self, i: usize) -> Option<&mut TxStream<K>> {
        self.streams.slot_mut(i).map(|s| &mut s.tx)
    }

    fn rx(&self, i: usize) -> Option<&RxStream<K>> {
        self.streams.slot(i).map(|s| &s.rx)
    }

    fn rx_mut(&mut self, i: usize) -> Option<&mut RxStream<K>> {
        self.streams.slot_mut(i).map(|s| &mut s.rx)
    }

    fn resp(&self, i: usize) -> Option<&RespRing<K>> {
        self.streams.slot(i).map(|s| &s.resp)
    }

    fn resp_mut(&mut self, i: usize) -> Option<&mut RespRing<K>> {
        self.streams.slot_mut(i).map(|s| &mut s.resp)
    }

    /// Abandons the unacknowledged packets of stream `idx`'s messages (and
    /// of its responses if `responses`): never sent or resent again.
    fn abandon(&mut self, idx: usize, responses: bool) {
        let mut dsn = self.dsn_base;
        while dsn != self.dsn_next {
            if let Some(d) = self.desc_mut(dsn) {
                if usize::from(d.stream) == idx && (responses || !d.resp) {
                    // A Lost descriptor still queued for retransmission is skipped when popped.
                    d.state = DescState::Acked;
                }
            }
            dsn = dsn.wrapping_add(1);
        }
        self.advance_dsn_base();
    }

    /// True if stream `idx` failed alone ([`TxStream::failed`]): its
    /// messages complete with retry exceeded, then flushed; it takes no
    /// more (the glue closes it at that completion).
    pub fn stream_failed(&self, idx: usize) -> bool {
        self.tx(idx).is_some_and(|t| t.open && t.failed)
    }

    /// Messages posted on stream `idx` and not completed (0 for a closed stream).
    pub fn outstanding(&self, idx: usize) -> u32 {
        self.tx(idx)
            .filter(|t| t.open)
            .map_or(0, |t| t.outstanding())
    }

    /// Posts a message on stream `idx`; returns its Msn.
    pub fn post(&mut self, idx: usize, msg: MsgDesc) -> Result<u32, PostError> {
        let (s, mss) = self.postable(idx)?;
        s.post(msg, mss)
    }

    /// Stream `idx` of a connection that takes new messages, and the MSS.
    fn postable(&mut self, idx: usize) -> Result<(&mut TxStream<K>, u16), PostError> {
        if self.state == ConnState::Failed {
            return Err(PostError::ConnFailed);
        }
        let mss = self.cfg.mss;
        let s = self.tx_mut(idx).ok_or(PostError::NoStream)?;
        Ok((s, mss))
    }

    /// Posts an atomic on stream `idx` (see [`TxStream::post_atomic`]);
    /// returns its Msn.
    pub fn post_atomic(
        &mut self,
        idx: usize,
        op: MrcOp,
        va: u64,
        rkey: u32,
        compare_add: u64,
        swap: u64,
    ) -> Result<u32, PostError> {
        let (s, mss) = self.postable(idx)?;
        s.post_atomic(op, va, rkey, compare_add, swap, mss)
    }

    /// Answers the peer's request `msn` on stream `idx` (from
    /// [`RxEvent::Request`]): the response is then sent like any data.
    /// `false` (nothing changed) if no such request waits for an answer or
    /// the answer does not fit it.
    pub fn respond(&mut self, idx: usize, msn: u32, r: Response) -> bool {
        let mss = self.cfg.mss;
        self.resp_mut(idx).is_some_and(|q| q.answer(msn, r, mss))
    }

    /// Refuses the peer's data message `msn` (SEND, SEND_IMM, SEND_INV,
    /// WRITE, WRITE_IMM) on stream `idx` with `code` (`transport.rst`, section
    /// 9.1): a NAK is sent like a READ's, the message's later packets are
    /// acknowledged but not placed ([`RxEvent::Refused`]), and its
    /// [`Completion::Recv`] comes in order with [`RecvDone::refused`] set.
    /// Call it right after [`Self::on_packet`] returned [`RxEvent::Data`]
    /// for the message (before releasing the lock, no [`Self::poll_transmit`]
    /// in between), or later while the message is not completely received.
    /// On a connection that talks to itself, right after the packet, no NAK
    /// is sent: the requesting stream is told at once.
    /// `false` (nothing changed) if there is no such incomplete data
    /// message or it is already refused.
    pub fn refuse(&mut self, idx: usize, msn: u32, code: NakCode) -> bool {
        let last = self.last_data.filter(|&(s, m, ..)| s == idx && m == msn);
        let Some(st) = self.streams.slot_mut(idx) else {
            return false;
        };
        let r = &mut st.rx;
        // Complete here and not refused right on its last packet: its
        // acknowledgement may be gone, the requester may complete it.
        if !r.open || (r.all_placed(msn) && last.is_none()) || r.refused(msn).is_some() {
            return false;
        }
        let Some(op) = r.op_of(msn) else {
            return false;
        };
        // A connection that talks to itself (QPs of one device): the
        // requester is our own stream, told here. A NAK packet would need a
        // Dsn of the same window whose oldest entry may be the very packet
        // held until that NAK is acknowledged: neither would ever move.
        if let Some((.., Some(own))) = last {
            if !r.refuse(msn, code) {
                return false;
            }
            if let Some(t) = self.tx_mut(own) {
                t.nak(msn, code);
            }
            self.last_data = None;
            return true;
        }
        let q = &mut st.resp;
        let r = &mut st.rx;
        if !r.refuse(msn, code) || !q.refuse_data(idx, msn, op, code) {
            return false;
        }
        // The packet just received completed the message: take back its
        // acknowledgement, so that its retransmission is held until the
        // NAK is acknowledged.
        if let Some((_, _, path, before, _)) = last {
            if r.all_placed(msn) {
                if let Some(p) = self.rx_paths.get_mut(path) {
                    *p = before;
                }
            }
        }
        self.last_data = None;
        true
    }

    /// Path `i`'s current UDP source port, state and counters.
    pub fn path_info(&self, i: usize) -> Option<(u16, PathState, PathStats)> {
        self.paths.get(i).map(|p| (p.port, p.state, p.stats))
    }

    /// Path `i`'s window, srtt, min and mean RTT in ns.
    pub fn path_rtt(&self, i: usize) -> Option<(u32, u64, u64, u64)> {
        self.paths
            .get(i)
            .map(|p| (p.cc.cwnd(), p.rtt.srtt(), p.rtt.min(), p.rtt.avg()))
    }

    /// The connection window and the rate hint last received (kbit/s).
    pub fn conn_window(&self) -> (u32, u32) {
        (self.cc.cwnd(), self.rate_hint)
    }

    /// Path `i`'s congestion engine.
    pub fn path_engine(&self, i: usize) -> Option<&C> {
        self.paths.get(i).map(|p| &p.cc)
    }

    /// The connection's congestion engine.
    pub const fn conn_engine(&self) -> &C {
        &self.cc
    }

    fn inflight_bytes(&self) -> u32 {
        self.paths
            .iter()
            .fold(0u32, |a, p| a.saturating_add(p.inflight_bytes()))
    }

    fn conn_room(&self) -> u32 {
        self.cc.cwnd().saturating_sub(self.inflight_bytes())
    }

    fn stream_has_unsent(&self, i: usize) -> bool {
        self.tx(i).is_some_and(|s| s.open)
            && (self.resp(i).is_some_and(|q| q.has_unsent())
                || self.tx(i).is_some_and(|s| s.has_unsent()))
    }

    fn desc_index(dsn: u32) -> usize {
        (dsn as usize) % D.max(1)
    }

    /// Dsn `dsn`'s descriptor (`None` without a flight: nothing is in flight then).
    fn desc(&self, dsn: u32) -> Option<&Desc> {
        self.flight.get()?.descs.get(Self::desc_index(dsn))
    }

    fn desc_mut(&mut self, dsn: u32) -> Option<&mut Desc> {
        self.flight.get_mut()?.descs.get_mut(Self::desc_index(dsn))
    }

    /// Path `pi`'s slots, if the connection holds its flight.
    fn slots(&self, pi: usize) -> Option<&SlotWindow> {
        self.flight.get()?.slots.get(pi)
    }

    /// Handles a packet addressed to this connection. `ce` says whether its
    /// IP header carried CE; `rate_hint_kbps` is the device's current fair
    /// share for this sender (0: none), put in the ACK it causes.
    pub fn on_packet(
        &mut self,
        now: u64,
        buf: &[u8],
        ce: bool,
        src_port: u16,
        rate_hint_kbps: u32,
    ) -> Result<RxEvent, RxDrop> {
        self.last_data = None;
        if self.cfg.auth {
            self.stats.drops = self.stats.drops.saturating_add(1);
            return Err(RxDrop::Unauthenticated);
        }
        let r = match parse(buf) {
            Ok(MrcPacket::Data(h, payload)) => {
                self.on_data(now, &h, payload, ce, src_port, rate_hint_kbps)
            }
            Ok(MrcPacket::Ack(a)) => self.on_ack(&a, now),
            Ok(MrcPacket::Probe(p)) => self.on_probe(now, &p),
            Err(e) => Err(RxDrop::Malformed(e)),
        };
        if r.is_err() {
            self.stats.drops = self.stats.drops.saturating_add(1);
        }
        r
    }

    /// Handles a sealed packet of the authenticated mode (section 13.1) whose tag the caller
    /// verified under the key [`Sealed::key`] names; as [`Self::on_packet`] otherwise. An ACK
    /// names its sender (the trailer's SenderId): the peer's connection, held to the same rule
    /// as the ConnId of its DATA (a new one must be proven, section 7.1), and its Seq must be
    /// new ([`RxDrop::Replay`]).
    pub fn on_sealed(
        &mut self,
        now: u64,
        s: &Sealed<'_>,
        ce: bool,
        src_port: u16,
        rate_hint_kbps: u32,
    ) -> Result<RxEvent, RxDrop> {
        self.last_data = None;
        let r = if !self.cfg.auth {
            Err(RxDrop::Unauthenticated)
        } else {
            match parse_auth(s.packet) {
                Ok(MrcPacket::Data(h, payload)) => {
                    self.on_data(now, &h, payload, ce, src_port, rate_hint_kbps)
                }
                Ok(MrcPacket::Ack(a)) => self.on_sealed_ack(now, &a, s),
                Ok(MrcPacket::Probe(p)) if p.kind == ProbeKind::Proof && p.conn != s.sender_id => {
                    Err(RxDrop::BadProof)
                }
                Ok(MrcPacket::Probe(p)) => self.on_probe(now, &p),
                Err(e) => Err(RxDrop::Malformed(e)),
            }
        };
        if r.is_err() {
            self.stats.drops = self.stats.drops.saturating_add(1);
        }
        r
    }

    fn on_sealed_ack(&mut self, now: u64, a: &AckPkt, s: &Sealed<'_>) -> Result<RxEvent, RxDrop> {
        if a.conn != self.cfg.conn_id {
            return Err(RxDrop::WrongConn);
        }
        if let Err(e) = self.conn_rule(now, s.sender_id) {
            if e == RxDrop::Unproven {
                self.guard.unproven(now);
            }
            return Err(e);
        }
        if self.peer.is_none() {
            // First contact: the peer's receiving half names itself.
            self.peer = Some(s.sender_id);
            self.ack_window = ReplayWindow::EMPTY;
        }
        let mut w = self.ack_window;
        if !w.take(s.seq) {
            return Err(RxDrop::Replay);
        }
        let r = self.on_ack(a, now);
        if r.is_ok() {
            self.ack_window = w;
            self.last_rx = Some(now);
        }
        r
    }

    fn on_probe(&mut self, now: u64, p: &ProbePkt) -> Result<RxEvent, RxDrop> {
        match p.kind {
            ProbeKind::Challenge => self.guard.on_challenge(p.cookie),
            ProbeKind::Proof => {
                let quiet = self.conn_rule(now, p.conn) == Err(RxDrop::Unproven);
                match self.guard.on_proof(now, p.conn, p.cookie, self.peer) {
                    None => return Err(RxDrop::BadProof),
                    Some(Proven::SamePeer) => {}
                    // Only a peer that went quiet is replaced (a proof that came late, after
                    // the peer spoke again, changes nothing).
                    Some(Proven::Restart(c)) => {
                        if quiet {
                            self.reset_receiver();
                            self.peer = Some(c);
                            // One restart per quiet spell: the next needs the peer quiet again.
                            self.last_rx = Some(now);
                            let st = &mut self.guard.stats;
                            st.restarts = st.restarts.saturating_add(1);
                        }
                    }
                }
            }
        }
        Ok(RxEvent::Probe)
    }

    /// The checks of DATA packet `h` that change nothing (all but the ConnId rule and the
    /// refused-message hold of [`Self::on_data`]).
    fn vet(&self, h: &DataHdr) -> Result<Vetted, RxDrop> {
        let path = usize::from(h.path);
        if path >= self.npaths() {
            return Err(RxDrop::BadPath);
        }
        let rxp = self.rx_paths.get(path).ok_or(RxDrop::BadPath)?;
        let mut win = rxp.win;
        win.advance_to(h.path_floor);
        if !win.fits(h.path_seq) {
            return Err(RxDrop::PathWindow);
        }
        let ahead = seq_diff(h.dsn, self.rx_dsn.cum());
        let dup = match ahead {
            d if d < 0 => true,
            0 => false,
            d if d.unsigned_abs() > DSN_REACH => return Err(RxDrop::DsnWindow),
            // Beyond the bitmap: new, the window moves (below).
            d if d.unsigned_abs() > SeqWindow::<DW>::SPAN => false,
            _ => self.rx_dsn.contains(h.dsn),
        };
        // DATA for a stream that is not open (its QP is gone) is acknowledged, so that
        // the path and the Dsn window move on (an unacknowledged packet would be resent
        // until the whole connection fails), and dropped (section 4).
        let mut no_stream = false;
        let mut stale = false;
        let found = self.stream_of(h.stream);
        let stream = if dup {
            None
        } else {
            match found {
                Some(idx) => {
                    if h.op.is_response() {
                        // Answers one of our requests (section 11.2); one for a
                        // message flushed by a failure is acknowledged, not placed.
                        let t = self.tx(idx).ok_or(RxDrop::NoStream)?;
                        stale = t.stale_response(h);
                        if !stale {
                            t.check_response(h).map_err(RxDrop::Stream)?;
                        }
                    } else {
                        let s = self.rx(idx).ok_or(RxDrop::NoStream)?;
                        s.check(h).map_err(RxDrop::Stream)?;
                        if h.op.is_request() {
                            let q = self.resp(idx).ok_or(RxDrop::NoStream)?;
                            q.check(h).map_err(RxDrop::Stream)?;
                        }
                    }
                    Some(idx)
                }
                None => {
                    no_stream = true;
                    None
                }
            }
        };
        // The packet that completes a refused data message (and any
        // duplicate of one of its packets) is held, dropped without an
        // acknowledgement, until the NAK is acknowledged (section 9.1): the
        // requester cannot complete the message before the NAK arrived.
        let mut held = None;
        if !h.op.is_request() && !h.op.is_response() {
            if let Some(i) = found {
                // (A duplicate: its message may be complete and gone.)
                let pending = self.resp(i).is_some_and(|q| q.nak_pending(h.msn))
                    && (dup || self.rx(i).is_some_and(|s| s.would_complete(h.msn, h.len)));
                if pending {
                    held = Some(i);
                }
            }
        }
        Ok(Vetted {
            path,
            win,
            ahead,
            stream,
            no_stream,
            stale,
            held,
        })
    }

    /// A DATA packet of the peer; one it took (placed, duplicate or refused) marks the peer
    /// active (`last_rx`, sections 7 and 7.1).
    fn on_data(
        &mut self,
        now: u64,
        h: &DataHdr,
        payload: &[u8],
        ce: bool,
        src_port: u16,
        hint: u32,
    ) -> Result<RxEvent, RxDrop> {
        let r = self.take_data(now, h, payload, ce, src_port, hint);
        if matches!(
            r,
            Ok(RxEvent::Data(_) | RxEvent::Duplicate | RxEvent::Refused(_))
        ) {
            self.last_rx = Some(now);
        }
        r
    }

    fn take_data(
        &mut self,
        now: u64,
        h: &DataHdr,
        payload: &[u8],
        ce: bool,
        src_port: u16,
        hint: u32,
    ) -> Result<RxEvent, RxDrop> {
        if let Err(e) = self.conn_rule(now, h.conn) {
            if e == RxDrop::Unproven {
                // Not placed, not acknowledged: the sender resends it once proven.
                self.guard.unproven(now);
            }
            return Err(e);
        }
        let Vetted {
            path,
            mut win,
            ahead,
            stream,
            no_stream,
            stale,
            held,
        } = self.vet(h)?;
        if let Some(i) = held {
            // The requester is resending: our NAK may be lost.
            self.resend_nak(i, h.msn);
            return Err(RxDrop::NakPending);
        }
        // Commit.
        let before = self.rx_paths.get(path).copied();
        // The peer sent this Dsn only once every Dsn `W` or more before it
        // was settled: acknowledged, or abandoned with its stream
        // (`close_stream`) and never to be sent again. Those left
        // unreceived must not hold the window (section 4). A Dsn behind the
        // cumulative point proves nothing new: near half the space behind,
        // "its Dsn - W" would be ahead and move the window that far (found by
        // fuzzing: a genuine retransmission was then placed twice).
        if ahead >= 0 {
            self.rx_dsn
                .advance_to(h.dsn.wrapping_sub(SeqWindow::<DW>::SPAN.saturating_sub(1)));
        }
        self.peer = Some(h.conn);
        self.rx_hint = hint;
        // Due at once (section 4, step 5): anything but the next packet in order
        // (reordering, a duplicate), a retransmission, a packet that leaves a gap
        // behind it or closes one, or the last packet of a message, a request
        // included (nothing behind it would make the ACK due).
        let in_order = h.path_seq == win.cum();
        let mut gap = win.bits().iter().any(|&b| b != 0);
        win.mark(h.path_seq);
        gap |= win.bits().iter().any(|&b| b != 0);
        let ends = h.offset.saturating_add(u32::from(h.len)) >= h.msg_len || h.op.is_request();
        let urgent = !in_order || gap || h.retx || ends;
        if let Some(rxp) = self.rx_paths.get_mut(path) {
            rxp.win = win;
            if ce {
                rxp.ce_count = rxp.ce_count.wrapping_add(1);
            }
            rxp.unacked = rxp.unacked.saturating_add(1);
            rxp.ack_now |= urgent || rxp.unacked >= self.cfg.ack_every;
            rxp.ack_seq = h.path_seq;
            rxp.port = src_port;
        }
        let Some(idx) = stream else {
            if no_stream {
                let _ = self.rx_dsn.mark(h.dsn);
                return Err(RxDrop::NoStream);
            }
            self.stats.duplicates = self.stats.duplicates.saturating_add(1);
            return Ok(RxEvent::Duplicate);
        };
        if stale {
            let _ = self.rx_dsn.mark(h.dsn);
            self.stats.duplicates = self.stats.duplicates.saturating_add(1);
            return Ok(RxEvent::Duplicate);
        }
        if self.rx_dsn.mark(h.dsn) != Mark::New {
            // Unreachable after the checks above; counted, not placed.
            return Err(RxDrop::DsnWindow);
        }
        let mut invalidate = None;
        if h.op.is_response() {
            if let Some(t) = self.tx_mut(idx) {
                t.response(h);
            }
            if h.op == MrcOp::Nak {
                let code = NakCode::from_u32(h.imm).unwrap_or(NakCode::RemoteOperation);
                return Ok(RxEvent::Nak {
                    stream: idx,
                    msn: h.msn,
                    code,
                });
            }
        } else if let Some(s) = self.rx_mut(idx) {
            let was_complete = s.all_placed(h.msn);
            s.placed(h);
            if let Some(code) = s.refused(h.msn) {
                // Counted for the message's completion, never placed.
                self.stats.duplicates = self.stats.duplicates.saturating_add(1);
                return Ok(RxEvent::Refused(code));
            }
            // The packet that completes a SEND_INV names its key, once.
            if h.op.invalidates() && !was_complete && s.all_placed(h.msn) {
                invalidate = Some(h.rkey);
            }
        }
        if h.op.is_request() {
            let mss = self.cfg.mss;
            let q = self.resp_mut(idx).ok_or(RxDrop::NoStream)?;
            let req = q.insert(idx, h, payload).ok_or(RxDrop::NoStream)?;
            if req.op.is_atomic() && req.va % 8 != 0 {
                let code = NakCode::InvalidRequest;
                q.answer(req.msn, Response::Nak(code), mss);
                return Ok(RxEvent::Refused(code));
            }
            return Ok(RxEvent::Request(req));
        }
        self.stats.data_placed = self.stats.data_placed.saturating_add(1);
        self.stats.bytes_placed = self.stats.bytes_placed.saturating_add(u64::from(h.len));
        if !h.op.is_response() {
            let own = self.own_stream(h);
            self.last_data = before.map(|b| (idx, h.msn, path, b, own));
        }
        Ok(RxEvent::Data(Place {
            stream: idx,
            op: h.op,
            msn: h.msn,
            rsn: h.rsn,
            offset: h.offset,
            va: h.va,
            rkey: h.rkey,
            len: h.len,
            msg_len: h.msg_len,
            invalidate,
        }))
    }

    /// Our stream that sent DATA packet `h`, if the connection talks to
    /// itself (a device whose QPs talk to each other, `native.rs`): the
    /// packet carries our ConnId and its Dsn is one of ours, unacknowledged,
    /// for the same segment of a message of an open stream to `h`'s QP.
    fn own_stream(&self, h: &DataHdr) -> Option<usize> {
        let ours = h.dsn.wrapping_sub(self.dsn_base) < self.dsn_next.wrapping_sub(self.dsn_base);
        if h.conn != self.cfg.conn_id || !ours {
            return None;
        }
        let d = self.desc(h.dsn)?;
        let si = usize::from(d.stream);
        let t = self.tx(si)?;
        let same = !d.resp
            && d.state != DescState::Acked
            && (d.msn, d.offset, d.len) == (h.msn, h.offset, h.len);
        (same && t.open && t.remote_qpn == h.stream).then_some(si)
    }

    /// Queues the NAK of refused data message `msn` of stream `idx` for
    /// retransmission now if it is in flight (a held packet arrived: the
    /// requester is waiting for it). At most `max_retx / 2` times: the
    /// other half stays for the path's own loss recovery, so that held
    /// duplicates cannot spend the NAK's retries and fail our connection.
    fn resend_nak(&mut self, idx: usize, msn: u32) {
        let n = self.dsn_next.wrapping_sub(self.dsn_base);
        let limit = self.cfg.max_retx / 2;
        let Some(f) = self.flight.get_mut() else {
            return;
        };
        for k in 0..n {
            let dsn = self.dsn_base.wrapping_add(k);
            let Some(d) = f.descs.get_mut(Self::desc_index(dsn)) else {
                return;
            };
            if d.resp && usize::from(d.stream) == idx && d.msn == msn {
                if d.state == DescState::Unacked && d.tx_count < limit {
                    d.state = DescState::Lost;
                    f.retx.push(dsn);
                }
                return;
            }
        }
    }

    fn on_ack(&mut self, a: &AckPkt, now: u64) -> Result<RxEvent, RxDrop> {
        if a.conn != self.cfg.conn_id {
            return Err(RxDrop::WrongConn);
        }
        let pi = usize::from(a.path);
        if pi >= self.npaths() {
            return Err(RxDrop::BadPath);
        }
        self.busy_at = now;
        let Self {
            paths,
            flight,
            streams,
            cc,
            newest_acked,
            ..
        } = self;
        let p = paths.get_mut(pi).ok_or(RxDrop::BadPath)?;
        // Without a flight nothing is in flight: the path takes the ACK's ECN echo only.
        let (slots, mut descs, mut retx) = match flight.get_mut() {
            Some(f) => (f.slots.get_mut(pi), Some(&mut f.descs), Some(&mut f.retx)),
            None => (None, None, None),
        };
        let sampled = p.rtt.samples();
        let mut acked_bytes = 0u32;
        let dsn_base = self.dsn_base;
        let dsn_next = self.dsn_next;
        let in_dsn_window = |dsn: u32| dsn.wrapping_sub(dsn_base) < dsn_next.wrapping_sub(dsn_base);
        let ce = p
            .on_ack(slots, a, now, |ev| match ev {
                PathEvent::Acked { dsn, len, .. } => {
                    if !in_dsn_window(dsn) {
                        return;
                    }
                    if newest_acked.is_none_or(|n| seq_diff(dsn, n) > 0) {
                        *newest_acked = Some(dsn);
                    }
                    let Some(d) = descs
                        .as_deref_mut()
                        .and_then(|ds| ds.get_mut(Self::desc_index(dsn)))
                    else {
                        return;
                    };
                    if d.state == DescState::Acked {
                        return;
                    }
                    // A Lost descriptor still queued is skipped when popped.
                    d.state = DescState::Acked;
                    cc.on_ack(now, len);
                    acked_bytes = acked_bytes.saturating_add(len);
                    if d.resp {
                        if let Some(s) = streams.slot_mut(usize::from(d.stream)) {
                            let q = &mut s.resp;
                            q.packet_acked(d.msn);
                        }
                    } else if let Some(s) = streams.slot_mut(usize::from(d.stream)) {
                        s.tx.packet_acked(d.msn);
                    }
                }
                PathEvent::Lost { dsn, seq } => {
                    let Some(d) = descs
                        .as_deref_mut()
                        .and_then(|ds| ds.get_mut(Self::desc_index(dsn)))
                    else {
                        return;
                    };
                    if !in_dsn_window(dsn)
                        || d.state != DescState::Unacked
                        || usize::from(d.path) != pi
                        || d.seq != seq
                    {
                        return;
                    }
                    d.state = DescState::Lost;
                    if let Some(q) = retx.as_deref_mut() {
                        q.push(dsn);
                    }
                }
            })
            .ok_or(RxDrop::BadAck)?;
        // The peer refused transmission `ack_seq` for want of a posted receive (section 5.6):
        // its retransmissions so far are not losses and do not count towards `max_retx`, so
        // a receiver that is slow to post fails nothing (RNR retries are unlimited).
        let rnr = a.rnr
            && match flight.get_mut() {
                Some(f) => f.slots.get(pi).and_then(|w| p.unacked_dsn(w, a.ack_seq)),
                None => None,
            }
            .is_some_and(|dsn| {
                let d = flight
                    .get_mut()
                    .and_then(|f| f.descs.get_mut(Self::desc_index(dsn)));
                match d {
                    Some(d)
                        if in_dsn_window(dsn)
                            && usize::from(d.path) == pi
                            && d.seq == a.ack_seq =>
                    {
                        d.tx_count = 0;
                        true
                    }
                    _ => false,
                }
            });
        if rnr {
            self.stats.rnr_acks = self.stats.rnr_acks.saturating_add(1);
        }
        let conn_rtt = p.rtt.srtt();
        if p.rtt.min() != 0 && (self.min_rtt == 0 || p.rtt.min() < self.min_rtt) {
            self.min_rtt = p.rtt.min();
        }
        let target = self.cfg.delay_target_ns;
        let queued =
            target != 0 && p.rtt.min() != 0 && p.rtt.srtt() > p.rtt.min().saturating_add(target);
        if queued && !ce {
            self.stats.delay_signals = self.stats.delay_signals.saturating_add(1);
        }
        if ce || queued {
            let srtt = p.rtt.srtt();
            p.cc.on_congestion(now, srtt);
            if self.cc.on_congestion(now, conn_rtt.max(self.min_rtt)) {
                self.pace_scale = scale_q16(self.pace_scale, MD_ECN_CONN).max(Q16_ONE / 16);
                self.stats.conn_ecn_decreases = self.stats.conn_ecn_decreases.saturating_add(1);
            }
        }
        // A route much slower than the others' (a bottleneck on one path) holds the packets
        // sprayed onto it behind its queue: after `SLOW_PATH_SAMPLES` slow samples in a row
        // the path moves (section 6.1).
        let sample = (p.rtt.samples() != sampled && !p.new_route()).then(|| p.rtt.last());
        let mut repath = p.loss_epoch_says_repath();
        if let Some(last) = sample {
            repath |= self.slow_route(pi, last);
        }
        // Additive increase of the paced share: 1/16 of the hint per RTT.
        let rtt = conn_rtt.max(self.min_rtt).max(1);
        let elapsed = now.saturating_sub(self.pace_ai_at).min(rtt);
        self.pace_ai_at = now;
        if acked_bytes > 0 {
            let step = u64::from(Q16_ONE / 16).saturating_mul(elapsed) / rtt;
            let step = u32::try_from(step).unwrap_or(Q16_ONE);
            self.pace_scale = self.pace_scale.saturating_add(step).min(Q16_ONE);
        }
        if repath {
            self.repath(pi);
        }
        if a.rate_hint_kbps != self.rate_hint {
            let old = self.rate_hint;
            self.rate_hint = a.rate_hint_kbps;
            self.stats.rate_hint_changes = self.stats.rate_hint_changes.saturating_add(1);
            // The gap now running was computed at the old hint: at a faster
            // new one it ends sooner (a gap never grows after the fact), so
            // a tiny hint (stale, or forged) does not hold the sender once
            // the real share arrives.
            let end = match pace_gap_ns(self.pace_len, self.paced_rate()) {
                Some(gap) => self.pace_from.saturating_add(gap),
                None => self.pace_from,
            };
            self.pace_next = self.pace_next.min(end);
            // A first or smaller share: pay back the burst sent above it.
            if old == 0 || self.rate_hint < old {
                self.pace_payback(now);
            }
        }
        self.advance_dsn_base();
        Ok(RxEvent::Ack)
    }

    /// Burst payback (section 6.4, our choice): the bytes in flight beyond
    /// what the paced rate keeps in flight over the smallest RTT seen were
    /// sent above the share; the next new packet waits until they would
    /// have left at that rate, as if the sender had been paced from its
    /// first packet. Each sender of an incast so pays for its own part of
    /// the queue its unpaced start built, and the queue drains at the
    /// link's rate rather than at the hint's headroom. Once per first or
    /// smaller hint, never a standing cap: a smallest RTT that already
    /// included the queue only makes the payback shorter.
    fn pace_payback(&mut self, now: u64) {
        let rate = u64::from(self.paced_rate());
        if rate == 0 || self.min_rtt == 0 {
            return;
        }
        // kbit/s x ns / 8e6 = bytes.
        let pipe = rate.saturating_mul(self.min_rtt) / 8_000_000;
        let excess = u64::from(self.inflight_bytes()).saturating_sub(pipe);
        if excess == 0 {
            return;
        }
        self.pace_next = self
            .pace_next
            .max(now.saturating_add(bytes_ns(excess, rate)));
    }

    /// The rate the pacer sends at in kbit/s: the hint scaled by the
    /// connection's AIMD; 0 (not paced) without a hint. Any hint paces
    /// (section 6.4): a scaled rate that rounds down to 0 kbit/s is the
    /// slowest rate, not "no hint".
    fn paced_rate(&self) -> u32 {
        if self.rate_hint == 0 {
            0
        } else {
            scale_q16(self.rate_hint, self.pace_scale).max(1)
        }
    }

    fn advance_dsn_base(&mut self) {
        while self.dsn_base != self.dsn_next {
            match self.desc(self.dsn_base) {
                Some(d) if d.state != DescState::Acked => break,
                _ => self.dsn_base = self.dsn_base.wrapping_add(1),
            }
        }
    }

    /// Counts a new RTT sample `last` of path `pi` on its current route; true once
    /// `SLOW_PATH_SAMPLES` in a row were slow. The median of the other paths is only computed
    /// for a sample above `SLOW_PATH_FACTOR` times the connection's smallest RTT, below which
    /// no sample can be slow (every srtt is at least that smallest RTT).
    fn slow_route(&mut self, pi: usize, last: u64) -> bool {
        let slow = last > self.min_rtt.saturating_mul(SLOW_PATH_FACTOR) && {
            let others = self.median_srtt_but(pi);
            others != 0 && last > others.saturating_mul(SLOW_PATH_FACTOR)
        };
        let Some(p) = self.paths.get_mut(pi) else {
            return false;
        };
        p.slow_samples = if slow {
            p.slow_samples.saturating_add(1)
        } else {
            0
        };
        let moved = p.slow_samples >= SLOW_PATH_SAMPLES;
        if moved {
            self.stats.slow_repaths = self.stats.slow_repaths.saturating_add(1);
        }
        moved
    }

    /// The median smoothed RTT of the connection's paths other than `pi` that have a sample
    /// on their current route (the lower median); 0 if none has.
    fn median_srtt_but(&self, pi: usize) -> u64 {
        let mut v = [0u64; P];
        let mut n = 0;
        for (i, p) in self.paths.iter().enumerate().take(self.npaths()) {
            if i != pi && p.rtt.srtt() != 0 && !p.new_route() {
                if let Some(slot) = v.get_mut(n) {
                    *slot = p.rtt.srtt();
                    n += 1;
                }
            }
        }
        let v = v.get_mut(..n).unwrap_or(&mut []);
        insertion_sort(v);
        v.get(n.saturating_sub(1) / 2).copied().unwrap_or(0)
    }

    fn repath(&mut self, pi: usize) {
        let Some(old) = self.paths.get(pi).map(|p| p.port) else {
            return;
        };
        let mut port = old;
        while port == old {
            // xorshift32
            let mut x = self.port_rng;
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            self.port_rng = x;
            port = PORT_BASE.saturating_add(u16::try_from(x % PORT_SPAN).unwrap_or(0));
        }
        if let Some(p) = self.paths.get_mut(pi) {
            p.repath(port);
        }
        self.stats.repaths = self.stats.repaths.saturating_add(1);
    }

    /// The smallest RTO of a path on a new route (repathed, no RTT sample
    /// there yet): the largest RTO of the paths with a sample on their
    /// route, at least `rto_min_ns` (section 6.1).
    fn new_route_rto_floor(&self) -> u64 {
        let c = &self.cfg;
        self.paths
            .iter()
            .take(self.npaths())
            .filter(|q| !q.new_route() && q.rtt.srtt() != 0)
            .map(|q| q.rtt.rto(c.rto_init_ns, c.rto_min_ns, c.rto_max_ns))
            .fold(c.rto_min_ns, u64::max)
    }

    /// [`Self::new_route_rto_floor`], [`Self::share_drain_ns`] and [`Self::heard_at`], taken
    /// once for every path's [`Self::rto_deadline`] (each scans the paths).
    fn rto_floors(&self) -> (u64, u64, Option<u64>) {
        (
            self.new_route_rto_floor(),
            self.share_drain_ns(),
            self.heard_at(),
        )
    }

    /// Path `pi`'s RTO deadline, with `floors` from [`Self::rto_floors`]: the
    /// new-route floor if it is on a new route, the paced drain time, and the ACK-train
    /// wait after [`Self::heard_at`].
    fn rto_deadline(
        &self,
        pi: usize,
        (floor, drain, heard): (u64, u64, Option<u64>),
    ) -> Option<u64> {
        let c = &self.cfg;
        let p = self.paths.get(pi)?;
        let min = if p.new_route() { floor } else { c.rto_min_ns };
        let d = p.deadline(self.slots(pi)?, c.rto_init_ns, min.max(drain), c.rto_max_ns)?;
        let train = c.ack_train_ns;
        Some(match heard {
            Some(at) if train != 0 => d.max(at.saturating_add(train).min(d.saturating_add(train))),
            _ => d,
        })
    }

    /// When the connection's newest acknowledged transmission was acknowledged (section
    /// 5.5.2, the ACK-train wait), if any was.
    fn heard_at(&self) -> Option<u64> {
        self.paths
            .iter()
            .take(self.npaths())
            .filter_map(|p| p.acked_sent().map(|s| (s, p.acked_at())))
            .max()
            .map(|(_, at)| at)
    }

    /// How long the bytes in flight take to drain at the paced rate, plus
    /// the smallest RTT (0 without a hint): no transmission is declared
    /// lost sooner (section 6.4, our choice). A sender paced at its share
    /// of a bottleneck cannot expect its last packet through the queue
    /// before its own bytes ahead of it were: an incast's first burst
    /// otherwise outlasts RTOs set from the first, unqueued, samples.
    /// [`Self::rto_deadline`] clamps it to `rto_max_ns` like any RTO.
    fn share_drain_ns(&self) -> u64 {
        let rate = u64::from(self.paced_rate());
        if rate == 0 {
            return 0;
        }
        bytes_ns(u64::from(self.inflight_bytes()), rate).saturating_add(self.min_rtt)
    }

    /// The earliest time [`Self::on_timer`] or [`Self::reclaim_flight`] has work.
    pub fn next_deadline(&self) -> Option<u64> {
        [self.timer_deadline(), self.release_at()]
            .into_iter()
            .flatten()
            .min()
    }

    /// The earliest time [`Self::on_timer`] has work: a path's retransmission or probe timer,
    /// or the pacer. `None` once nothing is in flight and nothing waits for the pacer.
    pub fn timer_deadline(&self) -> Option<u64> {
        let c = &self.cfg;
        let floors = self.rto_floors();
        let timers = self
            .paths
            .iter()
            .enumerate()
            .take(self.npaths())
            .filter_map(|(pi, p)| {
                let rto = self.rto_deadline(pi, floors);
                let pto = p.probe_deadline(c.pto_min_ns);
                match (rto, pto) {
                    (Some(a), Some(b)) => Some(a.min(b)),
                    (a, b) => a.or(b),
                }
            })
            .min();
        let pace = self.pace_blocked.then_some(self.pace_next);
        match (timers, pace) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// The reordering window of the silence test (section 5.5.2): a quarter of the
    /// connection's minimum RTT, RACK's `reo_wnd`. An acknowledgment for a packet sent within
    /// it after a path's oldest one, on the same batch or a path a little faster, says nothing
    /// about that packet.
    fn reo_wnd(&self) -> u64 {
        self.min_rtt / 4
    }

    /// The latest send time of a transmission acknowledged on any path.
    fn acked_sent(&self) -> Option<u64> {
        self.paths
            .iter()
            .take(self.npaths())
            .filter_map(|p| p.acked_sent())
            .max()
    }

    /// Whether path `pi`'s timeout is a silence (section 5.5.2): nothing sent more than the
    /// reordering window ([`Self::reo_wnd`]) after its oldest transmission in flight was
    /// acknowledged on any path, `heard` being [`Self::acked_sent`]; fewer than
    /// [`MAX_SILENCES`] silences since its last acknowledgment; and a transmission in flight
    /// there still wanted (an abandoned stream's are not: an RTO lets them go).
    fn silent_since_oldest(&self, pi: usize, heard: Option<u64>) -> bool {
        let (Some(p), Some(w)) = (self.paths.get(pi), self.slots(pi)) else {
            return false;
        };
        let reo = self.reo_wnd();
        let silent = p
            .oldest_sent(w)
            .is_some_and(|t| heard.is_none_or(|h| h <= t.saturating_add(reo)));
        silent
            && p.silent_in_row() < MAX_SILENCES
            && p.in_flight(w)
                .any(|(dsn, seq)| self.is_current(dsn, pi, seq))
    }

    /// Whether the transmission of `dsn` on path `pi` at `seq` is its latest and still
    /// unacknowledged.
    fn is_current(&self, dsn: u32, pi: usize, seq: u32) -> bool {
        self.desc(dsn).is_some_and(|d| {
            d.state == DescState::Unacked
                && usize::from(d.path) == pi
                && d.seq == seq
                && dsn.wrapping_sub(self.dsn_base) < self.dsn_next.wrapping_sub(self.dsn_base)
        })
    }

    /// Runs the retransmission timers due at `now`.
    pub fn on_timer(&mut self, now: u64) {
        let c = self.cfg;
        if self.pace_blocked && self.pace_next <= now {
            self.pace_blocked = false;
        }
        for p in self.paths.iter_mut() {
            p.on_probe_timer(now, c.pto_min_ns);
        }
        let mut floors = self.rto_floors();
        let heard = self.acked_sent();
        for pi in 0..self.npaths() {
            let due = self.rto_deadline(pi, floors).is_some_and(|t| t <= now);
            if !due {
                continue;
            }
            if c.silence_probes && self.silent_since_oldest(pi, heard) {
                if let Some(p) = self.paths.get_mut(pi) {
                    p.on_silence();
                }
                continue;
            }
            let Self { paths, flight, .. } = self;
            // A deadline means packets in flight, so a flight.
            let (Some(p), Some(f)) = (paths.get_mut(pi), flight.get_mut()) else {
                continue;
            };
            let super::flight::Flight { descs, retx, slots } = f;
            if let Some(w) = slots.get_mut(pi) {
                p.on_timeout(w, |ev| {
                    if let PathEvent::Lost { dsn, seq } = ev {
                        if let Some(d) = descs.get_mut(Self::desc_index(dsn)) {
                            if d.state == DescState::Unacked
                                && usize::from(d.path) == pi
                                && d.seq == seq
                            {
                                d.state = DescState::Lost;
                                retx.push(dsn);
                            }
                        }
                    }
                });
            }
            self.repath(pi);
            // The path left the new-route floor's set, and its bytes are no
            // longer in flight.
            floors = self.rto_floors();
        }
    }

    /// The next packet to send, its header written to `buf` (at least
    /// [`super::mrc_wire::DATA_HDR_LEN`] bytes; [`MAX_HDR_LEN`] for atomic requests, which
    /// wait for such a buffer): ACKs first, then retransmissions, then new data round-robin
    /// over streams (a stream's READ/atomic responses before its own messages).
    ///
    /// In the authenticated mode the packet carries the AUTH flag and [`Transmit::seq`] its Seq;
    /// the caller appends the trailer (`super::auth::seal`) after the payload and tags it.
    pub fn poll_transmit(&mut self, now: u64, buf: &mut [u8]) -> Option<Transmit> {
        let t = self.poll_any(now, buf, false)?;
        Some(self.sealed(t, buf))
    }

    /// As [`Conn::poll_transmit`], but of the owed ACKs only those due at once
    /// ([`ConnConfig::ack_every`]): what a receive path sends, the data an ACK made room for
    /// included, while the coalesced ACKs wait for the transmitter.
    pub fn poll_receive_path(&mut self, now: u64, buf: &mut [u8]) -> Option<Transmit> {
        let t = self.poll_any(now, buf, true)?;
        Some(self.sealed(t, buf))
    }

    /// As [`Conn::poll_transmit`], but only the control packets due now: a PROOF or CHALLENGE
    /// (section 7.1), else an ACK due at once ([`ConnConfig::ack_every`]). No DATA, no
    /// retransmission, no probe: what a receive path may send at once while the data and the
    /// coalesced ACKs wait for the transmitter.
    pub fn poll_control(&mut self, now: u64, buf: &mut [u8]) -> Option<Transmit> {
        let t = match self.poll_probe(now, buf) {
            Some(t) => t,
            None => self.poll_ack(buf, true)?,
        };
        Some(self.sealed(t, buf))
    }

    /// `t`, whose header is in `buf`, as it leaves: in the authenticated mode (section 13.1)
    /// flagged and given the connection's next trailer Seq.
    fn sealed(&mut self, mut t: Transmit, buf: &mut [u8]) -> Transmit {
        if self.cfg.auth {
            mark(buf);
            t.seq = self.tx_seq;
            self.tx_seq = self.tx_seq.wrapping_add(1);
        }
        t
    }

    fn poll_any(&mut self, now: u64, buf: &mut [u8], acks_due: bool) -> Option<Transmit> {
        if let Some(t) = self.poll_probe(now, buf) {
            return Some(t);
        }
        if let Some(t) = self.poll_ack(buf, acks_due) {
            return Some(t);
        }
        if self.state != ConnState::Active {
            return None;
        }
        if let Some(t) = self.poll_retx(now, buf) {
            return Some(t);
        }
        let probe = (0..self.npaths()).find(|&i| self.paths.get(i).is_some_and(|p| p.probe_due()));
        if let Some(pi) = probe {
            if let Some(t) = self.poll_new(now, buf, Some(pi)) {
                return Some(t);
            }
            if let Some(t) = self.poll_tail_probe(now, buf, pi) {
                return Some(t);
            }
        }
        self.poll_new(now, buf, None)
    }

    /// A PROOF owed to a challenger, else a CHALLENGE due (section 7.1), on path 0.
    fn poll_probe(&mut self, now: u64, buf: &mut [u8]) -> Option<Transmit> {
        let p = match self.guard.poll_proof(self.cfg.conn_id) {
            Some(p) => p,
            None => self.guard.poll_challenge(now)?,
        };
        let hdr_len = p.write(buf)?;
        Some(Transmit {
            path: 0,
            src_port: self.paths.first().map_or(PORT_BASE, |p| p.port),
            hdr_len,
            payload: None,
            ect: false,
            retx: false,
            seq: 0,
        })
    }

    /// DATA packet `h`, which [`Self::admits`], arrived from UDP source port `src_port` for a
    /// receive not posted yet: the caller drops it (nothing of it is taken) and this owes the
    /// sender an ACK at once with the RNR flag naming it (section 5.6). The sender resends it
    /// without counting that towards `max_retx`.
    pub fn not_ready(&mut self, h: &DataHdr, src_port: u16) {
        let Some(rxp) = self.rx_paths.get_mut(usize::from(h.path)) else {
            return;
        };
        rxp.rnr = Some(h.path_seq);
        rxp.port = src_port;
        rxp.ack_now = true;
        self.stats.rnr_refused = self.stats.rnr_refused.saturating_add(1);
    }

    /// Whether an owed ACK is not due at once: coalesced ([`ConnConfig::ack_every`]), it waits
    /// for [`Conn::poll_transmit`].
    pub fn acks_coalesced(&self) -> bool {
        self.rx_paths
            .iter()
            .take(self.npaths())
            .any(|p| p.ack_pending() && !p.ack_now)
    }

    /// The next owed ACK, round-robin over the paths; with `due`, only one due at once
    /// ([`RxPath::ack_now`]).
    fn poll_ack(&mut self, buf: &mut [u8], due: bool) -> Option<Transmit> {
        let n = self.npaths();
        let peer = self.peer?;
        for k in 0..n {
            let pi = (self.rr_ack.wrapping_add(k)) % n;
            let rxp = self.rx_paths.get_mut(pi)?;
            if !rxp.ack_pending() || (due && !rxp.ack_now) {
                continue;
            }
            let path = u8::try_from(pi).ok()?;
            let hdr_len = rxp.ack(path, peer, self.rx_hint).write(buf)?;
            rxp.ack_now = false;
            rxp.unacked = 0;
            rxp.rnr = None;
            self.rr_ack = pi.wrapping_add(1);
            self.stats.acks_sent = self.stats.acks_sent.saturating_add(1);
            return Some(Transmit {
                path,
                src_port: rxp.port,
                hdr_len,
                payload: None,
                ect: false,
                retx: false,
                seq: 0,
            });
        }
        None
    }

    fn pick_path(&self, preferred: Option<usize>, len: u32) -> Option<usize> {
        let n = self.npaths();
        if let Some(pi) = preferred {
            if self
                .paths
                .get(pi)
                .is_some_and(|p| p.state == PathState::Active && p.can_send(len))
            {
                return Some(pi);
            }
            // "that path or a better one": the active path with most room,
            // else any path that can send.
            let best = (0..n)
                .filter(|&i| {
                    self.paths
                        .get(i)
                        .is_some_and(|p| p.state == PathState::Active && p.can_send(len))
                })
                .max_by_key(|&i| self.paths.get(i).map_or(0, |p| p.room()));
            return best
                .or_else(|| (0..n).find(|&i| self.paths.get(i).is_some_and(|p| p.can_send(len))));
        }
        // New data: the path of the current run while it is shorter than
        // `path_run` and the window allows, else of the paths whose window
        // allows it, the one with the fewest bytes in flight, ties in
        // round-robin order.
        let last = self.last_new_path();
        if self.run > 0
            && self.run < self.cfg.path_run
            && self.paths.get(last).is_some_and(|p| p.can_send(len))
        {
            return Some(last);
        }
        let mut best: Option<(usize, u32)> = None;
        for k in 0..n {
            let i = self.rr_path.wrapping_add(k) % n;
            if let Some(p) = self.paths.get(i).filter(|p| p.can_send(len)) {
                let load = p.inflight_bytes();
                if best.is_none_or(|(_, l)| load < l) {
                    best = Some((i, load));
                }
            }
        }
        best.map(|(i, _)| i)
    }

    /// The path the last new DATA packet left on (`rr_path` names the one after it).
    fn last_new_path(&self) -> usize {
        let n = self.npaths();
        self.rr_path.wrapping_add(n - 1) % n
    }

    fn poll_retx(&mut self, now: u64, buf: &mut [u8]) -> Option<Transmit> {
        while let Some(dsn) = self.flight.get().and_then(|f| f.retx.front()) {
            let d = *self.desc(dsn)?;
            let live = d.state == DescState::Lost
                && dsn.wrapping_sub(self.dsn_base) < self.dsn_next.wrapping_sub(self.dsn_base);
            if !live {
                self.pop_retx();
                continue;
            }
            // A response whose request slot was taken by a newer request: the
            // requester completed it (section 11.3), nothing to resend.
            let gone = d.resp
                && self
                    .resp(usize::from(d.stream))
                    .is_none_or(|q| q.get(d.msn).is_none());
            if gone {
                if let Some(dm) = self.desc_mut(dsn) {
                    dm.state = DescState::Acked;
                }
                self.pop_retx();
                self.advance_dsn_base();
                continue;
            }
            if buf.len() < MAX_HDR_LEN && self.is_atomic_desc(&d) {
                // No room for the operand block: wait for a larger buffer.
                return None;
            }
            if d.tx_count > self.cfg.max_retx {
                // Retransmitted, never acknowledged, while the peer
                // acknowledged data sent after it: the peer is alive and
                // drops this packet (its QP is not ready, or broken): that
                // stream fails, not every stream of the connection. Else the
                // peer is gone: the connection fails.
                let alive =
                    d.tx_count >= 2 && self.newest_acked.is_some_and(|n| seq_diff(n, dsn) > 0);
                if alive && !d.resp {
                    let si = usize::from(d.stream);
                    if let Some(t) = self.tx_mut(si) {
                        t.failed = true;
                    }
                    self.abandon(si, false);
                    continue;
                }
                self.fail();
                return None;
            }
            let pi = self.pick_path(Some(usize::from(d.path)), u32::from(d.len))?;
            self.pop_retx();
            return self.transmit(now, buf, dsn, pi, true);
        }
        None
    }

    /// A tail-loss probe on path `pi` when no new data waits: its newest
    /// packet in flight sent again, on it, with a fresh PathSeq (section
    /// 5.4). Its acknowledgment reveals the gaps before it; if that packet
    /// itself was lost, the probe delivers it.
    fn poll_tail_probe(&mut self, now: u64, buf: &mut [u8], pi: usize) -> Option<Transmit> {
        let (dsn, seq) = self.paths.get(pi)?.newest_in_flight(self.slots(pi)?)?;
        let d = *self.desc(dsn)?;
        if !self.is_current(dsn, pi, seq) || (buf.len() < MAX_HDR_LEN && self.is_atomic_desc(&d)) {
            return None;
        }
        let t = self.transmit(now, buf, dsn, pi, true)?;
        if let Some(p) = self.paths.get_mut(pi) {
            p.stats.tail_probes = p.stats.tail_probes.saturating_add(1);
        }
        Some(t)
    }

    /// New data; `probe`: on that path, beyond the windows and the pacer.
    fn poll_new(&mut self, now: u64, buf: &mut [u8], probe: Option<usize>) -> Option<Transmit> {
        // Without a flight nothing new leaves: the caller lends one ([`Self::flight_wanted`]).
        if self.dsn_next.wrapping_sub(self.dsn_base) as usize >= D || self.flight.get().is_none() {
            return None;
        }
        let mss = self.cfg.mss;
        if probe.is_none() {
            if self.conn_room() == 0 && self.inflight_bytes() > 0 {
                return None;
            }
            if self.rate_hint != 0 && self.pace_next > now {
                self.pace_blocked = true;
                return None;
            }
        }
        let n = self.hi.min(S);
        for k in 0..n {
            let si = self.rr_stream.wrapping_add(k) % n;
            if !self.stream_has_unsent(si) {
                continue;
            }
            // The next segment's length is at most mss.
            let pi = match probe {
                Some(pi) => pi,
                None => self.pick_path(None, u32::from(mss))?,
            };
            // Responses first: they complete the peer's requests.
            let resp = self.resp(si).is_some_and(|q| q.has_unsent());
            let atomic = !resp && self.tx(si).is_some_and(|t| t.next_is_atomic());
            if atomic && buf.len() < MAX_HDR_LEN {
                // No room for the operand block: the stream waits for a
                // caller with a larger buffer.
                continue;
            }
            let seg = if resp {
                let r = self.resp_mut(si)?.next_segment(mss)?;
                Segment {
                    msn: r.msn,
                    offset: r.offset,
                    len: r.len,
                }
            } else {
                self.tx_mut(si)?.next_segment(mss)?
            };
            let dsn = self.dsn_next;
            if let Some(d) = self.desc_mut(dsn) {
                *d = Desc {
                    stream: u16::try_from(si).ok()?,
                    resp,
                    msn: seg.msn,
                    offset: seg.offset,
                    len: seg.len,
                    path: 0,
                    seq: 0,
                    tx_count: 0,
                    state: DescState::Unacked,
                };
            }
            self.dsn_next = dsn.wrapping_add(1);
            self.rr_stream = si.wrapping_add(1);
            self.run = if pi == self.last_new_path() && self.run > 0 {
                self.run.saturating_add(1)
            } else {
                1
            };
            self.rr_path = pi.wrapping_add(1);
            return self.transmit(now, buf, dsn, pi, false);
        }
        None
    }

    fn transmit(
        &mut self,
        now: u64,
        buf: &mut [u8],
        dsn: u32,
        pi: usize,
        retx: bool,
    ) -> Option<Transmit> {
        let d = *self.desc(dsn)?;
        // Payload bytes on the wire: an atomic's operand block is written
        // here, not referenced, but windows and pacer count it all the same.
        let atomic = self.is_atomic_desc(&d);
        let wire_len = if atomic {
            u32::from(ATOMIC_OPERANDS_LEN)
        } else {
            u32::from(d.len)
        };
        let w = self.flight.get_mut()?.slots.get_mut(pi)?;
        let p = self.paths.get_mut(pi)?;
        let floor = p.floor();
        // Every earlier transmission counts, also those of a retransmission
        // that never arrived: each one's RTO doubles (path.rs `deadline`).
        let tries = if retx { d.tx_count.max(1) } else { 0 };
        let seq = p.on_send(w, dsn, wire_len, now, tries);
        let src_port = p.port;
        self.busy_at = now;
        let path = u8::try_from(pi).ok()?;
        let mut h = DataHdr {
            retx,
            se: false,
            path,
            op: MrcOp::Write,
            conn: self.cfg.conn_id,
            path_seq: seq,
            path_floor: floor,
            stream: 0,
            dsn,
            msn: d.msn,
            rsn: 0,
            msg_len: 0,
            offset: d.offset,
            va: 0,
            rkey: 0,
            imm: 0,
            len: d.len,
        };
        let si = usize::from(d.stream);
        let st = self.streams.slot(si)?;
        let t = &st.tx;
        let mut mr = None;
        let mut operands = None;
        if d.resp {
            let seg = RespSegment {
                msn: d.msn,
                offset: d.offset,
                len: d.len,
            };
            let q = &st.resp;
            q.fill_header(&seg, t.remote_qpn, &mut h)?;
            if let Some((req, Response::Read)) = q.get(d.msn) {
                mr = Some(MrRef {
                    rkey: req.rkey,
                    va: req.va.wrapping_add(u64::from(d.offset)),
                });
            }
        } else {
            let seg = Segment {
                msn: d.msn,
                offset: d.offset,
                len: d.len,
            };
            t.fill_header(&seg, &mut h)?;
            operands = t.operands(d.msn);
        }
        let mut hdr_len = h.write(buf)?;
        if let Some([a, b]) = operands {
            // An atomic's operand block follows the header (section 3.1).
            let ops =
                buf.get_mut(hdr_len..hdr_len.checked_add(usize::from(ATOMIC_OPERANDS_LEN))?)?;
            let (x, y) = ops.split_at_mut(8);
            x.copy_from_slice(&a.to_be_bytes());
            y.copy_from_slice(&b.to_be_bytes());
            hdr_len = hdr_len.checked_add(usize::from(ATOMIC_OPERANDS_LEN))?;
        }
        // Requests and non-READ responses carry no payload from the caller.
        let payload = match h.op {
            MrcOp::Read | MrcOp::CmpSwap | MrcOp::FetchAdd | MrcOp::Nak | MrcOp::AtomicResp => None,
            _ => Some(PayloadRef {
                stream: si,
                msn: d.msn,
                offset: d.offset,
                len: d.len,
                mr,
            }),
        };
        if let Some(gap) = pace_gap_ns(wire_len, self.paced_rate()) {
            // A sender behind its schedule catches up by at most the burst.
            self.pace_from = self
                .pace_next
                .max(now.saturating_sub(self.cfg.pace_burst_ns));
            self.pace_len = wire_len;
            self.pace_next = self.pace_from.saturating_add(gap);
        }
        self.pace_blocked = false;
        if let Some(dm) = self.desc_mut(dsn) {
            dm.path = path;
            dm.seq = seq;
            dm.state = DescState::Unacked;
            dm.tx_count = dm.tx_count.saturating_add(1);
        }
        if retx {
            self.stats.retransmits = self.stats.retransmits.saturating_add(1);
        } else {
            self.stats.data_sent = self.stats.data_sent.saturating_add(1);
        }
        Some(Transmit {
            path,
            src_port,
            hdr_len,
            payload,
            ect: true,
            retx,
            seq: 0,
        })
    }

    fn is_atomic_desc(&self, d: &Desc) -> bool {
        !d.resp
            && self
                .tx(usize::from(d.stream))
                .and_then(|t| t.operands(d.msn))
                .is_some()
    }

    fn pop_retx(&mut self) {
        if let Some(f) = self.flight.get_mut() {
            f.retx.pop();
        }
    }

    fn fail(&mut self) {
        self.state = ConnState::Failed;
        if let Some(f) = self.flight.get_mut() {
            f.retx.clear();
        }
    }

    /// The next completion: sends and receives, each stream in order.
    pub fn poll_completion(&mut self) -> Option<Completion> {
        let conn_failed = self.state == ConnState::Failed;
        let n = self.hi.min(S);
        for k in 0..n {
            let si = self.rr_done.wrapping_add(k) % n;
            if let Some(t) = self.tx_mut(si) {
                let failed = conn_failed || t.failed;
                // After the stream's RetryExceeded only flushes follow
                // (transport.rst, section 7), even for messages whose
                // packets were all acknowledged.
                let done = if failed && t.failed_reported {
                    None
                } else {
                    t.pop_done()
                };
                if let Some((msn, nak)) = done {
                    self.rr_done = si;
                    return Some(Completion::Send {
                        stream: si,
                        msn,
                        status: nak.map_or(SendStatus::Ok, SendStatus::of_nak),
                    });
                }
                if failed {
                    let first = !t.failed_reported;
                    if let Some(msn) = t.pop_failed() {
                        t.failed_reported = true;
                        return Some(Completion::Send {
                            stream: si,
                            msn,
                            status: if first {
                                SendStatus::RetryExceeded
                            } else {
                                SendStatus::Flushed
                            },
                        });
                    }
                }
            }
            if let Some(r) = self.rx_mut(si) {
                if let Some(done) = r.pop_complete() {
                    self.rr_done = si;
                    return Some(Completion::Recv { stream: si, done });
                }
            }
        }
        None
    }
}

/// Sorts the few values of `v` (at most one per path). Not `sort_unstable`: core's sort brings
/// a panic path for a comparison that violates a total order (`panic_on_ord_violation`) that
/// the kernel's objtool does not know as a noreturn function ("falls through to next
/// function"), for an order `u64` always has.
fn insertion_sort(v: &mut [u64]) {
    for i in 1..v.len() {
        let mut j = i;
        while j > 0 {
            match (v.get(j - 1), v.get(j)) {
                (Some(a), Some(b)) if a > b => {
                    v.swap(j - 1, j);
                    j -= 1;
                }
                _ => break,
            }
        }
    }
}

/// Time in ns `bytes` take at `kbps` (> 0): bytes x 8e6 / kbit/s.
fn bytes_ns(bytes: u64, kbps: u64) -> u64 {
    bytes.saturating_mul(8_000_000).div_ceil(kbps.max(1))
}

fn scale_q16(v: u32, q16: u32) -> u32 {
    u32::try_from((u64::from(v) * u64::from(q16)) >> 16).unwrap_or(u32::MAX)
}

const fn initial_port(seed: u32, i: u32) -> u16 {
    let h = seed.wrapping_add(i.wrapping_mul(2_654_435_761));
    // `h % PORT_SPAN` < 2^14: the cast is exact.
    PORT_BASE.saturating_add((h % PORT_SPAN) as u16)
}

#[cfg(test)]
mod tests {
    extern crate std;
    use super::super::mrc_wire::DATA_HDR_LEN;
    use super::*;

    type C = Conn<4, 256, 4, 1, 8>;
    /// [`C`] with its flight lent.
    type Lent =
        Conn<4, 256, 4, 1, 8, Aimd, [Stream<8>; 1], Option<std::boxed::Box<Flight<4, 256>>>>;

    /// A stream found once is found again from the cache, never a stale entry.
    #[test]
    fn stream_of_never_returns_a_stale_stream() {
        let mut c = Conn::<4, 256, 4, 4, 8>::new(ConnConfig::new(1));
        assert!(c.open_stream(0, 100, 1));
        assert_eq!(c.stream_of(100), Some(0));
        assert_eq!(c.stream_of(100), Some(0));
        // One open stream per QP number.
        assert!(!c.open_stream(2, 100, 1));
        assert!(c.close_stream(0));
        assert_eq!(c.stream_of(100), None);
        assert!(c.open_stream(1, 100, 1));
        assert_eq!(c.stream_of(100), Some(1));
        // Slot 0 again, for another QP: the cached (100, 1) stays right, 100 is not slot 0.
        assert!(c.open_stream(0, 300, 1));
        assert_eq!((c.stream_of(300), c.stream_of(100)), (Some(0), Some(1)));
        assert!(c.close_stream(1));
        assert_eq!((c.stream_of(100), c.stream_of(300)), (None, Some(0)));
        assert_eq!(c.stream_of(7), None);
    }

    /// A flight comes back empty, also after a loss left a lost transmission in its slots.
    #[test]
    fn a_reclaimed_flight_is_empty() {
        let mut cfg = ConnConfig::new(11);
        cfg.mss = MSS;
        cfg.paths = 1;
        cfg.flight_idle_ns = 1_000;
        let mut a = Lent::new(cfg);
        cfg.conn_id = 22;
        let mut b = Lent::new(cfg);
        assert!(a.open_stream(0, 100, 200) && b.open_stream(0, 200, 100));
        assert!(a.post(0, write_at_0x1000(4 * u32::from(MSS))).is_ok());
        assert!(a.flight_wanted());
        assert!(a
            .lend_flight(0, std::boxed::Box::new(Flight::EMPTY))
            .is_ok());
        let mut now = 0;
        let mut first = true;
        while a.outstanding(0) > 0 {
            now += 10_000;
            assert!(now < 1_000_000_000, "stuck");
            let mut buf = [0u8; MAX_HDR_LEN + MSS as usize];
            let mut to_b = std::vec::Vec::new();
            while let Some(t) = a.poll_transmit(now, &mut buf) {
                let len = t.hdr_len + t.payload.map_or(0, |p| usize::from(p.len));
                to_b.push(buf[..len].to_vec());
            }
            for (i, pkt) in to_b.iter().enumerate() {
                // The second packet of the first round is lost: a SACK gap declares it.
                if first && i == 1 {
                    continue;
                }
                let _ = b.on_packet(now, pkt, false, 0, 0);
            }
            first &= to_b.is_empty();
            while let Some(t) = b.poll_transmit(now, &mut buf) {
                let _ = a.on_packet(now, &buf[..t.hdr_len], false, 0, 0);
            }
            a.on_timer(now);
            while a.poll_completion().is_some() {}
            while b.poll_completion().is_some() {}
        }
        assert!(a.stats.retransmits > 0);
        let f = a.flight.get().map(|f| f.slots[0].clone());
        assert!(
            f.is_some_and(|w| w != SlotWindow::EMPTY),
            "the slots were used"
        );
        let back = a.reclaim_flight(now + 1_000_000).expect("idle: given back");
        assert!(back
            .descs
            .iter()
            .all(|d| *d == super::super::flight::FREE_DESC));
        assert!(back.retx.is_empty());
        assert!(back.slots.iter().all(|w| *w == SlotWindow::EMPTY));
        assert!(!a.has_flight() && a.next_deadline().is_none());
    }
    const MSS: u16 = 256;
    const WIRE: usize = 512;

    fn pair() -> (C, C) {
        pair_with(|_| {})
    }

    /// A WRITE of `len` bytes to 0x1000 under rkey 5 (tests/common's `write`, which
    /// the crate's own unit tests cannot reach).
    fn write_at_0x1000(len: u32) -> MsgDesc {
        MsgDesc {
            op: MrcOp::Write,
            len,
            va: 0x1000,
            rkey: 5,
            imm: 0,
            se: false,
        }
    }

    /// Two connected connections, `tune` applied to both configurations.
    fn pair_with(tune: impl Fn(&mut ConnConfig)) -> (C, C) {
        let mut cfg = ConnConfig::new(11);
        cfg.mss = MSS;
        cfg.paths = 4;
        tune(&mut cfg);
        let mut a = C::new(cfg);
        cfg.conn_id = 22;
        let mut b = C::new(cfg);
        assert!(a.open_stream(0, 100, 200));
        assert!(b.open_stream(0, 200, 100));
        (a, b)
    }

    #[derive(Clone, Copy)]
    struct Pkt {
        at: u64,
        to_b: bool,
        len: usize,
        buf: [u8; DATA_HDR_LEN + MSS as usize],
    }

    /// Sends `msgs` messages of `pkts` packets from `a` to `b` without loss,
    /// `b` giving rate hint `hint` (kbit/s, 0: none); DATA takes 1 us, an
    /// ACK of path `i` `ack_ns[i]`. Returns the time the last send
    /// completion arrived.
    fn transfer(
        a: &mut C,
        b: &mut C,
        mut now: u64,
        (msgs, pkts): (u32, u32),
        ack_ns: [u64; 4],
        hint: u32,
    ) -> u64 {
        let mut wire: [Option<Pkt>; WIRE] = [None; WIRE];
        let (mut posted, mut done) = (0, 0);
        while done < msgs {
            assert!(now < 1_000_000_000, "stuck after {done} messages");
            while posted < msgs {
                let m = write_at_0x1000(pkts * u32::from(MSS));
                if a.post(0, m).is_err() {
                    break;
                }
                posted += 1;
            }
            for (to_b, c) in [(true, &mut *a), (false, &mut *b)] {
                let mut p = Pkt {
                    at: 0,
                    to_b,
                    len: 0,
                    buf: [0; DATA_HDR_LEN + MSS as usize],
                };
                while let Some(t) = c.poll_transmit(now, &mut p.buf) {
                    p.len = t.hdr_len + t.payload.map_or(0, |d| usize::from(d.len));
                    let ack = usize::from(t.path);
                    p.at = now + if to_b { 1_000 } else { ack_ns[ack] };
                    let slot = wire.iter_mut().find(|w| w.is_none()).expect("wire full");
                    *slot = Some(p);
                }
            }
            let arrival = wire.iter().flatten().map(|p| p.at).min();
            let timer = [a.next_deadline(), b.next_deadline()]
                .into_iter()
                .flatten()
                .min();
            now = match (arrival, timer) {
                (Some(x), Some(y)) => x.min(y),
                (x, y) => x.or(y).expect("nothing in flight and no timer"),
            }
            .max(now);
            for w in wire.iter_mut() {
                if let Some(p) = w.filter(|p| p.at <= now) {
                    *w = None;
                    let c = if p.to_b { &mut *b } else { &mut *a };
                    let buf = p.buf.get(..p.len).expect("length");
                    assert!(c.on_packet(now, buf, false, 50_000, hint).is_ok());
                }
            }
            a.on_timer(now);
            b.on_timer(now);
            while let Some(c) = a.poll_completion() {
                assert!(matches!(
                    c,
                    Completion::Send {
                        status: SendStatus::Ok,
                        ..
                    }
                ));
                done += 1;
            }
            while b.poll_completion().is_some() {}
        }
        now
    }

    /// An RTO that fires while the ACKs are only late (a descheduled
    /// sender): the ACKs that arrive before the retransmissions leave prove
    /// the originals received, so nothing is sent again and the paths'
    /// windows come back.
    /// Returns the retransmissions sent after the late ACKs and the RTOs
    /// found spurious, with `late_acks` on or off.
    fn spurious_rto(late_acks: bool) -> (u32, u64) {
        // Every ACK held back is a silence (section 5.5.2): without its probes every path
        // times out.
        let (mut a, mut b) = pair_with(|c| {
            c.late_acks = late_acks;
            c.silence_probes = false;
        });
        let m = write_at_0x1000(8 * u32::from(MSS));
        assert!(a.post(0, m).is_ok());
        let mut buf = [0u8; DATA_HDR_LEN + MSS as usize];
        let mut acks = std::vec::Vec::new();
        let mut sent = 0;
        // Everything the windows allow reaches b; b's ACKs are held back.
        while let Some(t) = a.poll_transmit(0, &mut buf) {
            let len = t.hdr_len + t.payload.map_or(0, |d| usize::from(d.len));
            assert!(b.on_packet(1_000, &buf[..len], false, 50_000, 0).is_ok());
            sent += 1;
        }
        assert!(sent >= 4, "{sent} packets");
        let mut ack = [0u8; DATA_HDR_LEN + MSS as usize];
        while let Some(t) = b.poll_transmit(1_000, &mut ack) {
            acks.push(ack[..t.hdr_len].to_vec());
        }
        assert!(!acks.is_empty());
        // Every path with packets in flight times out.
        let rto = a.next_deadline().expect("an RTO is armed");
        a.on_timer(rto);
        let timeouts: u64 = (0..4)
            .filter_map(|i| a.path_info(i))
            .map(|p| p.2.timeouts)
            .sum();
        assert!(timeouts > 0);
        // The held ACKs arrive before anything is sent again.
        for ack in &acks {
            assert!(a.on_packet(rto + 1, ack, false, 50_000, 0).is_ok());
        }
        let spurious: u64 = (0..4)
            .filter_map(|i| a.path_info(i))
            .map(|p| p.2.spurious_rtos)
            .sum();
        assert_eq!(spurious, if late_acks { timeouts } else { 0 });
        let mut resent = 0;
        while let Some(t) = a.poll_transmit(rto + 2, &mut buf) {
            if t.retx {
                resent += 1;
            }
        }
        if late_acks {
            assert_eq!(a.stats.retransmits, 0);
            assert!(matches!(
                a.poll_completion(),
                Some(Completion::Send {
                    status: SendStatus::Ok,
                    ..
                })
            ));
        }
        (resent, spurious)
    }

    /// `poll_control` hands out a receiver's ACKs but never DATA: a connection that owes an
    /// ACK and has data of its own to send yields the ACK, then nothing, and the data is still
    /// there for `poll_transmit`.
    #[test]
    fn poll_control_yields_acks_and_never_data() {
        let (mut a, mut b) = pair_with(|_| {});
        let mut buf = [0u8; DATA_HDR_LEN + MSS as usize];
        assert!(a.post(0, write_at_0x1000(2 * u32::from(MSS))).is_ok());
        assert!(b.post(0, write_at_0x1000(u32::from(MSS))).is_ok());
        let t = a.poll_transmit(0, &mut buf).expect("a sends DATA");
        let len = t.hdr_len + t.payload.map_or(0, |d| usize::from(d.len));
        assert!(b.on_packet(1_000, &buf[..len], false, 50_000, 0).is_ok());
        let mut ack = [0u8; DATA_HDR_LEN + MSS as usize];
        let t = b.poll_control(1_000, &mut ack).expect("b owes an ACK");
        assert!(t.payload.is_none());
        assert!(matches!(parse(&ack[..t.hdr_len]), Ok(MrcPacket::Ack(_))));
        assert!(b.poll_control(1_000, &mut ack).is_none());
        // b's own message is untouched: DATA comes from poll_transmit.
        let t = b
            .poll_transmit(1_000, &mut ack)
            .expect("b's DATA is still due");
        assert!(t.payload.is_some());
    }

    #[test]
    fn insertion_sort_orders_few_values() {
        for v in [
            [5u64, 1, 4, 1, 9, 2, 6, 0],
            [0; 8],
            [8, 7, 6, 5, 4, 3, 2, 1],
        ] {
            for n in 0..=v.len() {
                let mut a = v;
                insertion_sort(&mut a[..n]);
                let mut b = v;
                b[..n].sort_unstable();
                assert_eq!(a, b, "{v:?} first {n}");
            }
        }
    }

    #[test]
    fn late_acks_cancel_a_spurious_rto() {
        assert_eq!(
            spurious_rto(true).0,
            0,
            "retransmissions after the late ACKs"
        );
        // Without them every packet in flight at the RTO is sent again.
        assert!(spurious_rto(false).0 >= 4);
    }

    /// Sends what `a`'s windows allow at `now`, handing each packet to `deliver` with its path;
    /// returns the packets and how many of them were retransmissions.
    fn send_all(a: &mut C, now: u64, mut deliver: impl FnMut(usize, &[u8])) -> (u32, u32) {
        let mut buf = [0u8; DATA_HDR_LEN + MSS as usize];
        let (mut sent, mut retx) = (0, 0);
        while let Some(t) = a.poll_transmit(now, &mut buf) {
            let len = t.hdr_len + t.payload.map_or(0, |d| usize::from(d.len));
            deliver(usize::from(t.path), &buf[..len]);
            sent += 1;
            retx += u32::from(t.retx);
        }
        (sent, retx)
    }

    /// The ACKs `b` owes at `now`.
    fn acks_of(b: &mut C, now: u64) -> std::vec::Vec<std::vec::Vec<u8>> {
        let mut ack = [0u8; DATA_HDR_LEN + MSS as usize];
        let mut acks = std::vec::Vec::new();
        while let Some(t) = b.poll_transmit(now, &mut ack) {
            acks.push(ack[..t.hdr_len].to_vec());
        }
        acks
    }

    fn path_sum(a: &C, f: impl Fn(&PathStats) -> u64) -> u64 {
        (0..4).filter_map(|i| a.path_info(i)).map(|p| f(&p.2)).sum()
    }

    /// Section 5.5.2: every packet reached the receiver, its ACKs are only late. The paths'
    /// timeouts find the connection silent: nothing is declared lost, at most one probe per
    /// path leaves, and the late ACKs complete the message with no window collapsed.
    #[test]
    fn a_silent_connection_probes_instead_of_declaring_its_window_lost() {
        let (mut a, mut b) = pair_with(|_| {});
        assert!(a.post(0, write_at_0x1000(8 * u32::from(MSS))).is_ok());
        let cwnd: std::vec::Vec<u32> = (0..4).map(|i| a.paths[i].cc.cwnd()).collect();
        let (sent, _) = send_all(&mut a, 0, |_, p| {
            assert!(b.on_packet(1_000, p, false, 50_000, 0).is_ok());
        });
        assert!(sent >= 4, "{sent} packets");
        let acks = acks_of(&mut b, 1_000);
        assert!(!acks.is_empty());
        let rto = a.next_deadline().expect("an RTO is armed");
        a.on_timer(rto);
        assert_eq!(path_sum(&a, |p| p.timeouts), 0);
        let silences = path_sum(&a, |p| p.silences);
        assert!(silences > 0);
        assert_eq!(path_sum(&a, |p| p.rto_losses), 0);
        // The probes (new data beyond the windows, else the newest packet again) reach b too.
        let (probes, _) = send_all(&mut a, rto + 1, |_, p| {
            assert!(b.on_packet(rto + 2, p, false, 50_000, 0).is_ok());
        });
        assert!(
            u64::from(probes) <= silences,
            "{probes} probes, {silences} silences"
        );
        for ack in acks.iter().chain(acks_of(&mut b, rto + 2).iter()) {
            assert!(a.on_packet(rto + 3, ack, false, 50_000, 0).is_ok());
        }
        while send_all(&mut a, rto + 4, |_, p| {
            assert!(b.on_packet(rto + 5, p, false, 50_000, 0).is_ok());
        })
        .0 > 0
        {
            for ack in acks_of(&mut b, rto + 5) {
                assert!(a.on_packet(rto + 6, &ack, false, 50_000, 0).is_ok());
            }
        }
        assert!(matches!(
            a.poll_completion(),
            Some(Completion::Send {
                status: SendStatus::Ok,
                ..
            })
        ));
        assert!(a.stats.retransmits <= silences);
        for (i, w) in cwnd.iter().enumerate() {
            assert!(a.paths[i].cc.cwnd() >= *w, "path {i}'s window collapsed");
        }
    }

    /// A peer that never answers: each path's silent timeouts back off, [`MAX_SILENCES`] of
    /// them, then its timeouts are RTOs again and `max_retx` fails the connection (section
    /// 5.5.2), its message with it.
    #[test]
    fn a_peer_silent_for_max_retx_timeouts_fails_the_connection() {
        let (mut a, _b) = pair_with(|_| {});
        assert!(a.post(0, write_at_0x1000(8 * u32::from(MSS))).is_ok());
        send_all(&mut a, 0, |_, _| {});
        let mut last = 0;
        for _ in 0..10_000 {
            if a.state == ConnState::Failed {
                break;
            }
            let t = a.next_deadline().expect("a timer is armed");
            assert!(t >= last, "timers run backwards");
            last = t;
            a.on_timer(t);
            send_all(&mut a, t, |_, _| {});
        }
        assert_eq!(a.state, ConnState::Failed);
        assert!(path_sum(&a, |p| p.timeouts) > 0);
        let most = (0..4)
            .filter_map(|i| a.path_info(i))
            .map(|p| p.2.silences)
            .max();
        assert_eq!(most, Some(u64::from(MAX_SILENCES)));
        assert!(matches!(
            a.poll_completion(),
            Some(Completion::Send {
                status: SendStatus::RetryExceeded,
                ..
            })
        ));
    }

    /// A pair where `a` sent 8 packets' worth of WRITE in one batch at time 0: path 0's were
    /// lost, the other paths' reached `b` at 1 us (their ACKs not yet taken).
    fn path_0_lost() -> (C, C) {
        let (mut a, mut b) = pair_with(|_| {});
        assert!(a.post(0, write_at_0x1000(8 * u32::from(MSS))).is_ok());
        let (sent, _) = send_all(&mut a, 0, |path, p| {
            if path != 0 {
                assert!(b.on_packet(1_000, p, false, 50_000, 0).is_ok());
            }
        });
        assert!(sent >= 4);
        assert!(a.paths[0].inflight_pkts() > 0);
        (a, b)
    }

    /// The peer answers on the other paths for packets sent after path 0's: path 0's
    /// timeout is an RTO, not a silence (section 5.5.2), and its packets are sent again.
    #[test]
    fn a_path_timing_out_while_the_others_are_heard_is_an_rto() {
        let (mut a, mut b) = path_0_lost();
        // More data, sent later, on the other paths only, is acknowledged.
        assert!(a.post(0, write_at_0x1000(4 * u32::from(MSS))).is_ok());
        for ack in acks_of(&mut b, 2_000) {
            assert!(a.on_packet(3_000, &ack, false, 50_000, 0).is_ok());
        }
        send_all(&mut a, 4_000, |path, p| {
            if path != 0 {
                assert!(b.on_packet(5_000, p, false, 50_000, 0).is_ok());
            }
        });
        for ack in acks_of(&mut b, 6_000) {
            assert!(a.on_packet(7_000, &ack, false, 50_000, 0).is_ok());
        }
        let t = a.next_deadline().expect("path 0's RTO is armed");
        a.on_timer(t);
        assert_eq!(a.paths[0].stats.timeouts, 1);
        assert_eq!(a.paths[0].stats.silences, 0);
        assert!(a.paths[0].stats.rto_losses > 0);
        let (_, retx) = send_all(&mut a, t + 1, |_, _| {});
        assert!(retx > 0);
    }

    /// One batch leaves at one send time (the kernel stamps a batch with one `now`). The
    /// other paths' packets of that batch are acknowledged, path 0's are not: those ACKs were
    /// sent within the reordering window of path 0's oldest packet, so they say nothing about
    /// it and path 0's timeout is a silence, not an RTO (section 5.5.2).
    #[test]
    fn acks_within_the_reordering_window_leave_a_timeout_silent() {
        let (mut a, mut b) = path_0_lost();
        for ack in acks_of(&mut b, 1_000) {
            assert!(a.on_packet(1_000, &ack, false, 50_000, 0).is_ok());
        }
        assert!(a.acked_sent().is_some(), "the other paths were heard");
        let t = a.next_deadline().expect("path 0's RTO is armed");
        a.on_timer(t);
        assert_eq!(a.paths[0].stats.timeouts, 0);
        assert_eq!(a.paths[0].stats.silences, 1);
        assert_eq!(a.paths[0].stats.rto_losses, 0);
    }

    /// The ACK-train wait (section 5.5.2): path 0's RTO falls just after other paths' ACKs
    /// for packets sent well after path 0's oldest arrived (so it is not a silence). With
    /// `ack_train_ns` the deadline waits until that long after their arrival (no longer than
    /// that past the RTO), so path 0's own ACKs, late members of the same train, arriving in
    /// between find nothing declared lost; without it the same timeline declares them lost.
    #[test]
    fn an_rto_waits_out_the_ack_train_it_falls_in() {
        const TRAIN: u64 = 5_000_000;
        let split =
            |acks: std::vec::Vec<std::vec::Vec<u8>>| -> (std::vec::Vec<_>, std::vec::Vec<_>) {
                acks.into_iter().partition(|a| a[2] == 0)
            };
        for train in [0, TRAIN] {
            let (mut a, mut b) = pair_with(|c| c.ack_train_ns = train);
            assert!(a.post(0, write_at_0x1000(8 * u32::from(MSS))).is_ok());
            send_all(&mut a, 0, |_, p| {
                assert!(b.on_packet(1_000, p, false, 50_000, 0).is_ok());
            });
            let (mut held, others) = split(acks_of(&mut b, 1_000));
            assert!(!held.is_empty() && !others.is_empty());
            for ack in &others {
                assert!(a.on_packet(1_000, ack, false, 50_000, 0).is_ok());
            }
            assert!(a.paths[0].inflight_pkts() > 0);
            // More data, sent later; the other paths' ACKs for it come just before path 0's RTO.
            assert!(a.post(0, write_at_0x1000(4 * u32::from(MSS))).is_ok());
            send_all(&mut a, 10_000, |_, p| {
                assert!(b.on_packet(11_000, p, false, 50_000, 0).is_ok());
            });
            let (held2, others) = split(acks_of(&mut b, 11_000));
            held.extend(held2);
            let mut plain = a.cfg;
            plain.ack_train_ns = 0;
            let kept = core::mem::replace(&mut a.cfg, plain);
            let rto = a
                .rto_deadline(0, a.rto_floors())
                .expect("path 0's RTO is armed");
            a.cfg = kept;
            for ack in &others {
                assert!(a.on_packet(rto - 1_000, ack, false, 50_000, 0).is_ok());
            }
            let t = a
                .rto_deadline(0, a.rto_floors())
                .expect("path 0's RTO is armed");
            assert_eq!(t, if train == 0 { rto } else { rto - 1_000 + TRAIN });
            a.on_timer(rto);
            for ack in &held {
                assert!(a.on_packet(rto + 1_000_000, ack, false, 50_000, 0).is_ok());
            }
            a.on_timer(t.max(rto + 1_000_000));
            let rto_losses = a.paths[0].stats.rto_losses;
            if train == 0 {
                assert!(
                    rto_losses > 0,
                    "without the wait path 0's packets are declared lost"
                );
            } else {
                assert_eq!(rto_losses, 0);
                assert_eq!(a.paths[0].inflight_pkts(), 0, "path 0's ACKs settled it");
            }
        }
    }

    /// The kernel's timer tick.
    const TICK: u64 = 5_000_000;

    /// Data packets a sends at the rate hint `hint` (kbit/s) with pacer
    /// credit `burst`, polled once every 5 ms tick (a kernel timer's
    /// granularity) for ticks 0..=100, none in 41..=60 (a descheduled
    /// sender): at tick 0, and in all later ticks. The lossless network
    /// delivers and acknowledges within the tick, so the windows never
    /// limit. Asserts that no later poll round sent more than one packet
    /// plus `burst` worth at the rate.
    fn coarse_polls(burst: u64, hint: u32) -> (u64, u64) {
        let (mut a, mut b) = pair_with(|c| {
            c.pace_burst_ns = burst;
            c.init_cwnd_path = 256;
            c.init_cwnd_conn = 1024;
        });
        let gap = pace_gap_ns(u32::from(MSS), hint).expect("a hint paces");
        let mut buf = [0u8; DATA_HDR_LEN + MSS as usize];
        let mut ack = [0u8; DATA_HDR_LEN + MSS as usize];
        let (mut first, mut sent) = (0u64, 0u64);
        // Tick 0 sends a window unpaced: the hint comes with its ACKs.
        for k in (0..=40).chain(61..=100) {
            let now = k * TICK;
            let mut round = 0;
            while a.post(0, write_at_0x1000(64 * u32::from(MSS))).is_ok() {}
            while let Some(t) = a.poll_transmit(now, &mut buf) {
                assert!(!t.retx && t.payload.is_some());
                round += 1;
                let len = t.hdr_len + t.payload.map_or(0, |d| usize::from(d.len));
                assert!(b.on_packet(now, &buf[..len], false, 50_000, hint).is_ok());
            }
            while let Some(t) = b.poll_transmit(now, &mut ack) {
                assert!(a
                    .on_packet(now, &ack[..t.hdr_len], false, 50_000, 0)
                    .is_ok());
            }
            while a.poll_completion().is_some() {}
            while b.poll_completion().is_some() {}
            if k > 0 {
                assert!(round <= 1 + burst / gap, "{round} packets at tick {k}");
                sent += round;
            } else {
                first = round;
            }
        }
        (first, sent)
    }

    /// Section 6.4, pacer credit: a sender polled only every 5 ms (the
    /// kernel's timer tick) keeps its paced rate with a tick of credit;
    /// strict pacing lets one packet out per poll. The first window leaves
    /// unpaced (no hint yet) and is paid back in part (burst payback: the
    /// bytes in flight when the first hint arrives).
    #[test]
    fn pacer_credit_keeps_the_rate_under_coarse_polls() {
        // 10 Mbit/s: (256 + 126) bytes every 305.6 us, 16.4 packets a tick.
        let gap = pace_gap_ns(u32::from(MSS), 10_000).unwrap();
        let ideal = 80 * TICK / gap;
        let (first, sent) = coarse_polls(TICK, 10_000);
        assert!(first > 16, "the first window: {first} packets");
        // The later ticks keep the rate but for at least a tick's worth
        // paid back (without the payback: ideal - 1 or more).
        assert!(
            first + sent + 1 >= ideal && sent + 16 < ideal,
            "{first} + {sent} packets in 81 ticks, {ideal} at the rate in 80"
        );
        let (first, sent) = coarse_polls(0, 10_000);
        assert!(
            sent < 80 && first + sent > 80,
            "{first} + {sent} packets with strict pacing"
        );
    }

    #[test]
    fn path_windows_grow_and_share_new_data() {
        let mss = u32::from(MSS);
        // Window-limited (no hint), then paced at 1 Gbit/s (about 4
        // packets per RTT: the windows never limit) with path 0's window
        // already grown by 60 MSS more than the others.
        for hint in [0, 1_000_000] {
            let (mut a, mut b) = pair();
            if hint != 0 {
                a.paths[0].cc.on_ack(60 * mss);
            }
            let before = [0, 1, 2, 3].map(|i| a.path_rtt(i).unwrap().0);
            // 32 messages of 8 packets: 64 packets a path.
            transfer(&mut a, &mut b, 0, (32, 8), [10_000; 4], hint);
            for (i, w) in before.iter().enumerate() {
                let (_, _, st) = a.path_info(i).unwrap();
                let (cwnd, ..) = a.path_rtt(i).unwrap();
                // Slow start (section 6.2): every acknowledged byte of the
                // path grew its window.
                let grown = (w + u32::try_from(st.bytes).unwrap()).min(256 * mss);
                let what = (cwnd, st.retransmits, st.timeouts);
                assert_eq!(what, (grown, 0, 0), "hint {hint}: path {i}");
                // New data spread evenly although the windows grew
                // (section 6.1: fewest bytes in flight, not most room).
                let sent = st.sent;
                assert!(
                    (60..=68).contains(&sent),
                    "hint {hint}: path {i} carried {sent}"
                );
            }
            assert!(a.conn_window().0 > 8 * mss);
        }
    }

    /// The delay signal (`delay_target_ns`): a path whose ACKs start taking
    /// 400 us instead of 10 us has its window cut, as on ECN; with the target
    /// 0 (the default) nothing happens, as the window grows on.
    #[test]
    fn delay_target_cuts_a_queued_path() {
        let mut cwnd = [0u32; 2];
        for (i, target) in [0u64, 100_000].into_iter().enumerate() {
            let (mut a, mut b) = pair_with(|cfg| {
                cfg.delay_target_ns = target;
                // An RTO well above the slow ACKs' 400 us: the path keeps
                // its RTT samples (a timed-out transmission gives none).
                cfg.rto_min_ns = 2_000_000;
            });
            let now = transfer(&mut a, &mut b, 0, (8, 8), [10_000; 4], 0);
            assert_eq!(a.stats.delay_signals, 0, "target {target}: no queue yet");
            transfer(
                &mut a,
                &mut b,
                now,
                (32, 8),
                [400_000, 10_000, 10_000, 10_000],
                0,
            );
            cwnd[i] = a.path_rtt(0).unwrap().0;
            let signals = a.stats.delay_signals;
            if target == 0 {
                assert_eq!(signals, 0);
            } else {
                assert!(signals > 0, "no delay signal");
            }
            // The fast paths never cross the target.
            assert_eq!(a.path_info(1).unwrap().2.timeouts, 0);
        }
        assert!(
            cwnd[1] < cwnd[0],
            "path 0's window: {} with the target, {} without",
            cwnd[1],
            cwnd[0]
        );
    }

    #[test]
    fn new_route_waits_for_the_other_paths_rto() {
        let (mut a, mut b) = pair();
        // Path 0's route is slow (its ACKs take 400 us), the others fast.
        let acks = [400_000, 10_000, 10_000, 10_000];
        let now = transfer(&mut a, &mut b, 0, (8, 8), acks, 0);
        let c = a.cfg;
        let slow = a.paths[0]
            .rtt
            .rto(c.rto_init_ns, c.rto_min_ns, c.rto_max_ns);
        assert!(slow > 400_000);
        assert_eq!(a.new_route_rto_floor(), slow);
        a.repath(1);
        assert!(a.paths[1].new_route());
        assert_eq!(a.new_route_rto_floor(), slow);
        // A packet sent on the new route is not declared lost after the
        // path's own (fast) RTO, only after the slow path's.
        let m = write_at_0x1000(16 * u32::from(MSS));
        a.post(0, m).unwrap();
        let mut buf = [0u8; DATA_HDR_LEN];
        while a.poll_transmit(now, &mut buf).is_some() {}
        assert!(a.paths[1].inflight_pkts() > 0);
        let own = a.paths[1]
            .rtt
            .rto(c.rto_init_ns, c.rto_min_ns, c.rto_max_ns);
        assert!(own < slow / 2);
        // Nothing sent since is acknowledged: the timeout finds the connection silent
        // (section 5.5.2), a probe instead of an RTO; either way it fires only then.
        let fired = |a: &C| {
            let s = a.paths[1].stats;
            s.timeouts + s.silences
        };
        a.on_timer(now + own + 1);
        assert_eq!(fired(&a), 0);
        a.on_timer(now + slow);
        assert_eq!(fired(&a), 1);
        assert!(a.paths[1].new_route());
    }

    /// The paths 16 packets of new data leave on, with windows that never stop a run.
    fn first_paths(path_run: u8) -> std::vec::Vec<u8> {
        let (mut a, _b) = pair_with(|c| {
            c.path_run = path_run;
            c.init_cwnd_path = 16;
            c.init_cwnd_conn = 64;
        });
        assert!(a.post(0, write_at_0x1000(16 * u32::from(MSS))).is_ok());
        let mut buf = [0u8; DATA_HDR_LEN + MSS as usize];
        (0..16)
            .map(|_| a.poll_transmit(0, &mut buf).expect("a packet").path)
            .collect()
    }

    #[test]
    fn new_data_runs_on_one_path_up_to_path_run() {
        // Default: every packet on the least loaded path, so never twice in a row.
        let one = first_paths(1);
        assert!(one.windows(2).all(|w| w[0] != w[1]), "{one:?}");
        // Runs of 4: each path once, four packets in a row.
        let four = first_paths(4);
        for run in four.chunks(4) {
            assert!(run.iter().all(|&p| p == run[0]), "{four:?}");
        }
        let mut firsts: std::vec::Vec<u8> = four.chunks(4).map(|r| r[0]).collect();
        firsts.sort_unstable();
        assert_eq!(firsts, [0, 1, 2, 3], "{four:?}");
    }
}
