# metaroce.ko loads and unloads cleanly, saying so in dmesg.
. "$MR_SELFTESTS/lib.sh"
lsmod | grep -q '^metaroce ' && { rmmod metaroce || fail "rmmod of a preloaded metaroce"; }
dmesg -c >/dev/null
modprobe metaroce || fail "modprobe metaroce"
lsmod | grep -q '^metaroce ' || fail "metaroce not in lsmod after modprobe"
dmesg | grep -q 'metaroce: loaded' || fail "no 'metaroce: loaded' line in dmesg"
modinfo metaroce | grep -E '^(filename|description|license|vermagic)'
rmmod metaroce || fail "rmmod metaroce"
lsmod | grep -q '^metaroce ' && fail "metaroce still loaded after rmmod"
dmesg | grep -q 'metaroce: unloaded' || fail "no 'metaroce: unloaded' line in dmesg"
dmesg | grep metaroce
