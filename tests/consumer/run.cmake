# Installs the build tree into a staging prefix, then configures, builds and runs the consumer.
file(REMOVE_RECURSE ${WORK_DIR})
execute_process(COMMAND ${CMAKE_COMMAND} --install ${BUILD_DIR} --prefix ${WORK_DIR}/stage
                RESULT_VARIABLE rc)
if(rc)
  message(FATAL_ERROR "install failed: ${rc}")
endif()
execute_process(COMMAND ${CMAKE_COMMAND} -S ${SOURCE_DIR} -B ${WORK_DIR}/build -G ${GENERATOR}
                        -DCMAKE_PREFIX_PATH=${WORK_DIR}/stage
                        # The compilers (and compiler cache) of the kvtk build it consumes.
                        -DCMAKE_CXX_COMPILER=${CONSUMER_CXX_COMPILER}
                        -DCMAKE_C_COMPILER=${CONSUMER_C_COMPILER}
                        "-DCMAKE_CXX_COMPILER_LAUNCHER=${CONSUMER_LAUNCHER}"
                        "-DCMAKE_C_COMPILER_LAUNCHER=${CONSUMER_LAUNCHER}"
                        "-DCMAKE_CXX_FLAGS=${CONSUMER_CXX_FLAGS}"
                        "-DCMAKE_C_FLAGS=${CONSUMER_C_FLAGS}"
                        "-DCMAKE_EXE_LINKER_FLAGS=${CONSUMER_LINKER_FLAGS}"
                        RESULT_VARIABLE rc)
if(rc)
  message(FATAL_ERROR "configure failed: ${rc}")
endif()
execute_process(COMMAND ${CMAKE_COMMAND} --build ${WORK_DIR}/build RESULT_VARIABLE rc)
if(rc)
  message(FATAL_ERROR "build failed: ${rc}")
endif()
foreach(program consumer consumer_policies consumer_mixed consumer_c)
  execute_process(COMMAND ${WORK_DIR}/build/${program} RESULT_VARIABLE rc)
  if(rc)
    message(FATAL_ERROR "${program} failed: ${rc}")
  endif()
endforeach()
