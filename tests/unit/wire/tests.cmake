# The RoCE v2 wire codec (src/wire): unit tests, and the codec's packets
# checked by the independent checker in ../shared/wire (label: protocol).
set(UROCE_WIRE_SAMPLES ${PROJECT_SOURCE_DIR}/../shared/wire)

uroce_gtest(wire_packet_test LABEL unit TIMEOUT 30
            SOURCES ${CMAKE_CURRENT_LIST_DIR}/packet_test.cc ${CMAKE_CURRENT_LIST_DIR}/captures_test.cc)
target_link_libraries(wire_packet_test PRIVATE uroce_wire PkgConfig::PCAP)  # reads captures with libpcap
set_property(TEST wire_packet_test APPEND PROPERTY ENVIRONMENT "UROCE_WIRE_SAMPLES=${UROCE_WIRE_SAMPLES}/samples")

add_executable(wire_write_samples ${CMAKE_CURRENT_LIST_DIR}/write_samples.cc)
target_link_libraries(wire_write_samples PRIVATE uroce_wire)
add_test(NAME wire_samples_roce_check
         COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/check_samples.sh $<TARGET_FILE:wire_write_samples>
                 ${UROCE_WIRE_SAMPLES})
set_tests_properties(wire_samples_roce_check PROPERTIES LABELS protocol TIMEOUT 60 SKIP_RETURN_CODE 77)
add_test(NAME wire_samples_tshark
         COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/check_samples_tshark.sh $<TARGET_FILE:wire_write_samples>
                 ${UROCE_WIRE_SAMPLES})
set_tests_properties(wire_samples_tshark PROPERTIES LABELS protocol TIMEOUT 120 SKIP_RETURN_CODE 77)

# The CM's MADs (src/wire/cm_mad.h): round trips, and Wireshark's dissector
# decoding the codec's frames into the values it was given.
uroce_gtest(wire_cm_mad_test LABEL unit TIMEOUT 30 SOURCES ${CMAKE_CURRENT_LIST_DIR}/cm_mad_test.cc)
target_link_libraries(wire_cm_mad_test PRIVATE uroce_wire)
uroce_gtest(wire_caps_mad_test LABEL unit TIMEOUT 30 SOURCES ${CMAKE_CURRENT_LIST_DIR}/caps_mad_test.cc)
target_link_libraries(wire_caps_mad_test PRIVATE uroce_wire)
add_executable(wire_write_cm_samples ${CMAKE_CURRENT_LIST_DIR}/write_cm_samples.cc)
target_link_libraries(wire_write_cm_samples PRIVATE uroce_wire)
add_test(NAME wire_cm_samples_tshark
         COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/check_cm_samples_tshark.sh $<TARGET_FILE:wire_write_cm_samples>
                 ${UROCE_WIRE_SAMPLES})
set_tests_properties(wire_cm_samples_tshark PROPERTIES LABELS protocol TIMEOUT 120 SKIP_RETURN_CODE 77)

# What a flow steering rule matches in a frame, and RSS's Toeplitz hash.
uroce_gtest(wire_flow_key_test LABEL unit TIMEOUT 30 SOURCES ${CMAKE_CURRENT_LIST_DIR}/flow_key_test.cc)
target_link_libraries(wire_flow_key_test PRIVATE uroce_contract)
