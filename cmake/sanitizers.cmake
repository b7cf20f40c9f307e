# Applied globally so that every object, including the separately compiled Asio/Beast
# library and the tests, is instrumented the same way.
if(TEC_SANITIZE STREQUAL "address")
  add_compile_options(-fsanitize=address,undefined -fno-omit-frame-pointer
                      -fno-sanitize-recover=undefined)
  add_link_options(-fsanitize=address,undefined)
elseif(TEC_SANITIZE STREQUAL "thread")
  # GCC 12 warns (-Wtsan, an error under -Werror) that TSan does not model the
  # atomic_thread_fence inside Asio's handler recycling: a remark on TSan's precision, not on
  # our code, and it fires in every file that includes Asio.
  add_compile_options(-fsanitize=thread -fno-omit-frame-pointer -Wno-tsan)
  add_link_options(-fsanitize=thread)
elseif(NOT TEC_SANITIZE STREQUAL "")
  message(FATAL_ERROR "TEC_SANITIZE must be '', 'address' or 'thread', not '${TEC_SANITIZE}'")
endif()
