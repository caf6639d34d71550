//! Setting a kin aside: a budget spent where it can still win.
//!
//! The GP lowers the siblings of a poor model only through the kin correlation of the prior
//! ([`crate::kernel::KIN_CORRELATION`]), and a per-cost rule still ranks an expensive sibling with a
//! wide posterior worth a try when nothing cheaper is left: six networks of about a minute each were
//! trained at 0.02-0.06 on a 52-class series task after MiniRocket had reached 0.74 in 13 s, while
//! other users waited. The rule here is plain and visible instead: once [`SET_ASIDE_AFTER`] models
//! of a kin (variants of one model count once) have been tried on the user's current data and the
//! kin's best quality is at least [`SchedulerConfig::set_aside_margin`] below the user's best (a
//! model of another kin), its untrained candidates that are expected to cost more than that best
//! one are set aside for this data version. One failed model is not enough: an image network at
//! chance under one input normalization says little about the other networks, while two unrelated
//! models of a kin far behind do. A cheap sibling stays eligible (trying
//! it costs less than the best did); a new data version, or a better run of the kin, brings them
//! back; a user whose only untrained candidates are set aside is finished, and its turns go to the
//! others.
//!
//! The rule is a function of the user's observations (recomputed on every question, never stored),
//! so the summary cache, which is dropped on every change to a user, stays exact. It acts only on
//! models whose kin the prior names ([`crate::KernelModel::with_kin`]).

use super::*;
use crate::kernel::family;

/// How many different models (ids up to the first `+`) of a kin must have been tried before the
/// kin can be set aside.
pub const SET_ASIDE_AFTER: usize = 2;

/// An untrained candidate that [`Scheduler::set_aside`] leaves out, and why.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SetAside {
    /// The candidate set aside.
    pub model_id: String,
    /// Its kin.
    pub kin: String,
    /// The best quality a model of that kin reached on the user's current data.
    pub kin_quality: f64,
    /// The user's best model on its current data.
    pub best_model_id: String,
    /// Its quality.
    pub best_quality: f64,
}

impl Scheduler {
    /// Why candidate `k` of `user` is set aside, if it is (see the module documentation).
    fn set_aside_reason(&self, user: &UserState, k: usize) -> Option<SetAside> {
        let margin = self.set_aside_margin?;
        let candidate = &user.candidates[k];
        if candidate.status != CandidateStatus::Eligible {
            return None;
        }
        let best = user.best_current.as_ref()?;
        let kin = self.kernel.kin(&candidate.model_id)?;
        if self.kernel.kin(&best.model_id) == Some(kin) || candidate.expected_cost <= best.cost {
            return None;
        }
        let tried: Vec<(&str, f64)> = user
            .candidates
            .iter()
            .filter(|other| self.kernel.kin(&other.model_id) == Some(kin))
            .filter_map(|other| Some((family(&other.model_id), other.observed_quality?)))
            .collect();
        let mut models: Vec<&str> = tried.iter().map(|&(model, _)| model).collect();
        models.sort_unstable();
        models.dedup();
        let kin_quality = tried
            .iter()
            .map(|&(_, quality)| quality)
            .fold(f64::NEG_INFINITY, f64::max);
        (models.len() >= SET_ASIDE_AFTER && best.quality - kin_quality >= margin).then(|| {
            SetAside {
                model_id: candidate.model_id.clone(),
                kin: kin.to_owned(),
                kin_quality,
                best_model_id: best.model_id.clone(),
                best_quality: best.quality,
            }
        })
    }

    /// The indices of `user`'s candidates that may be trained next: eligible, and not set aside.
    pub(super) fn eligible<'a>(&'a self, user: &'a UserState) -> impl Iterator<Item = usize> + 'a {
        (0..user.candidates.len()).filter(move |&k| {
            user.candidates[k].status == CandidateStatus::Eligible
                && self.set_aside_reason(user, k).is_none()
        })
    }

    /// The user's untrained candidates that are set aside on its current data, with the reason
    /// (registration order; empty when none is).
    pub fn set_aside(&self, user_id: &str) -> Result<Vec<SetAside>> {
        let user = &self.users[self.user_index(user_id)?];
        Ok((0..user.candidates.len())
            .filter_map(|k| self.set_aside_reason(user, k))
            .collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{KernelHyperparameters, KernelKind, KernelModel};

    /// A user with a cheap random-kernel model and two expensive kin of networks.
    fn series_user(margin: Option<f64>) -> Scheduler {
        let kernel =
            KernelModel::without_history(KernelKind::Matern52, KernelHyperparameters::default())
                .with_kin(
                    [
                        ("minirocket", "random_kernels"),
                        ("lstm", "recurrent"),
                        ("gru", "recurrent"),
                        ("rnn", "recurrent"),
                        ("fcn", "temporal_cnn"),
                        ("resnet1d", "temporal_cnn"),
                    ]
                    .map(|(model, kin)| (model.to_owned(), kin.to_owned())),
                );
        let config = SchedulerConfig {
            set_aside_margin: margin,
            ..SchedulerConfig::default()
        };
        let mut scheduler = Scheduler::new(Arc::new(kernel), config);
        let specs = [
            ("minirocket", 13.0),
            ("lstm", 56.0),
            ("lstm+norm_k1", 56.0),
            ("gru", 50.0),
            ("rnn", 45.0),
            ("fcn", 40.0),
            ("resnet1d", 60.0),
        ]
        .map(|(model, cost)| CandidateSpec {
            model_id: model.to_owned(),
            expected_cost: cost,
        })
        .to_vec();
        scheduler.register_user("series", specs, &[]).unwrap();
        scheduler
    }

    fn report(scheduler: &mut Scheduler, model: &str, quality: f64, cost: f64) {
        let decision = Decision {
            user_id: "series".to_owned(),
            model_id: model.to_owned(),
            data_version: scheduler.users[0].data_version,
        };
        scheduler.report(&decision, quality, cost).unwrap();
    }

    fn set_aside_models(scheduler: &Scheduler) -> Vec<String> {
        let set_aside = scheduler.set_aside("series").unwrap();
        set_aside.into_iter().map(|s| s.model_id).collect()
    }

    #[test]
    fn a_kin_far_below_the_best_after_two_models_is_set_aside_and_the_user_finishes() {
        let mut scheduler = series_user(Some(DEFAULT_SET_ASIDE_MARGIN));
        report(&mut scheduler, "minirocket", 0.74, 13.0);
        report(&mut scheduler, "lstm", 0.04, 56.0);
        // One model of the kin tried: nothing yet. A variant of the same model is still one.
        assert!(set_aside_models(&scheduler).is_empty());
        report(&mut scheduler, "lstm+norm_k1", 0.02, 56.0);
        assert!(set_aside_models(&scheduler).is_empty());
        // A second recurrent model, 0.69 below the best: the rest of the kin is set aside.
        report(&mut scheduler, "gru", 0.05, 50.0);
        assert_eq!(set_aside_models(&scheduler), ["rnn"]);
        let reason = &scheduler.set_aside("series").unwrap()[0];
        assert_eq!(
            (reason.kin.as_str(), reason.best_model_id.as_str()),
            ("recurrent", "minirocket")
        );
        assert!((reason.kin_quality - 0.05).abs() < 1e-12);
        // The temporal CNNs are untried: they are what is left.
        let next = scheduler.next_decision().unwrap();
        assert!(["fcn", "resnet1d"].contains(&next.model_id.as_str()));
        scheduler.report(&next, 0.06, 45.0).unwrap();
        assert_eq!(set_aside_models(&scheduler), ["rnn"]);
        let last = scheduler.next_decision().unwrap();
        assert_ne!(last.model_id, "rnn");
        scheduler.report(&last, 0.03, 45.0).unwrap();
        assert!(scheduler.is_finished("series").unwrap());
        assert_eq!(scheduler.next_decision(), None);
        assert!(scheduler.user_summaries().is_empty());
    }

    #[test]
    fn a_kin_close_to_the_best_or_cheaper_than_it_stays_eligible() {
        // 0.29 below the best: inside the margin.
        let mut scheduler = series_user(Some(DEFAULT_SET_ASIDE_MARGIN));
        report(&mut scheduler, "minirocket", 0.74, 13.0);
        report(&mut scheduler, "lstm", 0.45, 56.0);
        report(&mut scheduler, "gru", 0.30, 50.0);
        assert!(set_aside_models(&scheduler).is_empty());
        // Far below, but the best cost more than the sibling is expected to.
        let mut scheduler = series_user(Some(DEFAULT_SET_ASIDE_MARGIN));
        report(&mut scheduler, "minirocket", 0.74, 60.0);
        report(&mut scheduler, "lstm", 0.04, 56.0);
        report(&mut scheduler, "gru", 0.04, 50.0);
        assert!(set_aside_models(&scheduler).is_empty());
        // The best of the kin counts, and the best may change kin.
        let mut scheduler = series_user(Some(DEFAULT_SET_ASIDE_MARGIN));
        report(&mut scheduler, "minirocket", 0.74, 13.0);
        report(&mut scheduler, "lstm", 0.04, 56.0);
        report(&mut scheduler, "gru", 0.04, 50.0);
        report(&mut scheduler, "fcn", 0.9, 40.0);
        // fcn is now the best: the recurrent kin is 0.86 below it and rnn (45) is expected to
        // cost more than fcn (40); resnet1d is fcn's kin.
        assert_eq!(set_aside_models(&scheduler), ["lstm+norm_k1", "rnn"]);
        assert!(!scheduler.is_finished("series").unwrap());
    }

    #[test]
    fn a_new_data_version_or_no_margin_sets_nothing_aside() {
        let fail_two = |scheduler: &mut Scheduler| {
            report(scheduler, "minirocket", 0.74, 13.0);
            report(scheduler, "lstm", 0.04, 56.0);
            report(scheduler, "gru", 0.04, 50.0);
        };
        let mut scheduler = series_user(Some(DEFAULT_SET_ASIDE_MARGIN));
        fail_two(&mut scheduler);
        assert_eq!(set_aside_models(&scheduler), ["lstm+norm_k1", "rnn"]);
        scheduler.data_changed("series").unwrap();
        assert!(set_aside_models(&scheduler).is_empty());
        let mut scheduler = series_user(None);
        fail_two(&mut scheduler);
        assert!(set_aside_models(&scheduler).is_empty());
    }
}
