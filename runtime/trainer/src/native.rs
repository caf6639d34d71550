//! The trainer's own libtorch operators, those tch does not bind (its generator skips every
//! `_foreach` / `_fused` operator and every `Generator` argument), compiled from `csrc/ops.cpp` by
//! the build script against the headers of the libtorch tch links:
//!
//! - [`fused_adam`]: PyTorch's fused Adam step (`torch._fused_adam_`, what `Adam(fused=True)`
//!   runs): a handful of kernels for all variables of one device, dtype and step count, where a
//!   step with per-variable tensor ops launches seven per variable (the gap to PyTorch on CUDA);
//! - [`unscale_gradients`]: the float16 loss scaler's check-and-unscale of the gradients
//!   (`torch._amp_foreach_non_finite_check_and_unscale_`, `crate::loss_scale`);
//! - [`Generator`] and [`dropout`]: a random generator owned by one run, so the run's dropout masks
//!   do not depend on what other runs in the same process draw from libtorch's process-wide
//!   generator meanwhile. [`RunRandomness`] makes one the current thread's generator; the models'
//!   dropout ([`dropout`]) draws from it;
//! - [`Autocast`]: libtorch's autocast on one device type in a given reduced float type (tch's
//!   `autocast` is CUDA's in float16 only), and [`cuda_native_bf16`], whether the GPU has
//!   bfloat16 arithmetic (`crate::precision` decides with them);
//! - [`gather_rows`]: a batch's rows copied once into a tensor (pinned for a GPU);
//! - [`save_script_module`]: a TorchScript module compiled from source by libtorch's own compiler,
//!   with given tensors as its parameters, saved for `torch.jit.load` (the export of networks that
//!   tracing cannot record, `crate::export`).
//!
//! Invariants: every C++ exception becomes an [`Error::Torch`] (as tch's own operators report
//! libtorch's errors), never an abort; a [`Generator`] is freed exactly once (it owns its
//! handle); the tensors handed to C++ outlive the call.

// FFI to csrc/ops.cpp: the trainer's one module with `unsafe` (each block says why it holds).
#![allow(unsafe_code)]

use std::cell::RefCell;
use std::ffi::{CStr, CString, c_char, c_void};
use std::path::Path;
use std::ptr::NonNull;

use tch::{Device, Kind, Tensor};
use torch_sys::C_tensor;

use crate::error::{Error, Result};

unsafe extern "C" {
    fn easeml_ops_free_error(error: *mut c_char);
    fn easeml_ops_fused_adam(
        params: *const *mut C_tensor,
        grads: *const *mut C_tensor,
        exp_avgs: *const *mut C_tensor,
        exp_avg_sqs: *const *mut C_tensor,
        n: i64,
        step: i64,
        lr: f64,
        beta1: f64,
        beta2: f64,
        eps: f64,
    ) -> *mut c_char;
    fn easeml_ops_unscale_gradients(
        grads: *const *mut C_tensor,
        n: i64,
        inv_scale: f64,
        found: *mut i32,
    ) -> *mut c_char;
    fn easeml_ops_generator_new(
        device_type: i32,
        device_index: i32,
        seed: u64,
        out: *mut *mut c_void,
    ) -> *mut c_char;
    fn easeml_ops_generator_free(generator: *mut c_void);
    fn easeml_ops_script_save(
        source: *const c_char,
        names: *const *const c_char,
        tensors: *const *mut C_tensor,
        n: i64,
        path: *const c_char,
    ) -> *mut c_char;
    fn easeml_ops_dropout(
        input: *mut C_tensor,
        p: f64,
        generator: *mut c_void,
        out: *mut *mut C_tensor,
    ) -> *mut c_char;
    fn easeml_ops_autocast_enter(
        device_type: i32,
        dtype: i32,
        was_enabled: *mut i32,
        was_dtype: *mut i32,
    ) -> *mut c_char;
    fn easeml_ops_autocast_exit(device_type: i32, was_enabled: i32, was_dtype: i32) -> *mut c_char;
    fn easeml_ops_cuda_native_bf16() -> i32;
    fn easeml_ops_gather_rows(
        values: *const f32,
        row_len: i64,
        rows: *const i64,
        n_rows: i64,
        pinned: i32,
        out: *mut *mut C_tensor,
    ) -> *mut c_char;
}

/// A libtorch error with `message` (the trainer's one variant for them).
fn libtorch_error(message: String) -> Error {
    Error::Torch(tch::TchError::Torch(message))
}

/// The error a C++ call returned, if any (the message is copied and the C string freed).
fn checked(error: *mut c_char, what: &str) -> Result<()> {
    if error.is_null() {
        return Ok(());
    }
    // SAFETY: a non-null error is a NUL-terminated string malloc'd by ops.cpp, freed once here.
    let message = unsafe { CStr::from_ptr(error) }
        .to_string_lossy()
        .into_owned();
    unsafe { easeml_ops_free_error(error) };
    Err(libtorch_error(format!("{what}: {message}")))
}

/// The raw handle of a tensor, as the C++ side takes it (it never frees it).
fn raw(tensor: &Tensor) -> *mut C_tensor {
    tensor.as_ptr().cast_mut()
}

/// Compiles the TorchScript `source` (the methods of a module, `forward` among them) into a module
/// whose parameters are `parameters` (each `self.NAME` in the source; copies, not requiring
/// gradients, with a `training` attribute that is false) and saves it to `path` for
/// `torch.jit.load`. A compile error of the source is an [`Error::Torch`] with libtorch's message
/// (the line and column in the source).
pub fn save_script_module(
    source: &str,
    parameters: &[(String, Tensor)],
    path: &Path,
) -> Result<()> {
    let text = |what: &str, value: &str| {
        CString::new(value)
            .map_err(|_| libtorch_error(format!("{what} holds a NUL byte: {value:?}")))
    };
    let source = text("a TorchScript source", source)?;
    let path = text("the path", &path.to_string_lossy())?;
    let names = parameters
        .iter()
        .map(|(name, _)| text("a parameter name", name))
        .collect::<Result<Vec<_>>>()?;
    let name_pointers: Vec<*const c_char> = names.iter().map(|name| name.as_ptr()).collect();
    let tensors: Vec<*mut C_tensor> = parameters.iter().map(|(_, tensor)| raw(tensor)).collect();
    // SAFETY: NUL-terminated strings and `n` live tensor handles, all borrowed for the call.
    let error = unsafe {
        easeml_ops_script_save(
            source.as_ptr(),
            name_pointers.as_ptr(),
            tensors.as_ptr(),
            tensors.len() as i64,
            path.as_ptr(),
        )
    };
    checked(
        error,
        "libtorch could not compile or save the TorchScript module",
    )
}

/// Adam's hyper-parameters for one [`fused_adam`] call.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct FusedAdamStep {
    /// The step count after this step (the same for every variable of the call).
    pub step: i64,
    /// The learning rate.
    pub lr: f64,
    /// The first moment's decay.
    pub beta1: f64,
    /// The second moment's decay.
    pub beta2: f64,
    /// Added to the denominator.
    pub eps: f64,
}

/// One Adam step, in place, of `params` with their `grads` and moments (PyTorch's `_fused_adam_`
/// without weight decay, AMSGrad or maximizing). All tensors must share one device and one
/// floating dtype, and the four lists one length; a gradient laid out unlike its variable is copied
/// to the variable's layout first.
pub fn fused_adam(
    params: &[&Tensor],
    grads: &[&Tensor],
    exp_avgs: &[&Tensor],
    exp_avg_sqs: &[&Tensor],
    hyper: FusedAdamStep,
) -> Result<()> {
    let n = params.len();
    if grads.len() != n || exp_avgs.len() != n || exp_avg_sqs.len() != n {
        return Err(libtorch_error(format!(
            "fused Adam needs one gradient and two moments per variable: {n} variables, {} \
             gradients, {} and {} moments",
            grads.len(),
            exp_avgs.len(),
            exp_avg_sqs.len()
        )));
    }
    let handles = |tensors: &[&Tensor]| tensors.iter().map(|t| raw(t)).collect::<Vec<_>>();
    let (params, grads) = (handles(params), handles(grads));
    let (exp_avgs, exp_avg_sqs) = (handles(exp_avgs), handles(exp_avg_sqs));
    // SAFETY: four arrays of `n` live tensor handles (borrowed for the call).
    let error = unsafe {
        easeml_ops_fused_adam(
            params.as_ptr(),
            grads.as_ptr(),
            exp_avgs.as_ptr(),
            exp_avg_sqs.as_ptr(),
            n as i64,
            hyper.step,
            hyper.lr,
            hyper.beta1,
            hyper.beta2,
            hyper.eps,
        )
    };
    checked(error, "libtorch's fused Adam step failed")
}

/// Multiplies `grads` (one device) by `inv_scale` in place and says whether any of their values is
/// infinite or NaN (PyTorch's `_amp_foreach_non_finite_check_and_unscale_`, the loss scaler's
/// check: [`crate::loss_scale`]).
pub fn unscale_gradients(grads: &[&Tensor], inv_scale: f64) -> Result<bool> {
    let handles: Vec<*mut C_tensor> = grads.iter().map(|grad| raw(grad)).collect();
    let mut found = 0i32;
    // SAFETY: an array of `n` live tensor handles (borrowed for the call) and an out flag.
    let error = unsafe {
        easeml_ops_unscale_gradients(
            handles.as_ptr(),
            handles.len() as i64,
            inv_scale,
            &mut found,
        )
    };
    checked(error, "libtorch could not unscale the gradients")?;
    Ok(found != 0)
}

/// c10's device type number and index for `device`.
fn c10_device(device: Device) -> Result<(i32, i32)> {
    match device {
        Device::Cpu => Ok((0, -1)),
        Device::Cuda(index) => i32::try_from(index)
            .map(|index| (1, index))
            .map_err(|_| libtorch_error(format!("no CUDA device {index}"))),
        Device::Mps => Ok((13, 0)),
        other => Err(libtorch_error(format!(
            "no random generator for the device {other:?} (cpu, cuda and mps have one)"
        ))),
    }
}

/// A libtorch random generator of one device, seeded, independent of the process-wide one.
#[derive(Debug)]
pub struct Generator {
    /// A heap-allocated `at::Generator` (ops.cpp), freed on drop.
    handle: NonNull<c_void>,
}

// SAFETY: an `at::Generator` is a reference-counted handle to an implementation whose draws take
// its own mutex; moving the handle between threads is what PyTorch's DataLoader workers do.
unsafe impl Send for Generator {}

impl Generator {
    /// A new generator for `device` seeded with `seed`.
    pub fn new(device: Device, seed: u64) -> Result<Self> {
        let (device_type, device_index) = c10_device(device)?;
        let mut out = std::ptr::null_mut();
        // SAFETY: `out` is written only on success.
        let error = unsafe { easeml_ops_generator_new(device_type, device_index, seed, &mut out) };
        checked(error, "libtorch could not create a random generator")?;
        NonNull::new(out)
            .map(|handle| Self { handle })
            .ok_or_else(|| libtorch_error("libtorch returned no random generator".to_owned()))
    }
}

impl Drop for Generator {
    fn drop(&mut self) {
        // SAFETY: the handle came from `easeml_ops_generator_new` and is freed only here.
        unsafe { easeml_ops_generator_free(self.handle.as_ptr()) }
    }
}

/// Inverted dropout of `input` with drop probability `p` in `[0, 1)`, the mask drawn from
/// `generator`: `input * bernoulli(1 - p) / (1 - p)`, differentiable in `input`.
pub fn dropout_with(input: &Tensor, p: f64, generator: &Generator) -> Result<Tensor> {
    if !(0.0..1.0).contains(&p) {
        return Err(libtorch_error(format!(
            "a dropout probability must lie in [0, 1), not {p}"
        )));
    }
    let mut out = std::ptr::null_mut();
    // SAFETY: `input` and the generator are live for the call; `out` is a new tensor on success.
    let error = unsafe { easeml_ops_dropout(raw(input), p, generator.handle.as_ptr(), &mut out) };
    checked(error, "libtorch's dropout failed")?;
    if out.is_null() {
        return Err(libtorch_error(
            "libtorch's dropout returned no tensor".to_owned(),
        ));
    }
    // SAFETY: `out` is a `new at::Tensor` the caller owns; tch frees it on drop.
    Ok(unsafe { Tensor::from_ptr(out) })
}

thread_local! {
    /// The generator of the run training on this thread ([`RunRandomness`]).
    static RUN_GENERATOR: RefCell<Option<Generator>> = const { RefCell::new(None) };
}

/// While alive, this thread's dropout ([`dropout`]) draws from a generator seeded with the run's
/// seed; on drop the previous one (if any) is current again. A run's random draws during training
/// are then a function of its seed alone, whatever else the process trains meanwhile.
#[derive(Debug)]
#[must_use = "the run's generator is current only while this guard lives"]
pub struct RunRandomness {
    previous: Option<Generator>,
}

impl RunRandomness {
    /// Makes a new generator for `device`, seeded with `seed`, this thread's current one.
    pub fn enter(device: Device, seed: u64) -> Result<Self> {
        let generator = Generator::new(device, seed)?;
        let previous = RUN_GENERATOR.with(|current| current.borrow_mut().replace(generator));
        Ok(Self { previous })
    }
}

impl Drop for RunRandomness {
    fn drop(&mut self) {
        let previous = self.previous.take();
        RUN_GENERATOR.with(|current| *current.borrow_mut() = previous);
    }
}

/// The models' dropout: the identity unless `train`; in training, inverted dropout drawn from the
/// run's generator ([`RunRandomness`]), or from libtorch's process-wide one when no run has entered
/// one on this thread. Panics, as tch's own operators in a forward pass do, if libtorch fails.
pub fn dropout(input: &Tensor, p: f64, train: bool) -> Tensor {
    if !train || p == 0.0 {
        return input.shallow_clone();
    }
    RUN_GENERATOR.with(|current| match current.borrow().as_ref() {
        Some(generator) => {
            dropout_with(input, p, generator).unwrap_or_else(|error| panic!("{error}"))
        }
        None => input.dropout(p, true),
    })
}

/// [`dropout`] as a method, for the models' chains of tensor operations.
pub trait RunDropout {
    /// [`dropout`] of `self`.
    fn run_dropout(&self, p: f64, train: bool) -> Tensor;
}

impl RunDropout for Tensor {
    fn run_dropout(&self, p: f64, train: bool) -> Tensor {
        dropout(self, p, train)
    }
}

/// While alive, this thread's libtorch operators on one device type run under autocast in one
/// reduced float type (as inside `with torch.autocast(device_type, dtype)`); on drop the state
/// before it is back and, when it was the outermost region, the cast weights it kept are dropped.
#[derive(Debug)]
#[must_use = "autocast is on only while this guard lives"]
pub struct Autocast {
    device_type: i32,
    was_enabled: i32,
    was_dtype: i32,
}

impl Autocast {
    /// Autocast on `device`'s type in `kind` (`Kind::BFloat16` or `Kind::Half`).
    pub fn enter(device: Device, kind: Kind) -> Result<Self> {
        let (device_type, _) = c10_device(device)?;
        let dtype = match kind {
            Kind::Half => 5,
            Kind::BFloat16 => 15,
            other => {
                return Err(libtorch_error(format!(
                    "autocast reduces to Half or BFloat16, not {other:?}"
                )));
            }
        };
        let (mut was_enabled, mut was_dtype) = (0, 0);
        // SAFETY: the two outputs are written on success only; no tensor crosses.
        let error = unsafe {
            easeml_ops_autocast_enter(device_type, dtype, &mut was_enabled, &mut was_dtype)
        };
        checked(error, "libtorch could not turn autocast on")?;
        Ok(Self {
            device_type,
            was_enabled,
            was_dtype,
        })
    }
}

impl Drop for Autocast {
    fn drop(&mut self) {
        // SAFETY: restores the state `enter` read on this thread; no tensor crosses. It cannot
        // fail for a device type `enter` accepted; an error is dropped (a drop cannot return it).
        let error =
            unsafe { easeml_ops_autocast_exit(self.device_type, self.was_enabled, self.was_dtype) };
        let _ = checked(error, "libtorch could not turn autocast off");
    }
}

/// The rows `rows` of `values` (row-major, `row_len` floats a row) as a new `[rows, row_len]`
/// float tensor on the CPU, in page-locked memory when `pinned` (to be copied to a GPU without
/// blocking): one copy, on libtorch's threads. A row outside `values` is an error.
pub fn gather_rows(values: &[f32], row_len: usize, rows: &[usize], pinned: bool) -> Result<Tensor> {
    let outside = rows.iter().find(|&&row| {
        row.checked_add(1)
            .and_then(|end| end.checked_mul(row_len))
            .is_none_or(|end| end > values.len())
    });
    if let Some(row) = outside {
        return Err(libtorch_error(format!(
            "row {row} of {row_len} values lies outside the {} values",
            values.len()
        )));
    }
    let to_i64 = |value: usize| {
        i64::try_from(value).map_err(|_| libtorch_error(format!("{value} is too large a size")))
    };
    let rows64 = rows
        .iter()
        .map(|&row| to_i64(row))
        .collect::<Result<Vec<i64>>>()?;
    let mut out = std::ptr::null_mut();
    // SAFETY: every row lies inside `values` (checked above), `rows64` has `n_rows` entries, both
    // live for the call; `out` is a new tensor on success.
    let error = unsafe {
        easeml_ops_gather_rows(
            values.as_ptr(),
            to_i64(row_len)?,
            rows64.as_ptr(),
            to_i64(rows64.len())?,
            i32::from(pinned),
            &mut out,
        )
    };
    checked(error, "libtorch could not gather a batch")?;
    if out.is_null() {
        return Err(libtorch_error("libtorch returned no batch".to_owned()));
    }
    // SAFETY: `out` is a `new at::Tensor` the caller owns; tch frees it on drop.
    Ok(unsafe { Tensor::from_ptr(out) })
}

/// Whether the current CUDA device has bfloat16 arithmetic (compute capability 8.0 or more);
/// false without CUDA.
pub fn cuda_native_bf16() -> bool {
    // SAFETY: no arguments; the C++ side catches everything and answers 0 or 1.
    unsafe { easeml_ops_cuda_native_bf16() != 0 }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tch::Kind;

    #[test]
    fn rows_are_gathered_in_order_and_rows_outside_are_refused() {
        let values: Vec<f32> = (0..12).map(|value| value as f32).collect();
        let batch = gather_rows(&values, 3, &[2, 0, 2], false).unwrap();
        assert_eq!(batch.size(), vec![3, 3]);
        let gathered: Vec<f32> = Vec::try_from(batch.flatten(0, -1)).unwrap();
        assert_eq!(gathered, [6., 7., 8., 0., 1., 2., 6., 7., 8.]);
        let empty = gather_rows(&values, 3, &[], false).unwrap();
        assert_eq!(empty.size(), vec![0, 3]);
        let error = gather_rows(&values, 3, &[4], false)
            .unwrap_err()
            .to_string();
        assert!(
            error.contains("row 4 of 3 values lies outside the 12 values"),
            "{error}"
        );
        assert!(gather_rows(&values, 3, &[usize::MAX], false).is_err());
        // Many rows: libtorch's threads share the copy.
        let many: Vec<f32> = (0..100_000).map(|value| value as f32).collect();
        let order: Vec<usize> = (0..1000).rev().collect();
        let batch = gather_rows(&many, 100, &order, false).unwrap();
        assert_eq!(batch.double_value(&[0, 0]), 99_900.0);
        assert_eq!(batch.double_value(&[999, 99]), 99.0);
    }

    #[test]
    fn autocast_reduces_a_matmul_while_its_guard_lives() {
        let a = Tensor::ones([4, 4], (Kind::Float, Device::Cpu));
        {
            let _outer = Autocast::enter(Device::Cpu, Kind::BFloat16).unwrap();
            assert_eq!(a.matmul(&a).kind(), Kind::BFloat16);
            {
                let _inner = Autocast::enter(Device::Cpu, Kind::Half).unwrap();
                assert_eq!(a.matmul(&a).kind(), Kind::Half);
            }
            assert_eq!(
                a.matmul(&a).kind(),
                Kind::BFloat16,
                "the outer type is back"
            );
        }
        assert_eq!(a.matmul(&a).kind(), Kind::Float, "off after the guard");
        assert!(Autocast::enter(Device::Cpu, Kind::Float).is_err());
        assert!(!cuda_native_bf16() || tch::Cuda::is_available());
    }

    #[test]
    fn a_generator_draws_the_same_masks_from_the_same_seed_whatever_the_global_one_does() {
        let input = Tensor::ones([1000], (Kind::Float, Device::Cpu));
        let draw = |seed| {
            let generator = Generator::new(Device::Cpu, seed).unwrap();
            tch::manual_seed(7);
            let first = dropout_with(&input, 0.5, &generator).unwrap();
            tch::manual_seed(8);
            let _ = Tensor::rand([100], (Kind::Float, Device::Cpu));
            let second = dropout_with(&input, 0.5, &generator).unwrap();
            (first, second)
        };
        let (a1, a2) = draw(3);
        let (b1, b2) = draw(3);
        assert!(a1.equal(&b1) && a2.equal(&b2));
        assert!(!a1.equal(&a2), "the second mask is a new draw");
        let (c1, _) = draw(4);
        assert!(!a1.equal(&c1), "another seed draws another mask");
        // Inverted dropout: kept entries are scaled by 1 / (1 - p), about half are kept.
        let kept = a1.gt(0.0).sum(Kind::Int64).int64_value(&[]);
        assert!((400..600).contains(&kept), "{kept} of 1000 kept");
        assert_eq!(a1.max().double_value(&[]), 2.0);
    }

    #[test]
    fn dropout_passes_gradients_through_the_kept_entries() {
        let input = Tensor::ones([64], (Kind::Float, Device::Cpu)).set_requires_grad(true);
        let generator = Generator::new(Device::Cpu, 1).unwrap();
        let out = dropout_with(&input, 0.25, &generator).unwrap();
        out.sum(Kind::Float).backward();
        let grad = input.grad();
        assert!(
            grad.equal(&out.detach()),
            "d out / d input is the scaled mask"
        );
    }

    #[test]
    fn the_run_generator_is_scoped_to_its_guard() {
        let input = Tensor::ones([256], (Kind::Float, Device::Cpu));
        let in_run = |seed| {
            let _run = RunRandomness::enter(Device::Cpu, seed).unwrap();
            tch::manual_seed(99);
            dropout(&input, 0.5, true)
        };
        assert!(in_run(5).equal(&in_run(5)));
        assert!(dropout(&input, 0.5, false).equal(&input));
        let outer = RunRandomness::enter(Device::Cpu, 5).unwrap();
        let first = dropout(&input, 0.5, true);
        {
            let _inner = RunRandomness::enter(Device::Cpu, 6).unwrap();
            let _ = dropout(&input, 0.5, true);
        }
        // The outer run's generator is back, one draw further on.
        let second = dropout(&input, 0.5, true);
        drop(outer);
        let reference = Generator::new(Device::Cpu, 5).unwrap();
        assert!(first.equal(&dropout_with(&input, 0.5, &reference).unwrap()));
        assert!(second.equal(&dropout_with(&input, 0.5, &reference).unwrap()));
    }

    #[test]
    fn the_models_draw_dropout_from_the_run_generator() {
        // tch's own `dropout` draws from libtorch's process-wide generator.
        for (file, source) in [
            ("image.rs", include_str!("models/image.rs")),
            ("mod.rs", include_str!("models/mod.rs")),
            ("recovery.rs", include_str!("models/recovery.rs")),
            ("sequence.rs", include_str!("models/sequence.rs")),
            ("tabular.rs", include_str!("models/tabular.rs")),
            ("temporal.rs", include_str!("models/temporal.rs")),
            ("tree.rs", include_str!("models/tree.rs")),
        ] {
            for needle in [".dropout(", "dropout_(", "bernoulli", "rand("] {
                assert!(
                    !source.contains(needle),
                    "models/{file} calls `{needle}`: draw from the run's generator (run_dropout)"
                );
            }
        }
    }

    #[test]
    fn a_gradient_laid_out_unlike_its_variable_updates_it_alike() {
        let shape = [2, 3, 4, 5];
        let start = Tensor::randn(shape, (Kind::Float, Device::Cpu));
        let grad = Tensor::randn(shape, (Kind::Float, Device::Cpu));
        // The same values in channels-last order: other strides, same logical tensor.
        let strided = grad
            .permute([0, 2, 3, 1])
            .contiguous()
            .permute([0, 3, 1, 2]);
        assert_ne!(strided.stride(), grad.stride());
        assert!(strided.equal(&grad));
        let update = |grad: &Tensor| {
            let param = start.copy();
            let (m, v) = (param.zeros_like(), param.zeros_like());
            for count in 1..=3 {
                fused_adam(&[&param], &[grad], &[&m], &[&v], step(count)).unwrap();
            }
            param
        };
        let (plain, permuted) = (update(&grad), update(&strided));
        assert!(!plain.equal(&start));
        assert!(plain.equal(&permuted));
    }

    #[test]
    fn bad_arguments_are_errors_not_aborts() {
        let input = Tensor::ones([4], (Kind::Float, Device::Cpu));
        let generator = Generator::new(Device::Cpu, 1).unwrap();
        let error = dropout_with(&input, 1.0, &generator)
            .unwrap_err()
            .to_string();
        assert!(error.contains("[0, 1)"), "{error}");
        let ints = Tensor::ones([4], (Kind::Int64, Device::Cpu));
        let error = dropout_with(&ints, 0.5, &generator).unwrap_err();
        assert!(error.to_string().contains("dropout failed"), "{error}");
        let error = fused_adam(&[&input], &[], &[], &[], step(1)).unwrap_err();
        assert!(error.to_string().contains("one gradient"), "{error}");
        // Mismatched dtypes inside libtorch: its TORCH_CHECK becomes an error.
        let doubles = Tensor::ones([4], (Kind::Double, Device::Cpu));
        let error = fused_adam(&[&input], &[&doubles], &[&input], &[&input], step(1)).unwrap_err();
        assert!(error.to_string().contains("fused Adam"), "{error}");
    }

    fn step(step: i64) -> FusedAdamStep {
        FusedAdamStep {
            step,
            lr: 0.01,
            beta1: 0.9,
            beta2: 0.999,
            eps: 1e-8,
        }
    }
}
