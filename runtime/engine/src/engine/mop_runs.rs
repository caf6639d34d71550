//! The MOP run lifecycle as the coordinator drives it: a decision started as MOP runs over the
//! live workers (one per learning rate, hopping or data-parallel), runs adopted from a previous
//! session, advanced step by step and reported when the last one ends, or left open at the
//! session's end for the next.

use super::*;

impl Engine {
    /// Starts the decision as MOP runs over `workers`, one per learning rate of
    /// [`EngineConfig::mop_learning_rates`] (Cerebro's configurations, hopping independently, or
    /// each data-parallel over all the workers), when [`mop::choose_training`] says so. `false` when it is not one, or when the app's data cannot be
    /// cut into that many partitions with training rows in each (it then trains as a whole run,
    /// which needs no cut).
    pub(super) fn start_mop_run(
        &mut self,
        decision: &Decision,
        workers: &[String],
        events: &mut dyn FnMut(Event),
    ) -> Result<bool> {
        let Some(state) = self.apps.get(&decision.user_id) else {
            return Ok(false);
        };
        let (app, data_version) = (state.id, state.data_version);
        let data_bytes = state.examples.bytes();
        let rates = self.config.mop_learning_rates.len().max(1);
        let mut choice = MopChoice {
            candidate: &decision.model_id,
            workers: workers.len(),
            data_bytes,
            // The most the app could have open: whether a decision trains whole does not depend
            // on it, so a decision that trains whole even so needs no read of the app's runs.
            open_models: usize::MAX,
        };
        let training = |choice: &MopChoice<'_>| {
            mop::choose_training(self.config.parallelism, choice, self.config.mop_above_bytes)
        };
        if training(&choice) == Training::Whole {
            return Ok(false);
        }
        let hoppable: Vec<String> = state
            .model
            .candidates
            .iter()
            .filter(|candidate| mop::can_hop(candidate))
            .cloned()
            .collect();
        let finished: std::collections::HashSet<String> = self
            .store
            .runs(app)?
            .into_iter()
            .filter(|run| run.data_version == data_version)
            .filter(|run| matches!(run.state, RunState::Done | RunState::Failed))
            .map(|run| run.candidate)
            .collect();
        choice.open_models = rates
            * hoppable
                .iter()
                .filter(|candidate| !finished.contains(*candidate))
                .count();
        let gang = match training(&choice) {
            Training::Whole => return Ok(false),
            Training::Hop => false,
            Training::Gang => true,
        };
        // A whole run's time limit (at most 0.9 x `train_time`), spent across the workers.
        let max_seconds = self.unit_spec(state, None).max_seconds;
        let seed = mop::run_seed(self.config.seed, &decision.user_id, &decision.model_id);
        let mut flight = MopFlight {
            decision: Some(decision.clone()),
            app: decision.user_id.clone(),
            candidate: decision.model_id.clone(),
            open: BTreeMap::new(),
            best: 0.0,
            cost: 0.0,
        };
        let plans: Vec<MopPlan> = self
            .config
            .mop_learning_rates
            .iter()
            .enumerate()
            .map(|(index, &rate)| {
                let mut plan = MopPlan::new(workers.len() as u64, self.config.mop_epochs);
                plan.learning_rate = rate;
                plan.seed = seed.wrapping_add(index as u64);
                plan.patience = self.config.mop_patience;
                plan.max_seconds = Some(max_seconds);
                plan.gang = gang;
                plan
            })
            .collect();
        let runs = match mop::start_runs(&mut self.store, app, &decision.model_id, &plans, workers)
        {
            Ok(runs) => runs,
            Err(Error::Store(error)) => return Err(error.into()),
            // Every plan is checked before any run is queued: none was.
            Err(_) => return Ok(false),
        };
        for (run, plan) in runs.into_iter().zip(&plans) {
            events(Event::MopRunStarted {
                app: decision.user_id.clone(),
                candidate: decision.model_id.clone(),
                run,
                number: self.store.run(run)?.number,
                learning_rate: plan.learning_rate,
                partitions: plan.partitions,
                epochs: plan.epochs,
                resumed: false,
                data_parallel: gang,
            });
            let silence = self.worker_silence();
            flight
                .open
                .insert(run, OpenMopRun::holding(plan.partitions, gang, silence));
        }
        if flight.open.is_empty() {
            return Ok(false);
        }
        self.mop_flights.push(flight);
        Ok(true)
    }

    /// The workers' places the MOP runs in flight hold: one per hopping run, one per rank of a
    /// data-parallel run.
    pub(super) fn mop_places(&self) -> usize {
        self.mop_flights
            .iter()
            .flat_map(|flight| flight.open.values())
            .map(|run| run.places)
            .sum()
    }

    /// Takes over the MOP runs a previous session left open (queued or running, with sub-epoch
    /// units): the open runs of one candidate on one data version are one decision in flight
    /// for the scheduler, advanced and reported like the ones this session starts.
    pub(super) fn adopt_mop_runs(&mut self, events: &mut dyn FnMut(Event)) -> Result<()> {
        let known: std::collections::HashSet<RunId> = self
            .mop_flights
            .iter()
            .flat_map(|flight| flight.open.keys().copied())
            .collect();
        for app in self.store.apps()? {
            let mut groups: BTreeMap<(String, u64), Vec<RunId>> = BTreeMap::new();
            let mut places: BTreeMap<RunId, OpenMopRun> = BTreeMap::new();
            for run in self.store.runs(app.id)? {
                if !matches!(run.state, RunState::Queued | RunState::Running)
                    || known.contains(&run.id)
                {
                    continue;
                }
                let Some(shape) = mop::mop_shape(&self.store, run.id)? else {
                    continue;
                };
                places.insert(
                    run.id,
                    OpenMopRun::holding(shape.partitions, shape.gang, self.worker_silence()),
                );
                events(Event::MopRunStarted {
                    app: app.name.clone(),
                    candidate: run.candidate.clone(),
                    run: run.id,
                    number: run.number,
                    learning_rate: shape.learning_rate,
                    partitions: shape.partitions,
                    epochs: shape.epochs,
                    resumed: true,
                    data_parallel: shape.gang,
                });
                groups
                    .entry((run.candidate, run.data_version))
                    .or_default()
                    .push(run.id);
            }
            for ((candidate, data_version), runs) in groups {
                let decision = self.decision_for_run(app.id, data_version, &candidate);
                if let Some(decision) = &decision {
                    self.scheduler.mark_in_flight(decision)?;
                }
                self.mop_flights.push(MopFlight {
                    decision,
                    app: app.name.clone(),
                    candidate,
                    open: runs
                        .into_iter()
                        .filter_map(|run| places.remove(&run).map(|open| (run, open)))
                        .collect(),
                    best: 0.0,
                    cost: 0.0,
                });
            }
        }
        Ok(())
    }

    /// One step of each open MOP run ([`mop::advance`]): progress events; a done or failed run's
    /// event; and a decision whose last run ended reported to the scheduler with the best of its
    /// runs' qualities and the sum of their costs. A run whose coordinator step fails for a
    /// reason of its own (not the store's) fails, saying why. True when a decision ended.
    pub(super) fn advance_mop_runs(
        &mut self,
        summary: &mut TrainSummary,
        events: &mut dyn FnMut(Event),
    ) -> Result<bool> {
        let mut ended = false;
        let mut flights = std::mem::take(&mut self.mop_flights);
        let outcome = (|| -> Result<()> {
            for flight in &mut flights {
                let runs: Vec<RunId> = flight.open.keys().copied().collect();
                for run in runs {
                    let Some(entry) = flight.open.get_mut(&run) else {
                        continue;
                    };
                    let status = match mop::advance_with(&mut self.store, run, &mut entry.progress)
                    {
                        Ok(status) => status,
                        Err(Error::Store(easeml_store::Error::NoSuchRun(_))) => {
                            // Gone with its app.
                            flight.open.remove(&run);
                            continue;
                        }
                        Err(Error::Store(error)) => return Err(error.into()),
                        Err(error) => {
                            let reason = error.to_string();
                            mop::fail_run(&mut self.store, run, &reason)?;
                            MopStatus::Failed(reason)
                        }
                    };
                    match status {
                        MopStatus::Training {
                            committed,
                            total,
                            workers,
                        } => {
                            if let Some(entry) = flight.open.get_mut(&run) {
                                // A gang that turned into hops gives its other places back.
                                entry.places = workers;
                                if committed > entry.committed {
                                    entry.committed = committed;
                                    events(Event::RunProgress {
                                        app: flight.app.clone(),
                                        candidate: flight.candidate.clone(),
                                        run,
                                        number: self.store.run(run)?.number,
                                        done: committed,
                                        total,
                                    });
                                }
                            }
                        }
                        MopStatus::Done(_) | MopStatus::Failed(_) => {
                            flight.open.remove(&run);
                            let (record, reported) = self.announce(run, events)?;
                            if record.state == RunState::Done {
                                summary.finished += 1;
                            } else {
                                summary.failed += 1;
                            }
                            flight.best = flight.best.max(reported);
                            flight.cost += record.cost_seconds.unwrap_or(0.0);
                        }
                    }
                }
            }
            Ok(())
        })();
        let mut reported = Ok(());
        for flight in flights {
            if !flight.open.is_empty() {
                self.mop_flights.push(flight);
                continue;
            }
            ended = true;
            if let Some(decision) = &flight.decision
                && let Err(error) =
                    self.report(decision, flight.best, flight.cost, RunEnd::OnItsOwn, events)
            {
                reported = Err(error);
            }
        }
        outcome.and(reported).map(|()| ended)
    }

    /// At the session's end: the MOP runs stay open in the store (their units are leased by
    /// whichever workers are live, and the next coordinating session resumes them); their
    /// decisions are no longer in flight for this session's scheduler. Returns how many runs.
    pub(super) fn leave_mop_runs_open(&mut self) -> Result<usize> {
        let flights = std::mem::take(&mut self.mop_flights);
        for flight in &flights {
            if let Some(decision) = &flight.decision {
                self.scheduler.cancel(decision)?;
            }
        }
        Ok(flights.iter().map(|flight| flight.open.len()).sum())
    }
}
