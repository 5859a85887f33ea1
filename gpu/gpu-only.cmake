# The GPU-only configuration (cmake -DRCKPT_GPU_ONLY=ON): the record
# formats, the codec and the CUDA kernels, with test_gpu_parity and
# bench_gpu, for a machine with a device and none of the project's other
# packages (the lent H100/H200 machines: CUDA, CMake and Python, no Ceph).
# Included by the top CMakeLists.txt once CUDA is enabled; nothing here needs
# librados, a cluster, OpenSSL, TurboJPEG or Python.
#
# What it does need: zstd (records), OpenSSL's libcrypto (the manifest's
# SHA-256), jansson (safetensors) and cmocka (the test). Where the machine
# lacks them, gpu/carry-deps.sh unpacks Debian's packages of them into a
# folder that travels with the tree, and CMAKE_PREFIX_PATH names it. zstd,
# libcrypto and jansson are linked from their static libraries, so the
# programs need none of them at run time; cmocka's shared library is found
# through the build tree's RPATH.
if(NOT RCKPT_HAVE_CUDA)
  message(FATAL_ERROR "RCKPT_GPU_ONLY needs nvcc (/usr/local/cuda/bin or PATH)")
endif()

find_path(ZSTD_INCLUDE_DIR zstd.h)
find_library(ZSTD_STATIC NAMES libzstd.a)
find_path(CRYPTO_INCLUDE_DIR openssl/sha.h)
# Debian keeps OpenSSL's configuration header under the multiarch folder
find_path(CRYPTO_ARCH_INCLUDE_DIR openssl/configuration.h PATH_SUFFIXES include/${CMAKE_LIBRARY_ARCHITECTURE})
find_library(CRYPTO_STATIC NAMES libcrypto.a)
find_path(JANSSON_INCLUDE_DIR jansson.h)
find_library(JANSSON_STATIC NAMES libjansson.a)
find_path(CMOCKA_INCLUDE_DIR cmocka.h)
find_library(CMOCKA_LIBRARY cmocka)
foreach(v ZSTD_INCLUDE_DIR ZSTD_STATIC CRYPTO_INCLUDE_DIR CRYPTO_ARCH_INCLUDE_DIR CRYPTO_STATIC JANSSON_INCLUDE_DIR JANSSON_STATIC CMOCKA_INCLUDE_DIR CMOCKA_LIBRARY)
  if(NOT ${v})
    message(FATAL_ERROR "RCKPT_GPU_ONLY: ${v} not found. Install libzstd-dev, libssl-dev, "
                        "libjansson-dev and libcmocka-dev, or unpack them with gpu/carry-deps.sh DIR and configure with "
                        "-DCMAKE_PREFIX_PATH=DIR/usr")
  endif()
endforeach()
find_package(Threads REQUIRED)
message(STATUS "rckpt ${PROJECT_VERSION}: GPU-only (no librados), CUDA architectures "
               "${CMAKE_CUDA_ARCHITECTURES}; zstd ${ZSTD_STATIC}, libcrypto ${CRYPTO_STATIC}, jansson ${JANSSON_STATIC}, "
               "cmocka ${CMOCKA_LIBRARY}")

set(RCKPT_LIB_DIRS ${PROJECT_SOURCE_DIR}/client/lib ${PROJECT_SOURCE_DIR}/client/lib/codec)
enable_testing()
add_subdirectory(gpu)

# The record formats the codec writes (formats/), and the codec
# (client/lib/codec): as client/CMakeLists.txt builds them into librckpt.
set(_f ${PROJECT_SOURCE_DIR}/formats)
set(_c ${PROJECT_SOURCE_DIR}/client/lib/codec)
add_library(rckpt_gpu_codec STATIC
  ${_f}/rckpt_buf.c ${_f}/rckpt_crc32c.c ${_f}/rckpt_ctx.c ${_f}/rckpt_estream.c ${_f}/rckpt_huff.c ${_f}/rckpt_istream.c ${_f}/rckpt_planes.c
  ${_f}/rckpt_manifest.c ${_f}/rckpt_record.c ${_f}/rckpt_record_geometry.c ${_f}/rckpt_store_wire.c ${_f}/rckpt_store_names.c ${_f}/rckpt_store_summary.c ${_f}/rckpt_store_attach.c ${_f}/rckpt_wire.c ${_f}/rckpt_wire_fields.c ${_f}/rckpt_wire_version.c
  ${_c}/rckpt_sketch.c ${_c}/rckpt_kmeans.c ${_c}/rckpt_quant.c ${_c}/rckpt_safetensors.c ${_c}/rckpt_tset.c
  ${_c}/rckpt_codec.c ${_c}/ckenc_handle.c ${_c}/ckenc_step.c ${_c}/ckenc_state.c ${_c}/ckenc_values.c ${_c}/ckenc_search.c ${_c}/ckenc_judge.c ${_c}/ckenc_emit.c ${_c}/ckenc_partial.c
  ${_c}/rckpt_layout.c ${_c}/ckenc_resume.c ${_c}/ckenc_optim.c ${_c}/ckenc_cpu.c ${_c}/ckenc_par.c ${_c}/rckpt_par.c
  ${_c}/ckenc_cuda.c ${_c}/rckpt_ckdec.c ${_c}/rckpt_gpuenc.c ${_c}/rckpt_stepfile.c ${_c}/rckpt_files.c
  $<TARGET_OBJECTS:rckpt_gpu>)
target_include_directories(rckpt_gpu_codec
  PUBLIC ${PROJECT_SOURCE_DIR}/client/include ${RCKPT_LIB_DIRS} ${_f} ${PROJECT_SOURCE_DIR}/gpu/include
         ${CMAKE_BINARY_DIR}/generated
  PRIVATE ${ZSTD_INCLUDE_DIR} ${CRYPTO_INCLUDE_DIR} ${CRYPTO_ARCH_INCLUDE_DIR} ${JANSSON_INCLUDE_DIR})
target_compile_definitions(rckpt_gpu_codec PRIVATE RCKPT_BUILDING_LIBRARY)
target_link_libraries(rckpt_gpu_codec PUBLIC ${ZSTD_STATIC} ${CRYPTO_STATIC} ${JANSSON_STATIC} CUDA::cudart_static ${CMAKE_DL_LIBS}
                                             Threads::Threads m)
rckpt_target(rckpt_gpu_codec)

add_executable(test_gpu_parity ${PROJECT_SOURCE_DIR}/tests/gpu/test_gpu_parity.c)
target_include_directories(test_gpu_parity PRIVATE ${CMOCKA_INCLUDE_DIR} ${PROJECT_SOURCE_DIR}/tests/common)
target_link_libraries(test_gpu_parity PRIVATE rckpt_gpu_codec ${CMOCKA_LIBRARY})
rckpt_target(test_gpu_parity)
add_test(NAME test_gpu_parity COMMAND test_gpu_parity)
set_tests_properties(test_gpu_parity PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 1200)

add_executable(bench_gpu ${PROJECT_SOURCE_DIR}/bench/gpu/bench_gpu.c ${PROJECT_SOURCE_DIR}/bench/gpu/bench_gpu_base.cu)
set_target_properties(bench_gpu PROPERTIES CUDA_RUNTIME_LIBRARY Static CUDA_STANDARD 17)
target_compile_options(bench_gpu PRIVATE $<$<COMPILE_LANGUAGE:CUDA>:-Werror=all-warnings>)
target_link_libraries(bench_gpu PRIVATE rckpt_gpu_codec)
rckpt_target(bench_gpu)
