// DriverApi: see driver_api.h.
#include "tracer/driver_api.h"

#include <cuda.h>
#include <dlfcn.h>

namespace streamrace::tracer {

namespace {
template <typename F>
void find(void* h, F& fn, const char* name) {
  fn = reinterpret_cast<F>(dlsym(h, name));
}
}  // namespace

bool DriverApi::load() {
  if (handle_) return true;
  void* h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
  if (!h) h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!h) return false;
  find(h, driver_get_version_, "cuDriverGetVersion");
  find(h, device_get_count_, "cuDeviceGetCount");
  find(h, device_get_, "cuDeviceGet");
  find(h, device_get_name_, "cuDeviceGetName");
  find(h, ctx_get_device_, "cuCtxGetDevice");
  find(h, func_get_param_info_, "cuFuncGetParamInfo");
  find(h, kernel_get_param_info_, "cuKernelGetParamInfo");
  find(h, pointer_get_attribute_, "cuPointerGetAttribute");
  find(h, func_get_name_, "cuFuncGetName");
  find(h, kernel_get_name_, "cuKernelGetName");
  handle_ = h;
  return true;
}

uint32_t DriverApi::device_of_context(uint64_t) {
  // CUPTI reports the context current for the call, so the current device is the answer.
  int dev = 0;
  if (ctx_get_device_ && ctx_get_device_(&dev) == CUDA_SUCCESS && dev >= 0) return uint32_t(dev);
  return 0;
}

bool DriverApi::param_layout(uint64_t func, bool library_kernel, std::vector<ParamSlot>& out) {
  {
    std::lock_guard lock(mu_);
    auto it = layout_known_.find(func);
    if (it != layout_known_.end()) {
      if (!it->second) return false;
      out = layouts_[func];
      return true;
    }
  }
  std::vector<ParamSlot> slots;
  // Walks the parameters until the driver says the index is past the last one. A kernel
  // without parameters answers CUDA_ERROR_INVALID_VALUE at index 0; any other error at index
  // 0 means this flavour of handle is not what `func` is.
  auto query = [&](int (*fn)(void*, size_t, size_t*, size_t*)) {
    if (!fn) return false;
    slots.clear();
    for (size_t i = 0; i < 4096; ++i) {
      size_t off = 0, size = 0;
      int rc = fn(reinterpret_cast<void*>(func), i, &off, &size);
      if (rc != CUDA_SUCCESS) return i > 0 || rc == CUDA_ERROR_INVALID_VALUE;
      slots.push_back(ParamSlot{uint32_t(off), uint32_t(size)});
    }
    return true;
  };
  bool ok = library_kernel ? (query(kernel_get_param_info_) || query(func_get_param_info_))
                           : (query(func_get_param_info_) || query(kernel_get_param_info_));
  std::lock_guard lock(mu_);
  layout_known_[func] = ok;
  if (ok) {
    layouts_[func] = slots;
    out = slots;
  }
  return ok;
}

void DriverApi::forget_functions() {
  std::lock_guard lock(mu_);
  layouts_.clear();
  layout_known_.clear();
}

const char* DriverApi::function_name(uint64_t func, bool library_kernel) {
  const char* name = nullptr;
  int (*first)(const char**, void*) = library_kernel ? kernel_get_name_ : func_get_name_;
  int (*second)(const char**, void*) = library_kernel ? func_get_name_ : kernel_get_name_;
  void* f = reinterpret_cast<void*>(func);
  if (first && first(&name, f) == CUDA_SUCCESS && name) return name;
  if (second && second(&name, f) == CUDA_SUCCESS && name) return name;
  return nullptr;
}

trace::MemKind DriverApi::memory_kind(uint64_t ptr) {
  if (!pointer_get_attribute_ || ptr == 0) return trace::MemKind::kUnknown;
  unsigned int type = 0;
  if (pointer_get_attribute_(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, ptr) != CUDA_SUCCESS)
    return trace::MemKind::kPageableHost;  // the driver knows nothing of it: ordinary host memory
  unsigned int managed = 0;
  if (pointer_get_attribute_(&managed, CU_POINTER_ATTRIBUTE_IS_MANAGED, ptr) == CUDA_SUCCESS && managed)
    return trace::MemKind::kManaged;
  if (type == CU_MEMORYTYPE_HOST) return trace::MemKind::kPinnedHost;
  if (type == CU_MEMORYTYPE_DEVICE) return trace::MemKind::kDevice;
  return trace::MemKind::kUnknown;
}

std::string DriverApi::driver_version() {
  int v = 0;
  if (driver_get_version_ && driver_get_version_(&v) == CUDA_SUCCESS) return std::to_string(v);
  return "";
}

std::string DriverApi::devices() {
  std::string out;
  int n = 0;
  if (!device_get_count_ || device_get_count_(&n) != CUDA_SUCCESS) return out;
  for (int i = 0; i < n; ++i) {
    int dev = 0;
    char name[256] = {0};
    if (device_get_ && device_get_(&dev, i) == CUDA_SUCCESS && device_get_name_) device_get_name_(name, sizeof name, dev);
    if (!out.empty()) out += ';';
    out += std::to_string(i) + ":" + name;
  }
  return out;
}

}  // namespace streamrace::tracer
