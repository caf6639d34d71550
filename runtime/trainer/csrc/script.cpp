// TorchScript modules written from source, for the export of networks whose path through the
// layers depends on the data (recurrent networks over any length, trees), which tracing cannot
// record: a module is made, the network's tensors registered as its parameters, its methods
// compiled from TorchScript source (`Module::define`, libtorch's own compiler) and the module
// saved for `torch.jit.load`. See src/native.rs (`save_script_module`) and src/export.rs.

#include <ATen/core/Tensor.h>
#include <ATen/core/jit_type.h>
#include <torch/csrc/jit/api/module.h>

#include <cstdint>
#include <string>

typedef at::Tensor *tensor;

#include "catching.h"

extern "C" {

// A module named `EasemlModel` with the `n` tensors as parameters `names[i]` (detached copies of
// the values, not requiring gradients), a `training` attribute set to false (as every module saved
// from Python has), and the methods of `source`, saved to `path`.
char *easeml_ops_script_save(const char *source, const char *const *names, tensor *tensors,
                             int64_t n, const char *path) {
  return catching([&] {
    torch::jit::Module module(c10::QualifiedName("EasemlModel"));
    module.register_attribute("training", c10::BoolType::get(), false);
    for (int64_t i = 0; i < n; ++i) {
      module.register_parameter(names[i], tensors[i]->detach().clone(), /*is_buffer=*/false);
    }
    module.define(source);
    module.save(path);
  });
}

} // extern "C"
