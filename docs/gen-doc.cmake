# cmake -DEXE=bin/meshrun -DTOOL=meshrun -DPROSE=docs/man/meshrun.1.in -DOUT=build/docs
#       -P docs/gen-doc.cmake
# Runs the tool's hidden doc flags and writes OUT/man/TOOL.1 (the generated page
# with the line `.\" @PROSE@` replaced by PROSE), OUT/reference/TOOL.md,
# OUT/completion/TOOL (bash) and OUT/zsh-completion/_TOOL. Fails if the tool
# fails or prints to stderr.
cmake_minimum_required(VERSION 3.18)
foreach(v EXE TOOL PROSE OUT)
  if(NOT DEFINED ${v})
    message(FATAL_ERROR "gen-doc.cmake: -D${v}=... is required")
  endif()
endforeach()
file(MAKE_DIRECTORY ${OUT}/man ${OUT}/reference ${OUT}/completion ${OUT}/zsh-completion ${OUT}/gen)

function(run_doc flag file)
  execute_process(COMMAND ${EXE} ${flag} OUTPUT_FILE ${file} ERROR_VARIABLE err
                  RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0 OR NOT err STREQUAL "")
    message(FATAL_ERROR "${EXE} ${flag} failed (${rc}): ${err}")
  endif()
endfunction()

run_doc(--help-man ${OUT}/gen/${TOOL}.1)
run_doc(--help-markdown ${OUT}/reference/${TOOL}.md)
run_doc(--help-bash ${OUT}/completion/${TOOL})
run_doc(--help-zsh ${OUT}/zsh-completion/_${TOOL})

file(READ ${OUT}/gen/${TOOL}.1 page)
file(READ ${PROSE} prose)
# Replace the whole line holding @PROSE@ (a roff comment) with the prose.
string(FIND "${page}" "@PROSE@" at)
if(at EQUAL -1)
  message(FATAL_ERROR "${EXE} --help-man: no @PROSE@ line to put ${PROSE} at")
endif()
string(SUBSTRING "${page}" 0 ${at} head)
string(FIND "${head}" "\n" nl REVERSE)
math(EXPR head_len "${nl} + 1")
string(SUBSTRING "${page}" 0 ${head_len} head)
string(SUBSTRING "${page}" ${at} -1 tail)
string(FIND "${tail}" "\n" nl)
math(EXPR nl "${nl} + 1")
string(SUBSTRING "${tail}" ${nl} -1 tail)
file(WRITE ${OUT}/man/${TOOL}.1 "${head}${prose}${tail}")
