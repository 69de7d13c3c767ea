/* SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB */
/*
 * What libmetaroce uses of libibverbs' private provider interface, IBVERBS_PRIVATE_34 (the
 * interface rdma-core 44, Debian 12's libibverbs1, exports to its providers), declared here
 * because rdma-core installs no header for it.
 *
 * Why this stays correct: every layout below is part of that private ABI version, and the
 * provider binds to it by name. The one entry point, verbs_register_driver_34(), and every
 * ibv_cmd_*() are versioned symbols (@IBVERBS_PRIVATE_34): a libibverbs with another private
 * ABI has none of them, so the dynamic loader refuses this library before any of these
 * layouts is used, and libibverbs carries on without it.
 *
 * Only what the provider uses is declared. struct verbs_context_ops is declared as its slots
 * (function pointers in rdma-core's order, alphabetical), filled by name below.
 */
#ifndef METAROCE_VERBS_PRIVATE_H
#define METAROCE_VERBS_PRIVATE_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <infiniband/verbs.h>
#include <rdma/ib_user_verbs.h>

/* --- Devices and their matching ------------------------------------------------------- */

enum { VERBS_MATCH_SENTINEL = 0, VERBS_MATCH_DRIVER_ID = 3 };

struct verbs_match_ent {
	void *driver_data;
	union {
		const char *modalias;
		uint64_t driver_id;
	} u;
	uint16_t vendor;
	uint16_t device;
	uint8_t kind;
};

struct verbs_sysfs_dev;		/* libibverbs' record of a sysfs device: opaque here */
struct verbs_device;

struct verbs_device_ops {
	const char *name;
	uint32_t match_min_abi_version;
	uint32_t match_max_abi_version;
	const struct verbs_match_ent *match_table;
	const struct verbs_device_ops **static_providers;
	bool (*match_device)(struct verbs_sysfs_dev *sysfs_dev);
	struct verbs_context *(*alloc_context)(struct ibv_device *device, int cmd_fd,
					       void *private_data);
	struct verbs_context *(*import_context)(struct ibv_device *device, int cmd_fd);
	struct verbs_device *(*alloc_device)(struct verbs_sysfs_dev *sysfs_dev);
	void (*uninit_device)(struct verbs_device *device);
};

struct mr_list_node {
	struct mr_list_node *next, *prev;
};

/* Allocated by the provider (alloc_device) at least this large, ibv_device first. */
struct verbs_device {
	struct ibv_device device;
	const struct verbs_device_ops *ops;
	atomic_int refcount;
	struct mr_list_node entry;
	struct verbs_sysfs_dev *sysfs;
	uint64_t core_support;
};

void verbs_register_driver_34(const struct verbs_device_ops *ops);

/* --- Contexts --------------------------------------------------------------------------- */

/* Slots of struct verbs_context_ops, in rdma-core 44's order. */
enum mr_op_slot {
	MR_OP_ADVISE_MR,
	MR_OP_ALLOC_DM,
	MR_OP_ALLOC_MW,
	MR_OP_ALLOC_NULL_MR,
	MR_OP_ALLOC_PARENT_DOMAIN,
	MR_OP_ALLOC_PD,
	MR_OP_ALLOC_TD,
	MR_OP_ASYNC_EVENT,
	MR_OP_ATTACH_COUNTERS_POINT_FLOW,
	MR_OP_ATTACH_MCAST,
	MR_OP_BIND_MW,
	MR_OP_CLOSE_XRCD,
	MR_OP_CQ_EVENT,
	MR_OP_CREATE_AH,
	MR_OP_CREATE_COUNTERS,
	MR_OP_CREATE_CQ,
	MR_OP_CREATE_CQ_EX,
	MR_OP_CREATE_FLOW,
	MR_OP_CREATE_FLOW_ACTION_ESP,
	MR_OP_CREATE_QP,
	MR_OP_CREATE_QP_EX,
	MR_OP_CREATE_RWQ_IND_TABLE,
	MR_OP_CREATE_SRQ,
	MR_OP_CREATE_SRQ_EX,
	MR_OP_CREATE_WQ,
	MR_OP_DEALLOC_MW,
	MR_OP_DEALLOC_PD,
	MR_OP_DEALLOC_TD,
	MR_OP_DEREG_MR,
	MR_OP_DESTROY_AH,
	MR_OP_DESTROY_COUNTERS,
	MR_OP_DESTROY_CQ,
	MR_OP_DESTROY_FLOW,
	MR_OP_DESTROY_FLOW_ACTION,
	MR_OP_DESTROY_QP,
	MR_OP_DESTROY_RWQ_IND_TABLE,
	MR_OP_DESTROY_SRQ,
	MR_OP_DESTROY_WQ,
	MR_OP_DETACH_MCAST,
	MR_OP_FREE_CONTEXT,
	MR_OP_FREE_DM,
	MR_OP_GET_SRQ_NUM,
	MR_OP_IMPORT_DM,
	MR_OP_IMPORT_MR,
	MR_OP_IMPORT_PD,
	MR_OP_MODIFY_CQ,
	MR_OP_MODIFY_FLOW_ACTION_ESP,
	MR_OP_MODIFY_QP,
	MR_OP_MODIFY_QP_RATE_LIMIT,
	MR_OP_MODIFY_SRQ,
	MR_OP_MODIFY_WQ,
	MR_OP_OPEN_QP,
	MR_OP_OPEN_XRCD,
	MR_OP_POLL_CQ,
	MR_OP_POST_RECV,
	MR_OP_POST_SEND,
	MR_OP_POST_SRQ_OPS,
	MR_OP_POST_SRQ_RECV,
	MR_OP_QUERY_DEVICE_EX,
	MR_OP_QUERY_ECE,
	MR_OP_QUERY_PORT,
	MR_OP_QUERY_QP,
	MR_OP_QUERY_QP_DATA_IN_ORDER,
	MR_OP_QUERY_RT_VALUES,
	MR_OP_QUERY_SRQ,
	MR_OP_READ_COUNTERS,
	MR_OP_REG_DM_MR,
	MR_OP_REG_DMABUF_MR,
	MR_OP_REG_MR,
	MR_OP_REQ_NOTIFY_CQ,
	MR_OP_REREG_MR,
	MR_OP_RESIZE_CQ,
	MR_OP_SET_ECE,
	MR_OP_UNIMPORT_DM,
	MR_OP_UNIMPORT_MR,
	MR_OP_UNIMPORT_PD,
	MR_OP_COUNT
};

struct verbs_context_ops {
	void *slot[MR_OP_COUNT];
};

void *_verbs_init_and_alloc_context(struct ibv_device *device, int cmd_fd, size_t alloc_size,
				    struct verbs_context *context_offset, uint32_t driver_id);
void verbs_uninit_context(struct verbs_context *context);
void verbs_set_ops(struct verbs_context *vctx, const struct verbs_context_ops *ops);

/* --- Objects with provider-visible wrappers --------------------------------------------- */

struct verbs_mr {
	struct ibv_mr ibv_mr;
	int mr_type;		/* enum ibv_mr_type of the private interface */
	int access;
};

enum { VERBS_QP_XRCD = 1 << 0, VERBS_QP_EX = 1 << 1 };

struct verbs_qp {
	union {
		struct ibv_qp qp;
		struct ibv_qp_ex qp_ex;
	};
	uint32_t comp_mask;
	struct verbs_xrcd *xrcd;
};

struct verbs_cq {
	union {
		struct ibv_cq cq;
		struct ibv_cq_ex cq_ex;
	};
};

/* --- Commands: the core uverbs command after its header; a provider's data follows ------ */

struct ex_hdr {
	struct ib_uverbs_cmd_hdr hdr;
	struct ib_uverbs_ex_cmd_hdr ex_hdr;
};

#define MR_CMD(name, core)                                                              \
	struct name {                                                                    \
		struct ib_uverbs_cmd_hdr hdr;                                            \
		struct core core_payload;                                                \
	}

MR_CMD(ibv_get_context, ib_uverbs_get_context);
MR_CMD(ibv_query_port, ib_uverbs_query_port);
MR_CMD(ibv_alloc_pd, ib_uverbs_alloc_pd);
MR_CMD(ibv_reg_mr, ib_uverbs_reg_mr);
MR_CMD(ibv_alloc_mw, ib_uverbs_alloc_mw);
MR_CMD(ibv_create_cq, ib_uverbs_create_cq);
MR_CMD(ibv_resize_cq, ib_uverbs_resize_cq);
MR_CMD(ibv_create_qp, ib_uverbs_create_qp);
MR_CMD(ibv_modify_qp, ib_uverbs_modify_qp);
MR_CMD(ibv_query_qp, ib_uverbs_query_qp);
MR_CMD(ibv_create_srq, ib_uverbs_create_srq);
MR_CMD(ibv_modify_srq, ib_uverbs_modify_srq);
MR_CMD(ibv_query_srq, ib_uverbs_query_srq);

struct ibv_create_cq_ex {
	struct ex_hdr hdr;
	struct ib_uverbs_ex_create_cq core_payload;
};

struct ibv_create_qp_ex {
	struct ex_hdr hdr;
	struct ib_uverbs_ex_create_qp core_payload;
};

struct ibv_modify_cq {
	struct ex_hdr hdr;
	struct ib_uverbs_ex_modify_cq core_payload;
};

struct ibv_query_device_ex_input;

int ibv_cmd_get_context(struct verbs_context *context, struct ibv_get_context *cmd,
			size_t cmd_size, struct ib_uverbs_get_context_resp *resp,
			size_t resp_size);
int ibv_cmd_query_device_any(struct ibv_context *context,
			     const struct ibv_query_device_ex_input *input,
			     struct ibv_device_attr_ex *attr, size_t attr_size,
			     struct ib_uverbs_ex_query_device_resp *resp, size_t *resp_size);
int ibv_cmd_query_port(struct ibv_context *context, uint8_t port_num,
		       struct ibv_port_attr *port_attr, struct ibv_query_port *cmd,
		       size_t cmd_size);
int ibv_cmd_alloc_pd(struct ibv_context *context, struct ibv_pd *pd, struct ibv_alloc_pd *cmd,
		     size_t cmd_size, struct ib_uverbs_alloc_pd_resp *resp, size_t resp_size);
int ibv_cmd_dealloc_pd(struct ibv_pd *pd);
int ibv_cmd_reg_mr(struct ibv_pd *pd, void *addr, size_t length, uint64_t hca_va, int access,
		   struct verbs_mr *vmr, struct ibv_reg_mr *cmd, size_t cmd_size,
		   struct ib_uverbs_reg_mr_resp *resp, size_t resp_size);
int ibv_cmd_dereg_mr(struct verbs_mr *vmr);
int ibv_cmd_alloc_mw(struct ibv_pd *pd, enum ibv_mw_type type, struct ibv_mw *mw,
		     struct ibv_alloc_mw *cmd, size_t cmd_size,
		     struct ib_uverbs_alloc_mw_resp *resp, size_t resp_size);
int ibv_cmd_dealloc_mw(struct ibv_mw *mw);
int ibv_cmd_create_cq(struct ibv_context *context, int cqe, struct ibv_comp_channel *channel,
		      int comp_vector, struct ibv_cq *cq, struct ibv_create_cq *cmd,
		      size_t cmd_size, struct ib_uverbs_create_cq_resp *resp, size_t resp_size);
int ibv_cmd_create_cq_ex(struct ibv_context *context, const struct ibv_cq_init_attr_ex *cq_attr,
			 struct verbs_cq *cq, struct ibv_create_cq_ex *cmd, size_t cmd_size,
			 struct ib_uverbs_ex_create_cq_resp *resp, size_t resp_size,
			 uint32_t cmd_flags);
int ibv_cmd_req_notify_cq(struct ibv_cq *cq, int solicited_only);
int ibv_cmd_resize_cq(struct ibv_cq *cq, int cqe, struct ibv_resize_cq *cmd, size_t cmd_size,
		      struct ib_uverbs_resize_cq_resp *resp, size_t resp_size);
int ibv_cmd_modify_cq(struct ibv_cq *cq, struct ibv_modify_cq_attr *attr, struct ibv_modify_cq *cmd,
		      size_t cmd_size);
int ibv_cmd_destroy_cq(struct ibv_cq *cq);
int ibv_cmd_create_srq(struct ibv_pd *pd, struct ibv_srq *srq, struct ibv_srq_init_attr *attr,
		       struct ibv_create_srq *cmd, size_t cmd_size,
		       struct ib_uverbs_create_srq_resp *resp, size_t resp_size);
int ibv_cmd_modify_srq(struct ibv_srq *srq, struct ibv_srq_attr *srq_attr, int srq_attr_mask,
		       struct ibv_modify_srq *cmd, size_t cmd_size);
int ibv_cmd_query_srq(struct ibv_srq *srq, struct ibv_srq_attr *srq_attr,
		      struct ibv_query_srq *cmd, size_t cmd_size);
int ibv_cmd_destroy_srq(struct ibv_srq *srq);
int ibv_cmd_create_qp(struct ibv_pd *pd, struct ibv_qp *qp, struct ibv_qp_init_attr *attr,
		      struct ibv_create_qp *cmd, size_t cmd_size,
		      struct ib_uverbs_create_qp_resp *resp, size_t resp_size);
int ibv_cmd_create_qp_ex2(struct ibv_context *context, struct verbs_qp *qp,
			  struct ibv_qp_init_attr_ex *qp_attr, struct ibv_create_qp_ex *cmd,
			  size_t cmd_size, struct ib_uverbs_ex_create_qp_resp *resp,
			  size_t resp_size);
int ibv_cmd_query_qp(struct ibv_qp *qp, struct ibv_qp_attr *qp_attr, int attr_mask,
		     struct ibv_qp_init_attr *qp_init_attr, struct ibv_query_qp *cmd,
		     size_t cmd_size);
int ibv_cmd_modify_qp(struct ibv_qp *qp, struct ibv_qp_attr *attr, int attr_mask,
		      struct ibv_modify_qp *cmd, size_t cmd_size);
int ibv_cmd_destroy_qp(struct ibv_qp *qp);
int ibv_cmd_create_ah(struct ibv_pd *pd, struct ibv_ah *ah, struct ibv_ah_attr *attr,
		      struct ib_uverbs_create_ah_resp *resp, size_t resp_size);
int ibv_cmd_destroy_ah(struct ibv_ah *ah);
int ibv_cmd_attach_mcast(struct ibv_qp *qp, const union ibv_gid *gid, uint16_t lid);
int ibv_cmd_detach_mcast(struct ibv_qp *qp, const union ibv_gid *gid, uint16_t lid);

#endif /* METAROCE_VERBS_PRIVATE_H */
