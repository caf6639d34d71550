//! Bringing the scheduler up to date with the store's apps ([`Engine::sync`]): new apps registered
//! with their candidates, estimated costs and prior history, apps whose data changed re-opened,
//! removed ones dropped; and the kernel the scheduler starts from, fitted to the store's history.

use super::*;

impl Engine {
    /// Brings the scheduler up to date with the store's apps (see the module documentation).
    pub fn sync(&mut self, events: &mut dyn FnMut(Event)) -> Result<()> {
        let apps = self.store.apps()?;
        let names: Vec<String> = apps.iter().map(|app| app.name.clone()).collect();
        let gone: Vec<String> = self
            .apps
            .keys()
            .filter(|name| !names.contains(name))
            .cloned()
            .collect();
        for name in gone {
            self.apps.remove(&name);
            self.forget_user(&name)?;
        }
        for app in apps {
            let known_version = self.apps.get(&app.name).map(|state| state.data_version);
            if known_version == Some(app.data_version)
                || self.skipped.get(&app.name) == Some(&app.data_version)
            {
                continue;
            }
            match self.prepare(&app) {
                Ok(Some(state)) => {
                    let candidates = self.candidate_specs(&app.name, &state, events);
                    let history = self.prior_history(&state)?;
                    if known_version.is_some() {
                        self.forget_user(&app.name)?;
                        events(Event::DataChanged {
                            app: app.name.clone(),
                            data_version: app.data_version,
                        });
                    } else {
                        events(Event::AppRegistered {
                            app: app.name.clone(),
                            candidates: candidates.len(),
                        });
                    }
                    self.scheduler
                        .register_user(&app.name, candidates, &history)?;
                    self.skipped.remove(&app.name);
                    self.apps.insert(app.name.clone(), state);
                }
                Ok(None) => {
                    // Too few examples for now: say so once, look again when the data changes.
                    if self.apps.remove(&app.name).is_some() {
                        self.forget_user(&app.name)?;
                    }
                    self.skipped.insert(app.name.clone(), app.data_version);
                    let (_, enabled) = self.store.example_counts(app.id)?;
                    events(Event::AppSkipped {
                        app: app.name.clone(),
                        reason: format!(
                            "{enabled} enabled example(s); training starts at {MIN_EXAMPLES} (feed more, or enable some with `refine`)"
                        ),
                    });
                }
                Err(error) => {
                    if self.apps.remove(&app.name).is_some() {
                        self.forget_user(&app.name)?;
                    }
                    self.skipped.insert(app.name.clone(), app.data_version);
                    events(Event::AppSkipped {
                        app: app.name.clone(),
                        reason: error.to_string(),
                    });
                }
            }
        }
        Ok(())
    }

    /// Takes an app out of the scheduler (removed, its data changed, or left out), with the
    /// decisions in flight for it: a unit or MOP run decided for its old registration still
    /// commits to the store, but it is not reported to the new one (it trained on other data; the
    /// candidate is eligible again on the new data, as a feed promises).
    pub(super) fn forget_user(&mut self, name: &str) -> Result<()> {
        self.scheduler.remove_user(name)?;
        let of_app = |decision: &Option<Decision>| {
            decision
                .as_ref()
                .is_some_and(|decision| decision.user_id == name)
        };
        for entry in self.in_flight.values_mut() {
            if of_app(&entry.decision) {
                entry.decision = None;
            }
        }
        for flight in &mut self.mop_flights {
            if of_app(&flight.decision) {
                flight.decision = None;
            }
        }
        Ok(())
    }

    /// Reads an app's manifest and enabled examples; `None` when it has too few examples.
    pub(super) fn prepare(&self, app: &easeml_store::App) -> Result<Option<AppState>> {
        let model = AppModel::from_manifest(&app.name, &app.manifest)?;
        let Some(examples) = load_examples(&self.store, app.id, &model)? else {
            return Ok(None);
        };
        Ok(Some(AppState {
            id: app.id,
            model: Arc::new(model),
            data_version: app.data_version,
            examples: Arc::new(examples),
        }))
    }

    /// The app's candidates that fit its data, with their estimated costs; each one left out is
    /// reported with its reason.
    pub(super) fn candidate_specs(
        &self,
        app: &str,
        state: &AppState,
        events: &mut dyn FnMut(Event),
    ) -> Vec<CandidateSpec> {
        let budget = self.budget(state, None);
        // One estimate per model: a candidate's `+norm_kK` rescales its inputs and costs the
        // same (an estimate runs the network on a sample: seconds for 38 candidates of 256x256
        // images, which came out of the first run's time).
        let mut by_model: HashMap<ModelKind, std::result::Result<f64, String>> = HashMap::new();
        state
            .model
            .candidates
            .iter()
            .filter_map(|id| {
                let estimate = Candidate::parse(id)
                    .and_then(|candidate| {
                        candidate.check_fits(&Task::of(&state.examples)?)?;
                        Ok(candidate)
                    })
                    .map_err(|error| error.to_string())
                    .and_then(|candidate| {
                        by_model
                            .entry(candidate.model)
                            .or_insert_with(|| {
                                estimate_cost(
                                    &Candidate::new(candidate.model),
                                    &state.examples,
                                    &budget,
                                )
                                .map(|estimate| estimate.seconds)
                                .map_err(|error| error.to_string())
                            })
                            .clone()
                    });
                match estimate {
                    Ok(seconds) => Some(CandidateSpec {
                        model_id: id.clone(),
                        expected_cost: seconds.max(1e-3),
                    }),
                    Err(reason) => {
                        events(Event::CandidateLeftOut {
                            app: app.to_owned(),
                            candidate: id.clone(),
                            reason,
                        });
                        None
                    }
                }
            })
            .collect()
    }

    /// The app's finished runs on its current data, as the scheduler's prior history, one
    /// observation per candidate as the scheduler was told it: the best quality of its runs (a
    /// decision trained by hopping has one run per learning rate), as [`scheduler_quality`]
    /// reports it (the current data's protocol says how many examples validated them), and their
    /// summed cost.
    pub(super) fn prior_history(&self, state: &AppState) -> Result<Vec<PriorObservation>> {
        let budget = self.budget(state, None);
        let validated = Validation::choose(&state.examples, &budget).validated(&state.examples);
        let mut by_candidate: BTreeMap<String, PriorObservation> = BTreeMap::new();
        for run in self.store.runs(state.id)? {
            if run.data_version != state.data_version
                || !matches!(run.state, RunState::Done | RunState::Failed)
                || !state.model.candidates.contains(&run.candidate)
            {
                continue;
            }
            let quality = scheduler_quality(run.quality.unwrap_or(0.0), validated);
            let cost = run.cost_seconds.unwrap_or(1.0).max(1e-3);
            by_candidate
                .entry(run.candidate.clone())
                .and_modify(|seen| {
                    seen.quality = seen.quality.max(quality);
                    seen.cost += cost;
                })
                .or_insert(PriorObservation {
                    model_id: run.candidate,
                    quality,
                    cost,
                });
        }
        Ok(by_candidate.into_values().collect())
    }
}

/// The scheduler's prior over models, fitted on the store's own history (appendix A): one row per app
/// (each candidate's best quality), over the candidates that at least two apps have finished, when at
/// least two apps have two or more of them, on the quality scale under which those rows are more
/// likely (`easeml_scheduler::choose_quality_scale`: log-odds or as they are). Otherwise (a fresh store, or apps whose workloads share no
/// model) the documented no-history prior: Matern-5/2 with [`KernelHyperparameters::default`] and
/// variants of one model correlated (`easeml_scheduler::kernel::FAMILY_CORRELATION`). Either way
/// [`Engine::open`] adds the models' kin (`ModelKind::kin`) for the models the history does not
/// relate.
pub(super) fn kernel_from_history(store: &Store) -> Result<KernelModel> {
    let mut rows: Vec<BTreeMap<String, f64>> = Vec::new();
    for app in store.apps()? {
        let mut row = BTreeMap::new();
        for run in store.runs(app.id)? {
            if let (RunState::Done, Some(quality)) = (run.state, run.quality) {
                let entry = row.entry(run.candidate).or_insert(quality);
                *entry = f64::max(*entry, quality);
            }
        }
        rows.push(row);
    }
    let mut shared: BTreeMap<&str, usize> = BTreeMap::new();
    for row in &rows {
        for id in row.keys() {
            *shared.entry(id.as_str()).or_default() += 1;
        }
    }
    let model_ids: Vec<String> = shared
        .iter()
        .filter(|&(_, &count)| count >= 2)
        .map(|(id, _)| (*id).to_owned())
        .collect();
    let history_rows: Vec<Vec<Option<f64>>> = rows
        .iter()
        .map(|row| {
            model_ids
                .iter()
                .map(|id| row.get(id).copied())
                .collect::<Vec<_>>()
        })
        .filter(|row: &Vec<Option<f64>>| row.iter().flatten().count() >= 2)
        .collect();
    if history_rows.len() >= 2 {
        let history = easeml_scheduler::QualityHistory {
            model_ids,
            rows: history_rows,
        };
        let choice = easeml_scheduler::HyperparameterChoice::FitMarginalLikelihood;
        if let Ok(identity) = KernelModel::from_history(&history, KernelKind::Matern52, choice) {
            return Ok(
                match easeml_scheduler::choose_quality_scale(&history, &identity, choice) {
                    Ok(Some(logit)) => logit,
                    // No better scale, or the log-odds fit failed: the qualities as they are.
                    Ok(None) | Err(_) => identity,
                },
            );
        }
    }
    Ok(KernelModel::without_history(
        KernelKind::Matern52,
        KernelHyperparameters::default(),
    ))
}
