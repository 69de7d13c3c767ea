//! One simulated RoCEv2 endpoint: a QP from the protocol core plus the
//! memory, queues and packet I/O that the kernel glue provides for real.

use metaroce_proto::icrc::{IPV4_HDR_LEN, UDP_HDR_LEN};
use metaroce_proto::offload::{roce_rx, Integrity, SoftIntegrity};
use metaroce_proto::packet::{build, wire_len, PayloadRef};
use metaroce_proto::qp::{ConfigError, Qp, QpConfig, RxOutcome};
use metaroce_proto::req::PostError;
use metaroce_proto::resp::{AccessError, MemAccess, RecvQueue};
use metaroce_proto::wr::{Access, AtomicOp, Place, RecvWqe, SendWqe, SendWr};
use std::collections::{HashMap, VecDeque};
use std::ops::Range;

/// Responder resources per QP (`max_dest_rd_atomic`).
pub const RESOURCES: usize = 16;

/// RoCEv2 UDP destination port.
pub const ROCE_PORT: u16 = 4791;

/// A single memory region registered for remote access.
#[derive(Clone, Debug)]
pub struct Memory {
    /// Its R_Key.
    pub rkey: u32,
    /// Virtual address of `data[0]`.
    pub base: u64,
    /// Contents.
    pub data: Vec<u8>,
    /// Rights granted to remote peers.
    pub access: Access,
    /// Atomics executed (to check exactly-once execution).
    pub atomics: u64,
    /// Make the next atomic fail with a remote operational error.
    pub fail_next_atomic: bool,
    /// FLUSHes executed.
    pub flushes: u64,
}

impl Memory {
    /// Byte range of `va..va+len` in `data`, if the region covers it.
    pub fn range(&self, va: u64, len: u32) -> Option<Range<usize>> {
        let start = usize::try_from(va.checked_sub(self.base)?).ok()?;
        let end = start.checked_add(len as usize)?;
        (end <= self.data.len()).then_some(start..end)
    }

    fn checked(
        &self,
        rkey: u32,
        va: u64,
        len: u32,
        access: Access,
    ) -> Result<Range<usize>, AccessError> {
        if rkey != self.rkey || !self.access.contains(access) {
            return Err(AccessError::Access);
        }
        self.range(va, len).ok_or(AccessError::Access)
    }
}

impl MemAccess for Memory {
    fn check(&mut self, rkey: u32, va: u64, len: u32, access: Access) -> Result<(), AccessError> {
        self.checked(rkey, va, len, access).map(|_| ())
    }

    fn atomic(&mut self, rkey: u32, va: u64, op: AtomicOp) -> Result<u64, AccessError> {
        let r = self.checked(rkey, va, 8, Access::ATOMIC)?;
        if std::mem::take(&mut self.fail_next_atomic) {
            return Err(AccessError::Operational);
        }
        let cell: &mut [u8; 8] = (&mut self.data[r])
            .try_into()
            .map_err(|_| AccessError::Access)?;
        let orig = u64::from_le_bytes(*cell);
        let new = match op {
            AtomicOp::CmpSwap { compare, swap } => {
                if orig == compare {
                    swap
                } else {
                    orig
                }
            }
            AtomicOp::FetchAdd { add } => orig.wrapping_add(add),
        };
        *cell = new.to_le_bytes();
        self.atomics += 1;
        Ok(orig)
    }
    fn atomic_write(&mut self, rkey: u32, va: u64, value: [u8; 8]) -> Result<(), AccessError> {
        let r = self.checked(rkey, va, 8, Access::WRITE)?;
        self.data[r].copy_from_slice(&value);
        self.atomics += 1;
        Ok(())
    }

    fn flush(
        &mut self,
        rkey: u32,
        va: u64,
        len: u32,
        whole_mr: bool,
        access: Access,
    ) -> Result<(), AccessError> {
        if whole_mr {
            if rkey != self.rkey || !self.access.contains(access) {
                return Err(AccessError::Access);
            }
        } else {
            self.checked(rkey, va, len, access)?;
        }
        self.flushes += 1;
        Ok(())
    }
}

/// The receive queue: posted WQEs and their buffers.
#[derive(Clone, Debug, Default)]
pub struct RecvBufs {
    /// Posted, not yet taken by the responder.
    pub posted: VecDeque<RecvWqe>,
    /// Buffer of every WQE ever posted, by id.
    pub bufs: HashMap<u64, Vec<u8>>,
    next_id: u64,
}

impl RecvBufs {
    /// Posts a receive buffer of `len` bytes; returns its id.
    pub fn post(&mut self, len: u32) -> u64 {
        let id = self.next_id;
        self.next_id += 1;
        self.bufs.insert(id, vec![0; len as usize]);
        self.posted.push_back(RecvWqe { id, len });
        id
    }
}

impl RecvQueue for RecvBufs {
    fn take(&mut self) -> Option<RecvWqe> {
        self.posted.pop_front()
    }
}

/// A simulated host: QP, send queue with per-slot local buffers, one memory
/// region and a receive queue.
pub struct Endpoint {
    /// The protocol core.
    pub qp: Qp<RESOURCES>,
    /// Send queue storage (owned here, as the kernel would).
    pub sq: Vec<SendWqe>,
    /// Local data of each send queue slot: SEND/WRITE source, READ/atomic
    /// destination.
    pub local: Vec<Vec<u8>>,
    /// Remotely accessible memory.
    pub mem: Memory,
    /// Receive queue.
    pub rq: RecvBufs,
    posted: u32,
    ip: [u8; 4],
    peer_ip: [u8; 4],
}

impl Endpoint {
    /// Creates an endpoint with IPv4 address `ip` talking to `peer_ip`.
    pub fn new(
        cfg: QpConfig,
        mem: Memory,
        ip: [u8; 4],
        peer_ip: [u8; 4],
    ) -> Result<Self, ConfigError> {
        let depth = cfg.sq_depth as usize;
        Ok(Endpoint {
            qp: Qp::new(cfg)?,
            sq: vec![SendWqe::default(); depth],
            local: vec![Vec::new(); depth],
            mem,
            rq: RecvBufs::default(),
            posted: 0,
            ip,
            peer_ip,
        })
    }

    /// Posts `wr` with its local buffer (`wr.len` bytes); returns the send
    /// queue slot it went to.
    pub fn post_send(&mut self, wr: SendWr, local: Vec<u8>) -> Result<usize, PostError> {
        self.qp.post_send(&mut self.sq, wr)?;
        let slot = self.posted as usize & (self.sq.len() - 1);
        self.local[slot] = local;
        self.posted = self.posted.wrapping_add(1);
        Ok(slot)
    }

    /// Local buffer of the WQE in `slot`.
    pub fn local(&self, slot: usize) -> &[u8] {
        &self.local[slot]
    }

    /// Produces the next packet as IPv4/UDP/RoCEv2 bytes with a valid ICRC.
    pub fn poll_packet(&mut self, now: u64) -> Result<Option<Vec<u8>>, String> {
        let Some(d) = self.qp.poll_tx(now, &mut self.sq) else {
            return Ok(None);
        };
        let payload: &[u8] = match d.payload {
            PayloadRef::None => &[],
            PayloadRef::Sq { slot, offset, len } => self.local[slot as usize]
                .get(offset as usize..(offset + len) as usize)
                .ok_or("payload beyond local buffer")?,
            PayloadRef::Mr { rkey, va, len } => {
                let r = self
                    .mem
                    .checked(rkey, va, len, Access::READ)
                    .map_err(|_| "READ response outside the MR")?;
                &self.mem.data[r]
            }
        };
        let ib_len = wire_len(&d.hdr, payload.len()).ok_or("length overflow")?;
        let mut pkt = vec![0u8; IPV4_HDR_LEN + UDP_HDR_LEN + ib_len];
        let (hdrs, ib) = pkt.split_at_mut(IPV4_HDR_LEN + UDP_HDR_LEN);
        build(&d.hdr, payload, ib).map_err(|e| format!("build: {e:?}"))?;
        let (ip, udp) = hdrs.split_at_mut(IPV4_HDR_LEN);
        ipv4_header(
            ip,
            self.ip,
            self.peer_ip,
            (IPV4_HDR_LEN + UDP_HDR_LEN + ib_len) as u16,
        );
        udp.copy_from_slice(&udp_header(
            0xC000 | (d.hdr.bth.dest_qp as u16 & 0x3FFF),
            (UDP_HDR_LEN + ib_len) as u16,
        ));
        // A software NIC: the ICRC is computed here (offload.rs).
        SoftIntegrity
            .seal_icrc(ip, udp, ib)
            .map_err(|e| format!("icrc: {e:?}"))?;
        Ok(Some(pkt))
    }

    /// Verifies, parses and processes a received packet and performs the
    /// data placement the core asks for.
    pub fn receive_packet(&mut self, now: u64, pkt: &[u8]) -> Result<RxOutcome, String> {
        let (ip, rest) = pkt.split_at(IPV4_HDR_LEN);
        let (udp, ib) = rest.split_at(UDP_HDR_LEN);
        let p = roce_rx(&mut SoftIntegrity, ip, udp, ib).map_err(|e| format!("receive: {e:?}"))?;
        let out = self
            .qp
            .receive(now, &p, &mut self.sq, &mut self.mem, &mut self.rq);
        let dst: &mut [u8] = match out.place {
            None => return Ok(out),
            Some(Place::Recv { id, offset, len }) => {
                let b = self.rq.bufs.get_mut(&id).ok_or("unknown receive WQE")?;
                b.get_mut(offset as usize..(offset + len) as usize)
                    .ok_or("receive placement out of bounds")?
            }
            Some(Place::Rdma { rkey, va, len }) => {
                let r = self
                    .mem
                    .checked(rkey, va, len, Access::WRITE)
                    .map_err(|_| "unchecked RDMA WRITE")?;
                &mut self.mem.data[r]
            }
            Some(Place::ReadResp { slot, offset, len }) => self.local[slot as usize]
                .get_mut(offset as usize..(offset + len) as usize)
                .ok_or("READ response beyond local buffer")?,
            Some(Place::AtomicResult { slot, value }) => {
                self.local[slot as usize] = value.to_le_bytes().to_vec();
                return Ok(out);
            }
        };
        if dst.len() != p.payload.len() {
            return Err("placement length differs from payload".into());
        }
        dst.copy_from_slice(p.payload);
        Ok(out)
    }
}

fn ipv4_header(h: &mut [u8], src: [u8; 4], dst: [u8; 4], total_len: u16) {
    h.fill(0);
    h[0] = 0x45;
    h[2..4].copy_from_slice(&total_len.to_be_bytes());
    h[6] = 0x40; // don't fragment
    h[8] = 64; // TTL
    h[9] = 17; // UDP
    h[12..16].copy_from_slice(&src);
    h[16..20].copy_from_slice(&dst);
    let mut sum: u32 = h
        .chunks(2)
        .map(|c| u32::from(u16::from_be_bytes([c[0], c[1]])))
        .sum();
    while sum > 0xFFFF {
        sum = (sum & 0xFFFF) + (sum >> 16);
    }
    h[10..12].copy_from_slice(&(!(sum as u16)).to_be_bytes());
}

fn udp_header(src_port: u16, len: u16) -> [u8; 8] {
    let [s0, s1] = src_port.to_be_bytes();
    let [d0, d1] = ROCE_PORT.to_be_bytes();
    let [l0, l1] = len.to_be_bytes();
    // RoCEv2 senders may leave the UDP checksum zero.
    [s0, s1, d0, d1, l0, l1, 0, 0]
}
