#!/usr/bin/env bash
# rxe-guest.sh - boot a throwaway Linux guest under QEMU whose (Debian) kernel has
# rdma_rxe (soft-RoCE), and run a command inside it with real libibverbs traffic.
#
#   rxe-guest.sh                         # install deps, boot, run the built-in RDMA smoke test
#   rxe-guest.sh --share "$PWD/build" -- ./build/tests/rdma_test --foo
#   rxe-guest.sh --cmd my-guest-script.sh
#
# Guest layout: the host's / is shared read-only over virtio-9p and used as the guest's root
# (chroot), so every host binary and library (ibv_*, rdma, perftest, the project's build) is
# usable as-is. tmpfs is mounted on /tmp, /run, /var/tmp, /dev/shm (so host /tmp is NOT visible
# in the guest). --share DIR mounts DIR read-write at the same path. The work directory is always
# shared read-write (guest exit code and generated scripts live there).
# Before the command runs, the guest (by default) creates veth0<->veth1 and rxe0 (on veth0) and
# rxe1 (on veth1), and waits for both ports to be ACTIVE. Use GID index 0 (the link-local IPv6
# RoCEv2 GID) between rxe0 and rxe1; out-of-band TCP can use 127.0.0.1.
#
# Exit status: the guest command's exit status; 124 on timeout; 100-109 for harness errors.
# Needs root (apt-get, 9p passthrough of /). One run per --workdir at a time.
set -euo pipefail

# Vendored from the soft-RoCE study (shared/rxe-guest/FINDINGS.md); what it found:
#  - KVM here is nested PVM (kvm_pvm) and cannot boot a stock kernel: TCG only
#    ("auto" picks KVM only with kvm_intel/kvm_amd and without kvm_pvm).
#  - rdma_rxe on 6.1 needs crc32_generic loaded first ("rdma_rxe: failed to add").
#  - IPv6 DAD must be off (accept_dad=0) before the veths exist, else
#    modify_qp(RTR) fails with ETIMEDOUT while the fe80:: GID is tentative.
#  - rxe does not work across network namespaces on 6.1 (local QP operation
#    error): all RDMA "hosts" share one namespace, a veth pair per cable.
#  - Within one namespace only GID index 0 (link-local RoCE v2) works; the
#    IPv4-mapped GID fails RTR because the peer address is local.
#  - -M microvm hangs at TSC calibration in about half the boots: -M pc.
#  - Serial output is filtered with sed -u only (tr would buffer it for minutes).
#  - Under TCG, rxe retransmits a lot; short ack timeouts make it worse.
WORKDIR=${RXE_WORKDIR:-/tmp/rxe-qemu/work}
ACCEL=${RXE_ACCEL:-auto}        # auto | kvm | tcg
MACHINE=${RXE_MACHINE:-pc}      # pc | microvm (microvm boots faster but can hang on TSC calibration under TCG)
MEM=${RXE_MEM:-1024}            # MiB
SMP=${RXE_SMP:-2}
TB_SIZE=${RXE_TB_SIZE:-256}     # MiB, TCG translation cache cap (bounds qemu RSS)
CPU=${RXE_CPU:-}                # -cpu model override (default: host with kvm, max with tcg)
TIMEOUT=${RXE_TIMEOUT:-300}     # seconds, whole guest run
KVER=${RXE_KVER:-}              # guest kernel version (default: newest with rdma_rxe)
SETUP=${RXE_SETUP:-pair}        # pair | none
INSTALL=${RXE_INSTALL:-1}
CMD_FILE=
SHARES=()
USER_CMD=()

usage() { sed -n '2,19p' "$0" | sed 's/^# \{0,1\}//'; cat <<EOF
Options:
  --cmd FILE        bash script to run in the guest (default: built-in smoke test)
  --share DIR       share DIR read-write into the guest at the same path (repeatable)
  --workdir DIR     work directory (default $WORKDIR)
  --accel MODE      auto|kvm|tcg (default $ACCEL; auto = kvm only with kvm_intel/kvm_amd)
  --machine M       microvm|pc (default $MACHINE)
  --mem MB --smp N --timeout SEC --kver VERSION
  --no-setup        do not create veth0/veth1 + rxe0/rxe1 before the command
  --no-install      do not apt-get install missing packages
  -- CMD ARGS...    run this command in the guest (cwd = current host directory)
EOF
}

while [ $# -gt 0 ]; do
  case "$1" in
    --cmd) CMD_FILE=$(readlink -f "$2"); shift 2;;
    --share) SHARES+=("$(readlink -f "$2")"); shift 2;;
    --workdir) WORKDIR=$2; shift 2;;
    --accel) ACCEL=$2; shift 2;;
    --machine) MACHINE=$2; shift 2;;
    --mem) MEM=$2; shift 2;;
    --smp) SMP=$2; shift 2;;
    --timeout) TIMEOUT=$2; shift 2;;
    --kver) KVER=$2; shift 2;;
    --no-setup) SETUP=none; shift;;
    --no-install) INSTALL=0; shift;;
    -h|--help) usage; exit 0;;
    --) shift; USER_CMD=("$@"); break;;
    *) echo "unknown option: $1" >&2; usage >&2; exit 100;;
  esac
done

ms() { echo $(( $(date +%s%N) / 1000000 )); }
secs() { printf '%d.%03d' $(( $1 / 1000 )) $(( $1 % 1000 )); }  # ms -> s.mmm
T0=$(ms)
log() { printf '[rxe-qemu %8ss] %s\n' "$(secs $(( $(ms) - T0 )))" "$*" >&2; }
die() { log "ERROR: $*"; exit "${2:-101}"; }

# ---------------------------------------------------------------- 1. packages
PKGS=(qemu-system-x86 linux-image-amd64 busybox-static rdma-core ibverbs-utils ibverbs-providers
      perftest iproute2 kmod cpio xz-utils zstd time)
if [ "$INSTALL" = 1 ]; then
  missing=()
  for p in "${PKGS[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
  done
  if [ ${#missing[@]} -gt 0 ]; then
    command -v apt-get >/dev/null || die "apt-get not found and packages missing: ${missing[*]}" 102
    log "apt-get install ${missing[*]}"
    if ! apt-cache show qemu-system-x86 >/dev/null 2>&1; then apt-get update -qq; fi
    # INITRD=No: skip update-initramfs for the host (we build our own tiny initramfs).
    DEBIAN_FRONTEND=noninteractive INITRD=No apt-get install -y -qq --no-install-recommends \
      "${missing[@]}" >"${TMPDIR:-/tmp}/rxe-qemu-apt.$$.log" 2>&1 \
      || { tail -20 "${TMPDIR:-/tmp}/rxe-qemu-apt.$$.log" >&2; die "apt-get install failed" 102; }
    log "packages installed"
  fi
fi

# ---------------------------------------------------------------- 2. kernel
if [ -z "$KVER" ]; then
  for d in $(ls -d /lib/modules/*/ 2>/dev/null | sort -rV); do
    v=$(basename "$d")
    if [ -f "/boot/vmlinuz-$v" ] && ls "$d"kernel/drivers/infiniband/sw/rxe/rdma_rxe.ko* >/dev/null 2>&1; then
      KVER=$v; break
    fi
  done
fi
[ -n "$KVER" ] || die "no kernel with rdma_rxe.ko and /boot/vmlinuz-* found (install linux-image-amd64)" 103
MODDIR=/lib/modules/$KVER
log "guest kernel $KVER"

mkdir -p "$WORKDIR"
WORKDIR=$(readlink -f "$WORKDIR")
case "$WORKDIR" in /) die "workdir must not be /" 100;; esac

# Uncompressed vmlinux (ELF, PVH entry) boots ~2 s faster under TCG than the xz bzImage.
KERNEL=/boot/vmlinuz-$KVER
VMLINUX=$WORKDIR/vmlinux-$KVER
[ -s "$VMLINUX" ] && [ "$KERNEL" -nt "$VMLINUX" ] && rm -f "$VMLINUX"
if [ ! -s "$VMLINUX" ] && grep -q '^CONFIG_PVH=y' "/boot/config-$KVER" 2>/dev/null; then
  off=$(LC_ALL=C grep -obUaP '\xfd7zXZ\x00' "$KERNEL" 2>/dev/null | head -1 | cut -d: -f1 || true)
  if [ -n "$off" ]; then
    tail -c +$((off + 1)) "$KERNEL" | xz -dc --single-stream >"$VMLINUX.tmp" 2>/dev/null || true
  else
    off=$(LC_ALL=C grep -obUaP '\x28\xb5\x2f\xfd' "$KERNEL" 2>/dev/null | head -1 | cut -d: -f1 || true)
    [ -n "$off" ] && { tail -c +$((off + 1)) "$KERNEL" | zstd -dcq >"$VMLINUX.tmp" 2>/dev/null || true; }
  fi
  if [ -s "$VMLINUX.tmp" ] && [ "$(head -c 4 "$VMLINUX.tmp")" = $'\x7fELF' ]; then
    mv "$VMLINUX.tmp" "$VMLINUX"
  else
    rm -f "$VMLINUX.tmp"
  fi
fi
[ -s "$VMLINUX" ] && KERNEL=$VMLINUX

# ---------------------------------------------------------------- 3. initramfs
# busybox + the modules for virtio/9p (root fs) and soft-RoCE, loaded by insmod in dep order.
WANT_MODS=(virtio_pci virtio_mmio 9pnet_virtio 9p crc32_generic ib_core ib_uverbs rdma_rxe
           rdma_ucm veth)
IRD=$WORKDIR/initramfs
rm -rf "$IRD"; mkdir -p "$IRD"/{bin,dev,proc,sys,newroot,lib/modules}
cp /bin/busybox "$IRD/bin/busybox"
declare -A SEEN=()
ORDER=()
mod_visit() { # $1 = module name; appends its relative path (deps first) to ORDER
  local name=${1//-/_} line path dep
  [ -n "${SEEN[$name]:-}" ] && return 0
  SEEN[$name]=1
  line=$(grep -E "(^|/)(${name}|${name//_/-})\.ko(\.xz|\.zst|\.gz)?:" "$MODDIR/modules.dep" || true)
  if [ -z "$line" ]; then
    grep -qE "/(${name}|${name//_/-})\.ko" "$MODDIR/modules.builtin" 2>/dev/null \
      || log "note: module $name not found (skipped)"
    return 0
  fi
  path=${line%%:*}
  for dep in ${line#*:}; do
    dep=$(basename "$dep"); dep=${dep%%.ko*}; mod_visit "$dep"
  done
  ORDER+=("$path")
}
for m in "${WANT_MODS[@]}"; do mod_visit "$m"; done
: >"$IRD/lib/modules/order"
for p in "${ORDER[@]}"; do
  b=$(basename "$p"); b=${b%%.ko*}.ko
  case "$p" in
    *.ko.xz) xz -dc "$MODDIR/$p" >"$IRD/lib/modules/$b";;
    *.ko.zst) zstd -dcq "$MODDIR/$p" >"$IRD/lib/modules/$b";;
    *.ko.gz) gzip -dc "$MODDIR/$p" >"$IRD/lib/modules/$b";;
    *) cp "$MODDIR/$p" "$IRD/lib/modules/$b";;
  esac
  echo "$b" >>"$IRD/lib/modules/order"
done

# Kernel-requested modules (request_module) are loaded from the host root inside the guest.
cat >"$IRD/bin/modprobe-chroot" <<'EOF'
#!/bin/sh
exec /bin/chroot /newroot /sbin/modprobe "$@"
EOF
cat >"$IRD/init" <<'EOF'
#!/bin/busybox sh
/bin/busybox --install -s /bin
export PATH=/bin
mount -t proc proc /proc; mount -t sysfs sys /sys; mount -t devtmpfs dev /dev
up() { cut -d' ' -f1 /proc/uptime; }
echo "GUEST: init started at $(up)s uptime"
for m in $(cat /lib/modules/order); do insmod /lib/modules/$m 2>/dev/null || echo "GUEST: insmod $m failed"; done
CMD=; RW=; WORK=
for a in $(cat /proc/cmdline); do
  case "$a" in rxe_cmd=*) CMD=${a#*=};; rxe_rw=*) RW=${a#*=};; rxe_work=*) WORK=${a#*=};; esac
done
R=/newroot
fail() { echo "GUEST: $*"; echo "RXE_GUEST_EXIT=105"; sync; poweroff -f; sleep 5; }
mount -t 9p -o trans=virtio,version=9p2000.L,msize=262144,cache=loose,ro hostroot $R || fail "9p root mount failed"
mount -t proc proc $R/proc; mount -t sysfs sys $R/sys; mount -t devtmpfs dev $R/dev
mkdir -p $R/dev/pts $R/dev/shm; mount -t devpts devpts $R/dev/pts; mount -t tmpfs shm $R/dev/shm
mount -t tmpfs tmp $R/tmp; mount -t tmpfs run $R/run; mount -t tmpfs vartmp $R/var/tmp
i=0
for d in $(echo "$RW" | tr ',' ' '); do
  mkdir -p $R$d 2>/dev/null
  mount -t 9p -o trans=virtio,version=9p2000.L,msize=262144 rw$i $R$d || fail "9p mount of $d failed"
  i=$((i+1))
done
echo /bin/modprobe-chroot > /proc/sys/kernel/modprobe
ip link set lo up
echo "GUEST: root ready at $(up)s uptime"
chroot $R /usr/bin/env -i PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
  HOME=/tmp TERM=dumb LANG=C.UTF-8 RXE_GUEST=1 /bin/bash "$CMD" </dev/null
rc=$?
echo "GUEST: command finished at $(up)s uptime"
echo "RXE_GUEST_EXIT=$rc"
[ -n "$WORK" ] && echo $rc > $R$WORK/guest-exit-code
sync
poweroff -f
EOF
chmod +x "$IRD/init" "$IRD/bin/modprobe-chroot"
INITRD=$WORKDIR/initramfs.cpio
(cd "$IRD" && find . | cpio -o -H newc --quiet) >"$INITRD"
log "initramfs $(du -k "$INITRD" | cut -f1) KiB, ${#ORDER[@]} modules, kernel image $(basename "$KERNEL")"

# ---------------------------------------------------------------- 4. guest scripts
SMOKE=$WORKDIR/guest-smoke.sh
cat >"$SMOKE" <<'EOF'
#!/bin/bash
# Built-in soft-RoCE smoke test (runs inside the guest). rxe0 (veth0) <-> rxe1 (veth1), GID 0.
set -u
pass=0; fail=0
ok() { echo "SMOKE PASS: $*"; pass=$((pass+1)); }
ko() { echo "SMOKE FAIL: $*"; fail=$((fail+1)); }
now() { date +%s.%N; }
wait_listen() { local i; for i in $(seq 200); do ss -ltnH "sport = :$1" | grep -q . && return 0; sleep 0.05; done; return 1; }
# pair PORT "server cmd" "client cmd": run server in background, client when server listens
pair() {
  local port=$1 s=$2 c=$3 spid src crc t0
  timeout 60 $s >/tmp/srv.$port.log 2>&1 & spid=$!
  wait_listen "$port" || { echo "server on port $port never listened"; cat /tmp/srv.$port.log; kill $spid 2>/dev/null; return 1; }
  t0=$(now); timeout 60 $c >/tmp/cli.$port.log 2>&1; crc=$?
  CLIENT_WALL=$(awk -v a="$t0" -v b="$(now)" 'BEGIN{printf "%.3f", b-a}')
  wait $spid; src=$?
  cat /tmp/cli.$port.log
  echo "(server rc=$src client rc=$crc client wall=${CLIENT_WALL}s)"
  [ $src -eq 0 ] && [ $crc -eq 0 ]
}
echo "== kernel $(uname -r)"
echo "== rdma link"; rdma link show
echo "== ibv_devices"; ibv_devices
if ibv_devices | grep -q rxe0 && ibv_devices | grep -q rxe1; then ok "ibv_devices lists rxe0 and rxe1"; else ko "ibv_devices"; fi
if ibv_devinfo -d rxe0 | grep -q PORT_ACTIVE; then ok "rxe0 port ACTIVE"; else ko "rxe0 port not active"; ibv_devinfo -d rxe0; fi
echo "== rxe0 GID0 $(cat /sys/class/infiniband/rxe0/ports/1/gids/0) type $(cat /sys/class/infiniband/rxe0/ports/1/gid_attrs/types/0)"
tx0=$(cat /sys/class/net/veth0/statistics/tx_bytes)

echo "== ibv_rc_pingpong rxe1(server) <-> rxe0(client), RC, 4 KiB x 500"
if pair 18515 "ibv_rc_pingpong -d rxe1 -g 0 -n 500 -s 4096" "ibv_rc_pingpong -d rxe0 -g 0 -n 500 -s 4096 127.0.0.1"; then
  ok "ibv_rc_pingpong rxe0<->rxe1"; else ko "ibv_rc_pingpong rxe0<->rxe1"; fi

echo "== ibv_rc_pingpong 64 KiB x 200 (throughput)"
if pair 18516 "ibv_rc_pingpong -d rxe1 -g 0 -n 200 -s 65536 -p 18516" "ibv_rc_pingpong -d rxe0 -g 0 -n 200 -s 65536 -p 18516 127.0.0.1"; then
  ok "ibv_rc_pingpong 64KiB"; else ko "ibv_rc_pingpong 64KiB"; fi

echo "== ib_write_bw rxe0 -> rxe1, 64 KiB x 1000"
if pair 18600 "ib_write_bw -d rxe1 -x 0 -F -s 65536 -n 1000 --report_gbits -p 18600" \
              "ib_write_bw -d rxe0 -x 0 -F -s 65536 -n 1000 --report_gbits -p 18600 127.0.0.1"; then
  ok "ib_write_bw rxe0->rxe1"
  echo "   wall-clock check: $((65536*1000)) B in ${CLIENT_WALL}s (incl. setup) = $(awk -v t="$CLIENT_WALL" 'BEGIN{printf "%.3f", 65536*1000*8/t/1e9}') Gb/s lower bound"
else ko "ib_write_bw rxe0->rxe1"; fi

echo "== ib_send_lat rxe0 -> rxe1, 2 B x 500"
if pair 18700 "ib_send_lat -d rxe1 -x 0 -F -n 500 -p 18700" "ib_send_lat -d rxe0 -x 0 -F -n 500 -p 18700 127.0.0.1"; then
  ok "ib_send_lat"; else ko "ib_send_lat"; fi

tx1=$(cat /sys/class/net/veth0/statistics/tx_bytes)
echo "== veth0 tx bytes during tests: $((tx1 - tx0))"
echo "== rxe0 counters: $(cd /sys/class/infiniband/rxe0/ports/1/hw_counters && for f in sent_pkts rcvd_pkts duplicate_request completer_retry_err retry_exceeded_err; do printf '%s=%s ' $f $(cat $f); done)"
[ $((tx1 - tx0)) -gt 65536000 ] && ok "RoCE traffic crossed veth0 ($((tx1 - tx0)) bytes)" || ko "little/no traffic on veth0"
grep -E 'MemTotal|MemAvailable' /proc/meminfo
echo "rxe smoke: $pass passed, $fail failed"
[ $fail -eq 0 ]
EOF

# Wrapper run by the guest init: rxe setup, then the user's command.
GUEST=$WORKDIR/guest-run.sh
{
  echo '#!/bin/bash'
  echo 'set -u'
  if [ "$SETUP" = pair ]; then cat <<'EOF'
# No IPv6 DAD: the link-local addresses (= GID index 0) must be usable at once, otherwise
# modify_qp(RTR) fails with ETIMEDOUT while the peer's address is still "tentative".
echo 0 > /proc/sys/net/ipv6/conf/all/accept_dad; echo 0 > /proc/sys/net/ipv6/conf/default/accept_dad
ip link add veth0 type veth peer name veth1 && ip link set veth0 up && ip link set veth1 up
rdma link add rxe0 type rxe netdev veth0 || { echo "rdma link add rxe0 failed"; exit 104; }
rdma link add rxe1 type rxe netdev veth1 || { echo "rdma link add rxe1 failed"; exit 104; }
for i in $(seq 100); do
  [ "$(cat /sys/class/infiniband/rxe0/ports/1/state 2>/dev/null)" = "4: ACTIVE" ] &&
  [ "$(cat /sys/class/infiniband/rxe1/ports/1/state 2>/dev/null)" = "4: ACTIVE" ] &&
  ip -6 addr show dev veth0 scope link | grep -q 'inet6 fe80' &&
  ip -6 addr show dev veth1 scope link | grep -q 'inet6 fe80' &&
  ! ip -6 addr show tentative | grep -q inet6 && break
  sleep 0.1
done
echo "GUEST: rxe0/rxe1 ready at $(cut -d' ' -f1 /proc/uptime)s uptime"
EOF
  fi
  if [ ${#USER_CMD[@]} -gt 0 ]; then
    printf 'cd %q || { echo "cwd not visible in guest (host /tmp is hidden: use --share)"; exit 106; }\n' "$PWD"
    printf '%q ' "${USER_CMD[@]}"; echo
  elif [ -n "$CMD_FILE" ]; then
    cp "$CMD_FILE" "$WORKDIR/guest-cmd.sh"   # the work dir is always visible in the guest
    printf 'cd %q 2>/dev/null || cd %q\n' "$(dirname "$CMD_FILE")" "$WORKDIR"
    printf 'exec /bin/bash %q\n' "$WORKDIR/guest-cmd.sh"
  else
    printf 'exec /bin/bash %q\n' "$SMOKE"
  fi
} >"$GUEST"
chmod +x "$GUEST" "$SMOKE"

# ---------------------------------------------------------------- 5. boot
if [ "$ACCEL" = auto ]; then
  ACCEL=tcg
  # /dev/kvm backed by kvm_pvm (nested "PVM") cannot boot a stock kernel: it hangs right after
  # the firmware. Only use KVM with real hardware virtualization modules.
  if [ -r /dev/kvm ] && [ -w /dev/kvm ] && { [ -d /sys/module/kvm_intel ] || [ -d /sys/module/kvm_amd ]; } \
     && [ ! -d /sys/module/kvm_pvm ]; then ACCEL=kvm; fi
fi
if [ "$ACCEL" = kvm ]; then ACCEL_ARGS=(-accel kvm -cpu "${CPU:-host}"); else ACCEL_ARGS=(-accel "tcg,thread=multi,tb-size=$TB_SIZE" -cpu "${CPU:-max}"); fi

RWLIST=$WORKDIR
for s in "${SHARES[@]}"; do [ -d "$s" ] || die "--share $s: not a directory" 100; RWLIST+=",$s"; done
case "$RWLIST" in *' '*) die "shared paths must not contain spaces" 100;; esac
FS_ARGS=()
if [ "$MACHINE" = microvm ]; then
  MACH_ARGS=(-M microvm); DEV=virtio-9p-device; EXTRA_APPEND="pci=off"
else
  MACH_ARGS=(-M pc); DEV=virtio-9p-pci; EXTRA_APPEND=""
fi
FS_ARGS+=(-fsdev local,id=fs_root,path=/,security_model=none,readonly=on,multidevs=remap
          -device $DEV,fsdev=fs_root,mount_tag=hostroot)
i=0
IFS=, read -ra RWARR <<<"$RWLIST"
for d in "${RWARR[@]}"; do
  FS_ARGS+=(-fsdev local,id=fs_rw$i,path=$d,security_model=none,multidevs=remap -device $DEV,fsdev=fs_rw$i,mount_tag=rw$i)
  i=$((i + 1))
done

SERIAL=$WORKDIR/serial.log
rm -f "$WORKDIR/guest-exit-code" "$WORKDIR/qemu.rc" "$SERIAL"
APPEND="console=ttyS0 loglevel=4 panic=-1 $EXTRA_APPEND rxe_cmd=$GUEST rxe_rw=$RWLIST rxe_work=$WORKDIR"
QEMU=(qemu-system-x86_64 "${MACH_ARGS[@]}" "${ACCEL_ARGS[@]}" -smp "$SMP" -m "$MEM"
      -nodefaults -no-user-config -display none -monitor none -serial stdio -no-reboot
      -kernel "$KERNEL" -initrd "$INITRD" -append "$APPEND" "${FS_ARGS[@]}")
echo "${QEMU[*]}" >"$WORKDIR/qemu-cmdline.txt"
TIMECMD=(); [ -x /usr/bin/time ] && TIMECMD=(/usr/bin/time -f '%M' -o "$WORKDIR/qemu-maxrss-kb")
log "booting guest: accel=$ACCEL machine=$MACHINE mem=${MEM}M smp=$SMP timeout=${TIMEOUT}s"
TB=$(ms)
set +e
( "${TIMECMD[@]}" timeout -k 10 "$TIMEOUT" "${QEMU[@]}" </dev/null 2>&1; echo $? >"$WORKDIR/qemu.rc" ) \
  | sed -u 's/\r//g; s/\x1b\[[0-9;?]*[a-zA-Z]//g; s/\x1bc//g' | tee "$SERIAL"
set -e
TE=$(ms)
QRC=$(cat "$WORKDIR/qemu.rc" 2>/dev/null || echo 101)

if [ -s "$WORKDIR/guest-exit-code" ]; then RC=$(cat "$WORKDIR/guest-exit-code")
elif grep -q '^RXE_GUEST_EXIT=' "$SERIAL"; then RC=$(grep '^RXE_GUEST_EXIT=' "$SERIAL" | tail -1 | cut -d= -f2)
elif [ "$QRC" = 124 ] || [ "$QRC" = 137 ]; then RC=124
else RC=101; fi

log "qemu exit $QRC, guest exit $RC, qemu wall $(secs $((TE - TB)))s, total $(secs $((TE - T0)))s"
grep -E '^GUEST: (init started|root ready|rxe0/rxe1 ready|command finished)' "$SERIAL" | sed 's/^/  /' >&2 || true
[ -s "$WORKDIR/qemu-maxrss-kb" ] && log "qemu max RSS $(( $(tail -1 "$WORKDIR/qemu-maxrss-kb") / 1024 )) MiB"
exit "$RC"
