# The test programs of the test image (rootfs/build.sh GUEST_PROGRAMS=1):
# build_guest_programs compiles them, add_programs writes them into a copy
# of the user's image. Sourced by build.sh, which has the helpers (log,
# die, WORK, GUEST_CC, OUT, TMP_IMG, finish_image).
# shellcheck shell=bash

# Dynamic musl guests (tests/guest/dyn: dlplug and its plugins): the
# program is linked against musl's libc.so, whose interpreter is musl's
# own loader, /lib/ld-musl-x86_64.so.1 (libc.so itself), copied into the
# image (MUSL_LD). Only with musl-gcc and the loader on the build host;
# the tests that need them skip otherwise.
MUSL_LD=""
build_dynamic_guests() {
	local dir="$GUEST_SRC_DIR/dyn" out=$PROGS ld
	[ -d "$dir" ] || return 0
	ld=$(readlink -f /lib/ld-musl-x86_64.so.1 2>/dev/null || true)
	if [ "$GUEST_CC" != musl-gcc ] || [ -z "$ld" ] || [ ! -f "$ld" ]; then
		log "no musl-gcc or musl loader: dynamic guest programs (tests/guest/dyn) not built"
		return 0
	fi
	MUSL_LD=$WORK/ld-musl-x86_64.so.1
	install -m 0755 "$ld" "$MUSL_LD"
	if ! musl-gcc -O2 -Wall -o "$out/dlplug" "$dir/dlplug.c" 2>"$WORK/cc-dlplug.log" ||
		! musl-gcc -O2 -Wall -shared -fPIC -o "$out/libplug_a.so" "$dir/plug_a.c" 2>>"$WORK/cc-dlplug.log" ||
		! musl-gcc -O2 -Wall -shared -fPIC -o "$out/libplug_b.so" "$dir/plug_b.c" 2>>"$WORK/cc-dlplug.log"; then
		sed 's/^/[rootfs]   /' "$WORK/cc-dlplug.log" >&2
		die "compiling the dynamic guest programs (tests/guest/dyn) failed"
	fi
	log "built dynamic guest program dlplug, its plugins, and musl's loader at /lib/ld-musl-x86_64.so.1"
}

# build_guest_programs: the test programs, into PROGS (what goes into
# /opt/tests) and MUSL_LD.
PROGS=""
build_guest_programs() {
	PROGS=$WORK/programs
	mkdir -p "$PROGS"
	local src name extra out=$PROGS n=0
	local srcs=("$GUEST_SRC_DIR"/*.c "$STRESS_SRC_DIR"/*.c)
	log "guest programs: ${#srcs[@]} C sources with '$GUEST_CC -static -O2'"
	for src in "${srcs[@]}"; do
		name=$(basename "$src" .c)
		# A source may ask for linker flags of its own in a comment line
		# `KBOX_LDFLAGS: ...` (slotclash.c: a fixed load address).
		extra=$(sed -n 's/^ \* KBOX_LDFLAGS: \(.*\)$/\1/p' "$src" | head -n 1)
		# shellcheck disable=SC2086
		if ! $GUEST_CC -static -O2 -Wall -o "$out/$name" "$src" $extra 2>"$WORK/cc-$name.log"; then
			sed 's/^/[rootfs]   /' "$WORK/cc-$name.log" >&2
			die "compiling guest program $src failed (hint: apt-get install musl-tools, or set CC=gcc)"
		fi
		n=$((n + 1))
	done
	# A deliberately broken ELF: correct magic/class/endianness, then a
	# bogus e_type/e_machine and garbage, so execve() must fail (ENOEXEC).
	{
		printf '\177ELF\002\001\001\000\000\000\000\000\000\000\000\000' # e_ident
		printf '\102\102\102\102'                                         # e_type/e_machine = garbage
		printf 'kbox: this is not a valid ELF executable.\000\000\000\000'
		printf '\377\376\375\374%.0s' 1 2 3 4 5 6 7 8
	} >"$out/badelf"
	chmod 0755 "$out/badelf"
	log "built $n guest programs + badelf for /opt/tests"
	build_dynamic_guests
	fetch_e2fsprogs
	# Go guest programs (tests/stress/go/NAME): static, for multi-threaded
	# guests with the Go runtime's own threads, signals and futexes.
	if command -v "${GO:-go}" >/dev/null 2>&1; then
		for src in "$STRESS_SRC_DIR"/go/*/; do
			[ -d "$src" ] || continue
			name=$(basename "$src")
			if ! (cd "$src" && CGO_ENABLED=0 "${GO:-go}" build -trimpath -ldflags=-s -o "$out/$name" .) 2>"$WORK/go-$name.log"; then
				sed 's/^/[rootfs]   /' "$WORK/go-$name.log" >&2
				die "building Go guest program $src failed"
			fi
			log "built Go guest program $name"
		done
	else
		log "no Go toolchain: Go guest programs (tests/stress/go) not built"
	fi
}

# e2fsprogs for the loop-device tests (tests/loop_test.go): Debian's
# mke2fs and e2fsck, with the libraries they need that the user's image
# lacks, under /opt/tests/e2fsprogs (the programs; lib/ the libraries by
# soname: run them with LD_LIBRARY_PATH=/opt/tests/e2fsprogs/lib).
# Fetched with apt-get download for Debian images (the image's glibc);
# without them (another source, no mirror) the tests that need them skip
# and say so.
E2FS_PACKAGES="e2fsprogs libext2fs2 libcom-err2 libss2 libblkid1 libuuid1"
E2FS=""
fetch_e2fsprogs() {
	local debs=$WORK/e2fs-debs tree=$WORK/e2fs-tree deb l
	if [ "$ROOTFS_SOURCE" != debian ] || ! command -v apt-get >/dev/null 2>&1 || ! command -v dpkg-deb >/dev/null 2>&1; then
		log "no e2fsprogs for /opt/tests/e2fsprogs (Debian images with apt-get only): the loop-device tests will skip"
		return 0
	fi
	mkdir -p "$debs" "$tree"
	# shellcheck disable=SC2086
	if ! (cd "$debs" && apt-get download -q $E2FS_PACKAGES >"$WORK/e2fs-apt.log" 2>&1); then
		grep -E '^(E|W):' "$WORK/e2fs-apt.log" | grep -v unsandboxed | tail -n 3 | sed 's/^/[rootfs]   /' >&2 || true
		log "warning: apt-get download of $E2FS_PACKAGES failed: no /opt/tests/e2fsprogs, the loop-device tests will skip"
		return 0
	fi
	for deb in "$debs"/*.deb; do
		dpkg-deb -x "$deb" "$tree" || die "unpacking $(basename "$deb") failed"
	done
	E2FS=$WORK/e2fsprogs
	mkdir -p "$E2FS/lib"
	for l in mke2fs e2fsck; do
		install -m 0755 "$(find "$tree" -type f -name "$l" | head -n 1)" "$E2FS/$l"
	done
	while IFS= read -r l; do
		cp -L "$l" "$E2FS/lib/"
	done < <(find "$tree" -name 'lib*.so.[0-9]')
	log "e2fsprogs for /opt/tests/e2fsprogs: mke2fs, e2fsck and $(find "$E2FS/lib" -type f | wc -l) libraries"
}

# lib_dir IMAGE: the directory /lib is in IMAGE (usr/lib when /usr is
# merged).
lib_dir() {
	local st dest
	st=$(debugfs -R 'stat /lib' "$1" 2>/dev/null)
	if grep -q 'Type: symlink' <<<"$st"; then
		dest=$(sed -n 's/^Fast link dest: "\(.*\)"$/\1/p' <<<"$st")
		[[ $dest == /* ]] || dest=/$dest
		printf '%s\n' "$dest"
	else
		echo /lib
	fi
}

# add_programs BASE: OUT is the image BASE plus the programs: a copy of
# BASE grown by half again their size, with /opt/tests (and musl's
# loader) written into it by debugfs, root's, as the rest.
add_programs() {
	local base=$1 sb bsize blocks free_inodes cur_kib add_kib size_kib n f name lib
	sb=$(dumpe2fs -h "$base" 2>/dev/null) || die "cannot read the ext4 superblock of $base"
	bsize=$(sed -n 's/^Block size: *//p' <<<"$sb")
	blocks=$(sed -n 's/^Block count: *//p' <<<"$sb")
	free_inodes=$(sed -n 's/^Free inodes: *//p' <<<"$sb")
	cur_kib=$((blocks * bsize / 1024))
	add_kib=$(du -sk "$PROGS" ${MUSL_LD:+"$MUSL_LD"} ${E2FS:+"$E2FS"} | awk '{ s += $1 } END { print s }')
	size_kib=$(((cur_kib + add_kib * 3 / 2 + 1023) / 1024 * 1024))
	n=$(find "$PROGS" ${E2FS:+"$E2FS"} -type f | wc -l)
	[ -x "$PROGS/hello" ] || die "sanity check: the guest program hello was not built"
	[ "$free_inodes" -gt $((n + 2)) ] || die "$base has $free_inodes free inodes, too few for $n programs"

	TMP_IMG=$(mktemp "$OUT_DIR/.$(basename -- "$OUT").tmp.XXXXXX")
	cp --sparse=always "$base" "$TMP_IMG"
	if ! resize2fs "$TMP_IMG" "${size_kib}K" >"$WORK/resize2fs.log" 2>&1; then
		sed 's/^/[rootfs]   /' "$WORK/resize2fs.log" >&2
		die "resize2fs could not grow the image to ${size_kib}K"
	fi
	local script=$WORK/programs.cmd
	{
		if debugfs -R 'stat /opt' "$TMP_IMG" 2>&1 | grep -q 'File not found'; then
			printf 'mkdir /opt\nsif /opt uid 0\nsif /opt gid 0\n'
		fi
		printf 'mkdir /opt/tests\nsif /opt/tests mode 040755\nsif /opt/tests uid 0\nsif /opt/tests gid 0\ncd /opt/tests\n'
		for f in "$PROGS"/*; do
			name=$(basename "$f")
			printf 'write "%s" "%s"\nsif "%s" mode 0100%s\nsif "%s" uid 0\nsif "%s" gid 0\n' \
				"$f" "$name" "$name" "$(stat -c %a "$f")" "$name" "$name"
		done
		if [ -n "$E2FS" ]; then
			printf 'mkdir e2fsprogs\nsif e2fsprogs mode 040755\nmkdir e2fsprogs/lib\nsif e2fsprogs/lib mode 040755\n'
			for f in "$E2FS"/* "$E2FS"/lib/*; do
				[ -f "$f" ] || continue
				name=e2fsprogs/${f#"$E2FS"/}
				printf 'write "%s" "%s"\nsif "%s" mode 0100%s\n' "$f" "$name" "$name" "$(stat -c %a "$f")"
			done
			for name in e2fsprogs e2fsprogs/lib $(cd "$E2FS" && find . -type f | sed 's|^\./|e2fsprogs/|'); do
				printf 'sif "%s" uid 0\nsif "%s" gid 0\n' "$name" "$name"
			done
		fi
		if [ -n "$MUSL_LD" ]; then
			lib=$(lib_dir "$TMP_IMG")
			printf 'cd %s\n' "$lib"
			# The base's own musl loader (Alpine's) makes way for the host's.
			debugfs -R "stat $lib/ld-musl-x86_64.so.1" "$TMP_IMG" 2>&1 | grep -q 'File not found' ||
				printf 'rm ld-musl-x86_64.so.1\n'
			printf 'write "%s" ld-musl-x86_64.so.1\nsif ld-musl-x86_64.so.1 mode 0100755\n' "$MUSL_LD"
			printf 'sif ld-musl-x86_64.so.1 uid 0\nsif ld-musl-x86_64.so.1 gid 0\n'
		fi
	} >"$script"
	local what="$n programs to /opt/tests"
	[ -z "$E2FS" ] || what="$what, e2fsprogs to /opt/tests/e2fsprogs"
	[ -z "$MUSL_LD" ] || what="$what, musl's loader to $lib"
	log "adding $what ($((cur_kib / 1024))M -> $((size_kib / 1024))M)"
	finish_image "$script" "$OUT"
}
