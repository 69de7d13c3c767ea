/* SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB */
/*
 * libmetaroce: the rdma-core provider of MetaRoCE devices (RDMA_DRIVER_METAROCE), speaking
 * the user ABI of include/uapi/rdma/metaroce-abi.h.
 */
#ifndef METAROCE_PROVIDER_H
#define METAROCE_PROVIDER_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "verbs_private.h"
#include <rdma/metaroce-abi.h>

/* enum rdma_driver_id: the entry the overlay appends after RDMA_DRIVER_IONIC (21). */
#define MR_DRIVER_ID 22

/* The layout the kernel's Rust side parses (drivers/infiniband/sw/metaroce/uabi/own.rs). */
_Static_assert(sizeof(struct metaroce_send_wqe) == 64, "send WQE header");
_Static_assert(offsetof(struct metaroce_send_wqe, opcode) == 8, "opcode");
_Static_assert(offsetof(struct metaroce_send_wqe, num_sge) == 10, "num_sge");
_Static_assert(offsetof(struct metaroce_send_wqe, imm_data) == 12, "imm_data");
_Static_assert(offsetof(struct metaroce_send_wqe, length) == 16, "length");
_Static_assert(offsetof(struct metaroce_send_wqe, rkey) == 20, "rkey");
_Static_assert(offsetof(struct metaroce_send_wqe, remote_addr) == 24, "remote_addr");
_Static_assert(offsetof(struct metaroce_send_wqe, atomic.swap) == 40, "swap");
_Static_assert(offsetof(struct metaroce_send_wqe, ud.remote_qkey) == 40, "qkey");
_Static_assert(offsetof(struct metaroce_send_wqe, bind.mw_rkey) == 40, "mw_rkey");
_Static_assert(offsetof(struct metaroce_send_wqe, bind.access) == 52, "access");
_Static_assert(offsetof(struct metaroce_send_wqe, flush.selectivity) == 33, "selectivity");
_Static_assert(sizeof(struct metaroce_recv_wqe) == 16, "recv WQE header");
_Static_assert(sizeof(struct metaroce_sge) == 16, "SGE");
_Static_assert(sizeof(struct metaroce_cqe) == 32, "CQE");
_Static_assert(offsetof(struct metaroce_cqe, status) == 24, "status");
_Static_assert(offsetof(struct metaroce_cqe, pkey_index) == 28, "pkey_index");
_Static_assert(offsetof(struct metaroce_cqe, vendor_err) == 30, "vendor_err");
_Static_assert(sizeof(struct metaroce_ring_info) == 24, "ring info");
_Static_assert(sizeof(struct metaroce_path_stats) == 56, "path stats");
_Static_assert(sizeof(struct metaroce_conn_stats) == 24 + 8 * 56, "connection stats");
_Static_assert(sizeof(struct metaroce_create_qp_resp) == 72, "create_qp response");

struct mr_context {
	struct verbs_context ibv_ctx;
	uint32_t abi_version;
	uint32_t caps;			/* enum metaroce_caps */
	uint32_t max_inline;
	uint32_t max_sge;
	uint32_t max_paths;
};

/* Whether `dev` is one of ours (metaroce.c). */
bool mr_is_ours(struct ibv_device *dev);

static inline struct mr_context *to_mctx(struct ibv_context *ctx)
{
	return (struct mr_context *)((char *)ctx - offsetof(struct mr_context, ibv_ctx.context));
}

/* A ring mapped from the kernel (see metaroce-abi.h). */
struct mr_ring {
	uint8_t *base;
	size_t map_size;
	uint32_t mask;		/* slots - 1 */
	uint32_t slot_size;
};

static inline _Atomic uint32_t *mr_ring_producer(struct mr_ring *r)
{
	return (_Atomic uint32_t *)(r->base + METAROCE_RING_PRODUCER);
}

static inline _Atomic uint32_t *mr_ring_consumer(struct mr_ring *r)
{
	return (_Atomic uint32_t *)(r->base + METAROCE_RING_CONSUMER);
}

static inline void *mr_ring_slot(struct mr_ring *r, uint32_t index)
{
	return r->base + METAROCE_RING_SLOTS + (size_t)(index & r->mask) * r->slot_size;
}

int mr_ring_map(struct mr_ring *r, int cmd_fd, const struct metaroce_ring_info *info);
void mr_ring_unmap(struct mr_ring *r);

struct mr_cq {
	struct verbs_cq vcq;
	pthread_spinlock_t lock;
	struct mr_ring ring;
	/* Between start_poll() and end_poll() (lock held): the consumer index and a copy of the
	 * completion being read. */
	uint32_t ex_cons;
	struct metaroce_cqe ex_cur;
};

static inline struct mr_cq *to_mcq(struct ibv_cq *cq)
{
	return (struct mr_cq *)cq;
}

/* A receive ring and its lock (a QP's or an SRQ's). */
struct mr_rq {
	pthread_spinlock_t lock;
	struct mr_ring ring;
	uint32_t max_sge;
};

struct mr_qp {
	struct verbs_qp vqp;
	pthread_spinlock_t sq_lock;
	struct mr_ring sq;
	uint32_t max_send_sge;
	uint32_t max_inline;
	struct mr_rq rq;	/* unmapped with an SRQ */
	/* A native QP's view of its connection, if it asked (metaroce_dv_create_qp; mapped
	 * read-only; NULL otherwise). */
	const struct metaroce_conn_stats *stats;
	size_t stats_len;
	/* Between wr_start() and wr_complete()/wr_abort() (sq_lock held): the next free slot,
	 * the consumer index read at wr_start(), the WQE being built, the first error. */
	uint32_t ex_prod;
	uint32_t ex_cons;
	struct metaroce_send_wqe *ex_cur;
	int ex_err;
};

static inline struct mr_qp *to_mqp(struct ibv_qp *qp)
{
	return (struct mr_qp *)qp;
}

struct mr_srq {
	struct ibv_srq ibv_srq;
	struct mr_rq rq;
	uint32_t srq_num;
};

static inline struct mr_srq *to_msrq(struct ibv_srq *srq)
{
	return (struct mr_srq *)srq;
}

struct mr_ah {
	struct ibv_ah ibv_ah;
	uint32_t ah_num;
};

/* cq.c */
struct ibv_cq_ex *mr_create_cq_ex(struct ibv_context *ctx, struct ibv_cq_init_attr_ex *attr);
struct ibv_cq *mr_create_cq(struct ibv_context *ctx, int cqe, struct ibv_comp_channel *channel,
			    int comp_vector);
int mr_poll_cq(struct ibv_cq *cq, int ne, struct ibv_wc *wc);
int mr_req_notify_cq(struct ibv_cq *cq, int solicited_only);
int mr_resize_cq(struct ibv_cq *cq, int cqe);
int mr_modify_cq(struct ibv_cq *cq, struct ibv_modify_cq_attr *attr);
int mr_destroy_cq(struct ibv_cq *cq);

/* qp.c */
struct ibv_qp *mr_create_qp(struct ibv_pd *pd, struct ibv_qp_init_attr *attr);
struct ibv_qp *mr_create_qp_ex(struct ibv_context *ctx, struct ibv_qp_init_attr_ex *attr);
/* create_qp_ex with MetaRoCE's request (NULL: none). */
struct ibv_qp *mr_create_qp_req(struct ibv_context *ctx, struct ibv_qp_init_attr_ex *attr,
				const struct metaroce_create_qp_req *req);
int mr_ring_doorbell(struct ibv_qp *qp);
uint8_t mr_wqe_flags(unsigned int send_flags);
int mr_query_qp(struct ibv_qp *qp, struct ibv_qp_attr *attr, int mask,
		struct ibv_qp_init_attr *init);
int mr_modify_qp(struct ibv_qp *qp, struct ibv_qp_attr *attr, int mask);
int mr_destroy_qp(struct ibv_qp *qp);
int mr_post_send(struct ibv_qp *qp, struct ibv_send_wr *wr, struct ibv_send_wr **bad);
int mr_post_recv(struct ibv_qp *qp, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad);
int mr_bind_mw(struct ibv_qp *qp, struct ibv_mw *mw, struct ibv_mw_bind *bind);
struct ibv_srq *mr_create_srq(struct ibv_pd *pd, struct ibv_srq_init_attr *attr);
int mr_modify_srq(struct ibv_srq *srq, struct ibv_srq_attr *attr, int mask);
int mr_query_srq(struct ibv_srq *srq, struct ibv_srq_attr *attr);
int mr_destroy_srq(struct ibv_srq *srq);
int mr_post_srq_recv(struct ibv_srq *srq, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad);

/* qp_ex.c: the ibv_wr_*() interface of extended QPs */
int mr_qp_ex_check(enum ibv_qp_type type, uint64_t send_ops_flags);
void mr_qp_ex_init(struct mr_qp *qp, uint64_t send_ops_flags);

#endif /* METAROCE_PROVIDER_H */
