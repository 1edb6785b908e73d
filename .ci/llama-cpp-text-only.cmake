# Included before each project() of llama-cpp-python's build (CMAKE_PROJECT_INCLUDE_BEFORE,
# set by .ci/install).  llama-cpp-python forces llama.cpp's common library on (a cache
# entry); its Python bindings load only libllama and libggml, and the common library
# (argument parsing, chat templates, sampling helpers: benchmarks/perf/bench_llama_build.py
# counts its compile steps) serves llama.cpp's own tools and examples, which this build
# leaves out.  A normal variable wins over the cache entry (CMake policies CMP0077 and
# CMP0126, both NEW at the versions these projects require), so this leaves it out.
set(LLAMA_BUILD_COMMON OFF)

# libllama (the model loader, the quantizer, the graph builders of every architecture, the
# caches of architectures bcas never loads) is compiled at -O1, its hot paths at -O3: the
# sampler, the grammar (constrained decoding), the tokenizer (vocab, unicode), the context,
# graph, batch and KV cache. The tensor kernels (ggml) keep the build's -O3. What it saves
# and costs, measured with llama-cpp-python 0.3.36: docs/measured.md, "The llama.cpp build".
# The options go on when the llama.cpp directory's own project() runs, deferred to the end
# of that directory so the `llama` target exists.
if(CMAKE_CURRENT_SOURCE_DIR MATCHES "/vendor/llama\\.cpp$")
  function(_bcas_lean_optimization)
    if(TARGET llama)
      target_compile_options(llama PRIVATE -O1)
      set(_hot)
      foreach(_name llama-sampler llama-grammar llama-vocab unicode llama-context llama-graph llama-kv-cache llama-batch)
        list(APPEND _hot ${CMAKE_CURRENT_SOURCE_DIR}/src/${_name}.cpp)  # full paths: relative ones name this directory's
      endforeach()
      set_source_files_properties(${_hot} DIRECTORY ${CMAKE_CURRENT_SOURCE_DIR}/src PROPERTIES COMPILE_OPTIONS -O3)
    endif()
  endfunction()
  cmake_language(DEFER CALL _bcas_lean_optimization)
endif()
