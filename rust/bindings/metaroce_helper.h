/* SPDX-License-Identifier: GPL-2.0 */
/*
 * C headers whose declarations the Rust RDMA and networking abstractions
 * (rust/kernel/rdma, rust/kernel/net) bind to. Included from
 * rust/bindings/bindings_helper.h by MetaRoCE's overlay script.
 */
#include <crypto/blake2s.h>
#include <crypto/chacha20poly1305.h>
#include <keys/user-type.h>
#include <linux/crc32.h>
#include <linux/hmm.h>
#include <linux/igmp.h>
#include <linux/mmu_notifier.h>
#include <linux/inetdevice.h>
#include <linux/netdevice.h>
#include <linux/skbuff.h>
#include <linux/vmalloc.h>
#include <net/net_namespace.h>
#include <net/netns/generic.h>
#include <net/addrconf.h>
#include <net/checksum.h>
#include <net/ip6_checksum.h>
#include <net/ip6_route.h>
#include <net/route.h>
#include <net/udp_tunnel.h>
#include <rdma/ib_cache.h>
#include <rdma/ib_mad.h>
#include <rdma/ib_umem.h>
#include <rdma/ib_umem_odp.h>
#include <rdma/ib_verbs.h>
#include <rdma/rdma_netlink.h>
#include <rdma/uverbs_ioctl.h>
#include <trace/events/metaroce.h>

/* Constants bindgen cannot evaluate (BIT()), by the kernel's RUST_CONST_HELPER_ convention. */
const u32 RUST_CONST_HELPER_CRC32_LE_OPTIMIZATION = CRC32_LE_OPTIMIZATION;
