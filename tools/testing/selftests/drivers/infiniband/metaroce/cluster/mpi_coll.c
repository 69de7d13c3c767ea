// SPDX-License-Identifier: GPL-2.0
/*
 * MPI collectives over whatever transport Open MPI was given, every result checked: allreduce
 * (sum of int32), alltoall and bcast at sizes from 8 B to a maximum (default 4 MiB), then a
 * barrier loop. Rank 0 prints one line per operation and size:
 *
 *   allreduce 1048576 B x 4: 12345.6 us/op, bus 123.45 Mb/s, checked
 *
 * and then the fairness of concurrent flows (flows()).
 * Bus bandwidth as NCCL's tests define it: allreduce 2(n-1)/n x size / time, alltoall (n-1)/n x
 * size / time, bcast size / time. The byte counts are per rank (alltoall: the whole send buffer).
 * Usage: mpi_coll [MAX_BYTES] [BUDGET_BYTES]; each size runs max(2, min(50, BUDGET/size))
 * iterations after one warm-up (BUDGET default 16 MiB). Exits 1 on any wrong element.
 */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int rank, nranks, bad;

static int32_t pattern(int src, int dst, size_t i)
{
	return (int32_t)((src + 1) * 1000003u + (dst + 1) * 7919u + (uint32_t)i * 31u);
}

static void check(const char *op, size_t bytes, size_t i, int32_t got, int32_t want)
{
	if (got != want && bad++ < 5)
		fprintf(stderr, "rank %d: %s %zu B: element %zu is %d, expected %d\n", rank, op,
			bytes, i, got, want);
}

static void report(const char *op, size_t bytes, int iters, double secs, double factor)
{
	double us = secs / iters * 1e6;
	double mbps = factor * (double)bytes * 8 / (secs / iters) / 1e6;
	int total_bad;

	MPI_Reduce(&bad, &total_bad, 1, MPI_INT, MPI_SUM, 0, MPI_COMM_WORLD);
	if (rank == 0)
		printf("%-9s %8zu B x %2d: %10.1f us/op, bus %.2f Mb/s, %s\n", op, bytes, iters, us,
		       mbps, total_bad ? "WRONG" : "checked");
	fflush(stdout);
}

static double timed_max(double t0)
{
	double t = MPI_Wtime() - t0, max;

	MPI_Allreduce(&t, &max, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
	return max;
}

static void allreduce(size_t bytes, int iters)
{
	size_t n = bytes / 4, i;
	int32_t *in = malloc(bytes), *out = malloc(bytes);
	double t0 = 0;
	int it;

	for (i = 0; i < n; i++)
		in[i] = pattern(rank, 0, i);
	for (it = -1; it < iters; it++) {
		if (it == 0) {
			MPI_Barrier(MPI_COMM_WORLD);
			t0 = MPI_Wtime();
		}
		memset(out, 0, bytes);
		MPI_Allreduce(in, out, (int)n, MPI_INT32_T, MPI_SUM, MPI_COMM_WORLD);
	}
	double secs = timed_max(t0);
	for (i = 0; i < n; i++) {
		int32_t want = 0;
		for (int r = 0; r < nranks; r++)
			want = (int32_t)((uint32_t)want + (uint32_t)pattern(r, 0, i));
		check("allreduce", bytes, i, out[i], want);
	}
	report("allreduce", bytes, iters, secs, 2.0 * (nranks - 1) / nranks);
	free(in);
	free(out);
}

static void alltoall(size_t bytes, int iters)
{
	size_t blk = bytes / 4 / nranks, i;
	int32_t *in, *out;
	double t0 = 0;
	int it, d;

	if (blk == 0)
		blk = 1;
	in = malloc(blk * 4 * nranks);
	out = malloc(blk * 4 * nranks);
	for (d = 0; d < nranks; d++)
		for (i = 0; i < blk; i++)
			in[d * blk + i] = pattern(rank, d, i);
	for (it = -1; it < iters; it++) {
		if (it == 0) {
			MPI_Barrier(MPI_COMM_WORLD);
			t0 = MPI_Wtime();
		}
		memset(out, 0, blk * 4 * nranks);
		MPI_Alltoall(in, (int)blk, MPI_INT32_T, out, (int)blk, MPI_INT32_T, MPI_COMM_WORLD);
	}
	double secs = timed_max(t0);
	for (d = 0; d < nranks; d++)
		for (i = 0; i < blk; i++)
			check("alltoall", bytes, d * blk + i, out[d * blk + i], pattern(d, rank, i));
	report("alltoall", blk * 4 * nranks, iters, secs, (double)(nranks - 1) / nranks);
	free(in);
	free(out);
}

static void bcast(size_t bytes, int iters)
{
	size_t n = bytes / 4, i;
	int32_t *buf = malloc(bytes);
	double t0 = 0;
	int it, root = 0;

	for (it = -1; it < iters; it++) {
		if (it == 0) {
			MPI_Barrier(MPI_COMM_WORLD);
			t0 = MPI_Wtime();
		}
		root = (it + 1) % nranks; /* every rank is the root in turn */
		for (i = 0; i < n; i++)
			buf[i] = rank == root ? pattern(root, it + 1, i) : 0;
		MPI_Bcast(buf, (int)n, MPI_INT32_T, root, MPI_COMM_WORLD);
		for (i = 0; i < n; i++)
			check("bcast", bytes, i, buf[i], pattern(root, it + 1, i));
	}
	report("bcast", bytes, iters, timed_max(t0), 1.0);
	free(buf);
}

/*
 * All-to-all fairness of concurrent flows: every rank sends FLOW_MSGS messages of FLOW_BYTES to
 * every other rank at once (all posted together) and notes when the last one from each source
 * arrived; a flow's rate is its bytes over that time. Rank 0 prints every flow's rate and Jain's
 * index over the n(n-1) flows (1.0: equal shares), the data checked:
 *
 *   flows     65536 B x 16: 12.34 ... Mb/s, min 11.90, max 12.80, jain 0.999, checked
 */
#define FLOW_MSGS 16
#define FLOW_BYTES 65536

static void flows(void)
{
	size_t n = FLOW_BYTES / 4, per = (size_t)FLOW_MSGS * nranks;
	int32_t *sbuf = malloc((size_t)FLOW_BYTES * nranks), *rbuf = malloc(FLOW_BYTES * per);
	MPI_Request *req = malloc(sizeof(*req) * 2 * per);
	int *got = calloc(nranks, sizeof(*got)), nreq = 0, idx, r, m;
	double *done = calloc(nranks, sizeof(*done)), *rate = malloc(sizeof(*rate) * nranks);
	double *all = NULL, t0, sum = 0, sq = 0, lo = 0, hi = 0;
	size_t i;

	for (r = 0; r < nranks; r++)
		for (i = 0; i < n; i++)
			sbuf[r * n + i] = pattern(rank, r, i);
	MPI_Barrier(MPI_COMM_WORLD);
	t0 = MPI_Wtime();
	for (r = 0; r < nranks; r++)
		for (m = 0; r != rank && m < FLOW_MSGS; m++)
			MPI_Irecv(rbuf + (r * FLOW_MSGS + m) * n, (int)n, MPI_INT32_T, r, 7,
				  MPI_COMM_WORLD, &req[nreq++]);
	int nrecv = nreq;

	for (m = 0; m < FLOW_MSGS; m++)
		for (r = 0; r < nranks; r++)
			if (r != rank)
				MPI_Isend(sbuf + r * n, (int)n, MPI_INT32_T, r, 7, MPI_COMM_WORLD,
					  &req[nreq++]);
	for (int k = 0; k < nrecv; k++) {
		MPI_Status st;

		MPI_Waitany(nrecv, req, &idx, &st);
		if (++got[st.MPI_SOURCE] == FLOW_MSGS)
			done[st.MPI_SOURCE] = MPI_Wtime() - t0;
	}
	MPI_Waitall(nreq - nrecv, req + nrecv, MPI_STATUSES_IGNORE);
	for (r = 0; r < nranks; r++) {
		rate[r] = r == rank ? 0 : (double)FLOW_BYTES * FLOW_MSGS * 8 / done[r] / 1e6;
		for (m = 0; r != rank && m < FLOW_MSGS; m++)
			for (i = 0; i < n; i++)
				check("flows", FLOW_BYTES, i, rbuf[(r * FLOW_MSGS + m) * n + i],
				      pattern(r, rank, i));
	}
	if (rank == 0)
		all = malloc(sizeof(*all) * nranks * nranks);
	MPI_Gather(rate, nranks, MPI_DOUBLE, all, nranks, MPI_DOUBLE, 0, MPI_COMM_WORLD);
	int total_bad;

	MPI_Reduce(&bad, &total_bad, 1, MPI_INT, MPI_SUM, 0, MPI_COMM_WORLD);
	if (rank == 0) {
		printf("flows     %d B x %d:", FLOW_BYTES, FLOW_MSGS);
		/* all[dst * nranks + src]: the rate dst saw from src */
		for (int d = 0; d < nranks; d++)
			for (r = 0; r < nranks; r++) {
				double x = all[d * nranks + r];

				if (r == d)
					continue;
				printf(" %.2f", x);
				sum += x;
				sq += x * x;
				lo = lo == 0 || x < lo ? x : lo;
				hi = x > hi ? x : hi;
			}
		int nf = nranks * (nranks - 1);

		printf(" Mb/s, min %.2f, max %.2f, jain %.3f, %s\n", lo, hi,
		       sq > 0 ? sum * sum / (nf * sq) : 0.0, total_bad ? "WRONG" : "checked");
		fflush(stdout);
		free(all);
	}
	free(sbuf);
	free(rbuf);
	free(req);
	free(got);
	free(done);
	free(rate);
}

int main(int argc, char **argv)
{
	size_t max = argc > 1 ? strtoull(argv[1], NULL, 0) : 4 << 20;
	size_t budget = argc > 2 ? strtoull(argv[2], NULL, 0) : 16 << 20;
	int total_bad, i;

	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &nranks);
	/* 8 B to 4 MiB by factors of 8, with 1 MiB (the size the targets name) between; max last */
	static const size_t sizes[] = { 8, 64, 512, 4096, 32768, 262144, 1 << 20, 4 << 20 };
	for (size_t k = 0; k <= sizeof(sizes) / sizeof(sizes[0]); k++) {
		size_t bytes = k < sizeof(sizes) / sizeof(sizes[0]) ? sizes[k] : max;
		size_t want = budget / bytes;
		int iters = want > 50 ? 50 : want < 2 ? 2 : (int)want;

		int listed = 0;

		for (size_t j = 0; j < sizeof(sizes) / sizeof(sizes[0]); j++)
			listed |= sizes[j] == max;
		if (bytes > max || (k == sizeof(sizes) / sizeof(sizes[0]) && listed))
			continue;
		allreduce(bytes, iters);
		alltoall(bytes, iters);
		bcast(bytes, iters);
	}
	if (nranks > 1)
		flows();
	double t0 = MPI_Wtime();
	for (i = 0; i < 100; i++)
		MPI_Barrier(MPI_COMM_WORLD);
	double secs = timed_max(t0);
	if (rank == 0)
		printf("barrier   x 100: %.1f us/op\n", secs / 100 * 1e6);
	MPI_Allreduce(&bad, &total_bad, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
	if (rank == 0)
		printf("%d ranks: %s\n", nranks, total_bad ? "WRONG RESULTS" : "every result checked");
	MPI_Finalize();
	return total_bad ? 1 : 0;
}
