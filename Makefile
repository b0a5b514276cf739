# airlock: the two commands a new user needs are `make demo` and `make test`.
BUILD ?= build
PY := /usr/bin/python3

.PHONY: all setup build demo test unit integration bench fuzz lint clean format

all: build

setup:
	@./scripts/setup

$(BUILD)/build.ninja:
	meson setup $(BUILD) --buildtype=debugoptimized >/dev/null

# Quiet when it builds; the compiler's own words when it does not (ninja prints them on
# stdout, which a plain >/dev/null would swallow, leaving only "Error 1").
build: setup $(BUILD)/build.ninja
	@ninja -C $(BUILD) >$(BUILD)/ninja.log 2>&1 || { cat $(BUILD)/ninja.log; exit 1; }

demo: build
	@./scripts/demo $(BUILD)/airlock

test: build
	@./scripts/test $(BUILD)

unit: build
	meson test -C $(BUILD) --print-errorlogs

integration: build
	$(PY) -m pytest -q tests/integration

bench: build
	./bench/run

FUZZ_SECONDS ?= 60
fuzz: setup
	./scripts/fuzz $(FUZZ_SECONDS)

# cppcheck, shellcheck and clang-tidy (needs the build's compile_commands.json).
lint: $(BUILD)/build.ninja
	@./scripts/lint $(BUILD)

format:
	clang-format -i $$(git ls-files '*.c' '*.h')

clean:
	rm -rf $(BUILD) build-fuzz build-asan
