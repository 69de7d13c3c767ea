# The QEMU link carries UDP both ways (the pair suite's test).
bash "$MR_SELFTESTS/pair/00-link.sh"
