// SPDX-License-Identifier: GPL-2.0

/*
 * Helpers for the MetaRoCE Rust abstractions (rust/kernel/rdma, rust/kernel/net):
 * static inline functions of the networking and ib_core headers that Rust calls.
 * Included from rust/helpers/helpers.c by MetaRoCE's overlay script.
 */

#include <linux/netdevice.h>
#include <linux/skbuff.h>
#include <net/net_namespace.h>
#include <net/netns/generic.h>
#include <net/ip.h>
#include <net/ip6_route.h>
#include <net/ipv6.h>
#include <net/route.h>
#include <net/udp_tunnel.h>
#include <linux/inetdevice.h>
#include <net/addrconf.h>
#include <linux/scatterlist.h>
#include <linux/vmalloc.h>
#include <linux/hmm.h>
#include <linux/mmu_notifier.h>
#include <rdma/ib_umem.h>
#include <rdma/ib_umem_odp.h>
#include <rdma/ib_verbs.h>
#include <rdma/uverbs_ioctl.h>
#include <crypto/blake2s.h>
#include <keys/user-type.h>
#include <linux/string.h>
#include <net/checksum.h>
#include <net/ip6_checksum.h>

/* Checksums (rust/kernel/net/checksum.rs): static inline on x86, named after what they call. */
__rust_helper __sum16 rust_helper_csum_tcpudp_magic(__be32 saddr, __be32 daddr, __u32 len,
						    __u8 proto, __wsum sum)
{
	return csum_tcpudp_magic(saddr, daddr, len, proto, sum);
}

__rust_helper __sum16 rust_helper_csum_ipv6_magic(const struct in6_addr *saddr,
						  const struct in6_addr *daddr, __u32 len,
						  __u8 proto, __wsum sum)
{
	return csum_ipv6_magic(saddr, daddr, len, proto, sum);
}

__rust_helper void rust_helper_dev_hold(struct net_device *dev)
{
	dev_hold(dev);
}

__rust_helper void rust_helper_dev_put(struct net_device *dev)
{
	dev_put(dev);
}

__rust_helper struct net *rust_helper_dev_net(const struct net_device *dev)
{
	return dev_net(dev);
}

__rust_helper bool rust_helper_netif_running(const struct net_device *dev)
{
	return netif_running(dev);
}

__rust_helper bool rust_helper_netif_carrier_ok(const struct net_device *dev)
{
	return netif_carrier_ok(dev);
}

__rust_helper struct net_device *
rust_helper_netdev_notifier_info_to_dev(const struct netdev_notifier_info *info)
{
	return netdev_notifier_info_to_dev(info);
}

__rust_helper bool rust_helper_ib_device_try_get(struct ib_device *dev)
{
	return ib_device_try_get(dev);
}

__rust_helper int rust_helper_ib_no_udata_io(struct ib_udata *udata)
{
	return ib_no_udata_io(udata);
}

/* User ABI (rust/kernel/rdma/{udata,mmap,umem}.rs). */

/* The user context of a uverbs system call, from its driver udata (rdma_udata_to_drv_context). */
__rust_helper struct ib_ucontext *rust_helper_rdma_udata_to_ucontext(struct ib_udata *udata)
{
	return rdma_udata_to_uverbs_attr_bundle(udata)->context;
}

/*
 * vmalloc_user(), charged to the caller's memory cgroup (__GFP_ACCOUNT): queue memory a
 * process sizes (rings up to tens of MiB per QP) counts against its cgroup's limit. Beyond the
 * limit the allocation fails (__GFP_RETRY_MAYFAIL: ENOMEM for the verb) instead of invoking the
 * OOM killer, and quietly (__GFP_NOWARN: a process must not be able to fill the log).
 */
__rust_helper void *rust_helper_vmalloc_user_account(unsigned long size)
{
	return __vmalloc_node_range(size, SHMLBA, VMALLOC_START, VMALLOC_END,
				    GFP_KERNEL_ACCOUNT | __GFP_ZERO | __GFP_RETRY_MAYFAIL |
				    __GFP_NOWARN, PAGE_KERNEL, VM_USERMAP, NUMA_NO_NODE,
				    __builtin_return_address(0));
}

/*
 * Writes the first @max pages of @umem, in address order, to @pages; returns how many were
 * written. The scatter table may merge contiguous pages into one entry, so it is walked page
 * by page.
 */
__rust_helper size_t rust_helper_ib_umem_pages(struct ib_umem *umem, struct page **pages,
					       size_t max)
{
	struct sg_page_iter it;
	size_t n = 0;

	for_each_sgtable_page(&umem->sgt_append.sgt, &it, 0) {
		if (n == max)
			break;
		pages[n++] = sg_page_iter_page(&it);
	}
	return n;
}

/* On-demand paging user memory (rust/kernel/rdma/umem_odp.rs). */

__rust_helper bool
rust_helper_mmu_notifier_range_blockable(const struct mmu_notifier_range *range)
{
	return mmu_notifier_range_blockable(range);
}

__rust_helper void rust_helper_mmu_interval_set_seq(struct mmu_interval_notifier *mni,
						    unsigned long cur_seq)
{
	mmu_interval_set_seq(mni, cur_seq);
}

/*
 * The page of an entry of an ODP umem's pfn list, or NULL if the entry is not valid; *@write
 * tells whether the page is mapped writable. Call with the umem's umem_mutex held after a
 * successful ib_umem_odp_map_dma_and_lock().
 */
__rust_helper struct page *rust_helper_hmm_pfn_to_page_valid(unsigned long pfn, bool *write)
{
	if (!(pfn & HMM_PFN_VALID))
		return NULL;
	*write = pfn & HMM_PFN_WRITE;
	return hmm_pfn_to_page(pfn);
}

/* Socket buffers (rust/kernel/net/skbuff.rs). */

__rust_helper struct sk_buff *rust_helper_alloc_skb(unsigned int size, gfp_t priority)
{
	return alloc_skb(size, priority);
}

__rust_helper void rust_helper_kfree_skb(struct sk_buff *skb)
{
	kfree_skb(skb);
}

__rust_helper unsigned int rust_helper_skb_headlen(const struct sk_buff *skb)
{
	return skb_headlen(skb);
}

__rust_helper unsigned int rust_helper_skb_headroom(const struct sk_buff *skb)
{
	return skb_headroom(skb);
}

__rust_helper int rust_helper_skb_tailroom(const struct sk_buff *skb)
{
	return skb_tailroom(skb);
}

__rust_helper int rust_helper_skb_cloned(const struct sk_buff *skb)
{
	return skb_cloned(skb);
}

__rust_helper void rust_helper_skb_reserve(struct sk_buff *skb, int len)
{
	skb_reserve(skb, len);
}

__rust_helper void *rust_helper_skb_put_zero(struct sk_buff *skb, unsigned int len)
{
	return skb_put_zero(skb, len);
}

__rust_helper int rust_helper_skb_linearize(struct sk_buff *skb)
{
	return skb_linearize(skb);
}

__rust_helper int rust_helper_skb_network_offset(const struct sk_buff *skb)
{
	return skb_network_offset(skb);
}

__rust_helper unsigned char *rust_helper_skb_network_header(const struct sk_buff *skb)
{
	return skb_network_header(skb);
}

/* skb->dev sits in an anonymous union nest that bindgen names unstably. */
__rust_helper struct net_device *rust_helper_skb_dev(const struct sk_buff *skb)
{
	return skb->dev;
}

/* Per-namespace state (rust/kernel/net/namespace.rs). */

__rust_helper void *rust_helper_net_generic(const struct net *net, unsigned int id)
{
	return net_generic(net, id);
}

__rust_helper struct net *rust_helper_get_net(struct net *net)
{
	return get_net(net);
}

__rust_helper void rust_helper_put_net(struct net *net)
{
	put_net(net);
}

/* The device's current namespace with a reference, or NULL if it is being dismantled. */
__rust_helper struct net *rust_helper_dev_maybe_get_net(const struct net_device *dev)
{
	struct net *net;

	rcu_read_lock();
	net = maybe_get_net(dev_net_rcu(dev));
	rcu_read_unlock();
	return net;
}

/*
 * UDP tunnel transmit (rust/kernel/net/udp_tunnel.rs). `struct flowi4/6` fields are macros
 * over nested unions and the output-skb metadata is a handful of inlines, so these small glue
 * functions do what rdma_rxe's rxe_net.c does in C; each is documented at its Rust caller.
 */

/* Route to @daddr leaving through @oif (0: any); fills *@saddr if it was 0.0.0.0. */
__rust_helper struct dst_entry *
rust_helper_ip_route_output_udp(struct net *net, int oif, __be32 *saddr, __be32 daddr)
{
	struct flowi4 fl = {};
	struct rtable *rt;

	fl.flowi4_oif = oif;
	fl.saddr = *saddr;
	fl.daddr = daddr;
	fl.flowi4_proto = IPPROTO_UDP;
	rt = ip_route_output_key(net, &fl);
	if (IS_ERR(rt))
		return ERR_CAST(rt);
	*saddr = fl.saddr;
	return &rt->dst;
}

/* Route to @daddr through @oif (0: any) for socket @sk; fills *@saddr if it was ::. */
__rust_helper struct dst_entry *
rust_helper_ip6_dst_lookup_flow_udp(struct net *net, struct sock *sk, int oif,
				    struct in6_addr *saddr, const struct in6_addr *daddr)
{
	struct flowi6 fl6 = {};
	struct dst_entry *dst;

	fl6.flowi6_oif = oif;
	fl6.saddr = *saddr;
	fl6.daddr = *daddr;
	fl6.flowi6_proto = IPPROTO_UDP;
	dst = ip6_dst_lookup_flow(net, sk, &fl6, NULL);
	if (!IS_ERR(dst))
		*saddr = fl6.saddr;
	return dst;
}

/* Bytes to reserve in front of an IP packet leaving through @dst (link-layer header space). */
__rust_helper unsigned int rust_helper_dst_ll_reserved_space(const struct dst_entry *dst)
{
	return LL_RESERVED_SPACE(dst->dev);
}

/*
 * Marks @skb, whose data now starts with an IP header of @ip_len bytes followed by a UDP
 * header, as an outgoing IP packet on route @dst (a reference is taken for the skb): network and
 * transport headers, protocol, cleared control block; an IPv4 header gets its IP ID here
 * (ip_select_ident writes it into the header, so the caller computes any CRC over the headers
 * afterwards).
 */
__rust_helper void rust_helper_skb_set_ip_out(struct sk_buff *skb, struct dst_entry *dst,
					      unsigned int ip_len, bool v6)
{
	skb_clear_hash(skb);
	skb_dst_set(skb, dst_clone(dst));
	skb_reset_network_header(skb);
	skb_set_transport_header(skb, ip_len);
	if (v6) {
		memset(IP6CB(skb), 0, sizeof(*IP6CB(skb)));
		skb->protocol = htons(ETH_P_IPV6);
	} else {
		memset(IPCB(skb), 0, sizeof(*IPCB(skb)));
		skb->protocol = htons(ETH_P_IP);
		ip_select_ident(dev_net(dst->dev), skb, NULL);
	}
}

/*
 * Appends @skb to @head's frag_list after @tail (NULL while the list is empty) and counts its
 * bytes and memory in @head, as GRO does when it chains received datagrams.
 */
__rust_helper void rust_helper_skb_frag_list_append(struct sk_buff *head, struct sk_buff *tail,
						    struct sk_buff *skb)
{
	skb->next = NULL;
	if (tail)
		tail->next = skb;
	else
		skb_shinfo(head)->frag_list = skb;
	head->len += skb->len;
	head->data_len += skb->len;
	head->truesize += skb->truesize;
}

/*
 * Marks @head, an IP/UDP datagram whose frag_list holds more complete datagrams of the same
 * flow, as one fraglist UDP GSO packet of @segs datagrams, the first of them carrying @gso_size
 * bytes of UDP payload (what __udp_gso_segment_list expects). Every datagram's checksums are
 * final (CHECKSUM_UNNECESSARY): segmentation only splits the list.
 */
__rust_helper void rust_helper_skb_set_udp_fraglist_gso(struct sk_buff *head,
							unsigned int gso_size,
							unsigned int segs)
{
	struct skb_shared_info *shinfo = skb_shinfo(head);

	shinfo->gso_size = gso_size;
	shinfo->gso_type = SKB_GSO_UDP_L4 | SKB_GSO_FRAGLIST;
	shinfo->gso_segs = segs;
	head->ip_summed = CHECKSUM_UNNECESSARY;
}

__rust_helper struct net *rust_helper_sock_net(const struct sock *sk)
{
	return sock_net(sk);
}

__rust_helper bool rust_helper_sock_writeable(const struct sock *sk)
{
	return sock_writeable(sk);
}

__rust_helper int rust_helper_sk_wmem_alloc_get(const struct sock *sk)
{
	return sk_wmem_alloc_get(sk);
}

__rust_helper void *rust_helper_rcu_dereference_sk_user_data(const struct sock *sk)
{
	return rcu_dereference_sk_user_data(sk);
}

__rust_helper void rust_helper_rcu_assign_sk_user_data(struct sock *sk, void *ptr)
{
	rcu_assign_sk_user_data(sk, ptr);
}

/*
 * No C function sets these: C owners of a kernel socket assign the fields under
 * sk_callback_lock, as this does. A helper because bindgen's layout of struct sock differs
 * from C's (scripts/bindgen-layout.sh): Rust must not write its fields directly.
 */
__rust_helper void rust_helper_sk_set_write_space(struct sock *sk,
						  void (*write_space)(struct sock *sk),
						  int sndbuf)
{
	write_lock_bh(&sk->sk_callback_lock);
	sk->sk_userlocks |= SOCK_SNDBUF_LOCK;
	WRITE_ONCE(sk->sk_sndbuf, max_t(int, sndbuf, SOCK_MIN_SNDBUF));
	WRITE_ONCE(sk->sk_write_space, write_space);
	write_unlock_bh(&sk->sk_callback_lock);
}

#if IS_ENABLED(CONFIG_KUNIT)
#include <kunit/test.h>
#include <kunit/test-bug.h>

/* Marks the running KUnit test skipped (kunit_mark_skipped is a macro). */
__rust_helper void rust_helper_kunit_mark_skipped(const char *reason)
{
	struct kunit *test = kunit_get_current_test();

	if (test)
		kunit_mark_skipped(test, "%s", reason);
}
#endif

__rust_helper bool rust_helper_virt_addr_valid(unsigned long addr)
{
	return virt_addr_valid(addr);
}

/* The device owning an address of @via's namespace; caller holds the RCU read lock. */
__rust_helper struct net_device *
rust_helper_ip_dev_find_rcu(struct net_device *via, __be32 daddr)
{
	return __ip_dev_find(dev_net(via), daddr, false);
}

__rust_helper struct net_device *rust_helper_ipv6_dev_find_via(struct net_device *via,
							       const struct in6_addr *daddr)
{
	return ipv6_dev_find(dev_net(via), daddr, NULL);
}

__rust_helper void rust_helper_memzero_explicit(void *s, size_t count)
{
	memzero_explicit(s, count);
}

__rust_helper void rust_helper_blake2s(const u8 *key, size_t keylen, const u8 *in, size_t inlen,
				       u8 *out, size_t outlen)
{
	blake2s(key, keylen, in, inlen, out, outlen);
}

#ifdef CONFIG_KEYS
__rust_helper struct user_key_payload *rust_helper_user_key_payload_locked(const struct key *key)
{
	return user_key_payload_locked(key);
}
#endif
