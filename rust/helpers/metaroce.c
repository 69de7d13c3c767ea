// SPDX-License-Identifier: GPL-2.0

/*
 * Helpers for the MetaRoCE Rust abstractions (rust/kernel/rdma, rust/kernel/net):
 * static inline functions of the networking and ib_core headers that Rust calls.
 * Included from rust/helpers/helpers.c by MetaRoCE's overlay script.
 */

#include <linux/netdevice.h>
#include <rdma/ib_verbs.h>
#include <rdma/uverbs_ioctl.h>

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
