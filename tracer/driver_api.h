// DriverApi: the CUDA driver entry points the tracer calls itself, found at run time in the
// already loaded libcuda.so.1 (the tracer never links the driver, so it loads anywhere).
// Implements CudaQueries for the call handler and describes the devices for the header.
#pragma once

#include <cstdint>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "tracer/cuda_queries.h"

namespace streamrace::tracer {

class DriverApi final : public CudaQueries {
 public:
  // Looks up the entry points; false (and every query answers "unknown") without a driver.
  bool load();
  bool loaded() const { return handle_ != nullptr; }

  uint32_t device_of_context(uint64_t context) override;
  bool param_layout(uint64_t func, bool library_kernel, std::vector<ParamSlot>& out) override;
  trace::MemKind memory_kind(uint64_t ptr) override;
  const char* function_name(uint64_t func, bool library_kernel) override;
  void forget_functions() override;

  std::string driver_version();
  std::string devices();  // "0:NVIDIA H200;1:NVIDIA H200"

 private:
  void* handle_ = nullptr;
  int (*driver_get_version_)(int*) = nullptr;
  int (*device_get_count_)(int*) = nullptr;
  int (*device_get_)(int*, int) = nullptr;
  int (*device_get_name_)(char*, int, int) = nullptr;
  int (*ctx_get_device_)(int*) = nullptr;
  int (*func_get_param_info_)(void*, size_t, size_t*, size_t*) = nullptr;
  int (*kernel_get_param_info_)(void*, size_t, size_t*, size_t*) = nullptr;
  int (*pointer_get_attribute_)(void*, int, uint64_t) = nullptr;
  int (*func_get_name_)(const char**, void*) = nullptr;    // CUDA 12.3+
  int (*kernel_get_name_)(const char**, void*) = nullptr;  // CUDA 12.3+

  std::mutex mu_;
  std::unordered_map<uint64_t, std::vector<ParamSlot>> layouts_;  // empty vector: unknown
  std::unordered_map<uint64_t, bool> layout_known_;
};

}  // namespace streamrace::tracer
