# Runs one libFuzzer target for ctest (tests/fuzz/CMakeLists.txt):
#   cmake -DFUZZER=<binary> -DNAME=<target> -DWORK=<folder> -DREGRESSIONS=<folder>
#         -DMODE=fuzz -DSEEDS=<folder> -DSECONDS=<n> [-DDICT=<file>] -P run_fuzzer.cmake
#   cmake ... -DMODE=regressions -P run_fuzzer.cmake
# MODE=fuzz copies the seeds into WORK/corpus (new inputs go there, not into the source tree),
# fuzzes that plus REGRESSIONS for SECONDS, and prints libFuzzer's "Done N runs" line; crash
# inputs land in WORK/artifacts. MODE=regressions runs each file of REGRESSIONS once. The whole
# output is kept in WORK/<mode>.log; a failure prints its end (the sanitizer report).
cmake_minimum_required(VERSION 3.25)

foreach(var FUZZER NAME WORK REGRESSIONS MODE)
  if(NOT DEFINED ${var})
    message(FATAL_ERROR "run_fuzzer.cmake: -D${var}=... is missing")
  endif()
endforeach()

set(limits -rss_limit_mb=2048 -timeout=10)
file(MAKE_DIRECTORY ${WORK}/artifacts)
set(log ${WORK}/${MODE}.log)

# Regression inputs: every file but dotfiles (.gitkeep) and READMEs.
file(GLOB regression_inputs LIST_DIRECTORIES false ${REGRESSIONS}/*)
list(FILTER regression_inputs EXCLUDE REGEX "/(\\.[^/]*|README[^/]*)$")

if(MODE STREQUAL "regressions")
  list(LENGTH regression_inputs count)
  if(count EQUAL 0)
    message("${NAME}: no regression inputs in ${REGRESSIONS}")
    return()
  endif()
  set(args ${limits} -artifact_prefix=${WORK}/artifacts/ ${regression_inputs})
elseif(MODE STREQUAL "fuzz")
  foreach(var SEEDS SECONDS)
    if(NOT DEFINED ${var})
      message(FATAL_ERROR "run_fuzzer.cmake: -D${var}=... is missing")
    endif()
  endforeach()
  # The writable corpus: the seeds, plus what earlier runs in this build folder found.
  file(MAKE_DIRECTORY ${WORK}/corpus)
  file(GLOB seeds LIST_DIRECTORIES false ${SEEDS}/*)
  if(seeds)
    file(COPY ${seeds} DESTINATION ${WORK}/corpus)
  endif()
  set(args -max_total_time=${SECONDS} ${limits} -print_final_stats=1
    -artifact_prefix=${WORK}/artifacts/)
  if(DICT)
    list(APPEND args -dict=${DICT})
  endif()
  list(APPEND args ${WORK}/corpus)
  if(regression_inputs)
    list(APPEND args ${REGRESSIONS}) # read, never written: new inputs go to the first folder
  endif()
else()
  message(FATAL_ERROR "run_fuzzer.cmake: MODE must be fuzz or regressions, not '${MODE}'")
endif()

list(JOIN args " " shown)
message("${NAME}: ${FUZZER} ${shown}")
execute_process(COMMAND ${FUZZER} ${args}
  WORKING_DIRECTORY ${WORK}
  OUTPUT_FILE ${log} ERROR_FILE ${log}
  RESULT_VARIABLE rc)

# Only the summary lines are read as a list: libFuzzer's other lines (dictionary entries, unit
# contents) may hold an unbalanced '[', which stops CMake from splitting a list at ';'.
file(STRINGS ${log} summary REGEX
  "^(Done [0-9]+ runs in [0-9]+ second|INFO: seed corpus|stat::number_of_executed_units|stat::peak_rss_mb|Executed .* in [0-9]+ ms)")
list(JOIN summary "\n" summary_text)

if(NOT rc EQUAL 0)
  # The end of the output holds the sanitizer or libFuzzer report and the crash input's name.
  file(READ ${log} output)
  string(LENGTH "${output}" n)
  set(first 0)
  if(n GREATER 16000)
    math(EXPR first "${n} - 16000")
  endif()
  string(SUBSTRING "${output}" ${first} -1 tail)
  message("${tail}")
  message(FATAL_ERROR "${NAME} (${MODE}) failed with ${rc}; full output: ${log}; "
    "crash inputs: ${WORK}/artifacts/ (minimise with ${FUZZER} -minimize_crash=1 -runs=10000 "
    "<input>, then add it to ${REGRESSIONS}/)")
endif()

message("${summary_text}")
if(MODE STREQUAL "fuzz")
  string(REGEX MATCH "Done [0-9]+ runs in [0-9]+ second\\(s\\)" done "${summary_text}")
  if(NOT done)
    message(FATAL_ERROR "${NAME}: libFuzzer ended without its 'Done N runs' line; see ${log}")
  endif()
  message("${NAME}: ${done}")
endif()
