# kbox build. `make` builds ./kbox; `make check` runs every test; `make bench`
# runs the benchmarks; `make rootfs` builds rootfs.ext4, the user's image;
# `make test-image` builds rootfs-tests.ext4, the image the tests use (the
# user's image plus the test programs); `make lkl` builds liblkl; `make
# shell` does all it takes to start a shell in the user's image; `make
# install PREFIX=DIR` installs kbox and its manual page.
#
# LKL_DIR holds a prebuilt liblkl.a and the LKL headers, either flat or as
# lib/ + include/: by default /opt/lkl, else ./.lkl (where `make lkl`
# installs it). Without it kbox still builds, and `kbox image` explains
# what is missing.

LKL_DIR ?= $(if $(wildcard /opt/lkl/lib/liblkl.a /opt/lkl/liblkl.a),/opt/lkl,$(if $(wildcard $(CURDIR)/.lkl/lib/liblkl.a),$(CURDIR)/.lkl,/opt/lkl))
GO      ?= go
OUT     ?= rootfs.ext4
TEST_IMAGE ?= rootfs-tests.ext4
VERSION ?= $(shell git describe --always --dirty 2>/dev/null || echo dev)

LKL_LIB := $(firstword $(wildcard $(LKL_DIR)/lib/liblkl.a $(LKL_DIR)/liblkl.a))
LKL_INC := $(patsubst %/lkl.h,%,$(firstword $(wildcard $(LKL_DIR)/include/lkl.h $(LKL_DIR)/lkl.h)))

ifneq ($(and $(LKL_LIB),$(LKL_INC)),)
TAGS := lkl
export CGO_ENABLED := 1
export CGO_CFLAGS := -I$(LKL_INC) -O2
export CGO_LDFLAGS := -L$(dir $(LKL_LIB))
else
TAGS :=
endif

# Packed relative relocations (DT_RELR) where the linker and libc have
# them: kbox is a PIE with ~100,000 relative relocations, and each kbox
# process (kbox's own, and the seccomp tier's guest start-up where kbox
# was built without its start-up program) has the dynamic loader apply
# them first; packed, the table is ~2 MB smaller and the loader's time
# about half (docs/benchmarks.md, "Start-up").
RELR := $(shell printf 'int main(void){return 0;}' | $(CC) -x c - -o /dev/null -Wl,-z,pack-relative-relocs 2>&1 | grep -q . || echo -extldflags=-Wl,-z,pack-relative-relocs)
GOBUILD := $(GO) build -buildmode=pie -tags '$(TAGS)' -ldflags '-X main.version=$(VERSION) $(RELR)'
GOTEST  := $(GO) test -tags '$(TAGS)'

.PHONY: sysnum kbox-alt probe-program guest-program bench-workloads shell lkl lkl-config install man test-make-lkl test-arm64 race fuzz stress image-if-missing all kbox check unit integration bench rootfs test-image guests vet fmt clean lkl-status conformance

all: kbox

kbox: probe-program guest-program
	@$(MAKE) --no-print-directory lkl-status
	$(GOBUILD) -o kbox ./cmd/kbox

# The guest program of `kbox probe` (probe/guest/kbox-probe.c), static with
# musl-gcc, embedded in kbox (probe/embed.go). Without musl-gcc kbox builds
# without it, and `kbox probe` says so.
MUSL_GCC ?= $(shell command -v musl-gcc 2>/dev/null)
PROBE_SRC := probe/guest/kbox-probe.c probe/guest/host.c
probe-program:
ifneq ($(MUSL_GCC),)
	@if [ -z "$$(find probe/guest -newer probe/bin/kbox-probe 2>/dev/null)" ] && [ -f probe/bin/kbox-probe ]; then :; else \
		echo "$(MUSL_GCC) -static -O2 -Wall -o probe/bin/kbox-probe $(PROBE_SRC)"; $(MUSL_GCC) -static -O2 -Wall -o probe/bin/kbox-probe $(PROBE_SRC); fi
else
	@echo "kbox: *** no musl-gcc: kbox is built without the probe program (kbox probe will say so; apt-get install musl-tools) ***"
endif

# The guest start-up program (seccomp/supervisor's guestinit.c, binder.c,
# spawner.c and store.c), static with musl-gcc, embedded in kbox
# (seccomp/startup): the seccomp tier's guest start-up, the socket binder
# and the content store's helper run it instead of re-executing kbox. musl-gcc searches only musl's headers: the kernel's
# (linux/, asm/) come from the host's through .musl-include. Without
# musl-gcc, or if it fails, kbox builds without it and re-executes itself.
STARTUP_SRC := seccomp/supervisor/guestinit.c seccomp/supervisor/binder.c seccomp/supervisor/spawner.c seccomp/supervisor/store.c
STARTUP_BIN := seccomp/startup/bin/kbox-guest
ASM_INC := $(firstword $(wildcard /usr/include/$(shell $(CC) -print-multiarch 2>/dev/null)/asm /usr/include/asm))
guest-program:
ifneq ($(MUSL_GCC),)
	@if [ -f $(STARTUP_BIN) ] && [ -z "$$(find seccomp/supervisor -name '*.[ch]' -newer $(STARTUP_BIN))" ]; then :; else \
		mkdir -p .musl-include && ln -sfn /usr/include/linux .musl-include/linux && \
		ln -sfn /usr/include/asm-generic .musl-include/asm-generic && ln -sfn $(ASM_INC) .musl-include/asm && \
		echo "$(MUSL_GCC) -static -O2 -Wall -isystem .musl-include -DKBOX_STARTUP_PROGRAM -o $(STARTUP_BIN) $(STARTUP_SRC)" && \
		{ $(MUSL_GCC) -static -O2 -Wall -isystem .musl-include -DKBOX_STARTUP_PROGRAM -o $(STARTUP_BIN).tmp $(STARTUP_SRC) && \
		mv $(STARTUP_BIN).tmp $(STARTUP_BIN) || { rm -f $(STARTUP_BIN) $(STARTUP_BIN).tmp; \
		echo "kbox: *** the start-up program did not build: kbox re-executes itself instead ***"; }; }; fi
else
	@echo "kbox: *** no musl-gcc: kbox is built without its guest start-up program and re-executes itself instead (apt-get install musl-tools) ***"
endif

lkl-status:
ifeq ($(TAGS),lkl)
	@echo "kbox: linking liblkl from $(LKL_LIB) (headers $(LKL_INC))"
else
	@echo "kbox: *** no liblkl.a + lkl.h under LKL_DIR=$(LKL_DIR): building without LKL (run \`make lkl\` to build it into ./.lkl, docs/lkl.md) ***"
endif

rootfs:
	OUT=$(OUT) bash rootfs/build.sh

# The test image: the user's image (built first when missing) plus the
# test programs under /opt/tests (tests/guest, tests/stress). build.sh
# adds them to a copy of $(OUT) while that is as it built it (never
# mounted writable, newer than build.sh), else builds the tree again for
# the test image alone. Rebuilt by the targets that need it when the build
# scripts or a guest program changed.
GUEST_SOURCES := $(wildcard tests/guest/*.c tests/guest/*.h tests/guest/dyn/*.c tests/guest/dyn/*.h tests/stress/*.c tests/stress/go/*/*.go tests/stress/go/*/go.mod)
test-image:
	@test -f $(OUT) || $(MAKE) --no-print-directory rootfs
	OUT=$(TEST_IMAGE) GUEST_PROGRAMS=1 FROM_IMAGE=$(OUT) bash rootfs/build.sh

$(TEST_IMAGE): rootfs/build.sh rootfs/programs.sh $(GUEST_SOURCES)
	@$(MAKE) --no-print-directory test-image

# `make lkl` builds liblkl with kbox's configuration (lkl/kbox.config over
# LKL's defconfig; LKL_CONFIG=default for LKL's own, or LKL_CONFIG=FILE for
# another fragment) and installs liblkl.a, its .config and the headers under
# LKL_DIR when given, else ./.lkl (which `make` then finds). The tree is
# upstream LKL at LKL_COMMIT, fetched with git into LKL_FETCH, or LKL_SRC, a
# local tree (configured and built in place). `make lkl-config` only checks
# the configuration and says whether `make lkl` would rebuild the kernel.
# scripts/lkl.sh, docs/lkl.md.
LKL_REPO   ?= https://github.com/lkl/linux
LKL_COMMIT ?= 9da43d07386cc060f4f26194e9aa702ecc4627af
LKL_FETCH  ?= $(CURDIR)/.lkl-src
LKL_JOBS   ?= $(shell nproc 2>/dev/null || echo 2)
LKL_CONFIG ?= kbox
LKL_PREFIX := $(if $(filter command line environment,$(origin LKL_DIR)),$(LKL_DIR),$(CURDIR)/.lkl)
lkl lkl-config:
	@set -e; src="$(LKL_SRC)"; \
	if [ -z "$$src" ]; then \
		src="$(LKL_FETCH)"; \
		command -v git >/dev/null || { echo "kbox: make lkl needs git (apt-get install git), or LKL_SRC=DIR naming an LKL tree"; exit 1; }; \
		if [ ! -d "$$src/.git" ]; then git init -q "$$src" && git -C "$$src" remote add origin "$(LKL_REPO)"; fi; \
		echo "kbox: fetching LKL $(LKL_COMMIT) from $(LKL_REPO) into $$src"; \
		git -C "$$src" fetch -q --depth 1 origin "$(LKL_COMMIT)" || { echo "kbox: cannot fetch LKL $(LKL_COMMIT) from $(LKL_REPO): no network? Use LKL_SRC=DIR with a local LKL tree"; exit 1; }; \
		git -C "$$src" checkout -q --force FETCH_HEAD; \
	fi; \
	SRC="$$src" PREFIX="$(LKL_PREFIX)" JOBS="$(LKL_JOBS)" CONFIG="$(LKL_CONFIG)" MAKE="$(MAKE)" \
		bash scripts/lkl.sh $(if $(filter lkl-config,$@),config,build)

# Everything for a first run: liblkl (make lkl) when none is found, kbox,
# the image when it is missing, then a shell in it.
shell:
	@if [ "$(TAGS)" != lkl ]; then $(MAKE) --no-print-directory lkl; fi
	@$(MAKE) --no-print-directory kbox
	@test -f $(OUT) || $(MAKE) --no-print-directory rootfs
	./kbox image -S $(OUT) -- /bin/sh -i

# The seccomp package's syscall number tables (seccomp/nr_*.go), from the
# kernel's UAPI headers: LINUX_UAPI holds x86/asm/unistd_64.h and
# arm64/asm/unistd_64.h (Debian's linux-libc-dev 6.12 or later has them
# under /usr/lib/linux/uapi), LINUX_VERSION names them.
LINUX_UAPI ?= /usr/lib/linux/uapi
sysnum:
	$(GO) test ./seccomp -run 'TestSyscallNumbers$$' -count=1 -sysnum-headers $(LINUX_UAPI) -sysnum-linux $(LINUX_VERSION)

# The manual page, from the help texts of the kbox just built.
man:
	@test -x kbox || $(MAKE) --no-print-directory kbox
	$(GO) run ./scripts/mkman ./kbox > kbox.1.tmp && mv kbox.1.tmp kbox.1

# `make install PREFIX=DIR` (DESTDIR too): bin/kbox, share/man/man1/kbox.1
# and the GDB/Delve helpers under share/kbox. It installs the kbox already
# built (`make` first), building it only when there is none.
PREFIX ?= /usr/local
install: man
	install -D -m 755 kbox "$(DESTDIR)$(PREFIX)/bin/kbox"
	install -D -m 644 kbox.1 "$(DESTDIR)$(PREFIX)/share/man/man1/kbox.1"
	@for d in gdb dlv; do \
		if [ -d scripts/$$d ]; then \
			mkdir -p "$(DESTDIR)$(PREFIX)/share/kbox/$$d" && cp -R scripts/$$d/. "$(DESTDIR)$(PREFIX)/share/kbox/$$d/" && \
			echo "kbox: installed scripts/$$d in $(DESTDIR)$(PREFIX)/share/kbox/$$d"; \
		else echo "kbox: no scripts/$$d to install"; fi; \
	done

vet:
	$(GO) vet -tags '$(TAGS)' ./...
	GOARCH=arm64 CGO_ENABLED=0 $(GO) vet ./lkl/ ./rootfs/ ./cmd/kbox/ ./dispatch/ ./fifo/ ./seccomp/... ./unixsock/ ./elfload/... ./trap/ ./rewrite/

fmt:
	gofmt -l -w .

# Unit tests need no LKL; integration tests (package tests, and every test
# tagged lkl) need liblkl and $(TEST_IMAGE), and skip loudly without them. The
# integration package takes more than go test's default 10 minutes on a
# loaded machine, or when it first builds the package images (packageImage).
check: kbox vet image-if-missing
	@test -z "$$(gofmt -l .)" || { echo "gofmt needed:"; gofmt -l .; exit 1; }
	KBOX_IMAGE=$(abspath $(TEST_IMAGE)) KBOX_USER_IMAGE=$(abspath $(OUT)) KBOX_BIN=$(abspath kbox) $(GOTEST) -count=1 -timeout 80m ./...
	@$(MAKE) --no-print-directory race
	@$(MAKE) --no-print-directory test-arm64
	@if [ "$(TAGS)" = lkl ]; then $(MAKE) --no-print-directory fuzz; else echo "kbox: fuzz targets skipped without liblkl (they need none: make fuzz runs them; CI runs them in its LKL configuration)"; fi

# Every fuzz target for FUZZTIME (go test -fuzztime) each, from its seeds on.
FUZZTIME ?= 2000x
fuzz:
	GO=$(GO) bash scripts/fuzz.sh $(FUZZTIME)

# The stress programs (tests/stress) under every tier, with a 10-minute
# mixed workload (make check runs them with a 60-second one).
STRESS_SECONDS ?= 600
stress: kbox image-if-missing
	KBOX_STRESS_SECONDS=$(STRESS_SECONDS) KBOX_IMAGE=$(abspath $(TEST_IMAGE)) KBOX_BIN=$(abspath kbox) $(GOTEST) -count=1 -timeout 60m -run 'TestStress' -v ./tests/ | grep -E '^(---|ok|FAIL|PASS)|stress |SKIP'

# The engine served from many goroutines at once, under the race detector
# (tests/concurrency_test.go), and the LKL-free packages' concurrent tests.
race:
	KBOX_IMAGE=$(abspath $(TEST_IMAGE)) $(GOTEST) -race -count=1 -run 'TestEngineConcurrent' ./tests/
	$(GO) test -race -count=1 ./dispatch/ ./shadowfd/ ./fdtable/

# The LKL-free packages' unit tests (ABI remap, dispatch table, BPF, ELF,
# fd table, host FIFOs) built for arm64 and run under qemu-user, when it is
# installed.
ARM64_PKGS := ./lkl/ ./dispatch/ ./seccomp/... ./fdtable/ ./fifo/ ./elfload/ ./shadowfd/ ./cmd/kbox/ ./web/ ./clock/ ./scratchfs/ ./unixsock/ ./tierpolicy/ ./trap/ ./rewrite/
test-arm64:
	@if command -v qemu-aarch64-static >/dev/null; then \
		echo "kbox: arm64 unit tests under qemu-aarch64-static"; \
		KBOX_EMULATED=1 GOARCH=arm64 CGO_ENABLED=0 $(GO) test -count=1 -exec qemu-aarch64-static $(ARM64_PKGS); \
	else \
		echo "kbox: *** SKIP arm64 unit tests: no qemu-aarch64-static (apt-get install qemu-user-static) ***"; \
	fi

# Integration tests need the test image; build it when it is missing or
# older than what goes into it. If that fails (no Debian mirror), they
# skip loudly instead.
image-if-missing:
	@$(MAKE) --no-print-directory $(TEST_IMAGE) || echo "kbox: *** could not build $(TEST_IMAGE): image tests will be skipped ***"

unit:
	$(GO) test -count=1 ./...

# LKL_ALT=DIR (a second liblkl, e.g. LKL's defconfig beside kbox's
# configuration) builds ./kbox-alt against it, and BenchmarkKernels
# compares the two kernels in one run (docs/benchmarks.md, "Kernels").
LKL_ALT ?=
ALT_LIB := $(if $(LKL_ALT),$(firstword $(wildcard $(LKL_ALT)/lib/liblkl.a $(LKL_ALT)/liblkl.a)))
ALT_INC := $(if $(LKL_ALT),$(patsubst %/lkl.h,%,$(firstword $(wildcard $(LKL_ALT)/include/lkl.h $(LKL_ALT)/lkl.h))))
bench: kbox image-if-missing $(if $(LKL_ALT),kbox-alt)
	KBOX_IMAGE=$(abspath $(TEST_IMAGE)) KBOX_BIN=$(abspath kbox) KBOX_LKL_LIB=$(LKL_LIB) KBOX_LKL_INC=$(LKL_INC) \
		$(if $(LKL_ALT),KBOX_BIN_ALT=$(abspath kbox-alt) KBOX_LKL_LIB_ALT=$(ALT_LIB) KBOX_LKL_INC_ALT=$(ALT_INC)) \
		$(GOTEST) -run '^$$' -bench . -benchtime 1x -count 1 -v ./tests/ | grep -E '^Benchmark|ratio|wall|SKIP|floor|alone|kernel|native|_ms|_MB|MB/s|conns|session'
	$(GOTEST) -run '^$$' -bench . -benchmem -count 1 ./web/ ./seccomp/ ./clock/ ./cmd/kbox/
	$(GOTEST) -run '^$$' -bench . -benchtime 1x -count 1 -v ./usernet/ | grep -E '^Benchmark|conns'

kbox-alt:
	@test -n "$(ALT_LIB)" -a -n "$(ALT_INC)" || { echo "kbox: LKL_ALT=$(LKL_ALT) holds no liblkl.a and lkl.h"; exit 1; }
	CGO_ENABLED=1 CGO_CFLAGS="-I$(ALT_INC) -O2" CGO_LDFLAGS="-L$(dir $(ALT_LIB))" $(GO) build -buildmode=pie -tags lkl -ldflags '-X main.version=$(VERSION) $(RELR)' -o kbox-alt ./cmd/kbox

# Whole commands (find, grep -r, ls -lR, python3, git status, make -j2)
# natively in a chroot of the image's tree and under every tier, median of
# 5 (docs/benchmarks.md). The image with python3, git, gcc and make is
# built once into $(WORKLOADS_IMG).
WORKLOADS_IMG ?= workloads.ext4
bench-workloads: kbox
	@test -f $(WORKLOADS_IMG) || OUT=$(WORKLOADS_IMG) ROOTFS_PACKAGES="python3 git gcc make libc6-dev" ROOTFS_SIZE=1G bash rootfs/build.sh
	KBOX_WORKLOADS_IMAGE=$(abspath $(WORKLOADS_IMG)) KBOX_LKL_LIB=$(LKL_LIB) KBOX_LKL_INC=$(LKL_INC) KBOX_IMAGE=$(abspath $(TEST_IMAGE)) KBOX_BIN=$(abspath kbox) $(GOTEST) -run '^$$' -bench Workloads -benchtime 1x -count 1 -timeout 90m -v ./tests/ | grep -vE '^(=== |goos|goarch|pkg|cpu)'

# The Linux Test Project's syscall tests under kbox and natively in a chroot
# of the image (docs/conformance.md): KBOX_LTP is an LTP install prefix,
# built static by hand (never part of this repository); KBOX_LTP_FILTER a
# regexp of test names.
conformance: kbox image-if-missing
	@if [ -z "$(KBOX_LTP)" ]; then echo "kbox: *** SKIP conformance: no LTP build (set KBOX_LTP to an LTP install prefix, see docs/conformance.md) ***"; exit 0; fi
	KBOX_LTP=$(abspath $(KBOX_LTP)) KBOX_LTP_REPORT=$(abspath conformance-report.txt) KBOX_IMAGE=$(abspath $(TEST_IMAGE)) KBOX_BIN=$(abspath kbox) \
		$(GOTEST) -count=1 -timeout 6h -run TestLTPConformance -v ./tests/ | grep -v '^=== RUN'

clean:
	rm -f kbox kbox.1 $(STARTUP_BIN)
	rm -rf .musl-include
