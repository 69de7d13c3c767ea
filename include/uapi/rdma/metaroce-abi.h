/* SPDX-License-Identifier: ((GPL-2.0 WITH Linux-syscall-note) OR Linux-OpenIB) */
/*
 * The user ABI of the MetaRoCE software RDMA provider (RDMA_DRIVER_METAROCE): what the
 * kernel driver and its rdma-core provider, libmetaroce, exchange in uverbs commands, and
 * the layout of the rings they share through mmap.
 *
 * Versioned: the provider names the version it speaks in its get_context request and the
 * kernel answers with the version it serves (the same, or the context is refused). A later
 * version may add fields at the end of a request or response (the kernel accepts shorter
 * requests and zero-fills what it does not know) and capability bits, never move a field.
 *
 * Rings. Every queue (send, receive, shared receive, completion) is one mapping:
 *
 *   offset   0  producer index, __u32, written only by the producer
 *           64  consumer index, __u32, written only by the consumer
 *          128  slot 0, slot 1, ... (slot_size bytes each, a power of two)
 *
 * The two indices sit on cache lines of their own, so that the process posting work and
 * the kernel taking it never write the same line. An index counts slots modulo the number
 * of slots (a power of two); one slot is always left empty (full when producer + 1 ==
 * consumer). The geometry is in the create response, not in the ring: the kernel never
 * reads it back from memory the process can write. Each side publishes its index with a
 * release store after writing (producer) or reading (consumer) the slots, and reads the
 * other side's index with an acquire load. The kernel copies each slot it consumes once,
 * before looking at it, and checks every field.
 *
 * Work queue entries are compact: a 64-byte send header (the operation's fields in one
 * cache line) followed by the scatter list or the inline data, a 16-byte receive header
 * followed by the scatter list, a 32-byte completion (two per cache line).
 */
#ifndef METAROCE_ABI_USER_H
#define METAROCE_ABI_USER_H

#include <linux/types.h>

#define METAROCE_ABI_VERSION 1

/* Ring layout. */
#define METAROCE_RING_PRODUCER	0
#define METAROCE_RING_CONSUMER	64
#define METAROCE_RING_SLOTS	128

/* One queue's mapping, in a create (or resize) response. */
struct metaroce_ring_info {
	__aligned_u64 mmap_offset;	/* offset to pass to mmap() on the uverbs fd */
	__u32 mmap_size;		/* bytes to map: METAROCE_RING_SLOTS + slots * slot_size */
	__u32 slots;			/* a power of two; the ring holds slots - 1 entries */
	__u32 slot_size;		/* a power of two, bytes */
	__u32 reserved;
};

/* get_context */
struct metaroce_alloc_ucontext_req {
	__u32 abi_version;		/* METAROCE_ABI_VERSION the provider speaks */
	__u32 reserved;
};

enum metaroce_caps {
	/* RC QPs of this device use the native multipath transport unless they ask otherwise. */
	METAROCE_CAP_NATIVE = 1 << 0,
	/* create_qp takes struct metaroce_create_qp_req (wire and paths per QP). */
	METAROCE_CAP_QP_WIRE = 1 << 1,
};

struct metaroce_alloc_ucontext_resp {
	__u32 abi_version;		/* the version the kernel serves */
	__u32 caps;			/* enum metaroce_caps */
	__u32 max_inline_data;		/* largest inline payload of a send WQE */
	__u32 max_sge;			/* largest scatter list of a WQE */
	__u32 max_paths;		/* most paths of a native connection */
	__u32 reserved;
};

/* create_cq, resize_cq: no request beyond the core command. */
struct metaroce_create_cq_resp {
	struct metaroce_ring_info cq;
};

/*
 * create_qp: an optional request (absent or all zero: the device's defaults), then the
 * response. A QP with an SRQ has no receive ring (rq is all zero).
 */
enum metaroce_qp_wire {
	/* RoCEv2, also for an RC QP of a native device. */
	METAROCE_QP_WIRE_ROCEV2 = 1 << 0,
	/* The native transport: an RC QP of a native device (EINVAL for any other). */
	METAROCE_QP_WIRE_NATIVE = 1 << 1,
};

enum metaroce_qp_flags {
	/* A native QP maps its connection's figures (the stats record of the response). */
	METAROCE_QP_CONN_STATS = 1 << 0,
};

struct metaroce_create_qp_req {
	__u32 wire;			/* enum metaroce_qp_wire, at most one bit; 0: the default */
	/*
	 * Native RC: paths of the connection the QP is the first to need (1 to max_paths;
	 * 0: all). A connection that exists keeps its paths.
	 */
	__u32 paths;
	__u32 flags;			/* enum metaroce_qp_flags */
	__u32 reserved;
};

struct metaroce_create_qp_resp {
	struct metaroce_ring_info sq;
	struct metaroce_ring_info rq;
	/*
	 * With METAROCE_QP_CONN_STATS, a native RC QP's view of its connection, struct
	 * metaroce_conn_stats (slots and slot_size 0); all zero otherwise.
	 */
	struct metaroce_ring_info stats;
};

/* One path of a native connection. */
struct metaroce_path_stats {
	__u16 src_port;			/* the path's UDP source port now */
	__u8 state;			/* 0 active, 1 recovering after an RTO, 2 failed */
	__u8 reserved;
	__u32 cwnd;			/* congestion window, bytes */
	__aligned_u64 srtt_ns;		/* smoothed RTT */
	__aligned_u64 min_rtt_ns;
	__aligned_u64 sent;		/* transmissions */
	__aligned_u64 retransmits;
	__aligned_u64 ecn_echoes;	/* ECN echo increases */
	__aligned_u64 timeouts;		/* RTOs */
};

/*
 * The page a native RC QP maps: the figures of the connection it is bound to, rewritten by
 * the kernel at most every 10 ms while the connection works (the kernel never reads it). A
 * reader takes seq (acquire), copies, and reads seq again: an odd or changed seq means the
 * copy raced a rewrite.
 */
struct metaroce_conn_stats {
	__u32 seq;
	__u32 paths;			/* entries of path[] in use */
	__u32 window;			/* connection window, bytes */
	__u32 rate_hint_kbps;		/* the receiver's last rate hint (0: none) */
	__aligned_u64 updates;		/* rewrites so far */
	struct metaroce_path_stats path[8];
};

/* create_srq */
struct metaroce_create_srq_resp {
	struct metaroce_ring_info rq;
	__u32 srq_num;
	__u32 reserved;
};

/*
 * modify_srq with IBV_SRQ_MAX_WR (resize) has no driver response in uverbs: the kernel
 * writes the new ring's metaroce_ring_info at this user address.
 */
struct metaroce_modify_srq_req {
	__aligned_u64 ring_info_addr;
};

/* create_ah: the number a UD send WQE names the address handle by (never 0). */
struct metaroce_create_ah_resp {
	__u32 ah_num;
	__u32 reserved;
};

/* Scatter/gather element of a WQE. */
struct metaroce_sge {
	__aligned_u64 addr;
	__u32 length;
	__u32 lkey;
};

/* Send WQE opcodes (enum ibv_wr_opcode's values are not part of this ABI). */
enum metaroce_wr_opcode {
	METAROCE_WR_SEND = 1,
	METAROCE_WR_SEND_IMM = 2,
	METAROCE_WR_SEND_INV = 3,
	METAROCE_WR_RDMA_WRITE = 4,
	METAROCE_WR_RDMA_WRITE_IMM = 5,
	METAROCE_WR_RDMA_READ = 6,
	METAROCE_WR_ATOMIC_CMP_SWP = 7,
	METAROCE_WR_ATOMIC_FETCH_ADD = 8,
	METAROCE_WR_ATOMIC_WRITE = 9,
	METAROCE_WR_FLUSH = 10,
	METAROCE_WR_LOCAL_INV = 11,
	METAROCE_WR_BIND_MW = 12,
};

enum metaroce_wqe_flags {
	METAROCE_WQE_SIGNALED = 1 << 0,
	METAROCE_WQE_SOLICITED = 1 << 1,
	METAROCE_WQE_FENCE = 1 << 2,
	/* length bytes of data follow the header instead of num_sge SGEs. */
	METAROCE_WQE_INLINE = 1 << 3,
};

/*
 * A send WQE: this 64-byte header, then num_sge struct metaroce_sge, or (INLINE) length
 * bytes of data. ATOMIC_WRITE carries its 8 bytes in atomic.compare_add (length 8, no SGE);
 * FLUSH names the remote range by remote_addr, rkey and length. Local operations (LOCAL_INV,
 * BIND_MW), FLUSH and ATOMIC_WRITE carry no SGE.
 */
struct metaroce_send_wqe {
	__aligned_u64 wr_id;
	__u8 opcode;			/* enum metaroce_wr_opcode */
	__u8 flags;			/* enum metaroce_wqe_flags */
	__u16 num_sge;
	__be32 imm_data;		/* SEND_IMM, RDMA_WRITE_IMM (network order) */
	/* INLINE: bytes of data; FLUSH: the range's length; ATOMIC_WRITE: 8 */
	__u32 length;
	/* RDMA, atomics, FLUSH: the remote key; SEND_INV, LOCAL_INV: the key to invalidate */
	__u32 rkey;
	__aligned_u64 remote_addr;	/* RDMA, atomics, FLUSH; BIND_MW: the window's start */
	union {
		struct {
			__aligned_u64 compare_add;
			__aligned_u64 swap;
		} atomic;
		struct {
			__u32 ah_num;
			__u32 remote_qpn;
			__u32 remote_qkey;
			__u32 reserved;
		} ud;
		struct {
			__aligned_u64 length;
			__u32 mw_rkey;		/* the window's current R_Key */
			__u32 new_rkey;		/* its R_Key once bound */
			__u32 mr_lkey;
			__u32 access;		/* enum ib_uverbs_access_flags */
		} bind;
		struct {
			__u8 placement;		/* IB_UVERBS_FLUSH_GLOBAL, _PERSISTENT */
			__u8 selectivity;	/* IB_UVERBS_FLUSH_RANGE, _MR */
			__u8 reserved[6];
		} flush;
		__u8 reserved[32];
	};
};

/* A receive WQE: this header, then num_sge struct metaroce_sge. */
struct metaroce_recv_wqe {
	__aligned_u64 wr_id;
	__u32 num_sge;
	__u32 reserved;
};

/* Completion opcodes. */
enum metaroce_cqe_opcode {
	METAROCE_CQE_SEND = 1,
	METAROCE_CQE_RDMA_WRITE = 2,
	METAROCE_CQE_RDMA_READ = 3,
	METAROCE_CQE_COMP_SWAP = 4,
	METAROCE_CQE_FETCH_ADD = 5,
	METAROCE_CQE_BIND_MW = 6,
	METAROCE_CQE_LOCAL_INV = 7,
	METAROCE_CQE_ATOMIC_WRITE = 8,
	METAROCE_CQE_FLUSH = 9,
	METAROCE_CQE_RECV = 10,
	METAROCE_CQE_RECV_RDMA_WITH_IMM = 11,
};

enum metaroce_cqe_flags {
	METAROCE_CQE_WITH_IMM = 1 << 0,
	METAROCE_CQE_WITH_INV = 1 << 1,
	METAROCE_CQE_GRH = 1 << 2,
};

/*
 * A completion. status takes enum ib_uverbs_wc_status's values (those of enum
 * ibv_wc_status).
 */
struct metaroce_cqe {
	__aligned_u64 wr_id;
	__u32 byte_len;
	__u32 imm_or_rkey;		/* WITH_IMM: immediate (network order); WITH_INV: R_Key */
	__u32 qp_num;
	__u32 src_qp;
	__u8 status;
	__u8 opcode;			/* enum metaroce_cqe_opcode */
	__u8 flags;			/* enum metaroce_cqe_flags */
	__u8 sl;
	__u16 pkey_index;
	__u8 vendor_err;
	__u8 reserved;
};

#endif /* METAROCE_ABI_USER_H */
