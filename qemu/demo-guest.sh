# Runs inside the demo guest (release kernel): shows what MetaRoCE offers at this stage.
set -u
echo "== kernel: $(uname -r)"
echo "== loading metaroce"
modprobe metaroce && lsmod | grep -E '^(Module|metaroce)'
dmesg | grep metaroce
modinfo metaroce | grep -E '^(filename|description|vermagic)'
echo "== ib_core built in, rdma_rxe absent (the two are exclusive: same user ABI and driver id)"
grep -E 'CONFIG_(INFINIBAND|RDMA_RXE|RDMA_METAROCE|RUST_RDMA)[= ]' <(zcat /proc/config.gz)
rdma link show; echo "(no RDMA links yet: 'rdma link add ... type metaroce' arrives with the device abstractions)"
rmmod metaroce && dmesg | grep 'metaroce: unloaded'
