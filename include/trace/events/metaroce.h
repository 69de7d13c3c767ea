/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Tracepoints of the MetaRoCE native transport: path events (losses found by a SACK gap,
 * RTOs, ECN echoes, source port changes, path state changes) and receiver rate-hint changes.
 * Defined in vmlinux (drivers/infiniband/sw/metaroce/metaroce_trace.c) so that the Rust
 * wrappers in rust/kernel/rdma/trace.rs, built into the kernel crate, can name them; the
 * driver module calls those wrappers.
 */
#undef TRACE_SYSTEM
#define TRACE_SYSTEM metaroce

#if !defined(_TRACE_METAROCE_H) || defined(TRACE_HEADER_MULTI_READ)
#define _TRACE_METAROCE_H

#include <linux/tracepoint.h>
#include <rdma/ib_verbs.h>

TRACE_EVENT(metaroce_path,
	    TP_PROTO(const struct ib_device *ibdev, u32 conn, u8 path, u8 event, u32 count,
		     u16 port, u32 cwnd, u32 srtt_us),
	    TP_ARGS(ibdev, conn, path, event, count, port, cwnd, srtt_us),
	    TP_STRUCT__entry(__string(dev, dev_name(&ibdev->dev))
			     __field(u32, conn)
			     __field(u8, path)
			     __field(u8, event)
			     __field(u32, count)
			     __field(u16, port)
			     __field(u32, cwnd)
			     __field(u32, srtt_us)),
	    TP_fast_assign(__assign_str(dev);
			   __entry->conn = conn;
			   __entry->path = path;
			   __entry->event = event;
			   __entry->count = count;
			   __entry->port = port;
			   __entry->cwnd = cwnd;
			   __entry->srtt_us = srtt_us;),
	    /* The events: enum kernel::rdma::trace::PathEvent. */
	    TP_printk("%s conn=%#010x path=%u %s count=%u port=%u cwnd=%u srtt_us=%u",
		      __get_str(dev), __entry->conn, __entry->path,
		      __print_symbolic(__entry->event, { 0, "loss" }, { 1, "timeout" },
				       { 2, "ecn" }, { 3, "repath" }, { 4, "active" },
				       { 5, "recovering" }, { 6, "failed" }),
		      __entry->count, __entry->port, __entry->cwnd, __entry->srtt_us)
);

TRACE_EVENT(metaroce_rate_hint,
	    TP_PROTO(const struct ib_device *ibdev, u32 conn, u32 old_kbps, u32 new_kbps),
	    TP_ARGS(ibdev, conn, old_kbps, new_kbps),
	    TP_STRUCT__entry(__string(dev, dev_name(&ibdev->dev))
			     __field(u32, conn)
			     __field(u32, old_kbps)
			     __field(u32, new_kbps)),
	    TP_fast_assign(__assign_str(dev);
			   __entry->conn = conn;
			   __entry->old_kbps = old_kbps;
			   __entry->new_kbps = new_kbps;),
	    TP_printk("%s conn=%#010x rate hint %u -> %u kbit/s",
		      __get_str(dev), __entry->conn, __entry->old_kbps, __entry->new_kbps)
);

#endif /* _TRACE_METAROCE_H */

#include <trace/define_trace.h>
