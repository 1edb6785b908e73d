# Included before each project() of llama-cpp-python's build (CMAKE_PROJECT_INCLUDE_BEFORE,
# set by .ci/install).  llama-cpp-python forces llama.cpp's common library on (a cache
# entry); its Python bindings load only libllama and libggml, and the common library
# (argument parsing, chat templates, sampling helpers: benchmarks/perf/bench_llama_build.py
# counts its compile steps) serves llama.cpp's own tools and examples, which this build
# leaves out.  A normal variable wins over the cache entry (CMake policies CMP0077 and
# CMP0126, both NEW at the versions these projects require), so this leaves it out.
set(LLAMA_BUILD_COMMON OFF)
