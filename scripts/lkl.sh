#!/usr/bin/env bash
# lkl.sh build|config: `make lkl` and `make lkl-config` (docs/lkl.md).
#
# It configures the LKL tree SRC with LKL's defconfig plus a fragment
# (CONFIG: `kbox`, lkl/kbox.config, the default; `default`, LKL's defconfig
# alone; or the path of another fragment), checks that the result has
# every option of the fragment, and with `build` builds liblkl and installs
# it with the headers under PREFIX. `config` stops after the check and
# says whether `build` would rebuild the kernel; it changes nothing.
#
# The configuration is computed in a scratch file (KCONFIG_CONFIG), so a
# fragment that does not apply leaves the tree as it was. The kernel is
# rebuilt when the computed .config differs from the tree's, or from the
# one liblkl was last built with (STAMP); an unchanged configuration
# rebuilds nothing.
#
# Environment: SRC, PREFIX (build), JOBS, CONFIG, MAKE.
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$PWD
mode=${1:-}
case "$mode" in build | config) ;; *)
	echo "usage: lkl.sh build|config" >&2
	exit 2
	;;
esac
src=${SRC:?SRC names the LKL tree}
config=${CONFIG:-kbox}
jobs=${JOBS:-2}
make=${MAKE:-make}
say() { echo "kbox: $*"; }
die() {
	echo "kbox: make lkl: $*" >&2
	exit 1
}

[ -f "$src/tools/lkl/Makefile" ] || die "$src is not an LKL tree (no tools/lkl/Makefile)"
src=$(cd "$src" && pwd)
defconfig=$src/arch/lkl/configs/defconfig
[ -f "$defconfig" ] || die "$src has no arch/lkl/configs/defconfig"
case "$config" in
kbox) fragment=$repo/lkl/kbox.config ;;
default) fragment= ;;
*)
	fragment=$config
	[ -f "$fragment" ] || die "LKL_CONFIG=$config: not kbox, default, or a fragment file"
	fragment=$(cd "$(dirname "$fragment")" && pwd)/$(basename "$fragment")
	;;
esac

# One make lkl at a time per tree: two would build the same objects.
exec 9>"$src/.kbox-lkl.lock"
flock 9

# LKL 6.0's arch/lkl/Kconfig selects options no configuration can then
# turn off. `imply` keeps each on by default (LKL's defconfig gives the
# same .config) and lets a fragment turn it off:
# - KASAN;
# - BLK_DEV_NVME (LKL's vfio-pci passthrough), whose core starts three
#   workqueue threads and takes 0.5 ms of every boot; kbox attaches its
#   disks through virtio.
kconfig=$src/arch/lkl/Kconfig
skip=
unselect() {
	grep -Eq "^[[:space:]]*select $1[[:space:]]*\$" "$kconfig" || return 0
	if [ "$mode" = config ]; then
		say "arch/lkl/Kconfig selects $1: make lkl will change that select to imply (LKL's own configuration keeps it); CONFIG_$1 is not checked here"
		skip="$skip CONFIG_$1"
	else
		sed -i -E "s/^([[:space:]]*)select $1[[:space:]]*\$/\1imply $1/" "$kconfig"
		say "arch/lkl/Kconfig selected $1, which no configuration can turn off: changed to 'imply $1' (LKL's defconfig still gets it)"
	fi
}
if [ -n "$fragment" ]; then
	unselect KASAN
	unselect BLK_DEV_NVME
fi

# LKL 6.0's memset (arch/lkl/lib/string.c) stores a byte at a time: 3 ms
# of every boot and mount goes to zeroing pages, hash tables and slab
# objects with it. The compiler's memset (the host C library's, as LKL's
# memcpy already is through its host operations) takes a tenth of that.
# Not under KASAN (LKL's defconfig), where memset is KASAN's checked one,
# which calls __memset: LKL's loop stays there. A tree patched by an
# earlier make lkl without that guard is patched again.
strc=$src/arch/lkl/lib/string.c
memset_loop() { grep -q '^void \*__memset(void \*s, int c, size_t count)$' "$strc" && ! grep -q '__builtin_memset' "$strc"; }
memset_unguarded() { grep -q '__builtin_memset' "$strc" && ! grep -q 'ifdef CONFIG_KASAN' "$strc"; }
if [ -f "$strc" ] && { { [ -n "$fragment" ] && memset_loop; } || memset_unguarded; }; then
	if [ "$mode" = config ]; then
		say "arch/lkl/lib/string.c: make lkl will make its memset the compiler's, but under KASAN"
	else
		sed -i '/^void \*__memset(void \*s, int c, size_t count)$/,/^}$/c\
void *__memset(void *s, int c, size_t count)\
{\
#ifdef CONFIG_KASAN\
	char *xs = s;\
\
	while (count--)\
		*xs++ = c;\
	return s;\
#else\
	return __builtin_memset(s, c, count);\
#endif\
}' "$strc"
		say "arch/lkl/lib/string.c: memset is the compiler's (the host's), not a byte loop, but under KASAN"
	fi
fi

# LKL 6.0's uapi/asm/syscalls.h undefines the host's numbers of the
# deprecated system calls LKL lacks, so that its generated wrappers skip
# them; inotify_init is not in that list (LKL's defconfig has no inotify),
# and with INOTIFY_USER the host's __NR_inotify_init makes tools/lkl fail
# to compile ("__lkl__NR_inotify_init undeclared"). Add it to the list.
sysh=$src/arch/lkl/include/uapi/asm/syscalls.h
if [ -n "$fragment" ] && [ -f "$sysh" ] && grep -q '^#undef __NR_epoll_wait$' "$sysh" && ! grep -q '^#undef __NR_inotify_init$' "$sysh"; then
	if [ "$mode" = config ]; then
		say "arch/lkl/include/uapi/asm/syscalls.h lacks inotify_init among the deprecated calls: make lkl will add it"
	else
		sed -i 's/^#undef __NR_epoll_wait$/&\n#undef __NR_inotify_init/' "$sysh"
		say "arch/lkl/include/uapi/asm/syscalls.h: added inotify_init to the deprecated calls it undefines (tools/lkl fails to compile with INOTIFY_USER otherwise)"
	fi
fi

# LKL 6.0 has 4,096 IRQs (arch/lkl/include/asm/irq.h: 64 x 64 bits of
# pending state), fixed in its arch code. Each has its descriptor and,
# from boot, its /proc/irq/N directory: 1.5 MB of every kernel's memory
# and 3 ms of its boot, for the dozen kbox uses (its disks, network
# devices and timer). kbox's configuration has 256 (4 x 64 bits).
irqh=$src/arch/lkl/include/asm/irq.h
irqfull='^#define NR_IRQS[[:space:]]+\(\(int\)\(IRQ_STATUS_BITS \* IRQ_STATUS_BITS\)\)$'
if [ -n "$fragment" ] && [ -f "$irqh" ] && grep -Eq "$irqfull" "$irqh"; then
	if [ "$mode" = config ]; then
		say "arch/lkl/include/asm/irq.h has 4096 IRQs: make lkl will make it 256"
	else
		sed -i -E "s/$irqfull/#define NR_IRQS\t\t\t((int)(IRQ_STATUS_BITS * 4))/" "$irqh"
		say "arch/lkl/include/asm/irq.h: 256 IRQs instead of 4096 (each has its descriptor and /proc/irq/N)"
	fi
fi

sum() { sha256sum "$@" | cut -d' ' -f1; }
# The inputs: defconfig, fragment, and the state of the changes above.
input=$( { echo "config $config"; cat "$defconfig"; [ -z "$fragment" ] || cat "$fragment"; grep -E 'KASAN|BLK_DEV_NVME' "$kconfig" || true; grep -c -e '__builtin_memset' -e 'ifdef CONFIG_KASAN' "$strc" 2>/dev/null || true; grep -c '__NR_inotify_init$' "$sysh" || true; grep -E '^#define NR_IRQS' "$irqh" || true; } | sum)
stamp=$src/.kbox-lkl-config
lib=$src/tools/lkl/lib/lkl.o
have=
[ -f "$src/.config" ] && have=$(sum "$src/.config")
built=
[ -f "$stamp" ] && built=$(sed -n 's/^config //p' "$stamp")

unchanged=
if [ -f "$stamp" ] && [ "$(sed -n 's/^input //p' "$stamp")" = "$input" ] && [ -n "$have" ] && [ "$have" = "$built" ] && [ -f "$lib" ]; then
	unchanged=1
fi

if [ -z "$unchanged" ]; then
	tmp=$(mktemp -d)
	trap 'rm -rf "$tmp"' EXIT
	cat "$defconfig" >"$tmp/config"
	[ -z "$fragment" ] || cat "$fragment" >>"$tmp/config"
	if ! "$make" -s -C "$src" ARCH=lkl KCONFIG_CONFIG="$tmp/config" olddefconfig >"$tmp/log" 2>&1; then
		cat "$tmp/log" >&2
		die "configuring $src failed"
	fi
	# Every option of the fragment must be in the result: Kconfig drops
	# an option whose dependencies are missing without failing.
	if [ -n "$fragment" ]; then
		missing=$(awk -v skip="$skip" '
			FNR == NR {
				if ($0 ~ /^CONFIG_[A-Za-z0-9_]+=/) { i = index($0, "="); got[substr($0, 1, i - 1)] = substr($0, i + 1) }
				else if ($0 ~ /^# CONFIG_[A-Za-z0-9_]+ is not set$/) got[$2] = "n"
				next
			}
			$0 ~ /^CONFIG_[A-Za-z0-9_]+=/ {
				i = index($0, "="); k = substr($0, 1, i - 1); v = substr($0, i + 1)
				if (!(k in got)) printf "%s (wanted %s, absent: a dependency is missing)\n", k, v
				else if (got[k] != v) printf "%s (wanted %s, got %s)\n", k, v, got[k] == "n" ? "not set" : got[k]
			}
			$0 ~ /^# CONFIG_[A-Za-z0-9_]+ is not set$/ {
				if (index(" " skip " ", " " $2 " ") == 0 && ($2 in got) && got[$2] != "n") printf "%s (wanted not set, got %s: selected by another option?)\n", $2, got[$2]
			}' "$tmp/config" "$fragment")
		if [ -n "$missing" ]; then
			echo "kbox: make lkl: the configuration of $src lacks options of $fragment:" >&2
			echo "$missing" | sed 's/^/kbox:   /' >&2
			die "not applied (the tree is unchanged)"
		fi
		say "every option of $(basename "$fragment") is in the configuration"
	fi
	wanted=$(sum "$tmp/config")
	# A changed input that leaves .config as it was (the IRQ count, a
	# header) still needs the kernel built: Kbuild rebuilds what changed.
	if [ "$wanted" = "$have" ] && { [ -z "$built" ] || [ "$built" = "$have" ]; } && [ -f "$lib" ] &&
		{ [ ! -f "$stamp" ] || [ "$(sed -n 's/^input //p' "$stamp")" = "$input" ]; }; then
		unchanged=1
	fi
fi

if [ "$mode" = config ]; then
	if [ -n "$unchanged" ]; then
		say "LKL configuration $config: unchanged, make lkl rebuilds nothing"
	else
		say "LKL configuration $config: differs from the tree's, make lkl rebuilds the kernel"
	fi
	exit 0
fi

prefix=${PREFIX:?PREFIX names where to install}
if [ -n "$unchanged" ]; then
	say "LKL configuration $config: unchanged, nothing of the kernel to rebuild"
else
	say "LKL configuration $config: the kernel is rebuilt with it"
	# A switch between configurations (kbox's and LKL's defconfig, KASAN
	# off and on) is built from clean: built over kbox's objects, the
	# defconfig's kernel faults at boot (its first printk, in a KASAN
	# check); cleaned first, it boots.
	prev=
	[ -f "$stamp" ] && prev=$(sed -n 's/^name //p' "$stamp")
	if [ -n "$prev" ] && [ "$prev" != "$config" ]; then
		say "the tree was built with LKL configuration $prev: cleaning it first"
		"$make" --no-print-directory -s -C "$src/tools/lkl" clean >/dev/null
	fi
	# The stamp names no built configuration until the build succeeds,
	# so an interrupted build is redone, not trusted.
	printf 'input %s\nconfig building\nname %s\n' "$input" "$config" >"$stamp"
	cp "$tmp/config" "$src/.config"
	rm -f "$lib" "$src/tools/lkl/liblkl.a"
	# The kernel first: tools/lkl builds it through `make install`, which
	# Kbuild never lets bring its view of .config up to date.
	say "building the kernel in $src ($config configuration, -j$jobs)"
	"$make" --no-print-directory -C "$src" ARCH=lkl -j"$jobs"
fi
say "building liblkl in $src/tools/lkl"
# KCONFIG=olddefconfig: tools/lkl would otherwise reset .config to the
# defconfig.
"$make" --no-print-directory -C "$src/tools/lkl" -j"$jobs" KCONFIG=olddefconfig
printf 'input %s\nconfig %s\nname %s\n' "$input" "$(sum "$src/.config")" "$config" >"$stamp"
"$make" --no-print-directory -C "$src/tools/lkl" headers_install PREFIX="$prefix" DESTDIR=
install -D -m 644 "$src/tools/lkl/liblkl.a" "$prefix/lib/liblkl.a"
install -D -m 644 "$src/.config" "$prefix/lib/liblkl.config"
say "installed liblkl.a and headers under $prefix (its configuration: lib/liblkl.config)"
