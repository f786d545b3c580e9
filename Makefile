# browserd build. GNU make + pkg-config; everything comes from Debian packages.
#
#   make run     install what is missing, build, start the server (embedded SQLite store)
#   make test    install what is missing, build, lint, run every suite (plain, ASan+UBSan, TSan)
#   make bench   benchmarks; figures go to docs/BENCHMARKS.md
#   make fuzz    run every libFuzzer target for FUZZ_SECONDS each
#   make deb     the Debian package, $(BUILD)/browserd_VERSION_ARCH.deb (docs/packaging.md)

BUILD   ?= build
# Parallel jobs of the builds make test and make check start (one per core).
JOBS    ?= $(shell nproc 2>/dev/null || echo 2)
CC      ?= cc
SAN     ?=
FUZZ_SECONDS ?= 30

PKGS    := libmicrohttpd jansson sqlite3 libpq libssl libcrypto libpsl libarchive \
           xcb xcb-xtest xcb-xfixes xcb-shm zlib libseccomp libbpf
WARN    := -Wall -Wextra -Wshadow -Wformat=2 -Wstrict-prototypes -Wmissing-prototypes -Wvla -Werror
CFLAGS  ?= -O2 -g
ALL_CFLAGS  = -std=c17 -D_GNU_SOURCE $(WARN) $(CFLAGS) $(SAN) -Isrc -MMD -MP \
              $(shell pkg-config --cflags $(PKGS) 2>/dev/null)
LDLIBS  = $(shell pkg-config --libs $(PKGS) 2>/dev/null) -lwslay -lpthread -lm
ALL_LDFLAGS = $(SAN) $(LDFLAGS)

LIB_SRC := $(filter-out src/main.c,$(shell find src -name '*.c' | sort))
LIB_OBJ := $(LIB_SRC:%.c=$(BUILD)/%.o)
UNIT_SRC := $(sort $(wildcard tests/unit/test_*.c))
UNIT_BIN := $(UNIT_SRC:tests/unit/%.c=$(BUILD)/tests/%)
FUZZ_SRC := $(sort $(wildcard fuzz/fuzz_*.c))

VERSION := $(shell cat VERSION 2>/dev/null || echo 0.0.0)

.PHONY: all deps test-deps run deb test test-builds check unit blackbox asan lint analyze format fuzz fuzz-smoke bench clean check-banned

all: $(BUILD)/browserd

# V=1 shows the full commands.
Q := $(if $(V),,@)

$(BUILD)/%.o: %.c
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  CC      $@")
	$(Q)$(CC) $(ALL_CFLAGS) -DBROWSERD_VERSION='"$(VERSION)"' -c $< -o $@

$(BUILD)/libbrowserd.a: $(LIB_OBJ)
	@rm -f $@
	$(Q)ar rcs $@ $^

$(BUILD)/browserd: $(BUILD)/src/main.o $(BUILD)/libbrowserd.a
	@$(if $(Q),echo "  LINK    $@")
	$(Q)$(CC) $(ALL_LDFLAGS) -o $@ $^ $(LDLIBS)

$(BUILD)/tests/%: tests/unit/%.c $(BUILD)/libbrowserd.a
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  LINK    $@")
	$(Q)$(CC) $(ALL_CFLAGS) -Itests/unit $(ALL_LDFLAGS) -o $@ $< $(BUILD)/libbrowserd.a $(LDLIBS) -lcmocka

# Benchmark programs: linked like the unit tests, without cmocka.
$(BUILD)/bench/egress: bench/egress.c $(BUILD)/libbrowserd.a
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  LINK    $@")
	$(Q)$(CC) $(ALL_CFLAGS) $(ALL_LDFLAGS) -o $@ $< $(BUILD)/libbrowserd.a $(LDLIBS)

# The egress's in-kernel splice (docs/egress-proxy.md): a BPF object built
# with clang for the bpf target and assembled into proxy/ksplice.o (.incbin),
# so the binary carries it. The multiarch folder holds asm/types.h, which
# linux/bpf.h includes.
BPF_CC    ?= clang
BPF_CFLAGS := -target bpf -O2 -g -Wall -Werror -I/usr/include/$(shell gcc -dumpmachine 2>/dev/null)
$(BUILD)/bpf/egress_splice.bpf.o: bpf/egress_splice.bpf.c
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  BPF     $@")
	$(Q)$(BPF_CC) $(BPF_CFLAGS) -c $< -o $@
$(BUILD)/bpf/skmsg_probe.bpf.o: bpf/skmsg_probe.bpf.c
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  BPF     $@")
	$(Q)$(BPF_CC) $(BPF_CFLAGS) -c $< -o $@
# A probe of routing a tunnel's upload in the kernel (sockops + sk_msg,
# docs/egress-proxy.md "sk_msg: measured, not built"); built by make bench,
# run by hand as root.
$(BUILD)/bench/skmsg_probe: bench/skmsg_probe.c $(BUILD)/bpf/skmsg_probe.bpf.o
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  LINK    $@")
	$(Q)$(CC) $(ALL_CFLAGS) -DPROBE_BPF_OBJ='"$(BUILD)/bpf/skmsg_probe.bpf.o"' $(ALL_LDFLAGS) -o $@ $< $(LDLIBS)
$(BUILD)/src/proxy/ksplice.o: $(BUILD)/bpf/egress_splice.bpf.o
$(BUILD)/src/proxy/ksplice.o: ALL_CFLAGS += -DKSPLICE_BPF_OBJ='"$(BUILD)/bpf/egress_splice.bpf.o"'

# The OpenAPI document is assembled into this object (.incbin, api/openapi.c).
$(BUILD)/src/api/openapi.o: docs/openapi.yaml
# The console page likewise (.incbin, api/console.c).
$(BUILD)/src/api/console.o: src/api/console.html

-include $(LIB_OBJ:.o=.d) $(BUILD)/src/main.d

deps:
	@sh scripts/deps.sh

test-deps:
	@sh scripts/deps.sh --tests

run: deps all
	$(BUILD)/browserd serve

# Unit tests (cmocka) then the black-box suite against the real binary, first
# as a plain build, then under AddressSanitizer + UndefinedBehaviorSanitizer,
# then under ThreadSanitizer (unit tests, the black-box suite, and the suites
# whose server code runs on many threads: sessions and relay, pools, egress,
# BiDi, telemetry, the sandbox, files, processes, extensions, replays and live
# view, curl, headful controls, spares). The static analysis (make analyze)
# runs at the lowest priority beside the suites, on the CPU the browsers leave
# idle, and is counted as one suite (scripts/test.sh --analyze); so are the
# sanitizer builds and the fuzz targets made, beside the plain build's suites
# (make test-builds, scripts/test.sh --build-beside).
test: test-deps lint
	@$(MAKE) --no-print-directory -j$(JOBS) all $(UNIT_BIN)
	@JOBS=$(JOBS) sh scripts/test.sh --analyze --build-beside $(BUILD) build/asan build/tsan

# The builds the plain build's suites do not need: the sanitizer builds and
# the fuzz targets. make test has scripts/test.sh build them beside the
# plain build's suites, at the lowest priority, on the CPU the browsers
# leave idle (about two minutes of the run's wall time before).
test-builds:
	@$(MAKE) --no-print-directory -j$(JOBS) BUILD=build/asan CC=gcc \
	    SAN='-fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=all' \
	    CFLAGS='-O1 -g' build/asan/browserd $(UNIT_BIN:$(BUILD)/%=build/asan/%)
	@$(MAKE) --no-print-directory -j$(JOBS) BUILD=build/tsan CC=gcc \
	    SAN='-fsanitize=thread -fno-omit-frame-pointer' \
	    CFLAGS='-O1 -g' build/tsan/browserd $(UNIT_BIN:$(BUILD)/%=build/tsan/%)
	@$(MAKE) --no-print-directory -j$(JOBS) fuzz-build

unit: all $(UNIT_BIN)
	@sh scripts/test.sh --unit-only $(BUILD)

lint: check-banned
	@sh scripts/lint.sh
	@sh scripts/layers.sh

# The fast loop: lint, the unit tests and the black-box suite of the plain
# build (no Chromium, no sanitizer builds): a few minutes. `make test` is
# the whole run.
check: deps lint
	@$(MAKE) --no-print-directory -j$(JOBS) all $(UNIT_BIN)
	@sh scripts/test.sh --fast $(BUILD)

# compile_commands.json for clangd and clang-tidy, written from the same
# flags the build uses (no build is run).
compile_commands.json: Makefile $(LIB_SRC) src/main.c
	@{ echo '['; sep=''; for f in $(LIB_SRC) src/main.c; do \
	    printf '%s{"directory": "%s", "file": "%s", "command": "%s %s -c %s"}\n' "$$sep" \
	      "$(CURDIR)" "$$f" "$(CC)" "$$(echo '$(ALL_CFLAGS)' | sed 's/"/\\"/g')" "$$f"; sep=','; \
	  done; echo ']'; } > $@
	@echo "  GEN     $@"

check-banned:
	@sh scripts/banned.sh

# clang-tidy's static analyzer over src/ (scripts/analyze.sh says which
# checks are off and why); part of make test.
analyze:
	@sh scripts/analyze.sh

format:
	clang-format -i $$(find src tests/unit fuzz bench -name '*.[ch]')

# libFuzzer targets: built with clang, instrumented, linked against an
# instrumented copy of the library in build/fuzz.
FUZZ_FLAGS := -fsanitize=fuzzer-no-link,address,undefined -fno-omit-frame-pointer
fuzz-build:
	@$(MAKE) --no-print-directory BUILD=build/fuzz CC=clang SAN='$(FUZZ_FLAGS)' CFLAGS='-O1 -g' \
	    build/fuzz/libbrowserd.a
	@$(MAKE) --no-print-directory $(FUZZ_SRC:fuzz/%.c=build/fuzz/bin/%)

# One fuzz target: its source linked with libFuzzer and the fuzz build's
# library (a rule each, so that -j builds them side by side).
build/fuzz/bin/%: fuzz/%.c build/fuzz/libbrowserd.a
	@mkdir -p build/fuzz/bin
	@echo "  FUZZ    $@"
	@clang -std=c17 -D_GNU_SOURCE $(WARN) -O1 -g -Isrc -fsanitize=fuzzer,address,undefined \
	    $$(pkg-config --cflags $(PKGS)) -o $@ $< build/fuzz/libbrowserd.a $(LDLIBS)

fuzz: test-deps fuzz-build
	@for f in $(FUZZ_SRC); do n=$$(basename $$f .c); mkdir -p build/fuzz/corpus/$$n; \
	  echo "fuzz: $$n for $(FUZZ_SECONDS)s"; \
	  build/fuzz/bin/$$n -max_total_time=$(FUZZ_SECONDS) -timeout=10 \
	    build/fuzz/corpus/$$n fuzz/corpus/$$n || exit 1; done

# The Debian package, from a staged tree (scripts/deb.sh; docs/packaging.md).
deb: deps all
	@sh scripts/deb.sh $(BUILD) $(VERSION)

bench: test-deps all $(BUILD)/bench/egress $(BUILD)/bench/skmsg_probe
	@sh bench/run.sh $(BUILD)

clean:
	rm -rf build
