// The libtorch operators the trainer needs and tch does not bind (its generator skips every
// `_foreach` / `_fused` operator and every `Generator` argument): PyTorch's fused Adam step, the
// loss scaler's check-and-unscale of the gradients (`_amp_foreach_non_finite_check_and_unscale_`),
// random generators owned by one run, and autocast per device type with its reduced float type
// (tch's `autocast` turns on CUDA's, in float16, only). Every function catches C++ exceptions and returns the
// message as a malloc'd C string (null on success), freed with `easeml_ops_free_error`.
//
// A `tensor` is tch's handle, a heap-allocated `at::Tensor` (libtch's `typedef torch::Tensor
// *tensor`); tensors returned here are `new at::Tensor`, freed by tch's `at_free`.

#include <ATen/autocast_mode.h>
#include <ATen/core/Tensor.h>
#include <ATen/Context.h>
#include <ATen/detail/CUDAHooksInterface.h>
#include <ATen/ops/_amp_foreach_non_finite_check_and_unscale.h>
#include <ATen/ops/_fused_adam.h>
#include <ATen/ops/full.h>
#include <ATen/ops/zeros.h>
#include <ATen/Parallel.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/empty_like.h>
#include <ATen/ops/scalar_tensor.h>
#include <c10/core/GradMode.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <vector>

typedef at::Tensor *tensor;

#include "catching.h"

extern "C" {

void easeml_ops_free_error(char *error) { std::free(error); }

// One Adam step (PyTorch's `_fused_adam_`, no weight decay, no AMSGrad, not maximizing) over `n`
// variables that share a device, a dtype and a step count: `step` is the count after this step.
// A gradient whose strides differ from its variable's is copied to the variable's layout first
// (the fused kernels walk the four tensors of a variable as one flat buffer).
char *easeml_ops_fused_adam(tensor *params, tensor *grads, tensor *exp_avgs, tensor *exp_avg_sqs,
                            int64_t n, int64_t step, double lr, double beta1, double beta2,
                            double eps) {
  return catching([&] {
    if (n == 0) {
      return;
    }
    std::vector<at::Tensor> ps, gs, ms, vs, steps;
    ps.reserve(n);
    gs.reserve(n);
    ms.reserve(n);
    vs.reserve(n);
    steps.reserve(n);
    const at::Tensor &first = *params[0];
    at::Tensor step_tensor = at::scalar_tensor(
        static_cast<double>(step), first.options().dtype(at::kFloat).requires_grad(false));
    for (int64_t i = 0; i < n; ++i) {
      const at::Tensor &param = *params[i];
      const at::Tensor &grad = *grads[i];
      ps.push_back(param);
      if (grad.strides() == param.strides()) {
        gs.push_back(grad);
      } else {
        gs.push_back(at::empty_like(param).copy_(grad));
      }
      ms.push_back(*exp_avgs[i]);
      vs.push_back(*exp_avg_sqs[i]);
      steps.push_back(step_tensor);
    }
    at::_fused_adam_(ps, gs, ms, vs, {}, steps, lr, beta1, beta2, /*weight_decay=*/0.0, eps,
                     /*amsgrad=*/false, /*maximize=*/false);
  });
}

// Multiplies the `n` gradients (one device, floating) by `inv_scale` in place and sets `*found` to
// 1 when any of their values is infinite or NaN, else 0 (PyTorch's GradScaler's unscale: one fused
// kernel per dtype on CUDA). The one synchronization is reading the flag.
char *easeml_ops_unscale_gradients(tensor *grads, int64_t n, double inv_scale, int *found) {
  return catching([&] {
    *found = 0;
    if (n == 0) {
      return;
    }
    std::vector<at::Tensor> gs;
    gs.reserve(n);
    for (int64_t i = 0; i < n; ++i) {
      gs.push_back(*grads[i]);
    }
    at::TensorOptions options = gs[0].options().dtype(at::kFloat).requires_grad(false);
    at::Tensor found_inf = at::zeros({1}, options);
    at::Tensor inv = at::full({1}, inv_scale, options);
    at::_amp_foreach_non_finite_check_and_unscale_(gs, found_inf, inv);
    *found = found_inf.item<float>() != 0.0f ? 1 : 0;
  });
}

// A new random generator for `device_type` / `device_index` (c10's DeviceType numbering: 0 CPU,
// 1 CUDA) seeded with `seed`, independent of the process-wide default one.
char *easeml_ops_generator_new(int device_type, int device_index, uint64_t seed, void **out) {
  return catching([&] {
    at::Device device(static_cast<c10::DeviceType>(device_type),
                      static_cast<c10::DeviceIndex>(device_index));
    at::Generator generator =
        at::globalContext().defaultGenerator(device).clone();
    generator.set_current_seed(seed);
    *out = new at::Generator(std::move(generator));
  });
}

void easeml_ops_generator_free(void *generator) {
  delete static_cast<at::Generator *>(generator);
}

// Inverted dropout of `input` with drop probability `p` (0 <= p < 1), its mask drawn from
// `generator`: `input * bernoulli(1 - p) / (1 - p)`, differentiable in `input`.
char *easeml_ops_dropout(tensor input, double p, void *generator, tensor *out) {
  return catching([&] {
    at::Generator &gen = *static_cast<at::Generator *>(generator);
    at::Tensor mask;
    {
      c10::NoGradGuard no_grad;
      mask = at::empty_like(*input).bernoulli_(1.0 - p, gen).div_(1.0 - p);
    }
    *out = new at::Tensor(input->mul(mask));
  });
}

// Turns autocast on for `device_type` (c10's numbering: 0 CPU, 1 CUDA) in `dtype` (c10's
// ScalarType numbering: 5 Half, 15 BFloat16) on the calling thread, as `torch.autocast` enters;
// the state it replaced goes to `was_enabled` / `was_dtype` for `easeml_ops_autocast_exit`.
char *easeml_ops_autocast_enter(int device_type, int dtype, int *was_enabled, int *was_dtype) {
  return catching([&] {
    auto type = static_cast<c10::DeviceType>(device_type);
    *was_enabled = at::autocast::is_autocast_enabled(type) ? 1 : 0;
    *was_dtype = static_cast<int>(at::autocast::get_autocast_dtype(type));
    at::autocast::set_autocast_dtype(type, static_cast<at::ScalarType>(dtype));
    at::autocast::set_autocast_enabled(type, true);
    at::autocast::increment_nesting();
  });
}

// Leaves the autocast region `easeml_ops_autocast_enter` began: the cast weights are dropped
// when it was the outermost one, and the state before it comes back.
char *easeml_ops_autocast_exit(int device_type, int was_enabled, int was_dtype) {
  return catching([&] {
    auto type = static_cast<c10::DeviceType>(device_type);
    if (at::autocast::decrement_nesting() == 0) {
      at::autocast::clear_cache();
    }
    at::autocast::set_autocast_enabled(type, was_enabled != 0);
    at::autocast::set_autocast_dtype(type, static_cast<at::ScalarType>(was_dtype));
  });
}

// The rows `rows[0..n_rows]` of the row-major `values` (rows of `row_len` floats; the caller has
// checked every row lies inside) copied into a new float tensor `[n_rows, row_len]`, in
// page-locked host memory when `pinned` (for a non-blocking copy to a GPU), by libtorch's worker
// threads: one copy where gathering into a vector and copying that into a tensor made two.
char *easeml_ops_gather_rows(const float *values, int64_t row_len, const int64_t *rows,
                             int64_t n_rows, int pinned, tensor *out) {
  return catching([&] {
    auto options = at::TensorOptions().dtype(at::kFloat).pinned_memory(pinned != 0);
    at::Tensor batch = at::empty({n_rows, row_len}, options);
    float *target = batch.data_ptr<float>();
    size_t bytes = static_cast<size_t>(row_len) * sizeof(float);
    // About 64 KB per task at least, so small batches stay on one thread.
    int64_t grain = std::max<int64_t>(1, 16384 / std::max<int64_t>(1, row_len));
    at::parallel_for(0, n_rows, grain, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) {
        std::memcpy(target + i * row_len, values + rows[i] * row_len, bytes);
      }
    });
    *out = new at::Tensor(std::move(batch));
  });
}

// Whether the current CUDA device computes bfloat16 natively (compute capability 8.0 or more,
// with cuDNN: what `torch.cuda.is_bf16_supported()` reads); 0 in a build without CUDA.
int easeml_ops_cuda_native_bf16() {
  try {
    return at::detail::getCUDAHooks().supportsBFloat16ConvolutionWithCuDNNv8() ? 1 : 0;
  } catch (...) {
    return 0;
  }
}

} // extern "C"
