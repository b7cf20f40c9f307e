# Applied globally so that every object, including the separately compiled Asio/Beast
# library and the tests, is instrumented the same way.
if(TEC_SANITIZE STREQUAL "address")
  add_compile_options(-fsanitize=address,undefined -fno-omit-frame-pointer
                      -fno-sanitize-recover=undefined)
  add_link_options(-fsanitize=address,undefined)
elseif(TEC_SANITIZE STREQUAL "thread")
  add_compile_options(-fsanitize=thread -fno-omit-frame-pointer)
  add_link_options(-fsanitize=thread)
elseif(NOT TEC_SANITIZE STREQUAL "")
  message(FATAL_ERROR "TEC_SANITIZE must be '', 'address' or 'thread', not '${TEC_SANITIZE}'")
endif()
