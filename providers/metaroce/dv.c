// SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB
/*
 * metaroce_dv_*: the provider's extension API (metaroce_dv.h). Each call first checks that
 * the object belongs to a MetaRoCE device driven by this library.
 */
#include <errno.h>
#include <string.h>

#include "metaroce.h"
#include "metaroce_dv.h"

#define MR_EXPORT __attribute__((visibility("default")))

MR_EXPORT bool metaroce_dv_is_supported(struct ibv_device *device)
{
	return mr_is_ours(device);
}

MR_EXPORT int metaroce_dv_query_device(struct ibv_context *context,
				       struct metaroce_dv_device_attr *attr)
{
	struct mr_context *ctx;

	if (!context || !mr_is_ours(context->device))
		return EOPNOTSUPP;
	ctx = to_mctx(context);
	memset(attr, 0, sizeof(*attr));
	attr->abi_version = ctx->abi_version;
	if (ctx->caps & METAROCE_CAP_NATIVE)
		attr->flags |= METAROCE_DV_DEVICE_NATIVE;
	if (ctx->caps & METAROCE_CAP_QP_WIRE)
		attr->flags |= METAROCE_DV_DEVICE_QP_WIRE;
	attr->max_paths = ctx->max_paths;
	attr->max_inline_data = ctx->max_inline;
	attr->max_sge = ctx->max_sge;
	return 0;
}

MR_EXPORT int metaroce_dv_query_conn(struct ibv_qp *ibqp, struct metaroce_dv_conn *conn)
{
	const struct metaroce_conn_stats *page;
	struct metaroce_conn_stats copy;
	int tries, i;

	if (!ibqp || !mr_is_ours(ibqp->context->device) || !to_mqp(ibqp)->stats)
		return EOPNOTSUPP;
	page = to_mqp(ibqp)->stats;
	/* The kernel's sequence lock: an odd seq, or one that changed, is a torn copy. */
	for (tries = 0; tries < 1000; tries++) {
		uint32_t s1 = atomic_load_explicit((_Atomic uint32_t *)&page->seq,
						   memory_order_acquire);

		if (s1 & 1)
			continue;
		memcpy(&copy, page, sizeof(copy));
		atomic_thread_fence(memory_order_acquire);
		if (atomic_load_explicit((_Atomic uint32_t *)&page->seq, memory_order_relaxed) != s1)
			continue;
		memset(conn, 0, sizeof(*conn));
		conn->paths = copy.paths < METAROCE_DV_MAX_PATHS ? copy.paths : METAROCE_DV_MAX_PATHS;
		conn->window = copy.window;
		conn->rate_hint_kbps = copy.rate_hint_kbps;
		conn->updates = copy.updates;
		for (i = 0; i < (int)conn->paths; i++) {
			const struct metaroce_path_stats *p = &copy.path[i];

			conn->path[i] = (struct metaroce_dv_path){
				.src_port = p->src_port, .state = p->state, .cwnd = p->cwnd,
				.srtt_ns = p->srtt_ns, .min_rtt_ns = p->min_rtt_ns, .sent = p->sent,
				.retransmits = p->retransmits, .ecn_echoes = p->ecn_echoes,
				.timeouts = p->timeouts,
			};
		}
		return 0;
	}
	return EAGAIN;
}

MR_EXPORT struct ibv_qp *metaroce_dv_create_qp(struct ibv_context *context,
					       struct ibv_qp_init_attr_ex *qp_attr,
					       struct metaroce_dv_qp_init_attr *dv_attr)
{
	/* A QP made here may read its connection's figures (metaroce_dv_query_conn). */
	struct metaroce_create_qp_req req = { .flags = METAROCE_QP_CONN_STATS };
	uint64_t mask = dv_attr ? dv_attr->comp_mask : 0;

	if (!context || !mr_is_ours(context->device) ||
	    (mask & ~(uint64_t)(METAROCE_DV_QP_INIT_ATTR_WIRE | METAROCE_DV_QP_INIT_ATTR_PATHS)) ||
	    (mask && !(to_mctx(context)->caps & METAROCE_CAP_QP_WIRE))) {
		errno = EOPNOTSUPP;
		return NULL;
	}
	if (mask & METAROCE_DV_QP_INIT_ATTR_WIRE) {
		switch (dv_attr->wire) {
		case METAROCE_DV_WIRE_DEFAULT:
			break;
		case METAROCE_DV_WIRE_ROCEV2:
			req.wire = METAROCE_QP_WIRE_ROCEV2;
			break;
		case METAROCE_DV_WIRE_NATIVE:
			req.wire = METAROCE_QP_WIRE_NATIVE;
			break;
		default:
			errno = EINVAL;
			return NULL;
		}
	}
	if (mask & METAROCE_DV_QP_INIT_ATTR_PATHS) {
		if (!dv_attr->paths) {
			errno = EINVAL;
			return NULL;
		}
		req.paths = dv_attr->paths;
	}
	return mr_create_qp_req(context, qp_attr, &req);
}
