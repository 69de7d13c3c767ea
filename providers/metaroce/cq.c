// SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB
/*
 * libmetaroce completion queues: the kernel produces struct metaroce_cqe into a ring the
 * process maps; polling is a copy out of the ring and one index store, no system call.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "metaroce.h"

/*
 * After the create command (its result `ret`): maps the CQ's ring and readies its lock. On a
 * failure, undoes the command and frees `cq`, sets errno and returns -1.
 */
static int cq_setup(struct mr_cq *cq, struct ibv_context *ctx, int ret,
		    const struct metaroce_create_cq_resp *drv)
{
	if (!ret && (drv->cq.slot_size < sizeof(struct metaroce_cqe) ||
		     mr_ring_map(&cq->ring, ctx->cmd_fd, &drv->cq))) {
		ret = errno ? errno : EPROTO;
		ibv_cmd_destroy_cq(&cq->vcq.cq);
	}
	if (ret) {
		free(cq);
		errno = ret;
		return -1;
	}
	pthread_spin_init(&cq->lock, PTHREAD_PROCESS_PRIVATE);
	return 0;
}

struct ibv_cq *mr_create_cq(struct ibv_context *ctx, int cqe, struct ibv_comp_channel *channel,
			    int comp_vector)
{
	struct ibv_create_cq cmd;
	struct {
		struct ib_uverbs_create_cq_resp ibv;
		struct metaroce_create_cq_resp drv;
	} resp;
	struct mr_cq *cq;
	int ret;

	cq = calloc(1, sizeof(*cq));
	if (!cq)
		return NULL;
	memset(&resp, 0, sizeof(resp));
	ret = ibv_cmd_create_cq(ctx, cqe, channel, comp_vector, &cq->vcq.cq, &cmd, sizeof(cmd),
				&resp.ibv, sizeof(resp));
	if (cq_setup(cq, ctx, ret, &resp.drv))
		return NULL;
	return &cq->vcq.cq;
}

static enum ibv_wc_opcode wc_opcode(uint8_t op)
{
	switch (op) {
	case METAROCE_CQE_SEND:
		return IBV_WC_SEND;
	case METAROCE_CQE_RDMA_WRITE:
		return IBV_WC_RDMA_WRITE;
	case METAROCE_CQE_RDMA_READ:
		return IBV_WC_RDMA_READ;
	case METAROCE_CQE_COMP_SWAP:
		return IBV_WC_COMP_SWAP;
	case METAROCE_CQE_FETCH_ADD:
		return IBV_WC_FETCH_ADD;
	case METAROCE_CQE_BIND_MW:
		return IBV_WC_BIND_MW;
	case METAROCE_CQE_LOCAL_INV:
		return IBV_WC_LOCAL_INV;
	case METAROCE_CQE_ATOMIC_WRITE:
		return IBV_WC_ATOMIC_WRITE;
	/* IBV_WC_FLUSH, between IBV_WC_TSO and IBV_WC_ATOMIC_WRITE, unnamed in rdma-core 44. */
	case METAROCE_CQE_FLUSH:
		return (enum ibv_wc_opcode)(IBV_WC_TSO + 1);
	case METAROCE_CQE_RECV_RDMA_WITH_IMM:
		return IBV_WC_RECV_RDMA_WITH_IMM;
	default:
		return IBV_WC_RECV;
	}
}

static void cqe_to_wc(const struct metaroce_cqe *c, struct ibv_wc *wc)
{
	wc->wr_id = c->wr_id;
	wc->status = (enum ibv_wc_status)c->status;
	wc->opcode = wc_opcode(c->opcode);
	wc->vendor_err = c->vendor_err;
	wc->byte_len = c->byte_len;
	wc->wc_flags = 0;
	wc->imm_data = 0;
	if (c->flags & METAROCE_CQE_WITH_IMM) {
		/* Stored in network order, as ibv_wc keeps it. */
		wc->imm_data = c->imm_or_rkey;
		wc->wc_flags |= IBV_WC_WITH_IMM;
	} else if (c->flags & METAROCE_CQE_WITH_INV) {
		wc->invalidated_rkey = c->imm_or_rkey;
		wc->wc_flags |= IBV_WC_WITH_INV;
	}
	if (c->flags & METAROCE_CQE_GRH)
		wc->wc_flags |= IBV_WC_GRH;
	wc->qp_num = c->qp_num;
	wc->src_qp = c->src_qp;
	wc->pkey_index = c->pkey_index;
	wc->slid = 0;
	wc->sl = c->sl;
	wc->dlid_path_bits = 0;
}

int mr_poll_cq(struct ibv_cq *ibcq, int ne, struct ibv_wc *wc)
{
	struct mr_cq *cq = to_mcq(ibcq);
	struct mr_ring *r = &cq->ring;
	uint32_t cons, prod;
	int n = 0;

	pthread_spin_lock(&cq->lock);
	/* The consumer index is ours; the producer's is read once per call. */
	cons = atomic_load_explicit(mr_ring_consumer(r), memory_order_relaxed);
	prod = atomic_load_explicit(mr_ring_producer(r), memory_order_acquire) & r->mask;
	while (n < ne && cons != prod) {
		struct metaroce_cqe c;

		memcpy(&c, mr_ring_slot(r, cons), sizeof(c));
		cqe_to_wc(&c, &wc[n++]);
		cons = (cons + 1) & r->mask;
	}
	/* One release store for the batch: the kernel may reuse the slots once it sees it. */
	if (n)
		atomic_store_explicit(mr_ring_consumer(r), cons, memory_order_release);
	pthread_spin_unlock(&cq->lock);
	return n;
}

/* The extended poll interface: start_poll() takes the lock and reads the oldest completion,
 * next_poll() the one after, end_poll() publishes the consumer index once and unlocks. */
static int ex_load(struct mr_cq *cq)
{
	struct mr_ring *r = &cq->ring;
	uint32_t prod = atomic_load_explicit(mr_ring_producer(r), memory_order_acquire) & r->mask;

	if (cq->ex_cons == prod)
		return ENOENT;
	memcpy(&cq->ex_cur, mr_ring_slot(r, cq->ex_cons), sizeof(cq->ex_cur));
	cq->vcq.cq_ex.wr_id = cq->ex_cur.wr_id;
	cq->vcq.cq_ex.status = (enum ibv_wc_status)cq->ex_cur.status;
	return 0;
}

static struct mr_cq *ex_cq(struct ibv_cq_ex *cq)
{
	return (struct mr_cq *)cq;
}

static void ex_publish(struct mr_cq *cq)
{
	atomic_store_explicit(mr_ring_consumer(&cq->ring), cq->ex_cons, memory_order_release);
}

static int ex_start_poll(struct ibv_cq_ex *ibcq, struct ibv_poll_cq_attr *attr)
{
	struct mr_cq *cq = ex_cq(ibcq);
	int ret;

	(void)attr;
	pthread_spin_lock(&cq->lock);
	cq->ex_cons = atomic_load_explicit(mr_ring_consumer(&cq->ring), memory_order_relaxed);
	ret = ex_load(cq);
	/* ENOENT ends the poll: end_poll() is not called. */
	if (ret)
		pthread_spin_unlock(&cq->lock);
	return ret;
}

static int ex_next_poll(struct ibv_cq_ex *ibcq)
{
	struct mr_cq *cq = ex_cq(ibcq);

	cq->ex_cons = (cq->ex_cons + 1) & cq->ring.mask;
	return ex_load(cq);
}

static void ex_end_poll(struct ibv_cq_ex *ibcq)
{
	struct mr_cq *cq = ex_cq(ibcq);

	/* The completion last read is consumed too. */
	cq->ex_cons = (cq->ex_cons + 1) & cq->ring.mask;
	ex_publish(cq);
	pthread_spin_unlock(&cq->lock);
}

static enum ibv_wc_opcode ex_read_opcode(struct ibv_cq_ex *cq)
{
	return wc_opcode(ex_cq(cq)->ex_cur.opcode);
}

static uint32_t ex_read_vendor_err(struct ibv_cq_ex *cq)
{
	return ex_cq(cq)->ex_cur.vendor_err;
}

static uint32_t ex_read_byte_len(struct ibv_cq_ex *cq)
{
	return ex_cq(cq)->ex_cur.byte_len;
}

static __be32 ex_read_imm_data(struct ibv_cq_ex *cq)
{
	return ex_cq(cq)->ex_cur.imm_or_rkey;
}

static uint32_t ex_read_qp_num(struct ibv_cq_ex *cq)
{
	return ex_cq(cq)->ex_cur.qp_num;
}

static uint32_t ex_read_src_qp(struct ibv_cq_ex *cq)
{
	return ex_cq(cq)->ex_cur.src_qp;
}

static unsigned int ex_read_wc_flags(struct ibv_cq_ex *ibcq)
{
	struct ibv_wc wc;

	cqe_to_wc(&ex_cq(ibcq)->ex_cur, &wc);
	return wc.wc_flags;
}

static uint32_t ex_read_slid(struct ibv_cq_ex *cq)
{
	return 0;
}

static uint8_t ex_read_sl(struct ibv_cq_ex *cq)
{
	return ex_cq(cq)->ex_cur.sl;
}

static uint8_t ex_read_dlid_path_bits(struct ibv_cq_ex *cq)
{
	return 0;
}

struct ibv_cq_ex *mr_create_cq_ex(struct ibv_context *ctx, struct ibv_cq_init_attr_ex *attr)
{
	struct ibv_create_cq_ex cmd;
	struct {
		struct ib_uverbs_ex_create_cq_resp ibv;
		struct metaroce_create_cq_resp drv;
	} resp;
	struct ibv_cq_init_attr_ex kattr;
	struct ibv_cq_ex *x;
	struct mr_cq *cq;
	int ret;

	if ((attr->wc_flags & ~IBV_WC_STANDARD_FLAGS) ||
	    (attr->comp_mask & ~(IBV_CQ_INIT_ATTR_MASK_FLAGS | IBV_CQ_INIT_ATTR_MASK_PD)) ||
	    ((attr->comp_mask & IBV_CQ_INIT_ATTR_MASK_FLAGS) &&
	     (attr->flags & ~IBV_CREATE_CQ_ATTR_SINGLE_THREADED))) {
		errno = EOPNOTSUPP;
		return NULL;
	}
	cq = calloc(1, sizeof(*cq));
	if (!cq)
		return NULL;
	memset(&cmd, 0, sizeof(cmd));
	memset(&resp, 0, sizeof(resp));
	/* The kernel knows no creation flag (single-threaded use is the provider's business). */
	kattr = *attr;
	kattr.comp_mask &= ~IBV_CQ_INIT_ATTR_MASK_FLAGS;
	kattr.flags = 0;
	ret = ibv_cmd_create_cq_ex(ctx, &kattr, &cq->vcq, &cmd, sizeof(cmd), &resp.ibv,
				   sizeof(resp), 0);
	if (cq_setup(cq, ctx, ret, &resp.drv))
		return NULL;
	x = &cq->vcq.cq_ex;
	x->start_poll = ex_start_poll;
	x->next_poll = ex_next_poll;
	x->end_poll = ex_end_poll;
	x->read_opcode = ex_read_opcode;
	x->read_vendor_err = ex_read_vendor_err;
	x->read_wc_flags = ex_read_wc_flags;
	if (attr->wc_flags & IBV_WC_EX_WITH_BYTE_LEN)
		x->read_byte_len = ex_read_byte_len;
	if (attr->wc_flags & IBV_WC_EX_WITH_IMM)
		x->read_imm_data = ex_read_imm_data;
	if (attr->wc_flags & IBV_WC_EX_WITH_QP_NUM)
		x->read_qp_num = ex_read_qp_num;
	if (attr->wc_flags & IBV_WC_EX_WITH_SRC_QP)
		x->read_src_qp = ex_read_src_qp;
	if (attr->wc_flags & IBV_WC_EX_WITH_SLID)
		x->read_slid = ex_read_slid;
	if (attr->wc_flags & IBV_WC_EX_WITH_SL)
		x->read_sl = ex_read_sl;
	if (attr->wc_flags & IBV_WC_EX_WITH_DLID_PATH_BITS)
		x->read_dlid_path_bits = ex_read_dlid_path_bits;
	return x;
}

int mr_req_notify_cq(struct ibv_cq *cq, int solicited_only)
{
	return ibv_cmd_req_notify_cq(cq, solicited_only);
}

/* Completion-event moderation (cq_count, cq_period): the kernel holds the events. */
int mr_modify_cq(struct ibv_cq *cq, struct ibv_modify_cq_attr *attr)
{
	struct ibv_modify_cq cmd;

	memset(&cmd, 0, sizeof(cmd));
	return ibv_cmd_modify_cq(cq, attr, &cmd, sizeof(cmd));
}

int mr_resize_cq(struct ibv_cq *ibcq, int cqe)
{
	struct mr_cq *cq = to_mcq(ibcq);
	struct ibv_resize_cq cmd;
	struct {
		struct ib_uverbs_resize_cq_resp ibv;
		struct metaroce_create_cq_resp drv;
	} resp;
	struct mr_ring ring = { 0 };
	int ret;

	memset(&resp, 0, sizeof(resp));
	/* Held across the command: the kernel moves the pending completions to the new ring. */
	pthread_spin_lock(&cq->lock);
	ret = ibv_cmd_resize_cq(ibcq, cqe, &cmd, sizeof(cmd), &resp.ibv, sizeof(resp));
	if (!ret) {
		if (resp.drv.cq.slot_size < sizeof(struct metaroce_cqe) ||
		    mr_ring_map(&ring, ibcq->context->cmd_fd, &resp.drv.cq)) {
			ret = errno ? errno : EPROTO;
		} else {
			mr_ring_unmap(&cq->ring);
			cq->ring = ring;
		}
	}
	pthread_spin_unlock(&cq->lock);
	return ret;
}

int mr_destroy_cq(struct ibv_cq *ibcq)
{
	struct mr_cq *cq = to_mcq(ibcq);
	int ret = ibv_cmd_destroy_cq(ibcq);

	if (ret)
		return ret;
	mr_ring_unmap(&cq->ring);
	pthread_spin_destroy(&cq->lock);
	free(cq);
	return 0;
}
