# Fuzz targets (label: fuzz), each with a checked-in corpus in corpus/<name>/.
#  - Normal builds (gcc, and the ASan tree): the target is linked with a
#    replay main and CTest runs the corpus through it (fuzz_<name>_replay).
#  - -DUROCE_FUZZ=ON with clang (scripts/test.sh builds that tree with
#    `--target fuzz_all`): libFuzzer + ASan + UBSan, and CTest runs each
#    target for UROCE_FUZZ_SECONDS on a scratch copy of its corpus.
#  - corpus/transport, corpus/control and corpus/cm are written by gen_<name>_corpus.py.
set(UROCE_FUZZ_TARGETS wire_decode transport control cm)
# What each target links: the codec alone, or the transport state machines.
set(UROCE_FUZZ_LIBS_wire_decode uroce_wire)
set(UROCE_FUZZ_LIBS_transport uroce_core)
set(UROCE_FUZZ_LIBS_control uroce_daemon)
set(UROCE_FUZZ_LIBS_cm uroce_daemon)
set(UROCE_FUZZ_SECONDS 30 CACHE STRING "Seconds each libFuzzer target runs under CTest")
set(UROCE_FUZZ_DIR ${CMAKE_CURRENT_LIST_DIR})

if(UROCE_FUZZ)
  add_custom_target(fuzz_all)
endif()
foreach(t ${UROCE_FUZZ_TARGETS})
  set(corpus ${UROCE_FUZZ_DIR}/corpus/${t})
  if(UROCE_FUZZ)
    add_executable(fuzz_${t} ${UROCE_FUZZ_DIR}/${t}_fuzz.cc)
    target_link_options(fuzz_${t} PRIVATE -fsanitize=fuzzer)
    target_link_libraries(fuzz_${t} PRIVATE ${UROCE_FUZZ_LIBS_${t}})
    add_dependencies(fuzz_all fuzz_${t})
    add_test(NAME fuzz_${t}
             COMMAND bash -c "d=$(mktemp -d) && trap 'rm -rf $d' EXIT && cp ${corpus}/* $d/ && \
exec $<TARGET_FILE:fuzz_${t}> -max_total_time=${UROCE_FUZZ_SECONDS} -timeout=10 -rss_limit_mb=2048 $d")
    set_tests_properties(fuzz_${t} PROPERTIES LABELS fuzz TIMEOUT 300)
  else()
    add_executable(fuzz_${t}_replay ${UROCE_FUZZ_DIR}/${t}_fuzz.cc ${UROCE_FUZZ_DIR}/replay_main.cc)
    target_link_libraries(fuzz_${t}_replay PRIVATE ${UROCE_FUZZ_LIBS_${t}})
    add_test(NAME fuzz_${t}_replay COMMAND fuzz_${t}_replay ${corpus})
    set_tests_properties(fuzz_${t}_replay PROPERTIES LABELS fuzz TIMEOUT 60)
  endif()
endforeach()
