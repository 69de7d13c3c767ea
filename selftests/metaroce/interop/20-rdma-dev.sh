# MetaRoCE on our kernel's guest, rdma_rxe on Debian's (the pair suite's test).
bash "$MR_SELFTESTS/pair/20-rdma-dev.sh"
