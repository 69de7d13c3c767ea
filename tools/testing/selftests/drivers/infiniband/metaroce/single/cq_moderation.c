// SPDX-License-Identifier: GPL-2.0
/*
 * Completion-event moderation (ibv_modify_cq) on one RDMA device: two RC QPs connected to each
 * other through the device's own GID; the WRITEs of one complete on a CQ with a completion
 * channel, whose events are timed against the completions (seen by polling) under several
 * moderation settings.
 *
 *   cq_moderation DEV GID_INDEX
 *
 * Prints one "ok: ..." line per check; exit 0 when all pass, 1 on the first failure, 4 when
 * the device does not offer moderation (ibv_modify_cq: EOPNOTSUPP, or no cq_mod_caps).
 */
#include <errno.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <infiniband/verbs.h>

#define BUF 4096

static struct ibv_context *ctx;
static struct ibv_comp_channel *ch;
static struct ibv_cq *cq, *rcq;
static struct ibv_qp *qa, *qb;
static struct ibv_mr *mr;
static char *buf;

static void fail(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	fputs("FAIL: ", stdout);
	vprintf(fmt, ap);
	va_end(ap);
	putchar('\n');
	exit(1);
}

static double now_ms(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

static void connect_qp(struct ibv_qp *qp, uint32_t dest, union ibv_gid *gid, int gidx)
{
	struct ibv_qp_attr a = {
		.qp_state = IBV_QPS_INIT,
		.port_num = 1,
		.qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_LOCAL_WRITE,
	};

	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
			  IBV_QP_ACCESS_FLAGS))
		fail("QP to INIT: %s", strerror(errno));
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
		fail("QP to RTR: %s", strerror(errno));
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTS;
	a.timeout = 18;
	a.retry_cnt = 7;
	a.rnr_retry = 7;
	a.max_rd_atomic = 1;
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
			  IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC))
		fail("QP to RTS: %s", strerror(errno));
}

/* Posts one signaled 64-byte WRITE from qa into qb's half of the buffer; `rkey` may be wrong. */
static void post_write(uint32_t rkey)
{
	struct ibv_sge sge = { .addr = (uintptr_t)buf, .length = 64, .lkey = mr->lkey };
	struct ibv_send_wr wr = {
		.wr_id = 1,
		.sg_list = &sge,
		.num_sge = 1,
		.opcode = IBV_WR_RDMA_WRITE,
		.send_flags = IBV_SEND_SIGNALED,
		.wr.rdma = { .remote_addr = (uintptr_t)buf + BUF / 2, .rkey = rkey },
	};
	struct ibv_send_wr *bad;

	if (ibv_post_send(qa, &wr, &bad))
		fail("post WRITE: %s", strerror(errno));
}

/* Polls until `n` completions were taken (at most 10 s); returns the time of the last. */
static double take(int n, enum ibv_wc_status want)
{
	double end = now_ms() + 10000;
	struct ibv_wc wc;
	int got = 0, r;

	while (got < n) {
		r = ibv_poll_cq(cq, 1, &wc);
		if (r < 0)
			fail("poll_cq: %d", r);
		if (r == 1) {
			if (wc.status != want)
				fail("completion status %s, want %s", ibv_wc_status_str(wc.status),
				     ibv_wc_status_str(want));
			got++;
		} else if (now_ms() > end) {
			fail("%d of %d completions in 10 s", got, n);
		}
	}
	return now_ms();
}

/* Waits up to `ms` for a completion event; returns its time, or -1 if none came. */
static double event(int ms)
{
	struct pollfd p = { .fd = ch->fd, .events = POLLIN };
	struct ibv_cq *ev_cq;
	void *ev_ctx;
	int r;

	r = poll(&p, 1, ms);
	if (r < 0)
		fail("poll: %s", strerror(errno));
	if (r == 0)
		return -1;
	if (ibv_get_cq_event(ch, &ev_cq, &ev_ctx) || ev_cq != cq)
		fail("get_cq_event: %s", strerror(errno));
	ibv_ack_cq_events(cq, 1);
	return now_ms();
}

static void moderate(uint16_t count, uint16_t period)
{
	struct ibv_modify_cq_attr a = {
		.attr_mask = IBV_CQ_ATTR_MODERATE,
		.moderate = { .cq_count = count, .cq_period = period },
	};
	int r = ibv_modify_cq(cq, &a);

	if (r == EOPNOTSUPP) {
		printf("SKIP: ibv_modify_cq: EOPNOTSUPP\n");
		exit(4);
	}
	if (r)
		fail("ibv_modify_cq(%u, %u): %s", count, period, strerror(r));
	if (ibv_req_notify_cq(cq, 0))
		fail("req_notify_cq");
}

int main(int argc, char **argv)
{
	struct ibv_device **list;
	struct ibv_device_attr_ex dev_attr;
	struct ibv_qp_init_attr qi;
	struct ibv_pd *pd;
	union ibv_gid gid;
	double t_c, t_e;
	int i, n, gidx;

	if (argc != 3) {
		fprintf(stderr, "usage: cq_moderation DEV GID_INDEX\n");
		return 2;
	}
	gidx = atoi(argv[2]);
	list = ibv_get_device_list(&n);
	for (i = 0; list && i < n; i++)
		if (!strcmp(ibv_get_device_name(list[i]), argv[1]))
			ctx = ibv_open_device(list[i]);
	if (!ctx)
		fail("no device %s", argv[1]);
	if (ibv_query_device_ex(ctx, NULL, &dev_attr))
		fail("query_device_ex");
	printf("cq_mod_caps: max_cq_count %u, max_cq_period %u us\n",
	       dev_attr.cq_mod_caps.max_cq_count, dev_attr.cq_mod_caps.max_cq_period);
	if (!dev_attr.cq_mod_caps.max_cq_count || !dev_attr.cq_mod_caps.max_cq_period) {
		printf("SKIP: no cq_mod_caps\n");
		return 4;
	}
	if (ibv_query_gid(ctx, 1, gidx, &gid))
		fail("query_gid %d", gidx);
	pd = ibv_alloc_pd(ctx);
	buf = calloc(1, BUF);
	ch = ibv_create_comp_channel(ctx);
	if (!pd || !buf || !ch)
		fail("pd, buffer, channel");
	mr = ibv_reg_mr(pd, buf, BUF, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	cq = ibv_create_cq(ctx, 256, NULL, ch, 0);
	rcq = ibv_create_cq(ctx, 16, NULL, NULL, 0);
	if (!mr || !cq || !rcq)
		fail("mr, cqs: %s", strerror(errno));
	memset(&qi, 0, sizeof(qi));
	qi.send_cq = cq;
	qi.recv_cq = rcq;
	qi.qp_type = IBV_QPT_RC;
	qi.cap.max_send_wr = 64;
	qi.cap.max_recv_wr = 1;
	qi.cap.max_send_sge = 1;
	qi.cap.max_recv_sge = 1;
	qa = ibv_create_qp(pd, &qi);
	qi.send_cq = rcq;
	qb = ibv_create_qp(pd, &qi);
	if (!qa || !qb)
		fail("create_qp: %s", strerror(errno));
	connect_qp(qa, qb->qp_num, &gid, gidx);
	connect_qp(qb, qa->qp_num, &gid, gidx);

	/* Off (count 1): the event is there when the completion is. */
	moderate(1, 0);
	post_write(mr->rkey);
	t_c = take(1, IBV_WC_SUCCESS);
	t_e = event(2000);
	if (t_e < 0 || t_e - t_c > 20)
		fail("no moderation: event %.1f ms after the completion", t_e - t_c);
	printf("ok: no moderation: event %.1f ms after the completion\n", t_e - t_c);

	/* Count 4, no period: three completions are held, the fourth tells. */
	moderate(4, 0);
	for (i = 0; i < 3; i++)
		post_write(mr->rkey);
	take(3, IBV_WC_SUCCESS);
	if (event(300) >= 0)
		fail("count 4: an event after 3 completions");
	post_write(mr->rkey);
	t_c = take(1, IBV_WC_SUCCESS);
	t_e = event(2000);
	if (t_e < 0 || t_e - t_c > 20)
		fail("count 4: the 4th completion told no event (%.1f ms)", t_e < 0 ? -1 : t_e - t_c);
	printf("ok: count 4: no event for 3 completions in 300 ms, one %.1f ms after the 4th\n",
	       t_e - t_c);

	/* Count 1000, period 60 ms: one completion is told by the period, not before. */
	moderate(1000, 60000);
	post_write(mr->rkey);
	t_c = take(1, IBV_WC_SUCCESS);
	t_e = event(2000);
	if (t_e < 0)
		fail("period 60 ms: no event in 2 s");
	if (t_e - t_c < 40)
		fail("period 60 ms: event %.1f ms after the completion", t_e - t_c);
	printf("ok: period 60 ms: event %.1f ms after the completion\n", t_e - t_c);

	/* Count 16, no period: a completion in error is told at once. */
	moderate(16, 0);
	post_write(mr->rkey ^ 0x5a5a5a00);
	t_c = take(1, IBV_WC_REM_ACCESS_ERR);
	t_e = event(2000);
	if (t_e < 0 || t_e - t_c > 20)
		fail("count 16: the error completion told no event (%.1f ms)",
		     t_e < 0 ? -1 : t_e - t_c);
	printf("ok: count 16: an error completion told %.1f ms after it\n", t_e - t_c);

	ibv_destroy_qp(qa);
	ibv_destroy_qp(qb);
	ibv_destroy_cq(cq);
	ibv_destroy_cq(rcq);
	ibv_destroy_comp_channel(ch);
	ibv_dereg_mr(mr);
	ibv_dealloc_pd(pd);
	ibv_close_device(ctx);
	ibv_free_device_list(list);
	printf("ok: all\n");
	return 0;
}
