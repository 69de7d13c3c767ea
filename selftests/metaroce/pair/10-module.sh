# metaroce.ko loads on our kernel (Debian's peer kernel has rdma_rxe instead and skips this).
. "$MR_SELFTESTS/lib.sh"
mr_our_kernel || skip "peer runs $(uname -r), not MetaRoCE's kernel"
bash "$MR_SELFTESTS/single/10-module.sh"
