//! Adam with explicit state: PyTorch's Adam, its moments and step counts readable, serializable
//! and writable ([`crate::hop::TrainingState`]), which `tch::nn::Adam` cannot offer (its state
//! lives inside libtorch's C++ optimizer).
//!
//! The update is PyTorch's `Adam(fused=True)`: libtorch's fused kernel (`_fused_adam_`, through
//! [`crate::native::fused_adam`]) with `nn::Adam::default()`'s settings (betas 0.9 / 0.999, eps
//! 1e-8, no weight decay, no AMSGrad), per trainable variable `p` with gradient `g`:
//!
//! ```text
//! step += 1
//! m = lerp(m, g, 1 - beta1)                  // = beta1 m + (1 - beta1) g
//! v = beta2 v + (1 - beta2) g^2
//! p -= lr / (1 - beta1^step) * m / (sqrt(v) / sqrt(1 - beta2^step) + eps)
//! ```
//!
//! Invariants:
//! - the variables are the `VarStore`'s trainable ones (`requires_grad`), in name order; each has its
//!   own step count, incremented only when it has a gradient, as in libtorch (a variable that no
//!   forward pass used is skipped, its moments untouched);
//! - [`Adam::zero_grad`] sets the gradients to *none* (libtorch's `zero_grad`), not to zeros, so an
//!   unused variable has no gradient at the next step, exactly as under `nn::Adam`;
//! - a step is one fused kernel call per group of variables sharing a step count, dtype and device
//!   (one group in practice), where the per-variable form launched seven kernels per variable
//!   (on CUDA that launch overhead was the gap to PyTorch's training speed on ResNet-18); it
//!   allocates no moment storage (the moments are allocated once);
//! - the results agree with `nn::Adam` (libtorch's per-variable C++ Adam) to float rounding, not
//!   bit for bit; a run is bit-reproducible against itself, which is what a hop needs.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use tch::{COptimizer, Device, Kind, Tensor, nn};

use crate::error::{Error, Result};
use crate::loss_scale::LossScaler;
use crate::native::{FusedAdamStep, fused_adam, unscale_gradients};

/// Adam's hyper-parameters (the learning rate is separate: [`Adam::set_lr`]).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct AdamConfig {
    /// The first moment's decay.
    pub beta1: f64,
    /// The second moment's decay.
    pub beta2: f64,
    /// Added to the denominator.
    pub eps: f64,
}

impl Default for AdamConfig {
    /// `tch::nn::Adam::default()`: betas 0.9 / 0.999, eps 1e-8 (its weight decay is 0 and AMSGrad
    /// off, the only settings implemented here).
    fn default() -> Self {
        Self {
            beta1: 0.9,
            beta2: 0.999,
            eps: 1e-8,
        }
    }
}

/// One trainable variable and its Adam state.
#[derive(Debug)]
struct Param {
    name: String,
    /// A shallow clone of the `VarStore`'s variable (same storage).
    tensor: Tensor,
    exp_avg: Tensor,
    exp_avg_sq: Tensor,
    step: i64,
}

/// What the variables of one fused Adam call share: the step count after the step, the dtype and
/// the device.
type StepGroup = (i64, Kind, Device);

/// The Adam state that travels: hyper-parameters, learning rate and each variable's step count
/// (the moments are tensors, [`Adam::moments`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AdamHeader {
    /// The hyper-parameters.
    pub config: AdamConfig,
    /// The learning rate.
    pub learning_rate: f64,
    /// Each trainable variable's step count, by name.
    pub steps: BTreeMap<String, i64>,
}

/// Adam over a `VarStore`'s trainable variables, its state explicit (see the module docs).
#[derive(Debug)]
pub struct Adam {
    config: AdamConfig,
    learning_rate: f64,
    params: Vec<Param>,
    /// A stateless libtorch optimizer over the same variables, used only for its `zero_grad`
    /// (which sets gradients to none; tch's `Tensor::zero_grad` fills zeros instead).
    grad_clearer: COptimizer,
    /// The loss scale of float16 training ([`Adam::set_loss_scaler`]), none otherwise.
    loss_scaler: Option<LossScaler>,
}

impl Adam {
    /// Adam with `config` over `store`'s trainable variables (those created so far).
    pub fn new(store: &nn::VarStore, learning_rate: f64, config: AdamConfig) -> Result<Self> {
        let mut named: Vec<(String, Tensor)> = store
            .variables()
            .into_iter()
            .filter(|(_, tensor)| tensor.requires_grad())
            .collect();
        named.sort_by(|a, b| a.0.cmp(&b.0));
        let mut grad_clearer = COptimizer::sgd(0.0, 0.0, 0.0, 0.0, false)?;
        let mut params = Vec::with_capacity(named.len());
        for (name, tensor) in named {
            grad_clearer.add_parameters(&tensor, 0)?;
            let zeros = || tch::no_grad(|| tensor.f_zeros_like());
            params.push(Param {
                exp_avg: zeros()?,
                exp_avg_sq: zeros()?,
                step: 0,
                name,
                tensor,
            });
        }
        Ok(Self {
            config,
            learning_rate,
            params,
            grad_clearer,
            loss_scaler: None,
        })
    }

    /// Adam with `nn::Adam::default()`'s settings.
    pub fn with_defaults(store: &nn::VarStore, learning_rate: f64) -> Result<Self> {
        Self::new(store, learning_rate, AdamConfig::default())
    }

    /// The learning rate.
    pub fn lr(&self) -> f64 {
        self.learning_rate
    }

    /// Sets the learning rate of the next steps.
    pub fn set_lr(&mut self, learning_rate: f64) {
        self.learning_rate = learning_rate;
    }

    /// The hyper-parameters.
    pub fn config(&self) -> AdamConfig {
        self.config
    }

    /// Sets every trainable variable's gradient to none.
    pub fn zero_grad(&mut self) -> Result<()> {
        Ok(self.grad_clearer.zero_grad()?)
    }

    /// Scales the loss of every [`Adam::backward_step`] with `scaler` (float16 training:
    /// [`LossScaler::for_precision`]); `None` turns scaling off.
    pub fn set_loss_scaler(&mut self, scaler: Option<LossScaler>) {
        self.loss_scaler = scaler;
    }

    /// The loss scaler, when the loss is scaled.
    pub fn loss_scaler(&self) -> Option<&LossScaler> {
        self.loss_scaler.as_ref()
    }

    /// `zero_grad`, the backward pass of `loss`, then [`Adam::step`]. With a loss scaler
    /// ([`crate::loss_scale`]): the backward pass of the scaled loss, the gradients unscaled, and
    /// the step skipped (no variable or state changed, the gradients cleared) when any of them is
    /// not finite; an error when none is finite at any scale.
    pub fn backward_step(&mut self, loss: &Tensor) -> Result<()> {
        self.zero_grad()?;
        let Some(scaler) = &self.loss_scaler else {
            loss.f_backward()?;
            return self.step();
        };
        scaler.scaled(loss).f_backward()?;
        let inv_scale = 1.0 / scaler.scale();
        let grads: Vec<Tensor> = self
            .params
            .iter()
            .map(|param| param.tensor.grad())
            .filter(Tensor::defined)
            .collect();
        // One check per device (the operator's tensors share one).
        let mut devices: Vec<Device> = Vec::new();
        for grad in &grads {
            if !devices.contains(&grad.device()) {
                devices.push(grad.device());
            }
        }
        let mut finite = true;
        for device in devices {
            let on_device: Vec<&Tensor> = grads.iter().filter(|g| g.device() == device).collect();
            finite &= !unscale_gradients(&on_device, inv_scale)?;
        }
        if finite {
            self.step()?;
        } else {
            self.zero_grad()?;
        }
        if let Some(scaler) = &mut self.loss_scaler {
            scaler.update(finite).map_err(Error::MixedPrecision)?;
        }
        Ok(())
    }

    /// One update of every variable that has a gradient (see the module docs): libtorch's fused
    /// Adam kernel, called once per group of variables that share a step count, dtype and device
    /// (one group unless some variable missed a step).
    pub fn step(&mut self) -> Result<()> {
        let _guard = tch::no_grad_guard();
        let AdamConfig { beta1, beta2, eps } = self.config;
        // The variables with a gradient, grouped by (step count after this step, dtype, device):
        // one group unless some variable missed a step.
        let mut groups: Vec<(StepGroup, Vec<(&Param, Tensor)>)> = Vec::new();
        for param in &mut self.params {
            let grad = param.tensor.grad();
            if !grad.defined() {
                continue;
            }
            param.step += 1;
            let param: &Param = param;
            let key = (param.step, param.tensor.kind(), param.tensor.device());
            match groups.iter_mut().find(|(group, _)| *group == key) {
                Some((_, members)) => members.push((param, grad)),
                None => groups.push((key, vec![(param, grad)])),
            }
        }
        for ((step, _, _), members) in &groups {
            let params: Vec<&Tensor> = members.iter().map(|(param, _)| &param.tensor).collect();
            let grads: Vec<&Tensor> = members.iter().map(|(_, grad)| grad).collect();
            let exp_avgs: Vec<&Tensor> = members.iter().map(|(param, _)| &param.exp_avg).collect();
            let exp_avg_sqs: Vec<&Tensor> =
                members.iter().map(|(param, _)| &param.exp_avg_sq).collect();
            let hyper = FusedAdamStep {
                step: *step,
                lr: self.learning_rate,
                beta1,
                beta2,
                eps,
            };
            fused_adam(&params, &grads, &exp_avgs, &exp_avg_sqs, hyper)?;
        }
        Ok(())
    }

    /// The variables it updates (the `VarStore`'s tensors), in name order.
    pub fn variables(&self) -> impl Iterator<Item = &Tensor> {
        self.params.iter().map(|param| &param.tensor)
    }

    /// The names of the variables it updates, in order.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.params.iter().map(|param| param.name.as_str())
    }

    /// The header of its state: hyper-parameters, learning rate, step counts.
    pub fn header(&self) -> AdamHeader {
        AdamHeader {
            config: self.config,
            learning_rate: self.learning_rate,
            steps: self
                .params
                .iter()
                .map(|param| (param.name.clone(), param.step))
                .collect(),
        }
    }

    /// Each variable's `(name, exp_avg, exp_avg_sq)`, shallow clones of the live moments.
    pub fn moments(&self) -> Vec<(String, Tensor, Tensor)> {
        self.params
            .iter()
            .map(|param| {
                (
                    param.name.clone(),
                    param.exp_avg.shallow_clone(),
                    param.exp_avg_sq.shallow_clone(),
                )
            })
            .collect()
    }

    /// Replaces the whole state: `header` and, per variable name, `(exp_avg, exp_avg_sq)`. The names
    /// must be exactly this optimizer's and the shapes its variables'; nothing is changed when they
    /// are not.
    pub fn load_state(
        &mut self,
        header: &AdamHeader,
        moments: &BTreeMap<String, (Tensor, Tensor)>,
    ) -> Result<()> {
        let bad = |message: String| Error::BadCheckpoint(format!("Adam state: {message}"));
        if header.steps.len() != self.params.len() || moments.len() != self.params.len() {
            return Err(bad(format!(
                "{} step counts and {} moment pairs for {} variables",
                header.steps.len(),
                moments.len(),
                self.params.len()
            )));
        }
        for param in &self.params {
            let step = header
                .steps
                .get(&param.name)
                .ok_or_else(|| bad(format!("no step count for `{}`", param.name)))?;
            if *step < 0 {
                return Err(bad(format!("negative step count for `{}`", param.name)));
            }
            let (exp_avg, exp_avg_sq) = moments
                .get(&param.name)
                .ok_or_else(|| bad(format!("no moments for `{}`", param.name)))?;
            for (which, tensor) in [("exp_avg", exp_avg), ("exp_avg_sq", exp_avg_sq)] {
                if tensor.size() != param.tensor.size() || tensor.kind() != param.tensor.kind() {
                    return Err(bad(format!(
                        "`{}` {which} is {:?} {:?}, the variable {:?} {:?}",
                        param.name,
                        tensor.kind(),
                        tensor.size(),
                        param.tensor.kind(),
                        param.tensor.size()
                    )));
                }
            }
        }
        if !(header.learning_rate.is_finite() && header.learning_rate > 0.0) {
            return Err(bad(format!(
                "the learning rate {} is not a positive number",
                header.learning_rate
            )));
        }
        let _guard = tch::no_grad_guard();
        for param in &mut self.params {
            let (exp_avg, exp_avg_sq) = &moments[&param.name];
            param.exp_avg.f_copy_(exp_avg)?;
            param.exp_avg_sq.f_copy_(exp_avg_sq)?;
            param.step = header.steps[&param.name];
        }
        self.config = header.config;
        self.learning_rate = header.learning_rate;
        Ok(())
    }
}
