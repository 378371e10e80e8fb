#!/usr/bin/env bash
# Build the kbox guest root filesystem image (ext4) without needing root:
# the user's image, or with GUEST_PROGRAMS=1 the test image (the user's
# image plus the test programs under /opt/tests).
#
# Environment:
#   OUT              output image path                  (default: rootfs.ext4)
#   ROOTFS_SIZE      image size, e.g. 256M, 1G, 524288K (default: tree size + 50%, min 64M)
#   ROOTFS_PACKAGES  extra Debian packages, space separated (e.g. "python3-minimal")
#   ROOTFS_SOURCE    debian (default) | alpine
#   ALPINE_URL       Alpine minirootfs tarball URL      (only for ROOTFS_SOURCE=alpine)
#   GUEST_PROGRAMS   1: build the test image            (default: empty, the user's image)
#   FROM_IMAGE       with GUEST_PROGRAMS=1: a user image this script built, to add the
#                    programs to instead of building the tree again (used only while
#                    unchanged: never mounted writable, newer than this script)
#   CC               compiler for tests/guest/*.c, tests/stress/*.c (default: musl-gcc, else gcc)
#
# See rootfs/README.md.
set -Eeuo pipefail
shopt -s nullglob

SCRIPT_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO_DIR=$(cd "$SCRIPT_DIR/.." && pwd)

OUT=${OUT:-rootfs.ext4}
ROOTFS_SIZE=${ROOTFS_SIZE:-}
ROOTFS_PACKAGES=${ROOTFS_PACKAGES:-}
ROOTFS_SOURCE=${ROOTFS_SOURCE:-debian}
ALPINE_URL=${ALPINE_URL:-https://dl-cdn.alpinelinux.org/alpine/v3.20/releases/x86_64/alpine-minirootfs-3.20.3-x86_64.tar.gz}
GUEST_PROGRAMS=${GUEST_PROGRAMS:-}
FROM_IMAGE=${FROM_IMAGE:-}
GUEST_SRC_DIR=${GUEST_SRC_DIR:-$REPO_DIR/tests/guest}
STRESS_SRC_DIR=${STRESS_SRC_DIR:-$REPO_DIR/tests/stress}

# Packages always installed for the Debian source.
BASE_PACKAGES="busybox-static bash coreutils libc6"
# Dependencies we never pull in: package-manager / maintainer-script
# machinery that a minimal runtime image does not need.
SKIP_PACKAGES=" base-files debconf debconf-2.0 perl-base dpkg install-info base-passwd init-system-helpers usrmerge usr-is-merged sensible-utils cdebconf "

START_TIME=$(date +%s)

log() { printf '[rootfs] %s\n' "$*"; }
die() { printf '[rootfs] error: %s\n' "$*" >&2; exit 1; }

WORK=""
TMP_IMG=""
cleanup() {
	local rc=$?
	if [ -n "$TMP_IMG" ] && [ -e "$TMP_IMG" ]; then rm -f "$TMP_IMG"; fi
	if [ -n "$WORK" ] && [ -d "$WORK" ]; then
		# Extracted trees may contain read-only directories.
		chmod -R u+rwX "$WORK" 2>/dev/null || true
		rm -rf "$WORK"
	fi
	exit "$rc"
}
trap cleanup EXIT
trap 'die "interrupted"' INT TERM
trap 'rc=$?; printf "[rootfs] error: command failed (exit %s) at line %s: %s\n" "$rc" "$LINENO" "$BASH_COMMAND" >&2' ERR

need() { # need TOOL HINT
	command -v "$1" >/dev/null 2>&1 || die "required tool '$1' not found (hint: $2)"
}

# ---------------------------------------------------------------- helpers

# resolve_in_tree ROOT PATH: print PATH with every symlink resolved as if
# ROOT were "/" (so absolute link targets stay inside the tree).
resolve_in_tree() {
	local root=$1 p=${2#/} out="" comp rest target hops=0
	while [ -n "$p" ]; do
		comp=${p%%/*}
		if [[ $p == */* ]]; then rest=${p#*/}; else rest=""; fi
		case $comp in
		"" | .) ;;
		..) out=${out%/*} ;;
		*)
			if [ -L "$root$out/$comp" ]; then
				hops=$((hops + 1))
				[ "$hops" -le 40 ] || return 1
				target=$(readlink "$root$out/$comp")
				if [[ $target == /* ]]; then out=""; target=${target#/}; fi
				p="$target${rest:+/$rest}"
				continue
			fi
			out="$out/$comp"
			;;
		esac
		p=$rest
	done
	printf '%s\n' "${out:-/}"
}

# exists_in_tree ROOT PATH: true if PATH exists inside ROOT (links resolved in-tree).
exists_in_tree() {
	local r
	r=$(resolve_in_tree "$1" "$2") || return 1
	[ -e "$1$r" ]
}

# size_to_kib "256M" -> 262144
size_to_kib() {
	local s=$1 n unit
	[[ $s =~ ^([0-9]+)([kKmMgGtT]?)[iI]?[bB]?$ ]] || return 1
	n=${BASH_REMATCH[1]}
	unit=${BASH_REMATCH[2]}
	case $unit in
	"") echo $(((n + 1023) / 1024)) ;; # plain number = bytes
	k | K) echo "$n" ;;
	m | M) echo $((n * 1024)) ;;
	g | G) echo $((n * 1024 * 1024)) ;;
	t | T) echo $((n * 1024 * 1024 * 1024)) ;;
	esac
}

# ---------------------------------------------------------------- checks

case $ROOTFS_SOURCE in
debian | alpine) ;;
*) die "unknown ROOTFS_SOURCE '$ROOTFS_SOURCE' (hint: use ROOTFS_SOURCE=debian or ROOTFS_SOURCE=alpine)" ;;
esac
case $GUEST_PROGRAMS in
"" | 0) GUEST_PROGRAMS="" ;;
1) ;;
*) die "GUEST_PROGRAMS='$GUEST_PROGRAMS' must be 1 (the test image) or empty (the user's image)" ;;
esac
if [ -n "$FROM_IMAGE" ] && [ -z "$GUEST_PROGRAMS" ]; then
	die "FROM_IMAGE is only for the test image (hint: set GUEST_PROGRAMS=1 too)"
fi

need mke2fs "apt-get install e2fsprogs"
need debugfs "apt-get install e2fsprogs"

if [ -n "$ROOTFS_SIZE" ]; then
	SIZE_KIB=$(size_to_kib "$ROOTFS_SIZE") || die "cannot parse ROOTFS_SIZE='$ROOTFS_SIZE' (hint: use a size like 256M or 1G)"
fi

if [ -n "$GUEST_PROGRAMS" ]; then
	need resize2fs "apt-get install e2fsprogs"
	need dumpe2fs "apt-get install e2fsprogs"
	need e2fsck "apt-get install e2fsprogs"
	if [ -n "${CC:-}" ]; then
		GUEST_CC=$CC
	elif command -v musl-gcc >/dev/null 2>&1; then
		GUEST_CC=musl-gcc
	else
		GUEST_CC=gcc
	fi
	# shellcheck disable=SC2086 # CC may carry flags
	command -v ${GUEST_CC%% *} >/dev/null 2>&1 || die "guest compiler '$GUEST_CC' not found (hint: apt-get install musl-tools, or set CC)"
fi

OUT_DIR=$(dirname -- "$OUT")
[ -d "$OUT_DIR" ] || die "output directory '$OUT_DIR' does not exist"
[ -w "$OUT_DIR" ] || die "output directory '$OUT_DIR' is not writable"

# from_image_unusable IMAGE: why the test image cannot be IMAGE plus the
# programs (nothing when it can): IMAGE must be as this script built it,
# with what was asked for now.
from_image_unusable() {
	local img=$1 sb
	[ -f "$img" ] || { echo "it does not exist"; return; }
	[ -z "$ROOTFS_PACKAGES$ROOTFS_SIZE" ] && [ "$ROOTFS_SOURCE" = debian ] ||
		{ echo "ROOTFS_PACKAGES, ROOTFS_SIZE or ROOTFS_SOURCE is set"; return; }
	[ "$img" -nt "$SCRIPT_DIR/build.sh" ] || { echo "it is older than rootfs/build.sh"; return; }
	sb=$(dumpe2fs -h "$img" 2>/dev/null) || { echo "it is not an ext4 image"; return; }
	# A writable mount (a kbox run without --read-only) counts; what the
	# guest changed then must not reach the tests.
	grep -q '^Mount count: *0$' <<<"$sb" && grep -q '^Last mount time: *n/a$' <<<"$sb" ||
		{ echo "it has been mounted writable since it was built"; return; }
	debugfs -R 'stat /opt/tests' "$img" 2>&1 | grep -q 'File not found' ||
		{ echo "it has /opt/tests (an older build.sh made it)"; return; }
}

BASE_IMAGE=""
if [ -n "$FROM_IMAGE" ]; then
	why=$(from_image_unusable "$FROM_IMAGE")
	if [ -z "$why" ]; then
		BASE_IMAGE=$FROM_IMAGE
	else
		log "not adding the programs to FROM_IMAGE=$FROM_IMAGE ($why): building the tree"
	fi
fi

if [ -z "$BASE_IMAGE" ]; then
	need tar "apt-get install tar"
	if [ "$ROOTFS_SOURCE" = debian ]; then
		need apt-get "the Debian source needs apt; on other hosts try ROOTFS_SOURCE=alpine"
		need apt-cache "the Debian source needs apt; on other hosts try ROOTFS_SOURCE=alpine"
		need dpkg-deb "apt-get install dpkg"
	else
		need curl "apt-get install curl"
	fi
fi

WORK=$(mktemp -d "${TMPDIR:-/tmp}/kbox-rootfs.XXXXXX")
chmod 0755 "$WORK"
STAGING=$WORK/staging
mkdir -p "$STAGING"

# ---------------------------------------------------------------- debian

# Print the direct dependencies (Depends + Pre-Depends) of the given
# packages, one real package name per line. For "a | b" groups only the
# first alternative is taken; virtual packages are replaced by their first
# provider.
direct_deps() {
	apt-cache depends --no-recommends --no-suggests --no-conflicts --no-breaks \
		--no-replaces --no-enhances "$@" | awk '
		# top-level package name line
		/^[^ ]/ { in_or = 0; want_provider = 0; next }
		# provider lines of a virtual dependency (4 spaces)
		/^    / {
			if (want_provider) { print $1; want_provider = 0 }
			next
		}
		/^ [ |](Pre)?Depends:/ {
			alt = (substr($0, 2, 1) == "|")
			name = $2
			if (in_or) { in_or = alt; next }   # later alternatives: ignore
			in_or = alt
			want_provider = 0
			if (name ~ /^</) { want_provider = 1; next }
			print name
			next
		}
		{ next }' | sed 's/:any$//' | sort -u
}

# Print PKG=VERSION for each package: the newest version a configured
# source serves. apt's candidate can be a version that only the host's
# dpkg database knows (installed from a repository that is not
# configured), which apt-get download cannot fetch, and whose
# dependencies are not the image's. A package no source serves is
# printed bare; its download then fails and is named.
pin_versions() {
	apt-cache madison "$@" 2>/dev/null | awk -F'|' -v want="$*" '
		$3 ~ / Packages *$/ {
			n = $1; v = $2
			gsub(/ /, "", n); gsub(/ /, "", v)
			if (!(n in ver)) ver[n] = v
		}
		END {
			k = split(want, w, " ")
			for (i = 1; i <= k; i++) print (w[i] in ver) ? w[i] "=" ver[w[i]] : w[i]
		}'
}

resolve_packages() { # resolve_packages PKG... -> prints the closure
	local -A seen=()
	local level=("$@") next p
	while [ ${#level[@]} -gt 0 ]; do
		next=()
		for p in "${level[@]}"; do seen[$p]=1; done
		while read -r p; do
			[ -n "$p" ] || continue
			[ -z "${seen[$p]:-}" ] || continue
			case $SKIP_PACKAGES in *" $p "*) continue ;; esac
			seen[$p]=1
			next+=("$p")
		done < <(direct_deps $(pin_versions "${level[@]}"))
		level=("${next[@]}")
	done
	printf '%s\n' "${!seen[@]}" | sort
}

build_debian() {
	local pkgs=() p
	# shellcheck disable=SC2206
	pkgs=($BASE_PACKAGES $ROOTFS_PACKAGES)

	# Every requested package must be real and installable (one batched
	# query, then name whatever did not come back).
	local known
	known=" $(apt-cache show --no-all-versions "${pkgs[@]}" 2>/dev/null | sed -n 's/^Package: //p' | tr '\n' ' ') "
	for p in "${pkgs[@]}"; do
		case $known in *" $p "*) ;; *)
			die "package '$p' is unknown to apt or purely virtual (hint: check the name in ROOTFS_PACKAGES, or run 'apt-get update')" ;;
		esac
	done

	log "resolving dependencies of: ${pkgs[*]}"
	local all=()
	mapfile -t all < <(resolve_packages "${pkgs[@]}")
	[ ${#all[@]} -gt 0 ] || die "dependency resolution returned nothing"

	local debdir=$WORK/debs
	mkdir -p "$debdir"
	local pinned=()
	mapfile -t pinned < <(pin_versions "${all[@]}")
	log "download ${#all[@]} packages: ${all[*]}"
	if ! (cd "$debdir" && apt-get download -q "${pinned[@]}" >"$WORK/apt.log" 2>&1); then
		# Retry one by one to name the failing package.
		for p in "${pinned[@]}"; do
			if ! (cd "$debdir" && apt-get download -q "$p" >>"$WORK/apt.log" 2>&1); then
				grep -E '^(E|W):' "$WORK/apt.log" | grep -v unsandboxed | tail -n 3 >&2 || true
				die "apt-get download failed for package '$p' (hint: run 'apt-get update', check the mirror is reachable; 'apt-cache madison ${p%%=*}' lists the versions a source serves)"
			fi
		done
	fi
	local debs=("$debdir"/*.deb)
	[ ${#debs[@]} -eq ${#all[@]} ] || die "expected ${#all[@]} .deb files, got ${#debs[@]} (hint: see apt-get output above)"

	# Debian 12 layout is /usr-merged: /bin, /sbin, /lib, /lib64 are links
	# into /usr, while packages still ship files under /bin, /lib, ...
	# Create the links first and keep them while unpacking.
	mkdir -p "$STAGING"/usr/{bin,sbin,lib,lib64}
	for p in bin sbin lib lib64; do ln -s "usr/$p" "$STAGING/$p"; done

	log "unpack ${#debs[@]} packages"
	local deb
	for deb in "${debs[@]}"; do
		# dpkg-deb -x would replace the /bin -> usr/bin link by a real
		# directory, so feed its data tarball to tar with
		# --keep-directory-symlink instead.
		dpkg-deb --fsys-tarfile "$deb" |
			tar -x -p --no-same-owner --keep-directory-symlink -C "$STAGING" ||
			die "unpacking $(basename "$deb") failed"
	done

	# Docs, manuals and locales are dead weight in the guest.
	rm -rf "$STAGING"/usr/share/{doc,man,info,lintian,locale,bash-completion,bug,menu}

	# What the maintainer scripts would have done (never run here).
	configure_packages "$debdir"

	# busybox applets: fill in only what coreutils/bash do not provide.
	local bb=$STAGING/bin/busybox applet n=0
	[ -x "$bb" ] || die "busybox binary missing after unpack"
	while read -r applet; do
		case $applet in "" | linuxrc) continue ;; esac
		if exists_in_tree "$STAGING" "/$applet" || [ -L "$STAGING/$applet" ]; then continue; fi
		mkdir -p "$STAGING/$(dirname "$applet")"
		ln -s /bin/busybox "$STAGING/$applet"
		n=$((n + 1))
	done < <("$bb" --list-full)
	log "installed $n busybox applet links (/bin/sh -> busybox ash)"

	# glibc loader must be where ELF PT_INTERP says it is.
	exists_in_tree "$STAGING" /lib64/ld-linux-x86-64.so.2 || [ "$(uname -m)" != x86_64 ] ||
		die "/lib64/ld-linux-x86-64.so.2 does not resolve inside the tree"

	BASE_DESC="debian 12"
	PKG_COUNT=${#all[@]}
}

# ------------------------------------------------- configure_packages

# configure_packages DEBDIR: do for the unpacked tree what the packages'
# maintainer scripts would have done in the common cases, without running
# them: the alternatives links, the ld.so cache, Debian's static system
# users and groups, and the CA certificates bundle.
configure_packages() {
	local debdir=$1
	set_alternatives "$debdir"
	system_users
	ca_bundle
	ld_cache
}

# alternatives_of POSTINST: print "install LINK NAME PATH PRIO" and
# "slave MASTERNAME LINK NAME PATH" for each literal
# `update-alternatives --install` in a maintainer script (continuation
# lines joined, comments dropped, anything with a shell variable skipped).
alternatives_of() {
	sed -e ':a' -e '/\\$/{N;s/\\\n/ /;ba}' "$1" | awk '
		/update-alternatives/ && /--install/ {
			sub(/[ \t]#.*$/, "")
			if ($0 ~ /[$`"\047]/) next
			master = ""
			for (i = 1; i <= NF; i++) {
				if ($i == "--install" && i + 4 <= NF) {
					print "install", $(i+1), $(i+2), $(i+3), $(i+4)
					master = $(i+2); i += 4
				} else if ($i == "--slave" && i + 3 <= NF && master != "") {
					print "slave", master, $(i+1), $(i+2), $(i+3)
					i += 3
				}
			}
		}'
}

# set_alternatives DEBDIR: the alternatives the packages register, each
# name pointing at its highest-priority path present in the tree, as
# update-alternatives --auto would: LINK -> /etc/alternatives/NAME -> PATH.
set_alternatives() {
	local debdir=$1 deb ctl=$WORK/control list=$WORK/alternatives n=0
	: >"$list"
	for deb in "$debdir"/*.deb; do
		rm -rf "$ctl"
		dpkg-deb -e "$deb" "$ctl" 2>/dev/null || continue
		[ -f "$ctl/postinst" ] && alternatives_of "$ctl/postinst" >>"$list"
	done
	local kind link name path prio best=$WORK/alternatives.best
	# Highest priority per name among the paths that exist.
	: >"$best"
	while read -r kind link name path prio; do
		[ "$kind" = install ] || continue
		[[ $prio =~ ^[0-9]+$ ]] || continue
		exists_in_tree "$STAGING" "$path" || continue
		printf '%s %s %s %s\n' "$name" "$prio" "$link" "$path" >>"$best"
	done <"$list"
	mkdir -p "$STAGING/etc/alternatives"
	local master slink sname spath
	while read -r name prio link path; do
		install_alternative "$link" "$name" "$path" && n=$((n + 1))
		# Its slaves, for the chosen master path only when they exist.
		while read -r kind master slink sname spath; do
			[ "$kind" = slave ] && [ "$master" = "$name" ] || continue
			exists_in_tree "$STAGING" "$spath" || continue
			install_alternative "$slink" "$sname" "$spath" && n=$((n + 1))
		done < <(grep '^slave ' "$list" | sort -u)
	done < <(sort -k1,1 -k2,2nr "$best" | awk '!seen[$1]++')
	log "alternatives: $n links ($(awk '{print $1}' "$best" | sort -u | tr '\n' ' '))"
}

# install_alternative LINK NAME PATH
install_alternative() {
	local link=$1 name=$2 path=$3
	[[ $link == /* && $path == /* && $name =~ ^[A-Za-z0-9._+-]+$ ]] || return 1
	# A real file a package ships at LINK stays (dpkg would not replace it).
	if [ -e "$STAGING$link" ] && [ ! -L "$STAGING$link" ]; then return 1; fi
	mkdir -p "$STAGING$(dirname "$link")"
	ln -sfn "$path" "$STAGING/etc/alternatives/$name"
	ln -sfn "/etc/alternatives/$name" "$STAGING$link"
}

# system_users: the static users and groups of Debian's base-passwd, in
# its order (passwd.master, group.master: root first, nobody/nogroup
# last), which packages expect to exist (file owners, daemons' users);
# finish_tree adds kbox after them, where adduser would.
system_users() {
	local pw=$STAGING/etc/passwd gr=$STAGING/etc/group u
	touch "$pw" "$gr"
	add_line_if_missing "$pw" "root:" "root:x:0:0:root:/root:/bin/sh"
	# name:uid:gid:gecos:home
	for u in daemon:1:1:daemon:/usr/sbin bin:2:2:bin:/bin sys:3:3:sys:/dev sync:4:65534:sync:/bin \
		games:5:60:games:/usr/games man:6:12:man:/var/cache/man lp:7:7:lp:/var/spool/lpd \
		mail:8:8:mail:/var/mail news:9:9:news:/var/spool/news uucp:10:10:uucp:/var/spool/uucp \
		proxy:13:13:proxy:/bin www-data:33:33:www-data:/var/www backup:34:34:backup:/var/backups \
		list:38:38:"Mailing List Manager":/var/list irc:39:39:ircd:/run/ircd _apt:42:65534::/nonexistent; do
		IFS=: read -r name uid gid gecos home <<<"$u"
		add_line_if_missing "$pw" "$name:" "$name:x:$uid:$gid:$gecos:$home:/usr/sbin/nologin"
	done
	add_line_if_missing "$pw" "nobody:" "nobody:x:65534:65534:nobody:/nonexistent:/bin/false"
	for u in root:0 daemon:1 bin:2 sys:3 adm:4 tty:5 disk:6 lp:7 mail:8 news:9 uucp:10 man:12 proxy:13 \
		kmem:15 dialout:20 fax:21 voice:22 cdrom:24 floppy:25 tape:26 sudo:27 audio:29 dip:30 \
		www-data:33 backup:34 operator:37 list:38 irc:39 src:40 shadow:42 utmp:43 video:44 sasl:45 \
		plugdev:46 staff:50 games:60 users:100 nogroup:65534; do
		add_line_if_missing "$gr" "${u%%:*}:" "${u%%:*}:x:${u#*:}:"
	done
}

# ca_bundle: what update-ca-certificates does when ca-certificates is
# installed: every certificate under /usr/share/ca-certificates linked
# into /etc/ssl/certs and concatenated into ca-certificates.crt.
ca_bundle() {
	local share=$STAGING/usr/share/ca-certificates certs=$STAGING/etc/ssl/certs crt rel n=0
	[ -d "$share" ] || return 0
	mkdir -p "$certs"
	: >"$certs/ca-certificates.crt"
	: >"$STAGING/etc/ca-certificates.conf"
	while IFS= read -r -d '' crt; do
		rel=${crt#"$share"/}
		printf '%s\n' "$rel" >>"$STAGING/etc/ca-certificates.conf"
		# Relative, so that the host's openssl rehash follows it too.
		ln -sfn "../../../usr/share/ca-certificates/$rel" "$certs/$(basename "$rel" .crt).pem"
		cat "$crt" >>"$certs/ca-certificates.crt"
		# A certificate file may lack its final newline.
		[ -z "$(tail -c1 "$crt")" ] || echo >>"$certs/ca-certificates.crt"
		n=$((n + 1))
	done < <(find "$share" -name '*.crt' -print0 | sort -z)
	if command -v openssl >/dev/null 2>&1; then
		# The hash links OpenSSL looks certificates up by.
		openssl rehash "$certs" 2>/dev/null || log "warning: openssl rehash failed: no hash links in /etc/ssl/certs"
	fi
	log "CA certificates: $n in /etc/ssl/certs/ca-certificates.crt"
}

# ld_cache: /etc/ld.so.cache for the tree, as libc-bin's ldconfig trigger
# would make it (the host's ldconfig -r; same architecture only).
ld_cache() {
	[ -d "$STAGING/etc/ld.so.conf.d" ] || return 0
	[ -e "$STAGING/etc/ld.so.conf" ] || echo 'include /etc/ld.so.conf.d/*.conf' >"$STAGING/etc/ld.so.conf"
	if command -v ldconfig >/dev/null 2>&1 && [ "$(uname -m)" = x86_64 ]; then
		ldconfig -r "$STAGING" 2>"$WORK/ldconfig.log" || log "warning: ldconfig -r failed: $(head -n1 "$WORK/ldconfig.log")"
	fi
}

# ---------------------------------------------------------------- alpine

build_alpine() {
	if [ -n "$ROOTFS_PACKAGES" ]; then
		log "warning: ROOTFS_PACKAGES is ignored for ROOTFS_SOURCE=alpine"
	fi
	local tarball=$WORK/alpine-minirootfs.tar.gz
	log "download $ALPINE_URL"
	if ! curl -fsSL --connect-timeout 20 --retry 1 -o "$tarball" "$ALPINE_URL" 2>"$WORK/curl.log"; then
		sort -u "$WORK/curl.log" | sed 's/^/[rootfs]   /' >&2 || true
		die "downloading the Alpine minirootfs failed from $ALPINE_URL (hint: no internet access? use the default Debian source: ROOTFS_SOURCE=debian, or set ALPINE_URL to a reachable mirror)"
	fi
	log "unpack alpine minirootfs"
	tar -x -z -p --no-same-owner -f "$tarball" -C "$STAGING" || die "extracting the Alpine tarball failed"
	local ver=""
	[ -r "$STAGING/etc/alpine-release" ] && ver=$(cat "$STAGING/etc/alpine-release")
	BASE_DESC="alpine${ver:+ $ver}"
	PKG_COUNT=0
}

# ---------------------------------------------------------------- common

add_line_if_missing() { # FILE KEY LINE: append LINE unless a line starts with KEY
	grep -q "^$2" "$1" 2>/dev/null || printf '%s\n' "$3" >>"$1"
}

first_line_if_missing() { # FILE KEY LINE: put LINE first unless a line starts with KEY
	grep -q "^$2" "$1" 2>/dev/null && return 0
	{ printf '%s\n' "$3"; cat "$1"; } >"$1.new" && mv -f "$1.new" "$1"
}

# users_and_groups: root first in /etc/passwd and /etc/group, as Debian
# and Alpine have them, then nobody/nogroup and kbox (uid/gid 1000);
# /etc/shadow and /etc/gshadow (Debian's, or the base's own) with a line
# for each, in the same order, every password locked.
users_and_groups() {
	local pw=$STAGING/etc/passwd gr=$STAGING/etc/group sh=$STAGING/etc/shadow gs=$STAGING/etc/gshadow name days
	touch "$pw" "$gr"
	first_line_if_missing "$pw" "root:" "root:x:0:0:root:/root:/bin/sh"
	add_line_if_missing "$pw" "nobody:" "nobody:x:65534:65534:nobody:/nonexistent:/bin/false"
	add_line_if_missing "$pw" "kbox:" "kbox:x:1000:1000:kbox:/home/kbox:/bin/sh"
	first_line_if_missing "$gr" "root:" "root:x:0:"
	grep -q '^[^:]*:[^:]*:65534:' "$gr" || echo "nogroup:x:65534:" >>"$gr"
	add_line_if_missing "$gr" "kbox:" "kbox:x:1000:"
	if [ "$ROOTFS_SOURCE" = debian ]; then touch "$sh" "$gs"; fi
	days=$((${SOURCE_DATE_EPOCH:-$(date +%s)} / 86400))
	if [ -f "$sh" ]; then
		while IFS=: read -r name _; do
			[ -z "$name" ] || add_line_if_missing "$sh" "$name:" "$name:*:$days:0:99999:7:::"
		done <"$pw"
		chmod 0640 "$sh"
	fi
	if [ -f "$gs" ]; then
		while IFS=: read -r name _; do
			[ -z "$name" ] || add_line_if_missing "$gs" "$name:" "$name:*::"
		done <"$gr"
		chmod 0640 "$gs"
	fi
}

finish_tree() {
	local d
	for d in proc sys dev tmp root home etc var var/tmp var/log run mnt opt home/kbox; do
		mkdir -p "$STAGING/$d"
	done
	chmod 1777 "$STAGING/tmp" "$STAGING/var/tmp"
	chmod 0700 "$STAGING/root"

	echo kbox-rootfs >"$STAGING/etc/hostname"

	# base-files ships os-release as a link into /usr/lib; replace it.
	rm -f "$STAGING/etc/os-release" "$STAGING/usr/lib/os-release"
	cat >"$STAGING/etc/os-release" <<EOF
NAME="kbox rootfs"
ID=kbox
VERSION_ID=1
PRETTY_NAME="kbox rootfs 1 ($BASE_DESC)"
KBOX_BASE="$BASE_DESC"
HOME_URL="https://github.com/kbox-project/kbox"
EOF

	users_and_groups

	[ -e "$STAGING/etc/hosts" ] || printf '127.0.0.1\tlocalhost\n127.0.1.1\tkbox-rootfs\n::1\tlocalhost\n' >"$STAGING/etc/hosts"
	[ -e "$STAGING/etc/nsswitch.conf" ] || printf 'passwd: files\ngroup: files\nshadow: files\nhosts: files\n' >"$STAGING/etc/nsswitch.conf"
	[ -e "$STAGING/etc/profile" ] || cat >"$STAGING/etc/profile" <<'EOF'
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
export PS1='kbox:\w\$ '
EOF
}

verify_tree() {
	local f
	if [ "$ROOTFS_SOURCE" = debian ]; then
		for f in /bin/bash /bin/sh /usr/bin/env /lib64/ld-linux-x86-64.so.2 /bin/busybox /bin/ls; do
			exists_in_tree "$STAGING" "$f" || die "sanity check: $f missing or dangling in the tree"
		done
		# Run the tree's own bash through the tree's own loader (no chroot).
		if [ "$(uname -m)" = x86_64 ]; then
			local ld libs got
			ld=$STAGING$(resolve_in_tree "$STAGING" /lib64/ld-linux-x86-64.so.2)
			libs=$STAGING/usr/lib/x86_64-linux-gnu
			got=$("$ld" --library-path "$libs" "$STAGING$(resolve_in_tree "$STAGING" /bin/bash)" -c 'echo ok' 2>&1) ||
				die "sanity check: staged bash does not run with staged ld.so: $got"
			[ "$got" = ok ] || die "sanity check: staged bash printed '$got'"
		fi
	else
		exists_in_tree "$STAGING" /bin/sh || die "sanity check: /bin/sh missing in the tree"
	fi
	if [ "$ROOTFS_SOURCE" = debian ]; then
		log "sanity checks passed (/bin/bash, /bin/sh, /usr/bin/env, ld.so runs staged bash)"
	else
		log "sanity checks passed (/bin/sh)"
	fi
}

# make_image DEST: the image of the tree, at DEST.
make_image() {
	local dest=$1 used_kib files inodes size_kib
	used_kib=$(du -sk "$STAGING" | cut -f1)
	files=$(find "$STAGING" | wc -l)
	if [ -n "$ROOTFS_SIZE" ]; then
		size_kib=$SIZE_KIB
		if [ "$size_kib" -lt $((used_kib + used_kib / 10 + 4096)) ]; then
			die "ROOTFS_SIZE=$ROOTFS_SIZE is too small for ${used_kib}K of files (hint: use at least $(((used_kib * 3 / 2) / 1024 + 8))M or leave ROOTFS_SIZE unset)"
		fi
	else
		size_kib=$((used_kib * 3 / 2))
		[ "$size_kib" -ge 65536 ] || size_kib=65536
		size_kib=$(((size_kib + 1023) / 1024 * 1024)) # whole MiB
	fi
	# mke2fs picks at least one inode per 16K; ask for more only when the
	# tree (with room to spare) would not fit in that.
	local inode_opt=()
	inodes=$((files * 2 + 2048))
	[ "$inodes" -le $((size_kib / 16)) ] || inode_opt=(-N "$inodes")

	TMP_IMG=$(mktemp "$(dirname -- "$dest")/.$(basename -- "$dest").tmp.XXXXXX")
	log "mke2fs: $((size_kib / 1024))M ext4, $files files, ${used_kib}K used"
	if ! mke2fs -q -t ext4 -T default -d "$STAGING" -L kbox "${inode_opt[@]}" -E root_owner=0:0 -F "$TMP_IMG" "${size_kib}k" >"$WORK/mke2fs.log" 2>&1; then
		sed 's/^/[rootfs]   /' "$WORK/mke2fs.log" >&2
		die "mke2fs failed (hint: apt-get install e2fsprogs >= 1.43 for -d; or raise ROOTFS_SIZE)"
	fi

	# The image must look the same whoever built it: everything owned by
	# root, plus the device nodes an unprivileged build could not create.
	local script=$WORK/debugfs.cmd
	{
		if [ "$(id -u)" != 0 ]; then
			(cd "$STAGING" && find . -mindepth 1 -print0) |
				while IFS= read -r -d '' f; do
					f=${f#.}
					printf 'sif "%s" uid 0\nsif "%s" gid 0\n' "$f" "$f"
				done
		fi
		printf 'cd /dev\n'
		printf 'mknod null c 1 3\nsif null mode 020666\n'
		printf 'mknod zero c 1 5\nsif zero mode 020666\n'
		printf 'mknod tty c 5 0\nsif tty mode 020666\n'
		printf 'mknod console c 5 1\nsif console mode 020600\n'
		printf 'mknod urandom c 1 9\nsif urandom mode 020666\n'
		printf 'mknod random c 1 8\nsif random mode 020666\n'
		for f in null zero tty console urandom random; do
			printf 'sif %s uid 0\nsif %s gid 0\n' "$f" "$f"
		done
		# The shadow files are the shadow group's, as on Debian.
		local gid
		gid=$(awk -F: '$1 == "shadow" { print $3 }' "$STAGING/etc/group")
		for f in /etc/shadow /etc/gshadow; do
			if [ -n "$gid" ] && [ -f "$STAGING$f" ]; then printf 'sif %s gid %s\n' "$f" "$gid"; fi
		done
	} >"$script"
	if [ "$(id -u)" != 0 ]; then
		log "not root: fixing ownership to 0:0 inside the image with debugfs ($(grep -c '^sif' "$script") edits)"
	fi
	finish_image "$script" "$dest"
}

# finish_image SCRIPT DEST: run the debugfs SCRIPT on TMP_IMG, check it
# with e2fsck and rename it to DEST (whole or not at all).
finish_image() {
	local script=$1 dest=$2 bad='not found|error|cannot|could not|invalid|exists|no free'
	if ! debugfs -w -f "$script" "$TMP_IMG" >"$WORK/debugfs.log" 2>&1 ||
		grep -v '^debugfs: ' "$WORK/debugfs.log" | grep -qiE "$bad"; then
		grep -v '^debugfs: ' "$WORK/debugfs.log" | grep -iE "$bad" | head -n 5 | sed 's/^/[rootfs]   /' >&2
		die "debugfs post-processing of the image failed"
	fi

	if command -v e2fsck >/dev/null 2>&1; then
		e2fsck -fn "$TMP_IMG" >"$WORK/e2fsck.log" 2>&1 || {
			sed 's/^/[rootfs]   /' "$WORK/e2fsck.log" >&2
			die "e2fsck found problems in the new image"
		}
	fi

	chmod 0644 "$TMP_IMG"
	mv -f "$TMP_IMG" "$dest"
	TMP_IMG=""
	IMG_SIZE_KIB=$(($(stat -c %s "$dest") / 1024))
}

# ---------------------------------------------------------------- main

# shellcheck source=rootfs/programs.sh
. "$SCRIPT_DIR/programs.sh"

# The user's image: the tree. The test image: the user's image (FROM_IMAGE
# or the tree's) plus the programs.
if [ -z "$BASE_IMAGE" ]; then
	log "building $ROOTFS_SOURCE rootfs (staging in $WORK)"
	if [ "$ROOTFS_SOURCE" = debian ]; then build_debian; else build_alpine; fi
	finish_tree
	verify_tree
	if [ -n "$GUEST_PROGRAMS" ]; then
		BASE_IMAGE=$WORK/user.ext4
		make_image "$BASE_IMAGE"
	else
		make_image "$OUT"
	fi
	DESC="base $BASE_DESC, $PKG_COUNT packages"
else
	log "test image from $BASE_IMAGE"
	DESC="from $BASE_IMAGE"
fi
if [ -n "$GUEST_PROGRAMS" ]; then
	build_guest_programs
	add_programs "$BASE_IMAGE"
	DESC="$DESC, with the test programs"
fi

log "done: $OUT ($((IMG_SIZE_KIB / 1024))M, $DESC, $(($(date +%s) - START_TIME))s)"
