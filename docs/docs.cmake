# docs/docs.cmake - man page, reference page and bash completion of a tool,
# generated in the build from the tool's option tables (its hidden
# --help-man / --help-markdown / --help-bash, see src/common/optdoc.h) plus the
# hand-written prose in docs/man/TOOL.1.in.
#
#   include(${PROJECT_SOURCE_DIR}/docs/docs.cmake)
#   meshrun_docs(<target> <tool>)
#
# Outputs under <build>/docs/: man/TOOL.1, reference/TOOL.md, completion/TOOL
# (bash), zsh-completion/_TOOL. Installs the man page to share/man/man1, the
# completions to share/bash-completion/completions and share/zsh/site-functions
# (where Homebrew's and Debian's zsh look). `cmake --build B --target update-docs`
# copies the generated reference pages over docs/reference/ (the committed
# copies; tests/integration/docs checks that they are current).
#
#   meshrun_doc_blocks(<target> <flag> <doc>)
#
# Generated blocks inside a hand-written page docs/<doc> (e.g. the environment
# tables of contracts.md, from `meshrun --help-env`): <build>/docs/blocks/<doc>
# holds them, `update-docs` splices them into docs/<doc>, and the test
# integration/docs_contracts checks that the page holds them as generated.
include_guard(GLOBAL)

add_custom_target(update-docs)

function(meshrun_docs target tool)
  # The pages come from running the tool: a cross-built one does not run here.
  if(CMAKE_CROSSCOMPILING AND NOT CMAKE_CROSSCOMPILING_EMULATOR)
    message(STATUS "${tool}: no man page, reference or completion (cross-compiling: the tool cannot run here)")
    return()
  endif()
  set(MESHRUN_DOCS_DIR ${CMAKE_CURRENT_FUNCTION_LIST_DIR})
  set(out ${PROJECT_BINARY_DIR}/docs)
  set(prose ${MESHRUN_DOCS_DIR}/man/${tool}.1.in)
  add_custom_command(
    OUTPUT ${out}/man/${tool}.1 ${out}/reference/${tool}.md ${out}/completion/${tool}
           ${out}/zsh-completion/_${tool}
    COMMAND ${CMAKE_COMMAND} -DEXE=$<TARGET_FILE:${target}> -DTOOL=${tool}
            -DPROSE=${prose} -DOUT=${out} -P ${MESHRUN_DOCS_DIR}/gen-doc.cmake
    DEPENDS ${target} ${prose} ${MESHRUN_DOCS_DIR}/gen-doc.cmake
    COMMENT "Generating the man page, reference and completion of ${tool}"
    VERBATIM)
  add_custom_target(${tool}-docs ALL
    DEPENDS ${out}/man/${tool}.1 ${out}/reference/${tool}.md ${out}/completion/${tool}
            ${out}/zsh-completion/_${tool})
  add_custom_target(update-docs-${tool}
    COMMAND ${CMAKE_COMMAND} -E copy ${out}/reference/${tool}.md
            ${MESHRUN_DOCS_DIR}/reference/${tool}.md
    DEPENDS ${tool}-docs VERBATIM)
  add_dependencies(update-docs update-docs-${tool})
  install(FILES ${out}/man/${tool}.1 DESTINATION ${CMAKE_INSTALL_MANDIR}/man1)
  install(FILES ${out}/completion/${tool}
          DESTINATION ${CMAKE_INSTALL_DATAROOTDIR}/bash-completion/completions)
  install(FILES ${out}/zsh-completion/_${tool}
          DESTINATION ${CMAKE_INSTALL_DATAROOTDIR}/zsh/site-functions)
endfunction()

function(meshrun_doc_blocks target flag doc)
  if(CMAKE_CROSSCOMPILING AND NOT CMAKE_CROSSCOMPILING_EMULATOR)
    return()    # as in meshrun_docs: a cross-built tool cannot run here
  endif()
  set(MESHRUN_DOCS_DIR ${CMAKE_CURRENT_FUNCTION_LIST_DIR})
  set(out ${PROJECT_BINARY_DIR}/docs/blocks/${doc})
  add_custom_command(
    OUTPUT ${out}
    COMMAND ${CMAKE_COMMAND} -DEXE=$<TARGET_FILE:${target}> -DFLAG=${flag} -DOUT=${out}
            -P ${MESHRUN_DOCS_DIR}/gen-block.cmake
    DEPENDS ${target} ${MESHRUN_DOCS_DIR}/gen-block.cmake
    COMMENT "Generating the blocks of docs/${doc} (${flag})"
    VERBATIM)
  string(MAKE_C_IDENTIFIER ${doc} id)
  add_custom_target(blocks-${id} ALL DEPENDS ${out})
  add_custom_target(update-docs-blocks-${id}
    COMMAND ${CMAKE_COMMAND} -DBLOCKS=${out} -DDOC=${MESHRUN_DOCS_DIR}/${doc}
            -P ${MESHRUN_DOCS_DIR}/splice-blocks.cmake
    DEPENDS blocks-${id} VERBATIM)
  add_dependencies(update-docs update-docs-blocks-${id})
endfunction()
