# ucmatose between MetaRoCE and rdma_rxe, each as server and as client (the pair suite's test).
MR_BOTH_WAYS=1 bash "$MR_SELFTESTS/pair/61-ucmatose.sh"
