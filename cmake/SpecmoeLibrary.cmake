# specmoe_add_folder_library(NAME FOLDER [DEPS ...])
# Every folder of the layout is one static library made of its *.cpp files; files named
# *_avx2.cpp are compiled with AVX2/FMA/F16C enabled and are only called after a runtime
# CPU check, so the binary still runs on CPUs without AVX2.
function(specmoe_add_folder_library name folder)
  cmake_parse_arguments(ARG "" "" "DEPS" ${ARGN})
  file(GLOB_RECURSE srcs CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/${folder}/*.cpp)
  list(FILTER srcs EXCLUDE REGEX "/cli/")
  if(NOT srcs)  # a folder whose code has not landed yet still gives a linkable library
    set(empty ${CMAKE_BINARY_DIR}/empty_${name}.cpp)
    file(WRITE ${empty} "")
    set(srcs ${empty})
  endif()
  add_library(${name} STATIC ${srcs})
  target_include_directories(${name} PUBLIC ${CMAKE_SOURCE_DIR})
  target_link_libraries(${name} PUBLIC ${ARG_DEPS})
  foreach(src ${srcs})
    if(src MATCHES "_avx2\\.cpp$")
      set_source_files_properties(${src} PROPERTIES COMPILE_OPTIONS "-mavx2;-mfma;-mf16c")
    endif()
  endforeach()
endfunction()
