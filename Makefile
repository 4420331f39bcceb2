# simfarm — one Makefile for everything. `make help` lists the targets.
#
# Out-of-tree: objects and binaries go to $(BUILD) (build/ by default; the
# sanitizer variants use build/asan and build/tsan). Warnings are errors
# under CI=true. Every library comes through pkg-config.

SHELL := /bin/bash
.DEFAULT_GOAL := all
.DELETE_ON_ERROR:
.SECONDARY:
MAKEFLAGS += --no-builtin-rules

BUILD ?= build
SAN ?=
CC ?= cc
CLANG ?= clang
EMCC ?= emcc
NODE ?= node

PKGS := libuv msgpack libsodium libwebsockets libpq OpenCL openssl
DESKTOP_PKGS := gtk+-3.0 ayatana-appindicator3-0.1

WARN := -Wall -Wextra -Wshadow -Wstrict-prototypes -Wmissing-prototypes
ifeq ($(CI),true)
WARN += -Werror
endif

# -ffp-contract=off: kernels must give the same bits on every backend, so no
# compiler may fuse a multiply and an add behind our back. -fno-math-errno:
# sqrt, correctly rounded everywhere, becomes the instruction, so the
# kernels' loops around it vectorize (nothing here reads errno after libm).
CFLAGS ?= -O2 -g
ALL_CFLAGS := -std=c17 -D_DEFAULT_SOURCE -D_POSIX_C_SOURCE=200809L \
	$(WARN) -ffp-contract=off -fno-math-errno -MMD -MP -I. $(CFLAGS)
LDFLAGS ?=
LDLIBS :=

ifneq ($(SAN),)
ALL_CFLAGS += -fsanitize=$(SAN) -fno-omit-frame-pointer
LDFLAGS += -fsanitize=$(SAN)
endif

# $(DEPS_MK) is both the stamp that says the packages are installed and the
# place their pkg-config flags are kept: make builds it (running
# scripts/install-deps.sh) before anything else and then restarts with it
# read, so pkg-config is asked once, not on every run.
DEPS_MK ?= $(BUILD)/deps.mk
ifneq ($(filter-out help clean,$(or $(MAKECMDGOALS),all)),)
-include $(DEPS_MK)
endif
ALL_CFLAGS += $(PKG_CFLAGS)
LDLIBS += $(PKG_LIBS) -lm -lpthread

# ---- subsystems -----------------------------------------------------------
# Each C folder becomes one static library, linked in dependency order
# (the arrows in docs/architecture.md point down this list).
SUBSYSTEMS := node-native actors/coord actors/node sched sim proto runtime base
# Port-specific sources: <name>_native.c is native only, <name>_wasm.c is
# for the emcc build only; every other .c file is built for both (of the
# folders the emcc build takes at all: base, runtime, proto, sim, sched and
# actors/node).
subsys_src = $(filter-out %_wasm.c,$(wildcard $(1)/*.c))
subsys_wasm_src = $(filter-out %_native.c,$(wildcard $(1)/*.c))
subsys_obj = $(patsubst %.c,$(BUILD)/obj/%.o,$(call subsys_src,$(1)))
subsys_lib = $(BUILD)/lib/lib$(subst /,_,$(subst -,_,$(1))).a
LIBS := $(foreach s,$(SUBSYSTEMS),$(if $(call subsys_src,$(s)),$(call subsys_lib,$(s))))

define subsys_rule
$(call subsys_lib,$(1)): $(call subsys_obj,$(1))
	@mkdir -p $$(@D)
	rm -f $$@ && $(AR) rcs $$@ $$^
endef
$(foreach s,$(SUBSYSTEMS),$(eval $(call subsys_rule,$(s))))

$(BUILD)/obj/%.o: %.c | $(DEPS_MK)
	@mkdir -p $(@D)
	$(CC) $(ALL_CFLAGS) -c $< -o $@

# SQL migrations compiled into the actors library (generated, never edited).
SQL_SRC := $(sort $(wildcard sql/[0-9]*.sql))
$(BUILD)/gen/migrations.c: $(SQL_SRC) scripts/embed-sql.sh
	@mkdir -p $(@D)
	scripts/embed-sql.sh $(SQL_SRC) > $@.tmp && mv $@.tmp $@
$(BUILD)/obj/gen/migrations.o: $(BUILD)/gen/migrations.c | $(DEPS_MK)
	@mkdir -p $(@D)
	$(CC) $(ALL_CFLAGS) -c $< -o $@
$(call subsys_lib,actors/coord): $(BUILD)/obj/gen/migrations.o

# ---- the simfarm binary -----------------------------------------------------
BIN := $(BUILD)/bin/simfarm
CLI_OBJ := $(patsubst %.c,$(BUILD)/obj/%.o,$(wildcard cli/*.c))

$(BIN): $(CLI_OBJ) $(LIBS)
	@mkdir -p $(@D)
	$(CC) $(LDFLAGS) $^ $(LDLIBS) -o $@

# ---- the desktop node (node-desktop/) -----------------------------------------
# The native node in a GTK 3 window with a tray icon (libayatana-appindicator).
# Only this program links GTK; its headers come in as system headers, whose
# warnings are not ours. It asks the coordinator about its node with the
# command line's HTTP client.
DESKTOP := $(BUILD)/bin/simfarm-desktop
DESKTOP_SRC := $(wildcard node-desktop/*.c)
DESKTOP_OBJ := $(patsubst %.c,$(BUILD)/obj/%.o,$(DESKTOP_SRC))
$(DESKTOP_OBJ): ALL_CFLAGS += $(DESKTOP_CFLAGS)

$(DESKTOP): $(DESKTOP_OBJ) $(BUILD)/obj/cli/http.o $(LIBS)
	@mkdir -p $(@D)
	$(CC) $(LDFLAGS) $^ $(LDLIBS) $(DESKTOP_LIBS) -o $@

# tests/desktop/sense_probe: the desktop's sensing (UPower, logind, the
# idle monitor) on its own, for tests/desktop/sense.test.mjs.
$(BUILD)/tests/desktop/sense_probe: $(BUILD)/obj/tests/desktop/sense_probe.o $(BUILD)/obj/node-desktop/sense.o \
		$(BUILD)/obj/node-desktop/policy.o $(LIBS)
	@mkdir -p $(@D)
	$(CC) $(LDFLAGS) $^ $(LDLIBS) $(DESKTOP_LIBS) -o $@
$(BUILD)/obj/tests/desktop/sense_probe.o: ALL_CFLAGS += $(DESKTOP_CFLAGS)

# ---- tests ------------------------------------------------------------------
UNIT_SRC := $(wildcard tests/unit/test_*.c)
UNIT_BIN := $(patsubst tests/unit/%.c,$(BUILD)/tests/unit/%,$(UNIT_SRC))
SUPPORT_SRC := $(wildcard tests/support/*.c)
SUPPORT_OBJ := $(patsubst %.c,$(BUILD)/obj/%.o,$(SUPPORT_SRC))

$(BUILD)/tests/unit/%: $(BUILD)/obj/tests/unit/%.o $(SUPPORT_OBJ) $(LIBS)
	@mkdir -p $(@D)
	$(CC) $(LDFLAGS) $^ $(LDLIBS) $(CRITERION) -o $@
# The desktop's policy is plain C, tested without GTK.
$(BUILD)/tests/unit/test_desktop_policy: $(BUILD)/obj/node-desktop/policy.o

# Test programs on tests/support/check.h: run natively and under ASan and
# TSan (where Criterion's sandbox cannot start); those named in WASM_CHECK
# also get an emcc build run under node.
CHECK_SRC := $(wildcard tests/check/check_*.c)
CHECK_BIN := $(patsubst tests/check/%.c,$(BUILD)/tests/check/%,$(CHECK_SRC))

$(BUILD)/tests/check/%: $(BUILD)/obj/tests/check/%.o $(LIBS)
	@mkdir -p $(@D)
	$(CC) $(LDFLAGS) $^ $(LDLIBS) -o $@

# C programs that integration tests (tests/integration/*.test.mjs) drive
# against real servers they start.
ITEST_SRC := $(wildcard tests/integration/*.c)
ITEST_BIN := $(patsubst tests/integration/%.c,$(BUILD)/tests/integration/%,$(ITEST_SRC))

$(BUILD)/tests/integration/%: $(BUILD)/obj/tests/integration/%.o $(SUPPORT_OBJ) $(LIBS)
	@mkdir -p $(@D)
	$(CC) $(LDFLAGS) $^ $(LDLIBS) -o $@

# The saboteur: the native node with its results changed after computing
# (tests/integration/saboteur.c wraps the host's call of nd_compute).
$(BUILD)/tests/integration/saboteur: LDFLAGS += -Wl,--wrap=nd_compute

# Programs that are built both natively and with emcc, and compared.
WASM_SRC := $(wildcard tests/wasm/*.c)
WASM_NATIVE := $(patsubst tests/wasm/%.c,$(BUILD)/tests/wasm/%,$(WASM_SRC))

$(BUILD)/tests/wasm/%: $(BUILD)/obj/tests/wasm/%.o $(LIBS)
	@mkdir -p $(@D)
	$(CC) $(LDFLAGS) $^ $(LDLIBS) -o $@

# ---- benchmarks -------------------------------------------------------------
BENCH_SRC := $(wildcard tests/bench/bench_*.c)
BENCH_BIN := $(patsubst tests/bench/%.c,$(BUILD)/bench/%,$(BENCH_SRC))

$(BUILD)/bench/%: $(BUILD)/obj/tests/bench/%.o $(LIBS)
	@mkdir -p $(@D)
	$(CC) $(LDFLAGS) $^ $(LDLIBS) -o $@

# The verification benchmarks run the simulated farm of tests/support.
$(BUILD)/bench/bench_verify: $(BUILD)/obj/tests/bench/bench_verify.o $(BUILD)/obj/tests/support/farmsim.o $(LIBS)
	@mkdir -p $(@D)
	$(CC) $(LDFLAGS) $^ $(LDLIBS) -o $@

# The C++ Actor Framework versions of the runtime benchmarks, for
# `make bench-compare` only (Debian's libcaf-dev).
CXX ?= g++
$(BUILD)/bench/caf_bench: tests/bench/caf_bench.cpp | $(DEPS_MK)
	@mkdir -p $(@D)
	$(CXX) -std=c++17 -O2 -Wall $< -lcaf_core -lpthread -o $@

# ---- WebAssembly ------------------------------------------------------------
# The sysroot lives outside the clone, keyed by the toolchain and library
# versions; its .complete marker is the make target, so it is built once.
SYSROOT := $(shell scripts/wasm-sysroot.sh --path)
WASM_ENV := NODE_PATH=/usr/share/nodejs NODE_OPTIONS=--no-experimental-fetch
WASM_CFLAGS := -std=c17 -D_DEFAULT_SOURCE -D_POSIX_C_SOURCE=200809L $(WARN) -ffp-contract=off -O2 -msimd128 -I.
# Benchmarks that also get an emcc build (their BENCH names end in _wasm).
WASM_BENCH := ed25519 sim sim_stages proto
WASM_CHECK := rt_behaviour
WASM_OUT := $(patsubst tests/wasm/%.c,$(BUILD)/wasm/%.js,$(WASM_SRC)) \
	$(WASM_BENCH:%=$(BUILD)/wasm/bench_%.js) $(WASM_CHECK:%=$(BUILD)/wasm/check_%.js)
WASM_SUBSYS := sim proto runtime base
WASM_LIB_SRC := $(foreach s,$(WASM_SUBSYS),$(call subsys_wasm_src,$(s)))
# One emcc command compiles and links each program, so no .d files: every
# header of the subsystems it includes is a prerequisite instead.
WASM_LIB_HDR := $(foreach s,$(WASM_SUBSYS),$(wildcard $(s)/*.h)) $(wildcard tests/support/*.h)

define emcc_link
	@mkdir -p $(@D)
	$(WASM_ENV) $(EMCC) $(WASM_CFLAGS) -I$(SYSROOT)/include $< $(WASM_LIB_SRC) \
		-L$(SYSROOT)/lib -lsodium -lmsgpackc -sEXIT_RUNTIME=1 -o $@
endef
$(BUILD)/wasm/%.js: tests/wasm/%.c $(WASM_LIB_SRC) $(WASM_LIB_HDR) | $(DEPS_MK) $(SYSROOT)/.complete
	$(emcc_link)
$(BUILD)/wasm/%.js: tests/bench/%.c $(WASM_LIB_SRC) $(WASM_LIB_HDR) | $(DEPS_MK) $(SYSROOT)/.complete
	$(emcc_link)
# Check programs block in rt_system_run(), which under emcc yields to the
# host's event loop through Asyncify.
$(BUILD)/wasm/%.js: tests/check/%.c $(WASM_LIB_SRC) $(WASM_LIB_HDR) | $(DEPS_MK) $(SYSROOT)/.complete
	$(emcc_link) -sASYNCIFY -DRT_WASM_BLOCKING_RUN
# The same check programs with AddressSanitizer, run under node by the wasm
# suite: memory errors of the WebAssembly port. Asyncify saves the blocked
# call stack in a buffer; ASan's frames outgrow its default 4 KiB.
WASM_ASAN_OUT := $(WASM_CHECK:%=$(BUILD)/wasm-asan/check_%.js)
$(BUILD)/wasm-asan/%.js: tests/check/%.c $(WASM_LIB_SRC) $(WASM_LIB_HDR) | $(DEPS_MK) $(SYSROOT)/.complete
	@mkdir -p $(@D)
	$(WASM_ENV) $(EMCC) $(WASM_CFLAGS) -O1 -g -fsanitize=address -I$(SYSROOT)/include $< $(WASM_LIB_SRC) \
		-L$(SYSROOT)/lib -lsodium -lmsgpackc -sEXIT_RUNTIME=1 -sASYNCIFY -DRT_WASM_BLOCKING_RUN \
		-sINITIAL_MEMORY=268435456 -sASYNCIFY_STACK_SIZE=65536 -o $@

# The browser node (node-wasm/): the node actor, sched/ and the subsystems
# above in one module that both kinds of Web Worker load, plus the
# JavaScript glue, built into web/node/ (ignored by git) for the coordinator
# to serve next to web/contribute.html.
NODE_WASM_SRC := $(call subsys_wasm_src,actors/node) $(call subsys_wasm_src,sched) $(WASM_LIB_SRC)
NODE_WASM_HDR := $(wildcard actors/node/*.h) node-wasm/node_wasm.h $(wildcard sched/*.h) $(WASM_LIB_HDR)
NODE_WASM_JS := $(wildcard node-wasm/*.js)
NODE_WASM_OUT := web/node/simfarm-node.js $(NODE_WASM_JS:node-wasm/%=web/node/%)
NODE_WASM_LDFLAGS := -sMODULARIZE=1 -sEXPORT_NAME=SimfarmNode -sENVIRONMENT=web,worker,node \
	-sALLOW_MEMORY_GROWTH=1 -sFILESYSTEM=0 -sEXPORTED_RUNTIME_METHODS=[stringToUTF8,lengthBytesUTF8]
web/node/simfarm-node.js: node-wasm/node_wasm.c $(NODE_WASM_SRC) $(NODE_WASM_HDR) | $(DEPS_MK) $(SYSROOT)/.complete
	@mkdir -p $(@D)
	$(WASM_ENV) $(EMCC) $(WASM_CFLAGS) -I$(SYSROOT)/include $< $(NODE_WASM_SRC) \
		-L$(SYSROOT)/lib -lsodium -lmsgpackc $(NODE_WASM_LDFLAGS) -o $@
web/node/%.js: node-wasm/%.js
	@mkdir -p $(@D)
	cp $< $@
# Harnesses of the node actor (tests/wasm/node_*.c) drive it to the end in
# rt_system_run(), which under emcc yields to node's event loop.
$(BUILD)/wasm/node_%.js: tests/wasm/node_%.c $(NODE_WASM_SRC) $(NODE_WASM_HDR) | $(DEPS_MK) $(SYSROOT)/.complete
	@mkdir -p $(@D)
	$(WASM_ENV) $(EMCC) $(WASM_CFLAGS) -I$(SYSROOT)/include $< $(NODE_WASM_SRC) \
		-L$(SYSROOT)/lib -lsodium -lmsgpackc -sEXIT_RUNTIME=1 -sASYNCIFY -DRT_WASM_BLOCKING_RUN -o $@

# ---- CUDA (sim/) ----
# When nvcc exists (on PATH or in /usr/local/cuda/bin), sim/kernels.cu (the
# kernels' shared headers plus CUDA entry points) is compiled with
# -fmad=false into a fatbin that sim/cuda_native.o embeds; it is loaded through
# the driver at run time (libcuda.so.1 is opened with dlopen, so nothing
# links against CUDA). Without nvcc the CUDA backend reports
# SIM_ENOBACKEND. NVCC= (empty) turns it off.
NVCC ?= $(or $(shell command -v nvcc 2>/dev/null),$(wildcard /usr/local/cuda/bin/nvcc))
NVCC_ARCH ?= -gencode arch=compute_80,code=compute_80 -gencode arch=compute_90,code=sm_90
NVCC_FLAGS := -fmad=false -O3 -I.
ifneq ($(NVCC),)
SIM_FATBIN := $(BUILD)/sim/kernels.fatbin
SIM_CU_SRC := sim/kernels.cu sim/dev.h sim/option_dev.h sim/combat_dev.h
$(SIM_FATBIN): $(SIM_CU_SRC)
	@mkdir -p $(@D)
	$(NVCC) -fatbin $(NVCC_FLAGS) $(NVCC_ARCH) $< -o $@
# The flags, for scripts/gpu-check.sh, which may build it again.
SIM_FATBIN_FLAGS := $(SIM_FATBIN).flags
$(SIM_FATBIN_FLAGS): $(SIM_FATBIN)
	echo '$(NVCC_FLAGS) $(NVCC_ARCH)' > $@
# The same source with the same flags as PTX text, which
# tests/integration/cuda_ptx.test.mjs reads for fused or approximate
# arithmetic (the fatbin's PTX is compressed, and the toolkit here has no
# cuobjdump to read it with).
SIM_PTX := $(BUILD)/sim/kernels.ptx
$(SIM_PTX): $(SIM_CU_SRC)
	@mkdir -p $(@D)
	$(NVCC) -ptx $(NVCC_FLAGS) -arch=compute_80 $< -o $@
$(BUILD)/obj/sim/cuda_native.o: $(SIM_FATBIN)
NVCC_RELEASE := $(shell $(NVCC) --version | sed -n 's/.*release \([0-9][0-9.]*\),.*/\1/p')
$(BUILD)/obj/sim/cuda_native.o: ALL_CFLAGS += -DSIM_CUDA_FATBIN='"$(SIM_FATBIN)"' -DSIM_CUDA_TOOLKIT='"$(NVCC_RELEASE)"' \
	-DSIM_CUDA_ARCH='"$(NVCC_ARCH)"'
endif
# ---- end CUDA (sim/) ----

# ---- fuzzing ------------------------------------------------------------------
FUZZ_SRC := $(wildcard tests/fuzz/fuzz_*.c)
FUZZ_BIN := $(patsubst tests/fuzz/%.c,$(BUILD)/fuzz/%,$(FUZZ_SRC))
FUZZ_SECONDS ?= 60
FUZZ_LIB_SRC := $(foreach s,base sim proto sched,$(call subsys_src,$(s)))

$(BUILD)/fuzz/%: tests/fuzz/%.c $(FUZZ_LIB_SRC) | $(DEPS_MK)
	@mkdir -p $(@D)
	$(CLANG) -std=c17 -D_DEFAULT_SOURCE -g -O1 -I. -fsanitize=fuzzer,address,undefined \
		$(shell pkg-config --cflags msgpack libsodium) $^ \
		$(shell pkg-config --libs msgpack libsodium) $(PKG_LIBS) -lm -o $@

# ---- dependencies -----------------------------------------------------------
NPM_LOCKS := $(wildcard web/package-lock.json tests/browser/package-lock.json)

$(DEPS_MK): scripts/install-deps.sh scripts/wasm-sysroot.sh $(NPM_LOCKS)
	@mkdir -p $(@D)
	scripts/install-deps.sh --check || scripts/install-deps.sh
	@{ echo "PKG_CFLAGS := $$(pkg-config --cflags $(PKGS))"; \
	   echo "PKG_LIBS := $$(pkg-config --libs $(PKGS))"; \
	   echo "CRITERION := $$(pkg-config --cflags --libs criterion)"; \
	   echo "DESKTOP_CFLAGS := $$(pkg-config --cflags $(DESKTOP_PKGS) | sed 's/-I/-isystem /g')"; \
	   echo "DESKTOP_LIBS := $$(pkg-config --libs $(DESKTOP_PKGS))"; } > $@.tmp
	@mv $@.tmp $@

# Rebuilt only when absent (a cleaned cache), never when merely older.
$(SYSROOT)/.complete:
	scripts/wasm-sysroot.sh

# ---- targets ------------------------------------------------------------------
.PHONY: all test run wasm web bench bench-compare fuzz gpu-bundle soak asan tsan clean help deps install uninstall kernel-vectors

all: $(DEPS_MK) $(BIN) $(DESKTOP) $(BUILD)/tests/desktop/sense_probe $(UNIT_BIN) $(CHECK_BIN) $(ITEST_BIN) $(WASM_NATIVE) $(BENCH_BIN) $(NODE_WASM_OUT) $(SIM_PTX) $(SIM_FATBIN_FLAGS) ## build the simfarm binary, tests, benchmarks and the browser node

deps: ## install missing Debian/npm packages and the WebAssembly sysroot
	scripts/install-deps.sh

test: all wasm web asan tsan ## build everything and run every test suite; ends with "N passed, N failed" (and ", N skipped" where any were)
	BUILD=$(BUILD) scripts/run-tests.sh $(SUITES)

LISTEN ?=
run: all ## build, install what is missing, and run `simfarm up --allow-public-nodes` (the local farm, open to browser tabs; LISTEN=HOST:PORT: elsewhere than 127.0.0.1:8080)
	$(BIN) up --allow-public-nodes $(if $(LISTEN),--listen '$(LISTEN)')

wasm: $(DEPS_MK) $(WASM_OUT) $(WASM_ASAN_OUT) $(NODE_WASM_OUT) ## build the WebAssembly programs with emcc (sysroot built once, cached)

NPM_DIRS := $(patsubst %/package-lock.json,%,$(NPM_LOCKS))
web: $(DEPS_MK) $(NPM_DIRS:%=%/node_modules/.package-lock.json) ## install the npm packages of web/ and tests/browser (from package-lock.json)

%/node_modules/.package-lock.json: %/package-lock.json
	cd $* && npm ci --no-audit --no-fund --loglevel=error

bench: all wasm web ## run every benchmark, or one with ONLY=<name>; prints BENCH lines
	BUILD=$(BUILD) scripts/bench.sh $(ONLY)

bench-compare: $(BUILD)/bench/bench_rt $(BUILD)/bench/caf_bench ## run the runtime benchmarks and the same workloads on CAF, in one run
	BUILD=$(BUILD) scripts/bench-compare.sh

gpu-bundle: all ## pack the CUDA and OpenCL checks and their libraries into build/gpu-bundle, for a GPU machine without the build's packages (./gpu-check.sh there)
	BUILD=$(BUILD) scripts/gpu-bundle.sh

# The kernels' stage vectors are generated from the kernels' own code
# (tests/vectors/kvec.h) and committed; the tests hold every backend to them.
$(BUILD)/wasm/kernel_vectors.js: tests/vectors/kvec.h
kernel-vectors: $(BUILD)/tests/wasm/kernel_vectors ## regenerate tests/vectors/kernels.vec from the kernels (commit the result)
	$< gen > tests/vectors/kernels.vec.tmp && mv tests/vectors/kernels.vec.tmp tests/vectors/kernels.vec

fuzz: $(FUZZ_BIN) ## run each libFuzzer harness for FUZZ_SECONDS (default 60)
	BUILD=$(BUILD) FUZZ_SECONDS=$(FUZZ_SECONDS) scripts/fuzz.sh

SOAK_SEEDS ?= 1 2 3 4 5
SOAK_LOAD_S ?= 1500
soak: all ## the long reliability runs: chaos with a big job once per seed in SOAK_SEEDS, then 2,000 working sessions for SOAK_LOAD_S seconds
	@for seed in $(SOAK_SEEDS); do \
		BUILD=$(BUILD) CHAOS_SEED=$$seed CHAOS_ITEMS=$(or $(CHAOS_ITEMS),600000000) \
			scripts/run-tests.sh reliability || exit 1; \
	done
	BUILD=$(BUILD) BENCH_COORD_LOAD_S=$(SOAK_LOAD_S) $(BUILD)/bench/bench_coord

asan: $(DEPS_MK) ## build the unit and check tests with AddressSanitizer + UBSan into build/asan
	$(MAKE) --no-print-directory BUILD=$(BUILD)/asan DEPS_MK=$(DEPS_MK) SAN=address,undefined unit-tests check-tests

tsan: $(DEPS_MK) ## build the check tests with ThreadSanitizer into build/tsan
	$(MAKE) --no-print-directory BUILD=$(BUILD)/tsan DEPS_MK=$(DEPS_MK) SAN=thread check-tests

.PHONY: unit-tests check-tests
unit-tests: $(UNIT_BIN)
check-tests: $(CHECK_BIN)

# ---- install -------------------------------------------------------------------
# The binary, and the files the coordinator serves at / (the dashboard, the
# contribute page, the browser node and the parts of uPlot they load, with
# its licence): `simfarm serve` finds them beside its binary
# (PREFIX/share/simfarm/web) when it runs where there is no ./web.
PREFIX ?= /usr/local
WEB_DEST = $(DESTDIR)$(PREFIX)/share/simfarm/web
WEB_FILES := $(filter-out web/README.md web/package.json web/package-lock.json,$(wildcard web/*.*)) $(wildcard web/js/*.js)

install: $(BIN) $(DESKTOP) $(NODE_WASM_OUT) web ## install bin/simfarm, bin/simfarm-desktop (with its menu entry and icon) and share/simfarm/web under $(DESTDIR)$(PREFIX) (PREFIX=/usr/local)
	install -D -m 755 $(BIN) $(DESTDIR)$(PREFIX)/bin/simfarm
	install -D -m 755 $(DESKTOP) $(DESTDIR)$(PREFIX)/bin/simfarm-desktop
	install -D -m 644 node-desktop/simfarm-desktop.desktop $(DESTDIR)$(PREFIX)/share/applications/simfarm-desktop.desktop
	install -D -m 644 node-desktop/simfarm-desktop.svg $(DESTDIR)$(PREFIX)/share/icons/hicolor/scalable/apps/simfarm-desktop.svg
	install -d $(WEB_DEST)/js $(WEB_DEST)/node $(WEB_DEST)/node_modules/uplot/dist
	install -m 644 $(filter-out web/js/%,$(WEB_FILES)) $(WEB_DEST)/
	install -m 644 $(filter web/js/%,$(WEB_FILES)) $(WEB_DEST)/js/
	install -m 644 $(NODE_WASM_OUT) web/node/simfarm-node.wasm $(WEB_DEST)/node/
	install -m 644 web/node_modules/uplot/LICENSE $(WEB_DEST)/node_modules/uplot/
	install -m 644 web/node_modules/uplot/dist/uPlot.esm.js web/node_modules/uplot/dist/uPlot.min.css \
		$(WEB_DEST)/node_modules/uplot/dist/

uninstall: ## remove what `make install` put under $(DESTDIR)$(PREFIX)
	rm -f $(DESTDIR)$(PREFIX)/bin/simfarm $(DESTDIR)$(PREFIX)/bin/simfarm-desktop
	rm -f $(DESTDIR)$(PREFIX)/share/applications/simfarm-desktop.desktop
	rm -f $(DESTDIR)$(PREFIX)/share/icons/hicolor/scalable/apps/simfarm-desktop.svg
	rm -rf $(DESTDIR)$(PREFIX)/share/simfarm

clean: ## remove build/ and web/node/ (the WebAssembly sysroot cache outside the clone stays)
	rm -rf $(BUILD) web/node

help: ## list the targets
	@grep -hE '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | \
		sed -E 's/^([a-z-]+):.*## (.*)/\1\t\2/' | \
		awk -F'\t' '{ printf "  make %-9s %s\n", $$1, $$2 }'
	@echo "  variables: CI=true (warnings are errors), ONLY=<bench>, SUITES=\"unit wasm ...\", FUZZ_SECONDS=N, PREFIX=DIR DESTDIR=DIR"

-include $(shell find $(BUILD)/obj -name '*.d' 2>/dev/null)
