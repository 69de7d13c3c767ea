// SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB
/*
 * metaroce_dv_write: an example of the metaroce_dv API. On one MetaRoCE device it creates two
 * RC QPs with metaroce_dv_create_qp() (the wire and the paths given on the command line),
 * connects them to each other through the device's own GID, and RDMA-WRITEs a buffer from
 * one to the other N times, checking every byte that lands.
 *
 *   metaroce_dv_write -d DEV -g GID_INDEX [-w default|rocev2|native] [-p PATHS]
 *                     [-s BYTES] [-n ITERS]
 *
 * Prints the device's MetaRoCE properties and one result line; exit status 0 when every
 * WRITE landed intact, 2 when the device refused the QP (errno printed), 1 otherwise.
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <infiniband/verbs.h>
#include "metaroce_dv.h"

static int die(const char *what)
{
	fprintf(stderr, "metaroce_dv_write: %s: %s\n", what, strerror(errno));
	return 1;
}

static int connect_qp(struct ibv_qp *qp, uint32_t dest, union ibv_gid *gid, int gidx)
{
	struct ibv_qp_attr a = {
		.qp_state = IBV_QPS_INIT,
		.port_num = 1,
		.qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_LOCAL_WRITE,
	};

	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
			  IBV_QP_ACCESS_FLAGS))
		return -1;
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = IBV_MTU_1024;
	a.dest_qp_num = dest;
	a.max_dest_rd_atomic = 1;
	a.min_rnr_timer = 1;
	a.ah_attr.is_global = 1;
	a.ah_attr.port_num = 1;
	a.ah_attr.grh.dgid = *gid;
	a.ah_attr.grh.sgid_index = gidx;
	a.ah_attr.grh.hop_limit = 64;
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
			  IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER))
		return -1;
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTS;
	a.timeout = 14;
	a.retry_cnt = 7;
	a.rnr_retry = 7;
	a.max_rd_atomic = 1;
	return ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
			     IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC);
}

int main(int argc, char **argv)
{
	const char *dev_name = NULL, *wire_name = "default";
	struct metaroce_dv_qp_init_attr dv = { 0 };
	struct metaroce_dv_device_attr attr;
	struct ibv_device **list, *dev = NULL;
	struct ibv_qp *qp[2];
	int gidx = -1, paths = 0, iters = 10, opt, i, n;
	size_t size = 65536;
	union ibv_gid gid;

	while ((opt = getopt(argc, argv, "d:g:w:p:s:n:")) != -1) {
		switch (opt) {
		case 'd': dev_name = optarg; break;
		case 'g': gidx = atoi(optarg); break;
		case 'w': wire_name = optarg; break;
		case 'p': paths = atoi(optarg); break;
		case 's': size = strtoul(optarg, NULL, 0); break;
		case 'n': iters = atoi(optarg); break;
		default: return 1;
		}
	}
	if (!dev_name || gidx < 0 || !size || iters < 1) {
		fprintf(stderr, "usage: metaroce_dv_write -d DEV -g GID_INDEX [-w default|rocev2|native] [-p PATHS] [-s BYTES] [-n ITERS]\n");
		return 1;
	}
	list = ibv_get_device_list(NULL);
	for (i = 0; list && list[i]; i++)
		if (!strcmp(ibv_get_device_name(list[i]), dev_name))
			dev = list[i];
	if (!dev) {
		fprintf(stderr, "metaroce_dv_write: no device %s\n", dev_name);
		return 1;
	}
	if (!metaroce_dv_is_supported(dev)) {
		fprintf(stderr, "metaroce_dv_write: %s is not a MetaRoCE device\n", dev_name);
		return 1;
	}
	struct ibv_context *ctx = ibv_open_device(dev);

	if (!ctx)
		return die("ibv_open_device");
	if ((errno = metaroce_dv_query_device(ctx, &attr)))
		return die("metaroce_dv_query_device");
	printf("%s: abi %u, native %s, per-QP wire %s, max paths %u, max inline %u, max sge %u\n",
	       dev_name, attr.abi_version, attr.flags & METAROCE_DV_DEVICE_NATIVE ? "yes" : "no",
	       attr.flags & METAROCE_DV_DEVICE_QP_WIRE ? "yes" : "no", attr.max_paths,
	       attr.max_inline_data, attr.max_sge);

	dv.comp_mask = METAROCE_DV_QP_INIT_ATTR_WIRE;
	if (!strcmp(wire_name, "rocev2"))
		dv.wire = METAROCE_DV_WIRE_ROCEV2;
	else if (!strcmp(wire_name, "native"))
		dv.wire = METAROCE_DV_WIRE_NATIVE;
	else
		dv.wire = METAROCE_DV_WIRE_DEFAULT;
	if (paths) {
		dv.comp_mask |= METAROCE_DV_QP_INIT_ATTR_PATHS;
		dv.paths = paths;
	}

	struct ibv_pd *pd = ibv_alloc_pd(ctx);
	struct ibv_cq *cq = pd ? ibv_create_cq(ctx, 16, NULL, NULL, 0) : NULL;
	char *src = malloc(size), *dst = calloc(1, size);
	struct ibv_mr *smr = pd && src ? ibv_reg_mr(pd, src, size, 0) : NULL;
	struct ibv_mr *dmr = pd && dst ? ibv_reg_mr(pd, dst, size,
						    IBV_ACCESS_LOCAL_WRITE |
						    IBV_ACCESS_REMOTE_WRITE) : NULL;

	if (!cq || !smr || !dmr)
		return die("PD, CQ or MRs");
	for (i = 0; i < 2; i++) {
		struct ibv_qp_init_attr_ex qa = {
			.qp_type = IBV_QPT_RC,
			.send_cq = cq,
			.recv_cq = cq,
			.cap = { .max_send_wr = 4, .max_recv_wr = 1, .max_send_sge = 1,
				 .max_recv_sge = 1 },
			.comp_mask = IBV_QP_INIT_ATTR_PD,
			.pd = pd,
		};

		qp[i] = metaroce_dv_create_qp(ctx, &qa, &dv);
		if (!qp[i]) {
			fprintf(stderr, "metaroce_dv_write: metaroce_dv_create_qp (wire %s, paths %d): %s\n",
				wire_name, paths, strerror(errno));
			return 2;
		}
	}
	if (ibv_query_gid(ctx, 1, gidx, &gid))
		return die("ibv_query_gid");
	if (connect_qp(qp[0], qp[1]->qp_num, &gid, gidx) ||
	    connect_qp(qp[1], qp[0]->qp_num, &gid, gidx))
		return die("connecting the QPs");

	for (n = 0; n < iters; n++) {
		struct ibv_sge sge = { (uintptr_t)src, size, smr->lkey };
		struct ibv_send_wr wr = {
			.wr_id = n, .sg_list = &sge, .num_sge = 1, .opcode = IBV_WR_RDMA_WRITE,
			.send_flags = IBV_SEND_SIGNALED,
			.wr.rdma = { (uintptr_t)dst, dmr->rkey },
		}, *bad;
		struct ibv_wc wc;
		size_t k;
		int got;

		for (k = 0; k < size; k++)
			src[k] = (char)(k * 7 + n * 13 + 1);
		if (ibv_post_send(qp[0], &wr, &bad))
			return die("ibv_post_send");
		do
			got = ibv_poll_cq(cq, 1, &wc);
		while (got == 0);
		if (got < 0 || wc.status != IBV_WC_SUCCESS) {
			fprintf(stderr, "metaroce_dv_write: WRITE %d: %s\n", n,
				got < 0 ? "poll failed" : ibv_wc_status_str(wc.status));
			return 1;
		}
		if (memcmp(src, dst, size)) {
			fprintf(stderr, "metaroce_dv_write: WRITE %d: the data differs\n", n);
			return 1;
		}
	}
	printf("wire %s, paths %d: %d x %zu bytes written and verified\n", wire_name, paths,
	       iters, size);
	/* A native QP's connection, as the kernel last refreshed it (every 10 ms at most). */
	struct metaroce_dv_conn conn;
	int err = metaroce_dv_query_conn(qp[0], &conn);

	if (err == EOPNOTSUPP) {
		printf("connection: not native\n");
	} else if (err) {
		errno = err;
		return die("metaroce_dv_query_conn");
	} else {
		printf("connection: paths %u, window %u B, rate hint %u kbit/s, %llu updates\n",
		       conn.paths, conn.window, conn.rate_hint_kbps,
		       (unsigned long long)conn.updates);
		for (i = 0; i < (int)conn.paths; i++) {
			struct metaroce_dv_path *p = &conn.path[i];

			printf("  path %d: port %u state %u cwnd %u B srtt %llu us min %llu us sent %llu retransmits %llu ecn %llu rto %llu\n",
			       i, p->src_port, p->state, p->cwnd,
			       (unsigned long long)p->srtt_ns / 1000,
			       (unsigned long long)p->min_rtt_ns / 1000,
			       (unsigned long long)p->sent, (unsigned long long)p->retransmits,
			       (unsigned long long)p->ecn_echoes,
			       (unsigned long long)p->timeouts);
		}
	}
	ibv_destroy_qp(qp[0]);
	ibv_destroy_qp(qp[1]);
	ibv_dereg_mr(smr);
	ibv_dereg_mr(dmr);
	ibv_destroy_cq(cq);
	ibv_dealloc_pd(pd);
	ibv_close_device(ctx);
	ibv_free_device_list(list);
	free(src);
	free(dst);
	return 0;
}
