// SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB
/*
 * libmetaroce: device matching, user contexts, protection domains, memory regions and
 * windows, address handles, multicast, and the table of verbs libibverbs calls.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "metaroce.h"

int mr_ring_map(struct mr_ring *r, int cmd_fd, const struct metaroce_ring_info *info)
{
	void *p;

	/* Geometry as the kernel sized it: powers of two, the map covering every slot. */
	if (!info->slots || (info->slots & (info->slots - 1)) || !info->slot_size ||
	    (info->slot_size & (info->slot_size - 1)) ||
	    info->mmap_size < METAROCE_RING_SLOTS + (uint64_t)info->slots * info->slot_size) {
		errno = EPROTO;
		return -1;
	}
	p = mmap(NULL, info->mmap_size, PROT_READ | PROT_WRITE, MAP_SHARED, cmd_fd,
		 info->mmap_offset);
	if (p == MAP_FAILED)
		return -1;
	r->base = p;
	r->map_size = info->mmap_size;
	r->mask = info->slots - 1;
	r->slot_size = info->slot_size;
	return 0;
}

void mr_ring_unmap(struct mr_ring *r)
{
	if (r->base)
		munmap(r->base, r->map_size);
	r->base = NULL;
}

static int mr_query_device_ex(struct ibv_context *ctx,
			      const struct ibv_query_device_ex_input *input,
			      struct ibv_device_attr_ex *attr, size_t attr_size)
{
	struct ib_uverbs_ex_query_device_resp resp;
	size_t resp_size = sizeof(resp);
	uint64_t fw;
	int ret;

	ret = ibv_cmd_query_device_any(ctx, input, attr, attr_size, &resp, &resp_size);
	if (ret)
		return ret;
	fw = resp.base.fw_ver;
	snprintf(attr->orig_attr.fw_ver, sizeof(attr->orig_attr.fw_ver), "%u.%u.%u",
		 (unsigned int)(fw >> 32) & 0xffff, (unsigned int)(fw >> 16) & 0xffff,
		 (unsigned int)fw & 0xffff);
	return 0;
}

static int mr_query_port(struct ibv_context *ctx, uint8_t port, struct ibv_port_attr *attr)
{
	struct ibv_query_port cmd;

	return ibv_cmd_query_port(ctx, port, attr, &cmd, sizeof(cmd));
}

static struct ibv_pd *mr_alloc_pd(struct ibv_context *ctx)
{
	struct ib_uverbs_alloc_pd_resp resp;
	struct ibv_alloc_pd cmd;
	struct ibv_pd *pd;
	int ret;

	pd = calloc(1, sizeof(*pd));
	if (!pd)
		return NULL;
	ret = ibv_cmd_alloc_pd(ctx, pd, &cmd, sizeof(cmd), &resp, sizeof(resp));
	if (ret) {
		free(pd);
		errno = ret;
		return NULL;
	}
	return pd;
}

static int mr_dealloc_pd(struct ibv_pd *pd)
{
	int ret = ibv_cmd_dealloc_pd(pd);

	if (!ret)
		free(pd);
	return ret;
}

static struct ibv_mr *mr_reg_mr(struct ibv_pd *pd, void *addr, size_t length, uint64_t hca_va,
				int access)
{
	struct ib_uverbs_reg_mr_resp resp;
	struct ibv_reg_mr cmd;
	struct verbs_mr *vmr;
	int ret;

	vmr = calloc(1, sizeof(*vmr));
	if (!vmr)
		return NULL;
	ret = ibv_cmd_reg_mr(pd, addr, length, hca_va, access, vmr, &cmd, sizeof(cmd), &resp,
			     sizeof(resp));
	if (ret) {
		free(vmr);
		errno = ret;
		return NULL;
	}
	return &vmr->ibv_mr;
}

static int mr_dereg_mr(struct verbs_mr *vmr)
{
	int ret = ibv_cmd_dereg_mr(vmr);

	if (!ret)
		free(vmr);
	return ret;
}

static struct ibv_mw *mr_alloc_mw(struct ibv_pd *pd, enum ibv_mw_type type)
{
	struct ib_uverbs_alloc_mw_resp resp;
	struct ibv_alloc_mw cmd;
	struct ibv_mw *mw;
	int ret;

	mw = calloc(1, sizeof(*mw));
	if (!mw)
		return NULL;
	ret = ibv_cmd_alloc_mw(pd, type, mw, &cmd, sizeof(cmd), &resp, sizeof(resp));
	if (ret) {
		free(mw);
		errno = ret;
		return NULL;
	}
	return mw;
}

static int mr_dealloc_mw(struct ibv_mw *mw)
{
	int ret = ibv_cmd_dealloc_mw(mw);

	if (!ret)
		free(mw);
	return ret;
}

static struct ibv_ah *mr_create_ah(struct ibv_pd *pd, struct ibv_ah_attr *attr)
{
	struct {
		struct ib_uverbs_create_ah_resp ibv;
		struct metaroce_create_ah_resp drv;
	} resp;
	struct mr_ah *ah;
	int ret;

	ah = calloc(1, sizeof(*ah));
	if (!ah)
		return NULL;
	memset(&resp, 0, sizeof(resp));
	ret = ibv_cmd_create_ah(pd, &ah->ibv_ah, attr, &resp.ibv, sizeof(resp));
	if (ret) {
		free(ah);
		errno = ret;
		return NULL;
	}
	ah->ah_num = resp.drv.ah_num;
	return &ah->ibv_ah;
}

static int mr_destroy_ah(struct ibv_ah *ah)
{
	int ret = ibv_cmd_destroy_ah(ah);

	if (!ret)
		free(ah);
	return ret;
}

static int mr_attach_mcast(struct ibv_qp *qp, const union ibv_gid *gid, uint16_t lid)
{
	return ibv_cmd_attach_mcast(qp, gid, lid);
}

static int mr_detach_mcast(struct ibv_qp *qp, const union ibv_gid *gid, uint16_t lid)
{
	return ibv_cmd_detach_mcast(qp, gid, lid);
}

static void mr_free_context(struct ibv_context *ibctx)
{
	struct mr_context *ctx = to_mctx(ibctx);

	verbs_uninit_context(&ctx->ibv_ctx);
	free(ctx);
}

/* The verbs libibverbs calls through the context; the others stay NULL (EOPNOTSUPP). */
static const struct verbs_context_ops mr_ops = {
	.slot = {
		[MR_OP_QUERY_DEVICE_EX] = (void *)mr_query_device_ex,
		[MR_OP_QUERY_PORT] = (void *)mr_query_port,
		[MR_OP_ALLOC_PD] = (void *)mr_alloc_pd,
		[MR_OP_DEALLOC_PD] = (void *)mr_dealloc_pd,
		[MR_OP_REG_MR] = (void *)mr_reg_mr,
		[MR_OP_DEREG_MR] = (void *)mr_dereg_mr,
		[MR_OP_ALLOC_MW] = (void *)mr_alloc_mw,
		[MR_OP_DEALLOC_MW] = (void *)mr_dealloc_mw,
		[MR_OP_BIND_MW] = (void *)mr_bind_mw,
		[MR_OP_CREATE_AH] = (void *)mr_create_ah,
		[MR_OP_DESTROY_AH] = (void *)mr_destroy_ah,
		[MR_OP_ATTACH_MCAST] = (void *)mr_attach_mcast,
		[MR_OP_DETACH_MCAST] = (void *)mr_detach_mcast,
		[MR_OP_CREATE_CQ] = (void *)mr_create_cq,
		[MR_OP_CREATE_CQ_EX] = (void *)mr_create_cq_ex,
		[MR_OP_POLL_CQ] = (void *)mr_poll_cq,
		[MR_OP_REQ_NOTIFY_CQ] = (void *)mr_req_notify_cq,
		[MR_OP_RESIZE_CQ] = (void *)mr_resize_cq,
		[MR_OP_MODIFY_CQ] = (void *)mr_modify_cq,
		[MR_OP_DESTROY_CQ] = (void *)mr_destroy_cq,
		[MR_OP_CREATE_QP] = (void *)mr_create_qp,
		[MR_OP_CREATE_QP_EX] = (void *)mr_create_qp_ex,
		[MR_OP_QUERY_QP] = (void *)mr_query_qp,
		[MR_OP_MODIFY_QP] = (void *)mr_modify_qp,
		[MR_OP_DESTROY_QP] = (void *)mr_destroy_qp,
		[MR_OP_POST_SEND] = (void *)mr_post_send,
		[MR_OP_POST_RECV] = (void *)mr_post_recv,
		[MR_OP_CREATE_SRQ] = (void *)mr_create_srq,
		[MR_OP_MODIFY_SRQ] = (void *)mr_modify_srq,
		[MR_OP_QUERY_SRQ] = (void *)mr_query_srq,
		[MR_OP_DESTROY_SRQ] = (void *)mr_destroy_srq,
		[MR_OP_POST_SRQ_RECV] = (void *)mr_post_srq_recv,
		[MR_OP_FREE_CONTEXT] = (void *)mr_free_context,
	},
};

static struct verbs_context *mr_alloc_context(struct ibv_device *ibdev, int cmd_fd,
					      void *private_data)
{
	struct {
		struct ibv_get_context ibv;
		struct metaroce_alloc_ucontext_req drv;
	} cmd;
	struct {
		struct ib_uverbs_get_context_resp ibv;
		struct metaroce_alloc_ucontext_resp drv;
	} resp;
	struct mr_context *ctx;

	(void)private_data;
	/* The offset of the verbs context in ours, passed as a pointer (the private ABI's way). */
	ctx = _verbs_init_and_alloc_context(
		ibdev, cmd_fd, sizeof(*ctx),
		(struct verbs_context *)offsetof(struct mr_context, ibv_ctx), MR_DRIVER_ID);
	if (!ctx)
		return NULL;
	memset(&cmd, 0, sizeof(cmd));
	memset(&resp, 0, sizeof(resp));
	cmd.drv.abi_version = METAROCE_ABI_VERSION;
	if (ibv_cmd_get_context(&ctx->ibv_ctx, &cmd.ibv, sizeof(cmd), &resp.ibv, sizeof(resp)))
		goto err;
	if (resp.drv.abi_version != METAROCE_ABI_VERSION) {
		errno = EPROTO;
		goto err;
	}
	ctx->abi_version = resp.drv.abi_version;
	ctx->caps = resp.drv.caps;
	ctx->max_inline = resp.drv.max_inline_data;
	ctx->max_sge = resp.drv.max_sge;
	ctx->max_paths = resp.drv.max_paths;
	verbs_set_ops(&ctx->ibv_ctx, &mr_ops);
	return &ctx->ibv_ctx;
err:
	verbs_uninit_context(&ctx->ibv_ctx);
	free(ctx);
	return NULL;
}

static struct verbs_device *mr_alloc_device(struct verbs_sysfs_dev *sysfs_dev)
{
	(void)sysfs_dev;
	return calloc(1, sizeof(struct verbs_device));
}

static void mr_uninit_device(struct verbs_device *dev)
{
	free(dev);
}

static const struct verbs_match_ent mr_match_table[] = {
	{ .u.driver_id = MR_DRIVER_ID, .kind = VERBS_MATCH_DRIVER_ID },
	{ .kind = VERBS_MATCH_SENTINEL },
};

static const struct verbs_device_ops mr_device_ops = {
	.name = "metaroce",
	.match_min_abi_version = METAROCE_ABI_VERSION,
	.match_max_abi_version = METAROCE_ABI_VERSION,
	.match_table = mr_match_table,
	.alloc_device = mr_alloc_device,
	.uninit_device = mr_uninit_device,
	.alloc_context = mr_alloc_context,
};

bool mr_is_ours(struct ibv_device *dev)
{
	/* Every device libibverbs hands out is a struct verbs_device (ibv_device first). */
	return dev && ((struct verbs_device *)dev)->ops == &mr_device_ops;
}

static __attribute__((constructor)) void mr_register(void)
{
	verbs_register_driver_34(&mr_device_ops);
}
