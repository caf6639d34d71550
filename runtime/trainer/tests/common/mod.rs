//! What the trainer's test files share: the device their runs train on and a small budget.

use easeml_trainer::Budget;
use easeml_trainer::models::ModelConfig;
use tch::Device;

/// The device of the training runs: the CPU, unless `EASEML_DEVICE` names one (`cuda`, `cuda:N`) to
/// run the same tests on a GPU (`cargo xtask gpu-bundle`). Predictions stay on the CPU (checkpoints
/// move across devices).
pub fn test_device() -> Device {
    match std::env::var(easeml_trainer::device::DEVICE_ENV) {
        Ok(value) if !value.trim().is_empty() => {
            easeml_trainer::device::parse_device(&value).unwrap()
        }
        _ => Device::Cpu,
    }
}

/// A small, quick budget on [`test_device`]: one thread, one learning rate (0.01), `epochs`
/// epochs, batches of 16, networks at 1/16 of their widths.
pub fn small_budget(epochs: usize) -> Budget {
    tch::set_num_threads(1);
    let mut budget = Budget::new(test_device());
    budget.learning_rates = vec![0.01];
    budget.max_epochs = epochs;
    budget.batch_size = 16;
    budget.model = ModelConfig {
        width: 1.0 / 16.0,
        max_bytes: 8,
        input_bytes: 0,
        output_bytes: 0,
        bytes_per_step: 1,
    };
    budget
}
