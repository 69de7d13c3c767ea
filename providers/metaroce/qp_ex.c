// SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB
/*
 * libmetaroce's ibv_wr_*() interface (extended QPs): wr_start() takes the send ring's lock,
 * each operation builds one struct metaroce_send_wqe in the next free slot, the setters fill
 * its data, wr_complete() publishes them all with one index store and one doorbell.
 */
#include <errno.h>
#include <string.h>

#include "metaroce.h"

static struct mr_qp *ex_qp(struct ibv_qp_ex *ibqp)
{
	return (struct mr_qp *)ibqp;
}

static void ex_start(struct ibv_qp_ex *ibqp)
{
	struct mr_qp *qp = ex_qp(ibqp);

	pthread_spin_lock(&qp->sq_lock);
	qp->ex_prod = atomic_load_explicit(mr_ring_producer(&qp->sq), memory_order_relaxed);
	qp->ex_cons = atomic_load_explicit(mr_ring_consumer(&qp->sq), memory_order_acquire) &
		      qp->sq.mask;
	qp->ex_cur = NULL;
	qp->ex_err = 0;
}

static int ex_complete(struct ibv_qp_ex *ibqp)
{
	struct mr_qp *qp = ex_qp(ibqp);
	uint32_t start = atomic_load_explicit(mr_ring_producer(&qp->sq), memory_order_relaxed);
	int ret = qp->ex_err;

	if (!ret && qp->ex_prod != start) {
		atomic_store_explicit(mr_ring_producer(&qp->sq), qp->ex_prod, memory_order_release);
		ret = mr_ring_doorbell(&ibqp->qp_base);
	}
	qp->ex_cur = NULL;
	pthread_spin_unlock(&qp->sq_lock);
	return ret;
}

static void ex_abort(struct ibv_qp_ex *ibqp)
{
	struct mr_qp *qp = ex_qp(ibqp);

	/* Nothing was published: the slots are simply written again later. */
	qp->ex_cur = NULL;
	pthread_spin_unlock(&qp->sq_lock);
}

/* The next WQE of operation `opcode`, or NULL once an error is recorded. */
static struct metaroce_send_wqe *ex_begin(struct ibv_qp_ex *ibqp, uint8_t opcode)
{
	struct mr_qp *qp = ex_qp(ibqp);
	struct metaroce_send_wqe *w;

	if (qp->ex_err)
		return NULL;
	if (((qp->ex_prod + 1) & qp->sq.mask) == qp->ex_cons) {
		qp->ex_err = ENOMEM;
		qp->ex_cur = NULL;
		return NULL;
	}
	w = mr_ring_slot(&qp->sq, qp->ex_prod);
	memset(w, 0, sizeof(*w));
	w->wr_id = ibqp->wr_id;
	w->opcode = opcode;
	/* Inline data is what wr_set_inline_data*() say, not a flag. */
	w->flags = mr_wqe_flags(ibqp->wr_flags & ~IBV_SEND_INLINE);
	qp->ex_prod = (qp->ex_prod + 1) & qp->sq.mask;
	qp->ex_cur = w;
	return w;
}

static void ex_rdma(struct ibv_qp_ex *ibqp, uint8_t opcode, uint32_t rkey, uint64_t addr)
{
	struct metaroce_send_wqe *w = ex_begin(ibqp, opcode);

	if (w) {
		w->rkey = rkey;
		w->remote_addr = addr;
	}
}

static void wr_send(struct ibv_qp_ex *ibqp)
{
	ex_begin(ibqp, METAROCE_WR_SEND);
}

static void wr_send_imm(struct ibv_qp_ex *ibqp, __be32 imm)
{
	struct metaroce_send_wqe *w = ex_begin(ibqp, METAROCE_WR_SEND_IMM);

	if (w)
		w->imm_data = imm;
}

static void wr_send_inv(struct ibv_qp_ex *ibqp, uint32_t rkey)
{
	struct metaroce_send_wqe *w = ex_begin(ibqp, METAROCE_WR_SEND_INV);

	if (w)
		w->rkey = rkey;
}

static void wr_rdma_write(struct ibv_qp_ex *ibqp, uint32_t rkey, uint64_t addr)
{
	ex_rdma(ibqp, METAROCE_WR_RDMA_WRITE, rkey, addr);
}

static void wr_rdma_write_imm(struct ibv_qp_ex *ibqp, uint32_t rkey, uint64_t addr, __be32 imm)
{
	ex_rdma(ibqp, METAROCE_WR_RDMA_WRITE_IMM, rkey, addr);
	if (ex_qp(ibqp)->ex_cur)
		ex_qp(ibqp)->ex_cur->imm_data = imm;
}

static void wr_rdma_read(struct ibv_qp_ex *ibqp, uint32_t rkey, uint64_t addr)
{
	ex_rdma(ibqp, METAROCE_WR_RDMA_READ, rkey, addr);
}

static void wr_atomic_cmp_swp(struct ibv_qp_ex *ibqp, uint32_t rkey, uint64_t addr,
			      uint64_t compare, uint64_t swap)
{
	ex_rdma(ibqp, METAROCE_WR_ATOMIC_CMP_SWP, rkey, addr);
	if (ex_qp(ibqp)->ex_cur) {
		ex_qp(ibqp)->ex_cur->atomic.compare_add = compare;
		ex_qp(ibqp)->ex_cur->atomic.swap = swap;
	}
}

static void wr_atomic_fetch_add(struct ibv_qp_ex *ibqp, uint32_t rkey, uint64_t addr,
				uint64_t add)
{
	ex_rdma(ibqp, METAROCE_WR_ATOMIC_FETCH_ADD, rkey, addr);
	if (ex_qp(ibqp)->ex_cur)
		ex_qp(ibqp)->ex_cur->atomic.compare_add = add;
}

static void wr_atomic_write(struct ibv_qp_ex *ibqp, uint32_t rkey, uint64_t addr,
			    const void *atomic_wr)
{
	ex_rdma(ibqp, METAROCE_WR_ATOMIC_WRITE, rkey, addr);
	if (ex_qp(ibqp)->ex_cur) {
		memcpy(&ex_qp(ibqp)->ex_cur->atomic.compare_add, atomic_wr, 8);
		ex_qp(ibqp)->ex_cur->length = 8;
	}
}

static void wr_local_inv(struct ibv_qp_ex *ibqp, uint32_t rkey)
{
	struct metaroce_send_wqe *w = ex_begin(ibqp, METAROCE_WR_LOCAL_INV);

	if (w)
		w->rkey = rkey;
}

static void wr_bind_mw(struct ibv_qp_ex *ibqp, struct ibv_mw *mw, uint32_t rkey,
		       const struct ibv_mw_bind_info *bi)
{
	struct metaroce_send_wqe *w = ex_begin(ibqp, METAROCE_WR_BIND_MW);

	if (!w)
		return;
	w->remote_addr = bi->addr;
	w->bind.length = bi->length;
	w->bind.mw_rkey = mw->rkey;
	w->bind.new_rkey = rkey;
	w->bind.mr_lkey = bi->mr ? bi->mr->lkey : 0;
	w->bind.access = bi->mw_access_flags;
}

static void wr_set_ud_addr(struct ibv_qp_ex *ibqp, struct ibv_ah *ah, uint32_t remote_qpn,
			   uint32_t remote_qkey)
{
	struct metaroce_send_wqe *w = ex_qp(ibqp)->ex_cur;

	if (!w)
		return;
	w->ud.ah_num = ((struct mr_ah *)ah)->ah_num;
	w->ud.remote_qpn = remote_qpn;
	w->ud.remote_qkey = remote_qkey;
}

static void wr_set_sge_list(struct ibv_qp_ex *ibqp, size_t num, const struct ibv_sge *sg)
{
	struct mr_qp *qp = ex_qp(ibqp);
	struct metaroce_send_wqe *w = qp->ex_cur;
	struct metaroce_sge *s;
	size_t i;

	if (!w)
		return;
	if (num > qp->max_send_sge) {
		qp->ex_err = EINVAL;
		qp->ex_cur = NULL;
		return;
	}
	s = (struct metaroce_sge *)(w + 1);
	for (i = 0; i < num; i++) {
		s[i].addr = sg[i].addr;
		s[i].length = sg[i].length;
		s[i].lkey = sg[i].lkey;
	}
	w->num_sge = num;
}

static void wr_set_sge(struct ibv_qp_ex *ibqp, uint32_t lkey, uint64_t addr, uint32_t length)
{
	struct ibv_sge sge = { .addr = addr, .length = length, .lkey = lkey };

	wr_set_sge_list(ibqp, 1, &sge);
}

static void wr_set_inline_data_list(struct ibv_qp_ex *ibqp, size_t num,
				    const struct ibv_data_buf *buf)
{
	struct mr_qp *qp = ex_qp(ibqp);
	struct metaroce_send_wqe *w = qp->ex_cur;
	uint8_t *data;
	size_t i, len = 0;

	if (!w)
		return;
	data = (uint8_t *)(w + 1);
	for (i = 0; i < num; i++) {
		if (buf[i].length > qp->max_inline - len) {
			qp->ex_err = ENOMEM;
			qp->ex_cur = NULL;
			return;
		}
		memcpy(data + len, buf[i].addr, buf[i].length);
		len += buf[i].length;
	}
	w->length = len;
	w->flags |= METAROCE_WQE_INLINE;
}

static void wr_set_inline_data(struct ibv_qp_ex *ibqp, void *addr, size_t length)
{
	struct ibv_data_buf buf = { .addr = addr, .length = length };

	wr_set_inline_data_list(ibqp, 1, &buf);
}

/* What each QP type can post. */
static uint64_t ops_of(enum ibv_qp_type type)
{
	const uint64_t send = IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_SEND_WITH_IMM;

	switch (type) {
	case IBV_QPT_RC:
		return send | IBV_QP_EX_WITH_SEND_WITH_INV | IBV_QP_EX_WITH_RDMA_WRITE |
		       IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM | IBV_QP_EX_WITH_RDMA_READ |
		       IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP | IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD |
		       IBV_QP_EX_WITH_ATOMIC_WRITE | IBV_QP_EX_WITH_LOCAL_INV |
		       IBV_QP_EX_WITH_BIND_MW;
	case IBV_QPT_UC:
		return send | IBV_QP_EX_WITH_SEND_WITH_INV | IBV_QP_EX_WITH_RDMA_WRITE |
		       IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM | IBV_QP_EX_WITH_LOCAL_INV |
		       IBV_QP_EX_WITH_BIND_MW;
	case IBV_QPT_UD:
		return send;
	default:
		return 0;
	}
}

int mr_qp_ex_check(enum ibv_qp_type type, uint64_t send_ops_flags)
{
	return send_ops_flags & ~ops_of(type) ? -1 : 0;
}

void mr_qp_ex_init(struct mr_qp *qp, uint64_t flags)
{
	struct ibv_qp_ex *x = &qp->vqp.qp_ex;

#define SET(bit, member, fn) do { if (flags & IBV_QP_EX_WITH_##bit) x->member = fn; } while (0)
	SET(SEND, wr_send, wr_send);
	SET(SEND_WITH_IMM, wr_send_imm, wr_send_imm);
	SET(SEND_WITH_INV, wr_send_inv, wr_send_inv);
	SET(RDMA_WRITE, wr_rdma_write, wr_rdma_write);
	SET(RDMA_WRITE_WITH_IMM, wr_rdma_write_imm, wr_rdma_write_imm);
	SET(RDMA_READ, wr_rdma_read, wr_rdma_read);
	SET(ATOMIC_CMP_AND_SWP, wr_atomic_cmp_swp, wr_atomic_cmp_swp);
	SET(ATOMIC_FETCH_AND_ADD, wr_atomic_fetch_add, wr_atomic_fetch_add);
	SET(ATOMIC_WRITE, wr_atomic_write, wr_atomic_write);
	SET(LOCAL_INV, wr_local_inv, wr_local_inv);
	SET(BIND_MW, wr_bind_mw, wr_bind_mw);
#undef SET
	x->wr_set_ud_addr = wr_set_ud_addr;
	x->wr_set_sge = wr_set_sge;
	x->wr_set_sge_list = wr_set_sge_list;
	x->wr_set_inline_data = wr_set_inline_data;
	x->wr_set_inline_data_list = wr_set_inline_data_list;
	x->wr_start = ex_start;
	x->wr_complete = ex_complete;
	x->wr_abort = ex_abort;
	qp->vqp.comp_mask |= VERBS_QP_EX;
}
