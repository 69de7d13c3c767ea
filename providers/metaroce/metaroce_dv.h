/* SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB */
/*
 * metaroce_dv: direct verbs of MetaRoCE devices, the libmetaroce provider's extension of
 * libibverbs (as mlx5dv and efadv are for theirs). Link with -lmetaroce. Documented in
 * providers/metaroce/metaroce_dv.3.md.
 */
#ifndef METAROCE_DV_H
#define METAROCE_DV_H

#include <stdbool.h>
#include <stdint.h>

#include <infiniband/verbs.h>

#ifdef __cplusplus
extern "C" {
#endif

enum metaroce_dv_device_flags {
	/* RC QPs use the native multipath transport unless created otherwise (a device
	 * added with `rdma link add NAME type metaroce-native`). */
	METAROCE_DV_DEVICE_NATIVE = 1 << 0,
	/* metaroce_dv_create_qp() can choose the wire and the paths per QP. */
	METAROCE_DV_DEVICE_QP_WIRE = 1 << 1,
};

struct metaroce_dv_device_attr {
	uint32_t abi_version;		/* of the kernel's user ABI */
	uint32_t flags;			/* enum metaroce_dv_device_flags */
	uint32_t max_paths;		/* most paths of a native connection */
	uint32_t max_inline_data;	/* largest inline payload of a send */
	uint32_t max_sge;		/* largest scatter list of a work request */
};

/* Whether `device` is a MetaRoCE device driven by this library. */
bool metaroce_dv_is_supported(struct ibv_device *device);

/* The device's MetaRoCE properties. 0, or EOPNOTSUPP for another provider's context. */
int metaroce_dv_query_device(struct ibv_context *context, struct metaroce_dv_device_attr *attr);

enum metaroce_dv_wire {
	METAROCE_DV_WIRE_DEFAULT = 0,	/* the device's: native for RC on a native device */
	METAROCE_DV_WIRE_ROCEV2 = 1,	/* RoCEv2, also for an RC QP of a native device */
	METAROCE_DV_WIRE_NATIVE = 2,	/* the native transport (RC QPs of native devices only) */
};

enum metaroce_dv_qp_init_attr_mask {
	METAROCE_DV_QP_INIT_ATTR_WIRE = 1 << 0,
	METAROCE_DV_QP_INIT_ATTR_PATHS = 1 << 1,
};

struct metaroce_dv_qp_init_attr {
	uint64_t comp_mask;		/* enum metaroce_dv_qp_init_attr_mask */
	uint32_t wire;			/* enum metaroce_dv_wire */
	/* Native RC: paths of the connection this QP is the first to need (1 to max_paths).
	 * A connection to the same destination that exists keeps its paths. */
	uint32_t paths;
};

/*
 * ibv_create_qp_ex() with MetaRoCE's choices: the wire the QP's messages travel on and, for
 * the native transport, the paths of its connection. NULL with errno set (EOPNOTSUPP for
 * another provider's context or an unknown comp_mask bit, EINVAL for a choice the device
 * cannot make: the native wire for a UD/UC QP or on a RoCEv2 device, paths out of range or
 * for a QP that does not use the native transport).
 */
struct ibv_qp *metaroce_dv_create_qp(struct ibv_context *context,
				     struct ibv_qp_init_attr_ex *qp_attr,
				     struct metaroce_dv_qp_init_attr *dv_attr);

#define METAROCE_DV_MAX_PATHS 8

/* One path of a native connection. */
struct metaroce_dv_path {
	uint16_t src_port;		/* its UDP source port now */
	uint8_t state;			/* 0 active, 1 recovering after an RTO, 2 failed */
	uint8_t reserved;
	uint32_t cwnd;			/* congestion window, bytes */
	uint64_t srtt_ns;		/* smoothed RTT */
	uint64_t min_rtt_ns;
	uint64_t sent;			/* transmissions */
	uint64_t retransmits;
	uint64_t ecn_echoes;		/* ECN echo increases */
	uint64_t timeouts;		/* RTOs */
};

struct metaroce_dv_conn {
	uint32_t paths;			/* entries of path[] in use; 0 before the first update */
	uint32_t window;		/* connection window, bytes */
	uint32_t rate_hint_kbps;	/* the receiver's last rate hint (0: none) */
	uint64_t updates;		/* times the kernel refreshed these figures */
	struct metaroce_dv_path path[METAROCE_DV_MAX_PATHS];
};

/*
 * The figures of the native connection `qp` (made by metaroce_dv_create_qp) is bound to, as
 * the kernel last refreshed them (at most every 10 ms while the connection works). 0;
 * EOPNOTSUPP for a QP that does not use the native transport, one made otherwise, or another
 * provider's; EAGAIN if every read raced a refresh.
 */
int metaroce_dv_query_conn(struct ibv_qp *qp, struct metaroce_dv_conn *conn);

#ifdef __cplusplus
}
#endif

#endif /* METAROCE_DV_H */
