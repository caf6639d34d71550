//! The covariance between candidate models (appendix A of the ease.ml paper).
//!
//! A model is represented by its quality vector: its accuracy on every *other* user's data (the
//! "training users" of the replay, the prior history of the runtime). Two models whose quality
//! vectors are close are expected to behave alike on a new user too. The kernel is
//!
//! `k(a, b) = offset_variance + signal_variance * base(|x_a - x_b| / length_scale)`
//!
//! with `base` the squared exponential (RBF) or Matern-5/2 shape, and observations carry
//! `noise_variance`. The constant `offset_variance` term models the user's own difficulty: observing
//! one model of a hard data set lowers the expectation of every other model of that user.
//!
//! The prior mean of a model is its mean quality over the history users. **Prior for a model with
//! no history** (a model id that no history user has a quality for): prior mean = the mean of all
//! known models' prior means, prior variance = `offset_variance + signal_variance`, and its
//! covariance with another model is `offset_variance` (it shares the user's offset) plus, when the two
//! are variants of one model (the same id before a `+`, as `resnet18` and `resnet18+norm_k2`),
//! [`FAMILY_CORRELATION`] x `signal_variance`: a poor ResNet-18 makes its normalized variants less
//! promising too, so a fresh store explores architectures before it explores their variants. Models
//! of one *kin* (a group the caller names with [`KernelModel::with_kin`], e.g. the recurrent networks
//! RNN, LSTM, bi-LSTM and GRU) share [`KIN_CORRELATION`] x `signal_variance`: a poor GRU makes the
//! LSTM less promising but leaves a convolutional network or a random-kernel model untouched, so a
//! new kind of model is explored early instead of after every sibling of a poor one. Hyperparameters are fitted by maximising the log marginal likelihood of the
//! history rows (each history user is one draw of the GP over the models), with analytic gradients.
//!
//! **The quality scale** ([`QualityScale`]). The GP may model qualities as they are or their
//! log-odds `logit(q)`: accuracies crowd near 0 and 1, where every model of a data set scores
//! alike (a near-chance task, an easy one), and spread in between; on the log-odds scale that
//! spread is more even, so a user's level says how widely its candidates can differ *in quality*.
//! [`choose_quality_scale`] fits the kernel on both scales and keeps the one under which the
//! history rows are more likely, comparing densities of the qualities themselves (the log-odds
//! density plus the log-Jacobian `-log(q (1 - q))` of each entry), over the rows whose qualities
//! all lie strictly inside `(LOGIT_EPSILON, 1 - LOGIT_EPSILON)`: a quality of exactly 0 or 1 (a
//! saturated or clipped value) is a point mass that no density compares. The scheduler observes,
//! bounds and compares in the kernel's scale and hands the user pickers qualities
//! ([`QualityScale::to_quality`]). On the log-odds scale a model's prior mean is its mean
//! log-odds over the history (its typical quality); the kernel also keeps its mean quality
//! ([`KernelModel::mean_quality`], the prior mean on the identity scale), by which a user's first
//! run is chosen (the loss counts quality).
//!
//! **The history's own covariance** ([`KernelModel::with_history_covariance`]). The parametric
//! kernel relates two models only through the distance of their quality vectors; the history also
//! says directly how two models co-vary over data sets (the sample covariance `S` of the history
//! rows' residuals, imputed cells 0). The prior may take the blend `(1 - w) K + w S` of the fitted
//! kernel `K` and `S`, both positive semi-definite, so the blend is too (and the observation noise
//! keeps every posterior solvable). With [`HistoryCovariance::CrossValidated`] the weight `w` is the
//! one of [`HISTORY_COVARIANCE_WEIGHTS`] under which held-out history users are most likely:
//! [`CROSS_VALIDATION_FOLDS`] folds (user `u` in fold `u mod F`), `S` from the other folds' rows,
//! each held-out row scored by its Gaussian log density under the blend plus the noise. `S` of
//! the rows themselves would always win its own likelihood (it is fitted on them), which is why it
//! is scored out of fold. A model the history does not relate keeps the no-history prior.

use std::collections::HashMap;

use nalgebra::{DMatrix, DVector};

mod fit;

use fit::{
    cross_validated_weight, fit_hyperparameters, known_column_means, latent_covariance,
    prepare_history,
};
pub use fit::{log_marginal_likelihood, log_marginal_likelihood_with_gradient};

use crate::error::{Result, SchedulerError};

/// The prior correlation of the model-specific part between two variants of one model (ids equal up
/// to the first `+`) when the history does not relate them.
pub const FAMILY_CORRELATION: f64 = 0.8;

/// The prior correlation of the model-specific part between two different models of one kin (see
/// [`KernelModel::with_kin`]) when the history does not relate them.
pub const KIN_CORRELATION: f64 = 0.5;

/// The model an id is a variant of: the id up to its first `+`.
pub fn family(model_id: &str) -> &str {
    model_id.split('+').next().unwrap_or(model_id)
}

pub use easeml_stats::KernelKind;

/// Qualities are clamped to `[LOGIT_EPSILON, 1 - LOGIT_EPSILON]` before the log-odds.
pub const LOGIT_EPSILON: f64 = 0.005;

/// The scale on which the GP models qualities (see the module documentation).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum QualityScale {
    /// Qualities as they are.
    #[default]
    Identity,
    /// Log-odds of qualities in `[0, 1]` (clamped to `[LOGIT_EPSILON, 1 - LOGIT_EPSILON]`).
    Logit,
}

impl QualityScale {
    /// The scale's name (`identity`, `logit`).
    pub fn name(self) -> &'static str {
        match self {
            QualityScale::Identity => "identity",
            QualityScale::Logit => "logit",
        }
    }

    /// A quality in the model's scale.
    pub fn to_model(self, quality: f64) -> f64 {
        match self {
            QualityScale::Identity => quality,
            QualityScale::Logit => {
                let q = quality.clamp(LOGIT_EPSILON, 1.0 - LOGIT_EPSILON);
                (q / (1.0 - q)).ln()
            }
        }
    }

    /// A value of the model's scale as a quality (the inverse of [`QualityScale::to_model`] inside
    /// the clamp).
    pub fn to_quality(self, value: f64) -> f64 {
        match self {
            QualityScale::Identity => value,
            QualityScale::Logit => 1.0 / (1.0 + (-value).exp()),
        }
    }

    /// `d quality / d value` at a value of the model's scale: what turns a small difference in the
    /// model's scale into one in quality (1 on the identity scale).
    pub fn quality_slope(self, value: f64) -> f64 {
        match self {
            QualityScale::Identity => 1.0,
            QualityScale::Logit => {
                let q = self.to_quality(value);
                q * (1.0 - q)
            }
        }
    }

    /// `log |d value / d quality|` at a quality (0 on the identity scale): what a density over the
    /// model's scale adds to become a density over qualities.
    fn log_jacobian(self, quality: f64) -> f64 {
        match self {
            QualityScale::Identity => 0.0,
            QualityScale::Logit => {
                let q = quality.clamp(LOGIT_EPSILON, 1.0 - LOGIT_EPSILON);
                -(q * (1.0 - q)).ln()
            }
        }
    }

    /// The history with every quality in this scale.
    fn history(self, history: &QualityHistory) -> QualityHistory {
        QualityHistory {
            model_ids: history.model_ids.clone(),
            rows: history
                .rows
                .iter()
                .map(|row| row.iter().map(|q| q.map(|q| self.to_model(q))).collect())
                .collect(),
        }
    }
}

/// The quality scale under which the history rows are more likely (see the module
/// documentation), given `identity`, the prior already fitted on `history` as it is: the prior of
/// the same kind fitted on the log-odds when every quality lies in `[0, 1]`, at least two rows lie
/// strictly inside, and the rows are strictly more likely there; `None` (keep `identity`)
/// otherwise.
pub fn choose_quality_scale(
    history: &QualityHistory,
    identity: &KernelModel,
    choice: HyperparameterChoice,
) -> Result<Option<KernelModel>> {
    let inside = |q: &f64| *q > LOGIT_EPSILON && *q < 1.0 - LOGIT_EPSILON;
    let in_unit_interval = history
        .rows
        .iter()
        .flatten()
        .flatten()
        .all(|q| (0.0..=1.0).contains(q));
    let interior_rows: Vec<&Vec<Option<f64>>> = history
        .rows
        .iter()
        .filter(|row| row.iter().flatten().count() > 0 && row.iter().flatten().all(inside))
        .collect();
    if !in_unit_interval || interior_rows.len() < 2 {
        return Ok(None);
    }
    let logit =
        KernelModel::from_history_in_scale(history, identity.kind(), choice, QualityScale::Logit)?;
    let total = |model: &KernelModel| -> Option<f64> {
        model.log_density_of_rows(
            &history.model_ids,
            interior_rows.iter().map(|row| row.as_slice()),
        )
    };
    match (total(identity), total(&logit)) {
        (Some(on_identity), Some(on_logit)) if on_logit > on_identity => Ok(Some(logit)),
        _ => Ok(None),
    }
}

/// The weights of the history's sample covariance that [`HistoryCovariance::CrossValidated`]
/// chooses from (0 = the parametric kernel alone).
pub const HISTORY_COVARIANCE_WEIGHTS: [f64; 6] = [0.0, 0.2, 0.4, 0.6, 0.8, 0.9];

/// Folds of the cross-validation that chooses the weight of the history's covariance (fewer
/// when the history has fewer rows: then every row is its own fold).
pub const CROSS_VALIDATION_FOLDS: usize = 10;

/// How much of the history's own sample covariance the prior takes (see the module documentation).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum HistoryCovariance {
    /// The parametric kernel alone (weight 0).
    Off,
    /// This weight in `[0, 1)`.
    Fixed(f64),
    /// The weight of [`HISTORY_COVARIANCE_WEIGHTS`] that held-out history rows find most likely.
    CrossValidated,
}

impl HistoryCovariance {
    /// Parses `cross_validated` (or `cv`), `off`, or a weight in `[0, 1)`.
    pub fn parse(text: &str) -> Result<Self> {
        match text.trim() {
            "cross_validated" | "cv" => Ok(HistoryCovariance::CrossValidated),
            "off" => Ok(HistoryCovariance::Off),
            other => match other.parse::<f64>() {
                Ok(weight) if (0.0..1.0).contains(&weight) => Ok(HistoryCovariance::Fixed(weight)),
                _ => Err(SchedulerError::Config(format!(
                    "the history's covariance is `cross_validated`, `off` or a weight in [0, 1), \
                     got `{text}`"
                ))),
            },
        }
    }
}

impl std::fmt::Display for HistoryCovariance {
    /// The form [`HistoryCovariance::parse`] reads back: `cross_validated`, `off` or the weight.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            HistoryCovariance::CrossValidated => f.write_str("cross_validated"),
            HistoryCovariance::Off => f.write_str("off"),
            HistoryCovariance::Fixed(weight) => write!(f, "{weight}"),
        }
    }
}

/// The hyperparameters of the kernel (all variances in quality units squared).
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct KernelHyperparameters {
    /// Variance of the stationary (model-similarity) part.
    pub signal_variance: f64,
    /// Length-scale on quality-vector distances.
    pub length_scale: f64,
    /// Observation noise variance.
    pub noise_variance: f64,
    /// Variance of the constant part (the user's own offset).
    pub offset_variance: f64,
}

impl Default for KernelHyperparameters {
    /// Used when there is no history to fit on: a 0.1 spread of qualities, a 0.1 user offset.
    fn default() -> Self {
        KernelHyperparameters {
            signal_variance: 0.01,
            length_scale: 1.0,
            noise_variance: 1e-4,
            offset_variance: 0.01,
        }
    }
}

impl KernelHyperparameters {
    fn to_log(self) -> [f64; 4] {
        [
            self.signal_variance.ln(),
            self.length_scale.ln(),
            self.noise_variance.ln(),
            self.offset_variance.ln(),
        ]
    }

    fn from_log(log_parameters: [f64; 4]) -> Self {
        KernelHyperparameters {
            signal_variance: log_parameters[0].exp(),
            length_scale: log_parameters[1].exp(),
            noise_variance: log_parameters[2].exp(),
            offset_variance: log_parameters[3].exp(),
        }
    }
}

/// Qualities of models on the data of history users: `rows[user][model]`, `None` where unknown.
#[derive(Debug, Clone, Default)]
pub struct QualityHistory {
    /// The model ids, one per column.
    pub model_ids: Vec<String>,
    /// One row per history user, one entry per model id.
    pub rows: Vec<Vec<Option<f64>>>,
}

/// How hyperparameters are chosen.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum HyperparameterChoice {
    /// Fit by maximising the log marginal likelihood of the history (grid start + gradient ascent).
    FitMarginalLikelihood,
    /// Use these values as given.
    Fixed(KernelHyperparameters),
}

/// The prior over all models known to the history: features, prior means, covariance.
#[derive(Debug, Clone)]
pub struct KernelModel {
    kind: KernelKind,
    hyperparameters: KernelHyperparameters,
    model_index_by_id: HashMap<String, usize>,
    prior_mean_by_model: Vec<f64>,
    /// Latent covariance (no noise) between the known models.
    covariance: DMatrix<f64>,
    default_prior_mean: f64,
    /// The kin of a model (by the id before any `+`), for the no-history prior.
    kin_by_model: HashMap<String, String>,
    /// The log marginal likelihood per history row at the hyperparameters in use (`None` without
    /// a history, or where it cannot be computed).
    log_marginal_likelihood: Option<f64>,
    /// The weight of the history's sample covariance in `covariance` (0: the parametric kernel).
    history_covariance_weight: f64,
    /// Each known model's mean quality over the history rows, in quality units whatever the scale
    /// (what [`KernelModel::prior_mean`] is on the identity scale).
    mean_quality_by_model: Vec<f64>,
    /// The scale of the prior means and covariances (and of the history it was fitted on).
    quality_scale: QualityScale,
}

/// A prior over some models plus the observation noise, factored: what the density of a history
/// row with exactly those models known needs.
struct FactoredPrior {
    mean: DVector<f64>,
    /// The lower Cholesky factor of the covariance.
    lower: DMatrix<f64>,
    log_determinant: f64,
}

impl KernelModel {
    /// Builds the prior over the models of `history`, fitting or fixing the hyperparameters.
    pub fn from_history(
        history: &QualityHistory,
        kind: KernelKind,
        choice: HyperparameterChoice,
    ) -> Result<Self> {
        let prepared = prepare_history(history)?;
        let hyperparameters = match choice {
            HyperparameterChoice::FitMarginalLikelihood => fit_hyperparameters(kind, &prepared),
            HyperparameterChoice::Fixed(hyperparameters) => hyperparameters,
        };
        for value in hyperparameters.to_log() {
            if !value.is_finite() {
                return Err(SchedulerError::Kernel(format!(
                    "hyperparameters must be positive and finite: {hyperparameters:?}"
                )));
            }
        }
        let covariance = latent_covariance(kind, &hyperparameters, &prepared.squared_distances);
        let log_marginal_likelihood = (prepared.residuals.ncols() > 0)
            .then(|| {
                log_marginal_likelihood(
                    kind,
                    &hyperparameters,
                    &prepared.squared_distances,
                    &prepared.residuals,
                )
                .ok()
            })
            .flatten()
            .filter(|value| value.is_finite());
        let default_prior_mean = if prepared.prior_mean_by_model.is_empty() {
            0.5
        } else {
            prepared.prior_mean_by_model.iter().sum::<f64>()
                / prepared.prior_mean_by_model.len() as f64
        };
        Ok(KernelModel {
            kind,
            hyperparameters,
            model_index_by_id: prepared
                .model_ids
                .iter()
                .enumerate()
                .map(|(index, id)| (id.clone(), index))
                .collect(),
            mean_quality_by_model: prepared.prior_mean_by_model.clone(),
            prior_mean_by_model: prepared.prior_mean_by_model,
            covariance,
            default_prior_mean,
            kin_by_model: HashMap::new(),
            log_marginal_likelihood,
            history_covariance_weight: 0.0,
            quality_scale: QualityScale::Identity,
        })
    }

    /// Builds the prior over the models of `history` on the given quality scale: the history's
    /// qualities are mapped by [`QualityScale::to_model`] before anything is fitted, and the
    /// prior means and covariances are on that scale.
    pub fn from_history_in_scale(
        history: &QualityHistory,
        kind: KernelKind,
        choice: HyperparameterChoice,
        scale: QualityScale,
    ) -> Result<Self> {
        let mut model = KernelModel::from_history(&scale.history(history), kind, choice)?;
        model.quality_scale = scale;
        // The scale maps a known quality to a known value, so the known models, in order, are
        // the same on both scales: the prior's model index is the position in this list.
        model.mean_quality_by_model = known_column_means(history)
            .into_iter()
            .map(|(_, mean)| mean)
            .collect();
        debug_assert_eq!(
            model.mean_quality_by_model.len(),
            model.model_index_by_id.len()
        );
        Ok(model)
    }

    /// The scale of this prior's means and covariances ([`QualityScale::Identity`] unless built
    /// by [`KernelModel::from_history_in_scale`] or chosen by [`choose_quality_scale`]).
    pub fn quality_scale(&self) -> QualityScale {
        self.quality_scale
    }

    /// The log density of one row of *qualities* (one entry per `model_ids`, `None` where
    /// unknown) under this prior plus the observation noise: the Gaussian density of its known
    /// entries mapped to the prior's scale, plus the log-Jacobian of that map (so that priors on
    /// different scales compare). `None` for a row without a known entry or a covariance that
    /// does not factor.
    pub fn log_density_of_row(&self, model_ids: &[String], row: &[Option<f64>]) -> Option<f64> {
        self.log_density_of_rows(model_ids, [row])
    }

    /// The sum of [`KernelModel::log_density_of_row`] over `rows` (`None` if any row has none),
    /// factoring the prior once per pattern of known entries rather than once per row: a history
    /// without gaps factors it once.
    pub fn log_density_of_rows<'a>(
        &self,
        model_ids: &[String],
        rows: impl IntoIterator<Item = &'a [Option<f64>]>,
    ) -> Option<f64> {
        let mut factored_by_pattern: HashMap<Vec<bool>, Option<FactoredPrior>> = HashMap::new();
        let mut total = 0.0;
        for row in rows {
            let pattern: Vec<bool> = row.iter().map(Option::is_some).collect();
            let factored = factored_by_pattern
                .entry(pattern)
                .or_insert_with_key(|pattern| {
                    let known_ids: Vec<String> = model_ids
                        .iter()
                        .zip(pattern)
                        .filter(|(_, known)| **known)
                        .map(|(id, _)| id.clone())
                        .collect();
                    self.factor_prior(&known_ids)
                });
            total += self.log_density_given(factored.as_ref()?, row)?;
        }
        Some(total)
    }

    /// The prior over `ids` plus the observation noise, factored (`None` for no ids or a
    /// covariance that does not factor).
    fn factor_prior(&self, ids: &[String]) -> Option<FactoredPrior> {
        if ids.is_empty() {
            return None;
        }
        let (mean, mut covariance) = self.prior_over(ids);
        for i in 0..ids.len() {
            covariance[(i, i)] += self.hyperparameters.noise_variance;
        }
        let lower = covariance.cholesky()?.l();
        let log_determinant = 2.0 * lower.diagonal().iter().map(|d| d.ln()).sum::<f64>();
        Some(FactoredPrior {
            mean,
            lower,
            log_determinant,
        })
    }

    /// The log density of the known entries of `row` (in the order of the ids `factored` was
    /// made for) under `factored`, plus the log-Jacobian of the scale's map.
    fn log_density_given(&self, factored: &FactoredPrior, row: &[Option<f64>]) -> Option<f64> {
        let known: Vec<f64> = row.iter().flatten().copied().collect();
        let residual = DVector::from_iterator(
            known.len(),
            known
                .iter()
                .zip(factored.mean.iter())
                .map(|(q, m)| self.quality_scale.to_model(*q) - m),
        );
        let solved = factored.lower.solve_lower_triangular(&residual)?;
        let jacobian: f64 = known
            .iter()
            .map(|q| self.quality_scale.log_jacobian(*q))
            .sum();
        let value = -0.5 * solved.norm_squared()
            - 0.5 * factored.log_determinant
            - 0.5 * known.len() as f64 * (2.0 * std::f64::consts::PI).ln()
            + jacobian;
        value.is_finite().then_some(value)
    }

    /// Whether this prior's marginal likelihood is strictly larger than `other`'s (a prior without
    /// one never fits better; any prior fits better than one without).
    pub fn fits_better_than(&self, other: &KernelModel) -> bool {
        match (self.log_marginal_likelihood, other.log_marginal_likelihood) {
            (Some(mine), Some(theirs)) => mine > theirs,
            (Some(_), None) => true,
            (None, _) => false,
        }
    }

    /// The log marginal likelihood per history row at the hyperparameters in use (`None` without
    /// a history).
    pub fn log_marginal_likelihood(&self) -> Option<f64> {
        self.log_marginal_likelihood
    }

    /// A prior with no history at all: every model gets the no-history prior.
    pub fn without_history(kind: KernelKind, hyperparameters: KernelHyperparameters) -> Self {
        KernelModel {
            kind,
            hyperparameters,
            model_index_by_id: HashMap::new(),
            prior_mean_by_model: Vec::new(),
            mean_quality_by_model: Vec::new(),
            covariance: DMatrix::zeros(0, 0),
            default_prior_mean: 0.5,
            kin_by_model: HashMap::new(),
            log_marginal_likelihood: None,
            history_covariance_weight: 0.0,
            quality_scale: QualityScale::Identity,
        }
    }

    /// The same prior with kin groups for the models the history does not relate: `kin` maps a
    /// model id (the part before any `+`) to its group's name; models of one group are correlated by
    /// [`KIN_CORRELATION`], models of no group or of different groups only through the user's offset.
    pub fn with_kin(mut self, kin: impl IntoIterator<Item = (String, String)>) -> Self {
        self.kin_by_model.extend(kin);
        self
    }

    /// The kin group of a model, if it has one.
    pub fn kin(&self, model_id: &str) -> Option<&str> {
        self.kin_by_model.get(family(model_id)).map(String::as_str)
    }

    /// The same prior blended with the sample covariance of `history` (the history it was built
    /// from) by `choice`'s weight: `(1 - w) K + w S` over the models the history relates (see the
    /// module documentation). A fixed weight outside `[0, 1)` is an error; a history of fewer than
    /// two rows, or one that relates other models than this prior's, leaves the prior as it is
    /// (weight 0).
    pub fn with_history_covariance(
        mut self,
        history: &QualityHistory,
        choice: HistoryCovariance,
    ) -> Result<Self> {
        if let HistoryCovariance::Fixed(weight) = choice
            && !(0.0..1.0).contains(&weight)
        {
            return Err(SchedulerError::Kernel(format!(
                "the weight of the history's covariance must be in [0, 1), got {weight}"
            )));
        }
        let prepared = prepare_history(&self.quality_scale.history(history))?;
        let n_rows = prepared.residuals.ncols();
        if n_rows < 2 || prepared.model_ids.len() != self.covariance.nrows() {
            return Ok(self);
        }
        if prepared
            .model_ids
            .iter()
            .enumerate()
            .any(|(index, id)| self.model_index_by_id.get(id) != Some(&index))
        {
            return Ok(self);
        }
        let weight = match choice {
            HistoryCovariance::Off => 0.0,
            HistoryCovariance::Fixed(weight) => weight,
            HistoryCovariance::CrossValidated => cross_validated_weight(
                &self.covariance,
                self.hyperparameters.noise_variance,
                &prepared.residuals,
            ),
        };
        if weight > 0.0 {
            let residuals = &prepared.residuals;
            let sample = residuals * residuals.transpose() / n_rows as f64;
            self.covariance = &self.covariance * (1.0 - weight) + sample * weight;
        }
        self.history_covariance_weight = weight;
        Ok(self)
    }

    /// The weight of the history's sample covariance in this prior (0: the parametric kernel
    /// alone; see [`KernelModel::with_history_covariance`]).
    pub fn history_covariance_weight(&self) -> f64 {
        self.history_covariance_weight
    }

    /// The kernel shape.
    pub fn kind(&self) -> KernelKind {
        self.kind
    }

    /// The hyperparameters in use (fitted or fixed).
    pub fn hyperparameters(&self) -> KernelHyperparameters {
        self.hyperparameters
    }

    /// The prior mean quality of a model (the no-history prior for an unknown id).
    pub fn prior_mean(&self, model_id: &str) -> f64 {
        self.model_index_by_id
            .get(model_id)
            .map(|&index| self.prior_mean_by_model[index])
            .unwrap_or(self.default_prior_mean)
    }

    /// A model's mean quality over the history rows, in quality units on any scale (on the
    /// identity scale its prior mean; the no-history prior's mean for an unknown id).
    pub fn mean_quality(&self, model_id: &str) -> f64 {
        self.model_index_by_id
            .get(model_id)
            .map(|&index| self.mean_quality_by_model[index])
            .unwrap_or_else(|| self.quality_scale.to_quality(self.default_prior_mean))
    }

    /// The latent prior covariance between two models (ids unknown to the history get the
    /// no-history prior described in the module documentation).
    pub fn covariance(&self, model_a: &str, model_b: &str) -> f64 {
        match (
            self.model_index_by_id.get(model_a),
            self.model_index_by_id.get(model_b),
        ) {
            (Some(&a), Some(&b)) => self.covariance[(a, b)],
            _ => self.no_history_covariance(model_a, model_b),
        }
    }

    /// The covariance of two models that the history does not relate (see the module documentation).
    fn no_history_covariance(&self, model_a: &str, model_b: &str) -> f64 {
        let KernelHyperparameters {
            signal_variance,
            offset_variance,
            ..
        } = self.hyperparameters;
        if model_a == model_b {
            offset_variance + signal_variance
        } else if family(model_a) == family(model_b) {
            offset_variance + FAMILY_CORRELATION * signal_variance
        } else if self.kin(model_a).is_some() && self.kin(model_a) == self.kin(model_b) {
            offset_variance + KIN_CORRELATION * signal_variance
        } else {
            offset_variance
        }
    }

    /// The prior mean vector and latent covariance matrix over the given model ids, in order.
    pub fn prior_over(&self, model_ids: &[String]) -> (DVector<f64>, DMatrix<f64>) {
        let indices: Vec<Option<usize>> = model_ids
            .iter()
            .map(|id| self.model_index_by_id.get(id).copied())
            .collect();
        let n = model_ids.len();
        let mean = DVector::from_iterator(n, model_ids.iter().map(|id| self.prior_mean(id)));
        let covariance = DMatrix::from_fn(n, n, |a, b| match (indices[a], indices[b]) {
            (Some(index_a), Some(index_b)) => self.covariance[(index_a, index_b)],
            _ if a == b => self.no_history_covariance(&model_ids[a], &model_ids[a]),
            _ => self.no_history_covariance(&model_ids[a], &model_ids[b]),
        });
        (mean, covariance)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn small_history() -> QualityHistory {
        QualityHistory {
            model_ids: vec!["a".into(), "b".into(), "c".into(), "d".into()],
            rows: vec![
                vec![Some(0.9), Some(0.85), Some(0.5), Some(0.6)],
                vec![Some(0.7), Some(0.72), Some(0.4), None],
                vec![Some(0.95), Some(0.9), Some(0.8), Some(0.7)],
                vec![Some(0.6), Some(0.55), Some(0.3), Some(0.35)],
                vec![Some(0.8), Some(0.81), Some(0.62), Some(0.5)],
            ],
        }
    }

    #[test]
    fn variants_of_one_model_are_correlated_without_history() {
        let kernel =
            KernelModel::without_history(KernelKind::Matern52, KernelHyperparameters::default());
        let h = KernelHyperparameters::default();
        assert_eq!(
            kernel.covariance("resnet18", "resnet18"),
            h.offset_variance + h.signal_variance
        );
        assert_eq!(
            kernel.covariance("resnet18", "resnet18+norm_k2"),
            h.offset_variance + FAMILY_CORRELATION * h.signal_variance
        );
        assert_eq!(kernel.covariance("resnet18", "vgg16"), h.offset_variance);
        let ids: Vec<String> = ["resnet18", "resnet18+norm_k1", "vgg16"]
            .iter()
            .map(|id| id.to_string())
            .collect();
        let (_, covariance) = kernel.prior_over(&ids);
        assert_eq!(
            covariance[(0, 1)],
            kernel.covariance("resnet18", "resnet18+norm_k1")
        );
        assert_eq!(covariance[(1, 2)], h.offset_variance);
        // Positive definite: the Cholesky factorization exists.
        assert!(covariance.cholesky().is_some());
    }

    #[test]
    fn models_of_one_kin_are_correlated_less_than_variants_and_the_prior_stays_positive_definite() {
        let h = KernelHyperparameters::default();
        let kin = [
            ("gru", "recurrent"),
            ("lstm", "recurrent"),
            ("fcn", "conv1d"),
        ];
        let kernel = KernelModel::without_history(KernelKind::Matern52, h)
            .with_kin(kin.map(|(model, kin)| (model.to_owned(), kin.to_owned())));
        assert_eq!(
            kernel.covariance("gru", "lstm"),
            h.offset_variance + KIN_CORRELATION * h.signal_variance
        );
        // Variants inherit their model's kin; variants of one model stay closer than kin.
        assert_eq!(
            kernel.covariance("gru+norm_k1", "lstm"),
            kernel.covariance("gru", "lstm")
        );
        assert_eq!(
            kernel.covariance("gru", "gru+norm_k1"),
            h.offset_variance + FAMILY_CORRELATION * h.signal_variance
        );
        assert_eq!(kernel.covariance("gru", "fcn"), h.offset_variance);
        assert_eq!(kernel.covariance("gru", "minirocket"), h.offset_variance);
        assert_eq!(kernel.covariance("knn", "minirocket"), h.offset_variance);
        let ids: Vec<String> = [
            "gru",
            "gru+norm_k1",
            "lstm",
            "lstm+norm_k2",
            "fcn",
            "fcn+norm_k1",
            "minirocket",
        ]
        .iter()
        .map(|id| id.to_string())
        .collect();
        let (_, covariance) = kernel.prior_over(&ids);
        assert!(covariance.cholesky().is_some());
    }

    #[test]
    fn gradient_matches_finite_differences_for_both_kernels() {
        let prepared = prepare_history(&small_history()).unwrap();
        for kind in [KernelKind::Rbf, KernelKind::Matern52] {
            let base = KernelHyperparameters {
                signal_variance: 0.02,
                length_scale: 0.3,
                noise_variance: 0.001,
                offset_variance: 0.01,
            };
            let (_, gradient) = log_marginal_likelihood_with_gradient(
                kind,
                &base,
                &prepared.squared_distances,
                &prepared.residuals,
            )
            .unwrap();
            for index in 0..4 {
                let step = 1e-5;
                let mut plus = base.to_log();
                plus[index] += step;
                let mut minus = base.to_log();
                minus[index] -= step;
                let value_at = |log_parameters: [f64; 4]| {
                    log_marginal_likelihood_with_gradient(
                        kind,
                        &KernelHyperparameters::from_log(log_parameters),
                        &prepared.squared_distances,
                        &prepared.residuals,
                    )
                    .unwrap()
                    .0
                };
                let numeric = (value_at(plus) - value_at(minus)) / (2.0 * step);
                assert!(
                    (numeric - gradient[index]).abs() <= 1e-5 * (1.0 + numeric.abs()),
                    "{kind:?} parameter {index}: analytic {} numeric {numeric}",
                    gradient[index]
                );
            }
        }
    }

    #[test]
    fn fitting_does_not_lower_the_likelihood_of_the_grid_start() {
        let history = small_history();
        let prepared = prepare_history(&history).unwrap();
        let fitted = fit_hyperparameters(KernelKind::Matern52, &prepared);
        let fitted_value = log_marginal_likelihood_with_gradient(
            KernelKind::Matern52,
            &fitted,
            &prepared.squared_distances,
            &prepared.residuals,
        )
        .unwrap()
        .0;
        let default_value = log_marginal_likelihood_with_gradient(
            KernelKind::Matern52,
            &KernelHyperparameters::default(),
            &prepared.squared_distances,
            &prepared.residuals,
        )
        .unwrap()
        .0;
        assert!(fitted_value >= default_value);
    }

    #[test]
    fn the_marginal_likelihood_ranks_fitted_priors() {
        let history = small_history();
        let prepared = prepare_history(&history).unwrap();
        let fit = |kind| {
            KernelModel::from_history(&history, kind, HyperparameterChoice::FitMarginalLikelihood)
                .unwrap()
        };
        let (rbf, matern) = (fit(KernelKind::Rbf), fit(KernelKind::Matern52));
        // The stored value is the likelihood at the fitted hyperparameters.
        let expected = log_marginal_likelihood(
            KernelKind::Rbf,
            &rbf.hyperparameters(),
            &prepared.squared_distances,
            &prepared.residuals,
        )
        .unwrap();
        assert_eq!(rbf.log_marginal_likelihood(), Some(expected));
        let (a, b) = (
            rbf.log_marginal_likelihood().unwrap(),
            matern.log_marginal_likelihood().unwrap(),
        );
        assert_eq!(rbf.fits_better_than(&matern), a > b);
        assert_eq!(matern.fits_better_than(&rbf), b > a);
        assert!(!rbf.fits_better_than(&rbf));
        // A prior without history has no likelihood: never the better fit.
        let bare = KernelModel::without_history(KernelKind::Rbf, KernelHyperparameters::default());
        assert_eq!(bare.log_marginal_likelihood(), None);
        assert!(rbf.fits_better_than(&bare));
        assert!(!bare.fits_better_than(&rbf));
    }

    #[test]
    fn unknown_models_get_the_documented_prior() {
        let model = KernelModel::from_history(
            &small_history(),
            KernelKind::Rbf,
            HyperparameterChoice::FitMarginalLikelihood,
        )
        .unwrap();
        let hyper = model.hyperparameters();
        assert_eq!(
            model.covariance("new", "new"),
            hyper.offset_variance + hyper.signal_variance
        );
        assert_eq!(model.covariance("new", "a"), hyper.offset_variance);
        let known_means = ["a", "b", "c", "d"].map(|id| model.prior_mean(id));
        let expected = known_means.iter().sum::<f64>() / 4.0;
        assert!((model.prior_mean("new") - expected).abs() < 1e-12);
        assert!((model.prior_mean("d") - (0.6 + 0.7 + 0.35 + 0.5) / 4.0).abs() < 1e-12);
    }

    /// A history in which models `a` and `b` trade places from data set to data set (one high where
    /// the other is low), which a kernel over quality-vector distances cannot say: their vectors are
    /// far apart, so it relates them only through the users' offset, positively.
    fn traded_places_history(rows: usize) -> QualityHistory {
        use rand::{Rng, SeedableRng};
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(7);
        QualityHistory {
            model_ids: vec!["a".into(), "b".into(), "c".into()],
            rows: (0..rows)
                .map(|_| {
                    let swing: f64 = rng.gen_range(-0.2..0.2);
                    let noise = |rng: &mut rand_chacha::ChaCha8Rng| rng.gen_range(-0.01..0.01);
                    vec![
                        Some(0.6 + swing + noise(&mut rng)),
                        Some(0.6 - swing + noise(&mut rng)),
                        Some(0.5 + noise(&mut rng)),
                    ]
                })
                .collect(),
        }
    }

    #[test]
    fn the_history_covariance_blends_by_its_weight_and_leaves_unknown_models_alone() {
        let history = small_history();
        let parametric = KernelModel::from_history(
            &history,
            KernelKind::Rbf,
            HyperparameterChoice::FitMarginalLikelihood,
        )
        .unwrap();
        let blended = parametric
            .clone()
            .with_history_covariance(&history, HistoryCovariance::Fixed(0.25))
            .unwrap();
        assert_eq!(blended.history_covariance_weight(), 0.25);
        // S(a, c) by hand: residuals against the prior means, the missing cell of d imputed 0.
        let mean = |model: usize| {
            let known: Vec<f64> = history.rows.iter().filter_map(|row| row[model]).collect();
            known.iter().sum::<f64>() / known.len() as f64
        };
        let residual =
            |row: &Vec<Option<f64>>, model: usize| row[model].map_or(0.0, |q| q - mean(model));
        let sample_a_c: f64 = history
            .rows
            .iter()
            .map(|row| residual(row, 0) * residual(row, 2))
            .sum::<f64>()
            / history.rows.len() as f64;
        let sample_d_d: f64 = history
            .rows
            .iter()
            .map(|row| residual(row, 3).powi(2))
            .sum::<f64>()
            / history.rows.len() as f64;
        let expect = |parametric_value: f64, sample_value: f64| {
            0.75 * parametric_value + 0.25 * sample_value
        };
        assert!(
            (blended.covariance("a", "c") - expect(parametric.covariance("a", "c"), sample_a_c))
                .abs()
                < 1e-12
        );
        assert!(
            (blended.covariance("d", "d") - expect(parametric.covariance("d", "d"), sample_d_d))
                .abs()
                < 1e-12
        );
        assert_eq!(
            blended.covariance("new", "a"),
            parametric.covariance("new", "a")
        );
        assert_eq!(blended.prior_mean("a"), parametric.prior_mean("a"));
        let off = parametric
            .clone()
            .with_history_covariance(&history, HistoryCovariance::Off)
            .unwrap();
        assert_eq!(off.covariance("a", "c"), parametric.covariance("a", "c"));
        for weight in [-0.1, 1.0, f64::NAN] {
            let error = parametric
                .clone()
                .with_history_covariance(&history, HistoryCovariance::Fixed(weight))
                .unwrap_err();
            assert!(error.to_string().contains("[0, 1)"), "{error}");
        }
        // One row: nothing to estimate a covariance from, the prior stays as it is.
        let one_row = QualityHistory {
            model_ids: history.model_ids.clone(),
            rows: history.rows[..1].to_vec(),
        };
        let alone = KernelModel::from_history(
            &one_row,
            KernelKind::Rbf,
            HyperparameterChoice::FitMarginalLikelihood,
        )
        .unwrap();
        let same = alone
            .clone()
            .with_history_covariance(&one_row, HistoryCovariance::CrossValidated)
            .unwrap();
        assert_eq!(same.history_covariance_weight(), 0.0);
        assert_eq!(same.covariance("a", "b"), alone.covariance("a", "b"));
    }

    #[test]
    fn cross_validation_takes_the_history_covariance_where_the_kernel_cannot_say_it() {
        let history = traded_places_history(60);
        let parametric = KernelModel::from_history(
            &history,
            KernelKind::Rbf,
            HyperparameterChoice::FitMarginalLikelihood,
        )
        .unwrap();
        assert!(parametric.covariance("a", "b") > 0.0);
        let chosen = parametric
            .clone()
            .with_history_covariance(&history, HistoryCovariance::CrossValidated)
            .unwrap();
        let weight = chosen.history_covariance_weight();
        assert!(HISTORY_COVARIANCE_WEIGHTS.contains(&weight));
        assert!(weight >= 0.6, "weight {weight}");
        assert!(
            chosen.covariance("a", "b") < 0.0,
            "the blend says a and b trade places"
        );
        // The blended prior (plus the noise) stays positive definite.
        let ids: Vec<String> = ["a", "b", "c", "new"].map(String::from).to_vec();
        let (_, mut covariance) = chosen.prior_over(&ids);
        for i in 0..ids.len() {
            covariance[(i, i)] += chosen.hyperparameters().noise_variance;
        }
        assert!(covariance.cholesky().is_some());
    }

    #[test]
    fn the_history_covariance_parses_its_three_forms() {
        assert_eq!(
            HistoryCovariance::parse("cv").unwrap(),
            HistoryCovariance::CrossValidated
        );
        assert_eq!(
            HistoryCovariance::parse("cross_validated").unwrap(),
            HistoryCovariance::CrossValidated
        );
        assert_eq!(
            HistoryCovariance::parse("off").unwrap(),
            HistoryCovariance::Off
        );
        assert_eq!(
            HistoryCovariance::parse("0.5").unwrap(),
            HistoryCovariance::Fixed(0.5)
        );
        // What it prints, it reads back (the replay's summary.json records the printed form).
        for value in [
            HistoryCovariance::CrossValidated,
            HistoryCovariance::Off,
            HistoryCovariance::Fixed(0.0),
            HistoryCovariance::Fixed(0.65),
        ] {
            assert_eq!(HistoryCovariance::parse(&value.to_string()).unwrap(), value);
        }
        for bad in ["1", "-0.2", "half", "NaN"] {
            let error = HistoryCovariance::parse(bad).unwrap_err().to_string();
            assert!(
                error.contains(bad) && error.contains("cross_validated"),
                "{error}"
            );
        }
    }

    /// Rows at levels from near chance to near perfect whose models spread as `p (1 - p)`: even
    /// on the log-odds scale, wide in quality only in the middle (as accuracies do).
    fn heteroscedastic_history(rows: usize) -> QualityHistory {
        use rand::{Rng, SeedableRng};
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(3);
        let offsets = [-0.6, -0.2, 0.0, 0.3, 0.5, 0.8];
        QualityHistory {
            model_ids: (0..offsets.len()).map(|m| format!("m{m}")).collect(),
            rows: (0..rows)
                .map(|_| {
                    let level: f64 = rng.gen_range(-3.5..3.5);
                    offsets
                        .iter()
                        .map(|offset| {
                            let noise: f64 = rng.gen_range(-0.1..0.1);
                            Some(QualityScale::Logit.to_quality(level + offset + noise))
                        })
                        .collect()
                })
                .collect(),
        }
    }

    #[test]
    fn quality_scales_map_and_invert() {
        for q in [0.01, 0.3, 0.5, 0.97] {
            let z = QualityScale::Logit.to_model(q);
            assert!((QualityScale::Logit.to_quality(z) - q).abs() < 1e-12);
            assert_eq!(QualityScale::Identity.to_model(q), q);
            assert_eq!(QualityScale::Identity.to_quality(q), q);
            assert_eq!(QualityScale::Identity.quality_slope(q), 1.0);
            // The slope is the derivative of to_quality.
            let h = 1e-6;
            let numeric = (QualityScale::Logit.to_quality(z + h)
                - QualityScale::Logit.to_quality(z - h))
                / (2.0 * h);
            assert!((QualityScale::Logit.quality_slope(z) - numeric).abs() < 1e-8);
        }
        // Saturated qualities are clamped, so every value is finite.
        let top = QualityScale::Logit.to_model(1.0);
        assert!(
            top.is_finite()
                && (QualityScale::Logit.to_quality(top) - (1.0 - LOGIT_EPSILON)).abs() < 1e-12
        );
        assert!(QualityScale::Logit.to_model(-3.0).is_finite());
    }

    #[test]
    fn the_density_of_a_row_is_the_gaussian_of_its_known_entries_plus_the_jacobian() {
        let history = small_history();
        for scale in [QualityScale::Identity, QualityScale::Logit] {
            let model = KernelModel::from_history_in_scale(
                &history,
                KernelKind::Rbf,
                HyperparameterChoice::FitMarginalLikelihood,
                scale,
            )
            .unwrap();
            assert_eq!(model.quality_scale(), scale);
            // One known entry: a 1-D Gaussian.
            let row = [None, Some(0.8), None, None];
            let variance = model.covariance("b", "b") + model.hyperparameters().noise_variance;
            let residual = scale.to_model(0.8) - model.prior_mean("b");
            let jacobian = match scale {
                QualityScale::Identity => 0.0,
                QualityScale::Logit => -(0.8f64 * 0.2).ln(),
            };
            let expected = -0.5 * residual * residual / variance
                - 0.5 * variance.ln()
                - 0.5 * (2.0 * std::f64::consts::PI).ln()
                + jacobian;
            let value = model.log_density_of_row(&history.model_ids, &row).unwrap();
            assert!(
                (value - expected).abs() < 1e-9,
                "{scale:?}: {value} vs {expected}"
            );
            assert!(
                model
                    .log_density_of_row(&history.model_ids, &[None; 4])
                    .is_none()
            );
        }
    }

    #[test]
    fn the_density_of_rows_factored_per_pattern_is_the_sum_of_the_rows_densities() {
        let mut history = small_history();
        // Three patterns of known entries: complete rows, row 1 without d, and one without a, c.
        history.rows.push(vec![None, Some(0.66), None, Some(0.41)]);
        for scale in [QualityScale::Identity, QualityScale::Logit] {
            let model = KernelModel::from_history_in_scale(
                &history,
                KernelKind::Matern52,
                HyperparameterChoice::FitMarginalLikelihood,
                scale,
            )
            .unwrap();
            let rows = || history.rows.iter().map(|row| row.as_slice());
            let per_row: f64 = rows()
                .map(|row| model.log_density_of_row(&history.model_ids, row).unwrap())
                .sum();
            let factored = model
                .log_density_of_rows(&history.model_ids, rows())
                .unwrap();
            assert!(
                (factored - per_row).abs() < 1e-9 * per_row.abs().max(1.0),
                "{scale:?}: {factored} vs {per_row}"
            );
            // A row without a known entry has no density, so neither has the sum.
            let empty = [None; 4];
            assert!(
                model
                    .log_density_of_rows(
                        &history.model_ids,
                        rows().chain(std::iter::once(&empty[..]))
                    )
                    .is_none()
            );
        }
    }

    #[test]
    fn the_history_chooses_the_log_odds_where_spread_shrinks_near_the_bounds() {
        let choose = |history: &QualityHistory| {
            let identity = KernelModel::from_history(
                history,
                KernelKind::Rbf,
                HyperparameterChoice::FitMarginalLikelihood,
            )
            .unwrap();
            choose_quality_scale(
                history,
                &identity,
                HyperparameterChoice::FitMarginalLikelihood,
            )
            .unwrap()
            .map_or(identity.quality_scale(), |chosen| chosen.quality_scale())
        };
        assert_eq!(choose(&heteroscedastic_history(40)), QualityScale::Logit);
        // Rows that spread alike at every level (the synthetic family's kind) stay as they are.
        assert_eq!(choose(&traded_places_history(40)), QualityScale::Identity);
        // Qualities outside [0, 1] are not fractions: the identity scale, whatever the rest says.
        let mut outside = heteroscedastic_history(40);
        outside.rows[0][0] = Some(1.5);
        assert_eq!(choose(&outside), QualityScale::Identity);
        // Fewer than two rows strictly inside (0, 1): nothing to compare, the identity scale.
        let mut saturated = heteroscedastic_history(3);
        for row in &mut saturated.rows[..2] {
            row[0] = Some(1.0);
        }
        assert_eq!(choose(&saturated), QualityScale::Identity);
    }
}
