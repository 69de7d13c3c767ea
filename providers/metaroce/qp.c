// SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB
/*
 * libmetaroce queue pairs and shared receive queues: work requests go straight into the
 * rings the process maps (struct metaroce_send_wqe, struct metaroce_recv_wqe); one doorbell
 * system call per ibv_post_send() list tells the kernel to take the new send requests, and
 * receives need none (the kernel reads the ring when a message arrives).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "metaroce.h"

static int rq_init(struct mr_rq *rq, int cmd_fd, const struct metaroce_ring_info *info,
		   uint32_t max_sge)
{
	if (info->slot_size < sizeof(struct metaroce_recv_wqe) +
				      (size_t)max_sge * sizeof(struct metaroce_sge)) {
		errno = EPROTO;
		return -1;
	}
	if (mr_ring_map(&rq->ring, cmd_fd, info))
		return -1;
	rq->max_sge = max_sge;
	pthread_spin_init(&rq->lock, PTHREAD_PROCESS_PRIVATE);
	return 0;
}

static void rq_fini(struct mr_rq *rq)
{
	if (!rq->ring.base)
		return;
	mr_ring_unmap(&rq->ring);
	pthread_spin_destroy(&rq->lock);
}

/* Maps the rings of a QP the kernel created (cap: what it granted). 0 or an errno. */
static int qp_map(struct mr_qp *qp, int cmd_fd, const struct metaroce_create_qp_resp *drv,
		  const struct ibv_qp_cap *cap, bool srq)
{
	qp->max_send_sge = cap->max_send_sge;
	qp->max_inline = cap->max_inline_data;
	if (drv->sq.slot_size < sizeof(struct metaroce_send_wqe) + qp->max_inline ||
	    drv->sq.slot_size < sizeof(struct metaroce_send_wqe) +
					(size_t)qp->max_send_sge * sizeof(struct metaroce_sge))
		return EPROTO;
	if (mr_ring_map(&qp->sq, cmd_fd, &drv->sq))
		return errno ? errno : EPROTO;
	pthread_spin_init(&qp->sq_lock, PTHREAD_PROCESS_PRIVATE);
	if (!srq && rq_init(&qp->rq, cmd_fd, &drv->rq, cap->max_recv_sge)) {
		int ret = errno ? errno : EPROTO;

		mr_ring_unmap(&qp->sq);
		pthread_spin_destroy(&qp->sq_lock);
		return ret;
	}
	/* The stats page of a native QP: read-only here (only the kernel writes it). */
	if (drv->stats.mmap_size >= sizeof(struct metaroce_conn_stats)) {
		void *p = mmap(NULL, drv->stats.mmap_size, PROT_READ, MAP_SHARED, cmd_fd,
			       drv->stats.mmap_offset);

		if (p != MAP_FAILED) {
			qp->stats = p;
			qp->stats_len = drv->stats.mmap_size;
		}
	}
	return 0;
}

struct ibv_qp *mr_create_qp(struct ibv_pd *pd, struct ibv_qp_init_attr *attr)
{
	struct ibv_create_qp cmd;
	struct {
		struct ib_uverbs_create_qp_resp ibv;
		struct metaroce_create_qp_resp drv;
	} resp;
	struct mr_qp *qp;
	int ret;

	qp = calloc(1, sizeof(*qp));
	if (!qp)
		return NULL;
	memset(&resp, 0, sizeof(resp));
	ret = ibv_cmd_create_qp(pd, &qp->vqp.qp, attr, &cmd, sizeof(cmd), &resp.ibv, sizeof(resp));
	if (ret) {
		free(qp);
		errno = ret;
		return NULL;
	}
	/* attr->cap now holds what the kernel granted. */
	ret = qp_map(qp, pd->context->cmd_fd, &resp.drv, &attr->cap, attr->srq);
	if (ret) {
		ibv_cmd_destroy_qp(&qp->vqp.qp);
		free(qp);
		errno = ret;
		return NULL;
	}
	return &qp->vqp.qp;
}

struct ibv_qp *mr_create_qp_ex(struct ibv_context *ctx, struct ibv_qp_init_attr_ex *attr)
{
	return mr_create_qp_req(ctx, attr, NULL);
}

struct ibv_qp *mr_create_qp_req(struct ibv_context *ctx, struct ibv_qp_init_attr_ex *attr,
				const struct metaroce_create_qp_req *req)
{
	struct {
		struct ibv_create_qp_ex ibv;
		struct metaroce_create_qp_req drv;
	} cmd;
	struct {
		struct ib_uverbs_ex_create_qp_resp ibv;
		struct metaroce_create_qp_resp drv;
	} resp;
	struct mr_qp *qp;
	int ret;

	/* No creation flag is supported (a zero one is accepted). */
	if ((attr->comp_mask & ~(IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_CREATE_FLAGS |
				 IBV_QP_INIT_ATTR_SEND_OPS_FLAGS)) ||
	    ((attr->comp_mask & IBV_QP_INIT_ATTR_CREATE_FLAGS) && attr->create_flags)) {
		errno = EOPNOTSUPP;
		return NULL;
	}
	if ((attr->comp_mask & IBV_QP_INIT_ATTR_SEND_OPS_FLAGS) &&
	    mr_qp_ex_check(attr->qp_type, attr->send_ops_flags)) {
		errno = EOPNOTSUPP;
		return NULL;
	}
	qp = calloc(1, sizeof(*qp));
	if (!qp)
		return NULL;
	memset(&cmd, 0, sizeof(cmd));
	memset(&resp, 0, sizeof(resp));
	/* Without a request the command ends with the core payload (the device's defaults). */
	if (req)
		cmd.drv = *req;
	ret = ibv_cmd_create_qp_ex2(ctx, &qp->vqp, attr, &cmd.ibv,
				    req ? sizeof(cmd) : sizeof(cmd.ibv), &resp.ibv, sizeof(resp));
	if (ret) {
		free(qp);
		errno = ret;
		return NULL;
	}
	ret = qp_map(qp, ctx->cmd_fd, &resp.drv, &attr->cap, attr->srq);
	if (ret) {
		ibv_cmd_destroy_qp(&qp->vqp.qp);
		free(qp);
		errno = ret;
		return NULL;
	}
	if (attr->comp_mask & IBV_QP_INIT_ATTR_SEND_OPS_FLAGS)
		mr_qp_ex_init(qp, attr->send_ops_flags);
	return &qp->vqp.qp;
}

int mr_query_qp(struct ibv_qp *qp, struct ibv_qp_attr *attr, int mask,
		struct ibv_qp_init_attr *init)
{
	struct ibv_query_qp cmd;

	return ibv_cmd_query_qp(qp, attr, mask, init, &cmd, sizeof(cmd));
}

int mr_modify_qp(struct ibv_qp *qp, struct ibv_qp_attr *attr, int mask)
{
	struct ibv_modify_qp cmd;

	return ibv_cmd_modify_qp(qp, attr, mask, &cmd, sizeof(cmd));
}

int mr_destroy_qp(struct ibv_qp *ibqp)
{
	struct mr_qp *qp = to_mqp(ibqp);
	int ret = ibv_cmd_destroy_qp(ibqp);

	if (ret)
		return ret;
	mr_ring_unmap(&qp->sq);
	pthread_spin_destroy(&qp->sq_lock);
	rq_fini(&qp->rq);
	if (qp->stats)
		munmap((void *)qp->stats, qp->stats_len);
	free(qp);
	return 0;
}

/* Tells the kernel that the send ring holds new requests: uverbs' post_send with no work
 * request (the kernel takes them from the ring). The command has a response, which uverbs
 * requires room for. */
int mr_ring_doorbell(struct ibv_qp *qp)
{
	struct ib_uverbs_post_send_resp resp;
	struct {
		struct ib_uverbs_cmd_hdr hdr;
		struct ib_uverbs_post_send cmd;
	} db;

	memset(&db, 0, sizeof(db));
	db.hdr.command = IB_USER_VERBS_CMD_POST_SEND;
	db.hdr.in_words = sizeof(db) / 4;
	db.hdr.out_words = sizeof(resp) / 4;
	db.cmd.response = (uintptr_t)&resp;
	db.cmd.qp_handle = qp->handle;
	db.cmd.wqe_size = sizeof(struct ib_uverbs_send_wr);
	if (write(qp->context->cmd_fd, &db, sizeof(db)) != (ssize_t)sizeof(db))
		return errno;
	return 0;
}

static int wqe_opcode(enum ibv_wr_opcode op, uint8_t *out)
{
	switch (op) {
	case IBV_WR_SEND:
		*out = METAROCE_WR_SEND;
		break;
	case IBV_WR_SEND_WITH_IMM:
		*out = METAROCE_WR_SEND_IMM;
		break;
	case IBV_WR_SEND_WITH_INV:
		*out = METAROCE_WR_SEND_INV;
		break;
	case IBV_WR_RDMA_WRITE:
		*out = METAROCE_WR_RDMA_WRITE;
		break;
	case IBV_WR_RDMA_WRITE_WITH_IMM:
		*out = METAROCE_WR_RDMA_WRITE_IMM;
		break;
	case IBV_WR_RDMA_READ:
		*out = METAROCE_WR_RDMA_READ;
		break;
	case IBV_WR_ATOMIC_CMP_AND_SWP:
		*out = METAROCE_WR_ATOMIC_CMP_SWP;
		break;
	case IBV_WR_ATOMIC_FETCH_AND_ADD:
		*out = METAROCE_WR_ATOMIC_FETCH_ADD;
		break;
	case IBV_WR_LOCAL_INV:
		*out = METAROCE_WR_LOCAL_INV;
		break;
	case IBV_WR_BIND_MW:
		*out = METAROCE_WR_BIND_MW;
		break;
	default:
		return EINVAL;
	}
	return 0;
}

uint8_t mr_wqe_flags(unsigned int send_flags)
{
	uint8_t f = 0;

	if (send_flags & IBV_SEND_SIGNALED)
		f |= METAROCE_WQE_SIGNALED;
	if (send_flags & IBV_SEND_SOLICITED)
		f |= METAROCE_WQE_SOLICITED;
	if (send_flags & IBV_SEND_FENCE)
		f |= METAROCE_WQE_FENCE;
	if (send_flags & IBV_SEND_INLINE)
		f |= METAROCE_WQE_INLINE;
	return f;
}

static void wqe_bind(struct metaroce_send_wqe *w, struct ibv_mw *mw, uint32_t new_rkey,
		     const struct ibv_mw_bind_info *bi)
{
	w->remote_addr = bi->addr;
	w->bind.length = bi->length;
	w->bind.mw_rkey = mw->rkey;
	w->bind.new_rkey = new_rkey;
	w->bind.mr_lkey = bi->mr ? bi->mr->lkey : 0;
	w->bind.access = bi->mw_access_flags;
}

/* Builds the WQE of `wr` in slot `w` (at most slot_size bytes). */
static int build_send(struct mr_qp *qp, struct ibv_send_wr *wr, struct metaroce_send_wqe *w)
{
	uint8_t opcode;
	int i;

	if (wqe_opcode(wr->opcode, &opcode))
		return EINVAL;
	memset(w, 0, sizeof(*w));
	w->wr_id = wr->wr_id;
	w->opcode = opcode;
	w->flags = mr_wqe_flags(wr->send_flags);
	switch (wr->opcode) {
	case IBV_WR_SEND_WITH_IMM:
	case IBV_WR_RDMA_WRITE_WITH_IMM:
		w->imm_data = wr->imm_data;
		break;
	case IBV_WR_SEND_WITH_INV:
	case IBV_WR_LOCAL_INV:
		w->rkey = wr->invalidate_rkey;
		break;
	default:
		break;
	}
	switch (wr->opcode) {
	case IBV_WR_RDMA_WRITE:
	case IBV_WR_RDMA_WRITE_WITH_IMM:
	case IBV_WR_RDMA_READ:
		w->remote_addr = wr->wr.rdma.remote_addr;
		w->rkey = wr->wr.rdma.rkey;
		break;
	case IBV_WR_ATOMIC_CMP_AND_SWP:
	case IBV_WR_ATOMIC_FETCH_AND_ADD:
		w->remote_addr = wr->wr.atomic.remote_addr;
		w->rkey = wr->wr.atomic.rkey;
		w->atomic.compare_add = wr->wr.atomic.compare_add;
		w->atomic.swap = wr->wr.atomic.swap;
		break;
	case IBV_WR_BIND_MW:
		wqe_bind(w, wr->bind_mw.mw, wr->bind_mw.rkey, &wr->bind_mw.bind_info);
		return 0;
	case IBV_WR_LOCAL_INV:
		return 0;
	default:
		break;
	}
	if (qp->vqp.qp.qp_type == IBV_QPT_UD) {
		if (!wr->wr.ud.ah)
			return EINVAL;
		w->ud.ah_num = ((struct mr_ah *)wr->wr.ud.ah)->ah_num;
		w->ud.remote_qpn = wr->wr.ud.remote_qpn;
		w->ud.remote_qkey = wr->wr.ud.remote_qkey;
	}
	if (wr->send_flags & IBV_SEND_INLINE) {
		uint8_t *data = (uint8_t *)(w + 1);
		size_t len = 0;

		for (i = 0; i < wr->num_sge; i++) {
			size_t n = wr->sg_list[i].length;

			if (n > qp->max_inline - len)
				return ENOMEM;
			memcpy(data + len, (void *)(uintptr_t)wr->sg_list[i].addr, n);
			len += n;
		}
		w->length = len;
		return 0;
	}
	if (wr->num_sge < 0 || (uint32_t)wr->num_sge > qp->max_send_sge)
		return EINVAL;
	for (i = 0; i < wr->num_sge; i++) {
		struct metaroce_sge *s = (struct metaroce_sge *)(w + 1) + i;

		s->addr = wr->sg_list[i].addr;
		s->length = wr->sg_list[i].length;
		s->lkey = wr->sg_list[i].lkey;
	}
	w->num_sge = wr->num_sge;
	return 0;
}

int mr_post_send(struct ibv_qp *ibqp, struct ibv_send_wr *wr, struct ibv_send_wr **bad)
{
	struct mr_qp *qp = to_mqp(ibqp);
	struct mr_ring *r = &qp->sq;
	uint32_t prod, cons;
	int posted = 0, ret = 0, db;

	pthread_spin_lock(&qp->sq_lock);
	prod = atomic_load_explicit(mr_ring_producer(r), memory_order_relaxed);
	cons = atomic_load_explicit(mr_ring_consumer(r), memory_order_acquire) & r->mask;
	for (; wr; wr = wr->next) {
		if (((prod + 1) & r->mask) == cons) {
			ret = ENOMEM;
			break;
		}
		ret = build_send(qp, wr, mr_ring_slot(r, prod));
		if (ret)
			break;
		prod = (prod + 1) & r->mask;
		posted++;
	}
	if (posted) {
		/* The slots are written before the kernel sees the index. */
		atomic_store_explicit(mr_ring_producer(r), prod, memory_order_release);
		db = mr_ring_doorbell(ibqp);
		if (!ret)
			ret = db;
	}
	pthread_spin_unlock(&qp->sq_lock);
	if (ret)
		*bad = wr;
	return ret;
}

int mr_bind_mw(struct ibv_qp *ibqp, struct ibv_mw *mw, struct ibv_mw_bind *bind)
{
	struct ibv_send_wr wr = { 0 }, *bad;
	uint32_t new_rkey;
	int ret;

	/* A type 1 window is never zero-based; an MR is needed unless the bind only unbinds
	 * (length 0). */
	if (mw->type != IBV_MW_TYPE_1 ||
	    (bind->bind_info.mw_access_flags & IBV_ACCESS_ZERO_BASED) ||
	    (!bind->bind_info.mr && bind->bind_info.length))
		return EINVAL;
	/* A type 1 window's key changes with every bind: a new tag, same index. */
	new_rkey = (mw->rkey & ~0xffu) | ((mw->rkey + 1) & 0xffu);
	wr.wr_id = bind->wr_id;
	wr.opcode = IBV_WR_BIND_MW;
	wr.send_flags = bind->send_flags;
	wr.bind_mw.mw = mw;
	wr.bind_mw.rkey = new_rkey;
	wr.bind_mw.bind_info = bind->bind_info;
	ret = mr_post_send(ibqp, &wr, &bad);
	if (!ret)
		mw->rkey = new_rkey;
	return ret;
}

static int post_recv_ring(struct mr_rq *rq, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad)
{
	struct mr_ring *r = &rq->ring;
	uint32_t prod, cons;
	int ret = 0, i;

	pthread_spin_lock(&rq->lock);
	prod = atomic_load_explicit(mr_ring_producer(r), memory_order_relaxed);
	cons = atomic_load_explicit(mr_ring_consumer(r), memory_order_acquire) & r->mask;
	for (; wr; wr = wr->next) {
		struct metaroce_recv_wqe *w;
		struct metaroce_sge *s;

		if (((prod + 1) & r->mask) == cons) {
			ret = ENOMEM;
			break;
		}
		if (wr->num_sge < 0 || (uint32_t)wr->num_sge > rq->max_sge) {
			ret = EINVAL;
			break;
		}
		w = mr_ring_slot(r, prod);
		w->wr_id = wr->wr_id;
		w->num_sge = wr->num_sge;
		w->reserved = 0;
		s = (struct metaroce_sge *)(w + 1);
		for (i = 0; i < wr->num_sge; i++) {
			s[i].addr = wr->sg_list[i].addr;
			s[i].length = wr->sg_list[i].length;
			s[i].lkey = wr->sg_list[i].lkey;
		}
		prod = (prod + 1) & r->mask;
	}
	atomic_store_explicit(mr_ring_producer(r), prod, memory_order_release);
	pthread_spin_unlock(&rq->lock);
	if (ret)
		*bad = wr;
	return ret;
}

int mr_post_recv(struct ibv_qp *ibqp, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad)
{
	struct mr_qp *qp = to_mqp(ibqp);

	/* A QP with an SRQ has no receive queue of its own; in RESET a QP takes no receive
	 * (IBA C10-97.2.1). */
	if (!qp->rq.ring.base || ibqp->state == IBV_QPS_RESET) {
		*bad = wr;
		return EINVAL;
	}
	return post_recv_ring(&qp->rq, wr, bad);
}

struct ibv_srq *mr_create_srq(struct ibv_pd *pd, struct ibv_srq_init_attr *attr)
{
	struct ibv_create_srq cmd;
	struct {
		struct ib_uverbs_create_srq_resp ibv;
		struct metaroce_create_srq_resp drv;
	} resp;
	struct mr_srq *srq;
	int ret;

	srq = calloc(1, sizeof(*srq));
	if (!srq)
		return NULL;
	memset(&resp, 0, sizeof(resp));
	ret = ibv_cmd_create_srq(pd, &srq->ibv_srq, attr, &cmd, sizeof(cmd), &resp.ibv,
				 sizeof(resp));
	if (ret) {
		free(srq);
		errno = ret;
		return NULL;
	}
	if (rq_init(&srq->rq, pd->context->cmd_fd, &resp.drv.rq,
		    attr->attr.max_sge ? attr->attr.max_sge : 1)) {
		ret = errno ? errno : EPROTO;
		ibv_cmd_destroy_srq(&srq->ibv_srq);
		free(srq);
		errno = ret;
		return NULL;
	}
	srq->srq_num = resp.drv.srq_num;
	return &srq->ibv_srq;
}

int mr_modify_srq(struct ibv_srq *ibsrq, struct ibv_srq_attr *attr, int mask)
{
	struct mr_srq *srq = to_msrq(ibsrq);
	struct metaroce_ring_info info;
	struct {
		struct ibv_modify_srq ibv;
		struct metaroce_modify_srq_req drv;
	} cmd;
	struct mr_ring ring = { 0 };
	int ret;

	memset(&cmd, 0, sizeof(cmd));
	memset(&info, 0, sizeof(info));
	cmd.drv.ring_info_addr = (uintptr_t)&info;
	/* Held across a resize: the kernel moves the posted receives to the new ring. */
	pthread_spin_lock(&srq->rq.lock);
	ret = ibv_cmd_modify_srq(ibsrq, attr, mask, &cmd.ibv, sizeof(cmd));
	if (!ret && (mask & IBV_SRQ_MAX_WR)) {
		if (mr_ring_map(&ring, ibsrq->context->cmd_fd, &info)) {
			ret = errno ? errno : EPROTO;
		} else {
			mr_ring_unmap(&srq->rq.ring);
			srq->rq.ring = ring;
		}
	}
	pthread_spin_unlock(&srq->rq.lock);
	return ret;
}

int mr_query_srq(struct ibv_srq *srq, struct ibv_srq_attr *attr)
{
	struct ibv_query_srq cmd;

	return ibv_cmd_query_srq(srq, attr, &cmd, sizeof(cmd));
}

int mr_destroy_srq(struct ibv_srq *ibsrq)
{
	struct mr_srq *srq = to_msrq(ibsrq);
	int ret = ibv_cmd_destroy_srq(ibsrq);

	if (ret)
		return ret;
	rq_fini(&srq->rq);
	free(srq);
	return 0;
}

int mr_post_srq_recv(struct ibv_srq *srq, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad)
{
	return post_recv_ring(&to_msrq(srq)->rq, wr, bad);
}
