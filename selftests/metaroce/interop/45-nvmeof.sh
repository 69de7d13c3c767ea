# NVMe over Fabrics between MetaRoCE and Debian's rdma_rxe, each guest the target once.
MR_BOTH_WAYS=1 bash "$MR_SELFTESTS/pair/45-nvmeof.sh"
