# Applied globally so that every object, including the separately compiled Asio/Beast
# library and the tests, is instrumented the same way.
# The `asan` and `tsan` presets compile with clang 14, which builds this code in half the time
# GCC 12 takes (a test file with ASan at -O0 -g1: 40 s against 80 s); GCC builds the default
# preset and the image, so the tests run under two compilers. Both work with either compiler.
if(TEC_SANITIZE STREQUAL "address")
  add_compile_options(-fsanitize=address,undefined -fno-omit-frame-pointer
                      -fno-sanitize-recover=undefined)
  if(CMAKE_CXX_COMPILER_ID STREQUAL "Clang")
    # clang 14's check of indirect call types cannot compile our coroutines ("Cannot represent
    # a difference across sections"), as in the fuzz preset; every other UBSan check stays on.
    add_compile_options(-fno-sanitize=function)
  endif()
  add_link_options(-fsanitize=address,undefined)
elseif(TEC_SANITIZE STREQUAL "thread")
  add_compile_options(-fsanitize=thread -fno-omit-frame-pointer)
  if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
    # GCC 12 warns (-Wtsan, an error under -Werror) that TSan does not model the
    # atomic_thread_fence inside Asio's handler recycling: a remark on TSan's precision, not on
    # our code, and it fires in every file that includes Asio.
    add_compile_options(-Wno-tsan)
  endif()
  add_link_options(-fsanitize=thread)
elseif(NOT TEC_SANITIZE STREQUAL "")
  message(FATAL_ERROR "TEC_SANITIZE must be '', 'address' or 'thread', not '${TEC_SANITIZE}'")
endif()
