//! Device choice: CUDA when available, else CPU; the `EASEML_DEVICE` environment variable
//! (`cpu`, `cuda`, `cuda:N`) overrides. And the device's set-up before training or inference
//! ([`prepare`]).

use tch::{Cuda, Device};

use crate::error::{Error, Result};

/// The environment variable that overrides the device choice.
pub const DEVICE_ENV: &str = "EASEML_DEVICE";

/// The device to train on: `EASEML_DEVICE` when set, else CUDA when available, else CPU.
pub fn choose_device() -> Result<Device> {
    match std::env::var(DEVICE_ENV) {
        Ok(value) if !value.trim().is_empty() => parse_device(&value),
        _ => Ok(Device::cuda_if_available()),
    }
}

/// Parses `cpu`, `cuda` or `cuda:N`; CUDA devices must exist.
pub fn parse_device(value: &str) -> Result<Device> {
    let bad = |reason: &str| Error::BadDevice {
        value: value.to_owned(),
        reason: reason.to_owned(),
    };
    let trimmed = value.trim().to_ascii_lowercase();
    let device = match trimmed.as_str() {
        "cpu" => return Ok(Device::Cpu),
        "cuda" => Device::Cuda(0),
        other => match other.strip_prefix("cuda:") {
            Some(index) => Device::Cuda(
                index
                    .parse::<usize>()
                    .map_err(|_| bad("the CUDA index is not a number"))?,
            ),
            None => return Err(bad("unknown device")),
        },
    };
    let Device::Cuda(index) = device else {
        return Ok(device);
    };
    if !Cuda::is_available() {
        return Err(bad(
            "CUDA is not available (no GPU, or the binary was linked without libtorch_cuda)",
        ));
    }
    let count = usize::try_from(Cuda::device_count()).unwrap_or(0);
    if index >= count {
        return Err(bad(&format!("only {count} CUDA device(s)")));
    }
    Ok(device)
}

/// Readies `device` for training and inference (process-wide, idempotent): on CUDA, cuDNN's
/// autotuner (benchmark mode: the first convolution of each shape tries cuDNN's algorithms and
/// every later one of that shape runs the fastest; a run's batch shape is fixed, so every step
/// after a shape's first gains; issue 47, item 1). Nothing on the CPU. On CUDA the engine's cost
/// prior is counted FLOPs, not a timing (`crate::cost`), so the autotuner's first steps do not
/// enter it; they do enter a trial's first epoch, as libtorch's own first-call set-up always did.
pub fn prepare(device: Device) {
    if device.is_cuda() {
        Cuda::cudnn_set_benchmark(true);
    }
}

/// A short name for reports: `cpu` or `cuda:N`.
pub fn device_name(device: Device) -> String {
    match device {
        Device::Cuda(index) => format!("cuda:{index}"),
        Device::Mps => "mps".to_owned(),
        Device::Vulkan => "vulkan".to_owned(),
        Device::Cpu => "cpu".to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_and_bad_values() {
        assert_eq!(parse_device("cpu").unwrap(), Device::Cpu);
        assert_eq!(parse_device(" CPU ").unwrap(), Device::Cpu);
        let message = parse_device("tpu").unwrap_err().to_string();
        assert!(message.contains("`tpu`"), "{message}");
        assert!(parse_device("cuda:x").is_err());
        if !Cuda::is_available() {
            let message = parse_device("cuda").unwrap_err().to_string();
            assert!(message.contains("CUDA is not available"), "{message}");
        }
    }
}
