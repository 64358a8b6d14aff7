# Precompiled headers. Asio, spdlog, fmt and nlohmann/json take 1-5 s to parse in
# every file that includes them (measured with g++ 12: spdlog.h alone 4.6 s); parsed once per
# build folder, they take 2-5 s off each file (daemon/server.cpp: 18.9 -> 13.4 s).
#
# One precompiled header per build folder (meith_pch), reused by every library and program:
# they share the global compile flags, which a reused header needs. -Winvalid-pch turns a
# header the compiler would silently skip into an error under -Werror. Tests reuse a second
# one that adds Catch2 (tests/CMakeLists.txt).
# GCC and clang (the fuzz build): clang refuses a precompiled header built with -D macros a
# file does not have, which the global definitions below rule out.
option(MEITH_PCH "Precompile the heavy third-party headers (faster builds)" ON)

add_compile_options($<$<CXX_COMPILER_ID:GNU>:-Winvalid-pch>)

if(MEITH_PCH)
  # A precompiled header is used only where the macros it was built with are defined alike
  # (GCC: "not used because X not defined"), so the libraries' configuration macros
  # (ASIO_STANDALONE, SPDLOG_FMT_EXTERNAL, ...) become every file's.
  foreach(lib meith_asio simdjson::simdjson fmt::fmt spdlog::spdlog nlohmann_json::nlohmann_json)
    get_target_property(defs ${lib} INTERFACE_COMPILE_DEFINITIONS)
    if(defs)
      add_compile_definitions(${defs})
    endif()
  endforeach()
  # -pthread defines _REENTRANT; Threads::Threads gives it to some files and not others.
  add_compile_options(-pthread)
  add_library(meith_pch OBJECT ${CMAKE_CURRENT_LIST_DIR}/precompiled.cpp)
  target_link_libraries(meith_pch PRIVATE meith::asio simdjson::simdjson fmt::fmt spdlog::spdlog
    nlohmann_json::nlohmann_json)
  target_precompile_headers(meith_pch PRIVATE ${CMAKE_CURRENT_LIST_DIR}/precompiled.hpp)
endif()

# meith_reuse_pch(FROM <pch target> DIRECTORY <dir>...): every static library and program
# defined in <dir> and below reuses <pch target>'s header, except targets whose property
# MEITH_NO_PCH is set (a program kept minimal, a file that must define a macro first).
function(meith_reuse_pch)
  cmake_parse_arguments(arg "" "FROM" "DIRECTORY" ${ARGN})
  if(NOT MEITH_PCH)
    return()
  endif()
  foreach(dir IN LISTS arg_DIRECTORY)
    get_property(targets DIRECTORY ${dir} PROPERTY BUILDSYSTEM_TARGETS)
    foreach(target IN LISTS targets)
      get_target_property(type ${target} TYPE)
      get_target_property(opt_out ${target} MEITH_NO_PCH)
      if(target STREQUAL arg_FROM OR opt_out)
        continue()
      endif()
      if(type STREQUAL "STATIC_LIBRARY" OR type STREQUAL "EXECUTABLE")
        target_precompile_headers(${target} REUSE_FROM ${arg_FROM})
      endif()
    endforeach()
    get_property(subdirs DIRECTORY ${dir} PROPERTY SUBDIRECTORIES)
    if(subdirs)
      meith_reuse_pch(FROM ${arg_FROM} DIRECTORY ${subdirs})
    endif()
  endforeach()
endfunction()
