// SPDX-License-Identifier: GPL-2.0
/*
 * The MetaRoCE tracepoints (include/trace/events/metaroce.h), built into vmlinux whenever the
 * Rust RDMA abstractions are (CONFIG_RUST_RDMA): their Rust wrappers live in the kernel crate
 * (rust/kernel/rdma/trace.rs), which is part of vmlinux, and are called from the metaroce
 * module, hence the exports.
 */

#define CREATE_TRACE_POINTS
#define CREATE_RUST_TRACE_POINTS
#include <trace/events/metaroce.h>

EXPORT_TRACEPOINT_SYMBOL_GPL(metaroce_path);
EXPORT_TRACEPOINT_SYMBOL_GPL(metaroce_rate_hint);

/*
 * Without tracepoints (the release kernel) there is nothing to export: the Rust wrappers compile
 * to nothing (declare_trace! and path_enabled() test CONFIG_TRACEPOINTS). The wrappers are
 * defined by the tracepoint header (CREATE_RUST_TRACE_POINTS), not in this file.
 */
#ifdef CONFIG_TRACEPOINTS
EXPORT_SYMBOL_GPL(rust_do_trace_metaroce_path);
EXPORT_SYMBOL_GPL(rust_do_trace_metaroce_rate_hint);
#endif
