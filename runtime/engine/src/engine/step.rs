//! The in-process loop: [`Engine::step`] trains one whole run on the engine's own worker (a
//! unit left queued first, else the scheduler's choice), and [`Engine::train`] steps, or
//! coordinates the store's workers, until the budget is spent.

use super::*;

impl Engine {
    /// Runs one training run on the engine's in-process worker: a unit left queued (or whose
    /// lease expired) first, else the scheduler's choice. `Ok(None)` when nothing is left to train.
    pub fn step(
        &mut self,
        deadline: Option<Instant>,
        events: &mut dyn FnMut(Event),
    ) -> Result<Option<Step>> {
        self.sync(events)?;
        self.give_queued_runs_units()?;
        if self.worker.is_none() {
            let mut worker_config = WorkerConfig::for_device(self.config.device);
            worker_config.lease_ttl = self.config.lease_ttl;
            self.worker = Some(Worker::register(
                &mut self.store,
                easeml_store::IN_PROCESS_ROLE,
                worker_config,
            )?);
        }
        let Some(worker) = self.worker.as_mut() else {
            return Ok(None);
        };
        let owner = worker.id().to_owned();
        let lease = match self.store.lease_run_unit(&owner, self.config.lease_ttl)? {
            Some(lease) => Some(lease),
            None => match self.scheduler.next_decision() {
                None => None,
                Some(decision) => {
                    let state = &self.apps[&decision.user_id];
                    let spec = self.unit_spec(state, deadline).to_json();
                    let (run, unit) = self.store.queue_unit(state.id, &decision.model_id, &spec)?;
                    let lease = self
                        .store
                        .lease_unit_by_id(unit, &owner, self.config.lease_ttl)?;
                    if lease.is_none() {
                        // A worker of another process took it first: it is reported when it
                        // commits, as the coordinator reports its workers' units.
                        let number = self.store.run(run)?.number;
                        self.in_flight.insert(
                            unit,
                            InFlight {
                                decision: Some(decision),
                                seen_attempt: 0,
                                run,
                                number,
                            },
                        );
                    }
                    lease
                }
            },
        };
        let Some(lease) = lease else {
            // Nothing to lease or decide: only units held elsewhere may be left.
            return self.wait_for_in_flight(events);
        };
        let decision = self.decision_for(&lease);
        events(Event::RunStarted {
            app: self.app_name(lease.app),
            candidate: lease.candidate.clone(),
            run: lease.run,
            number: lease.run_number,
            max_seconds: self.max_seconds(&lease.spec),
        });
        if let Some(state) = self.apps.values().find(|state| state.id == lease.app)
            && let Some(worker) = self.worker.as_mut()
        {
            worker.cache().insert(
                state.id,
                state.data_version,
                Arc::clone(&state.model),
                Arc::clone(&state.examples),
            );
        }
        let Some(worker) = self.worker.as_mut() else {
            return Ok(None);
        };
        if let Executed::Dropped(reason) = worker.work(&mut self.store, &lease)? {
            // The candidate stays in flight for the scheduler: this session has no time for it.
            events(Event::RunDropped {
                app: self.app_name(lease.app),
                candidate: lease.candidate,
                run: lease.run,
                number: lease.run_number,
                reason,
            });
            return Ok(Some(Step::Dropped(lease.run)));
        }
        self.observe(lease.run, decision.as_ref(), events)
            .map(|record| Some(Step::Run(Box::new(record))))
    }

    /// Waits for a unit held by another process's worker and reports it; `Ok(None)` when there is
    /// none.
    pub(super) fn wait_for_in_flight(
        &mut self,
        events: &mut dyn FnMut(Event),
    ) -> Result<Option<Step>> {
        loop {
            let Some((&unit, _)) = self.in_flight.iter().next() else {
                return Ok(None);
            };
            let record = self.store.unit(unit);
            match record {
                Ok(record) if record.state == UnitState::Committed => {
                    let decision = self
                        .in_flight
                        .remove(&unit)
                        .and_then(|entry| entry.decision);
                    return self
                        .observe(record.run, decision.as_ref(), events)
                        .map(|record| Some(Step::Run(Box::new(record))));
                }
                Ok(_) => std::thread::sleep(COORDINATOR_POLL),
                Err(_) => {
                    // Gone with its app.
                    self.in_flight.remove(&unit);
                }
            }
        }
    }

    /// Gives each queued run that has no work unit (one queued by a store client, or before units
    /// existed) its unit, so that a worker runs it. A queued run of data that changed since is
    /// failed (its data is gone); one of an app left out for now waits.
    pub(super) fn give_queued_runs_units(&mut self) -> Result<()> {
        for run in self.store.queued_runs_without_unit()? {
            let record = self.store.run(run)?;
            let state = self.apps.values().find(|state| state.id == record.app);
            let Some(state) = state else {
                // An app left out (too few examples, a broken manifest): its run waits.
                continue;
            };
            if record.data_version != state.data_version
                || !state.model.candidates.contains(&record.candidate)
            {
                self.store.fail_run(
                    run,
                    "interrupted, and the app's data changed before it could be re-run",
                    None,
                )?;
                continue;
            }
            let spec = self.unit_spec(state, None).to_json();
            self.store.queue_unit_for_run(run, &spec)?;
        }
        Ok(())
    }

    /// Trains until `budget` has passed (a run never starts with less than a second left) or nothing
    /// is left to train: on the in-process worker, or, with [`EngineConfig::coordinate`], by
    /// coordinating the store's workers ([`Engine::coordinate`]). The budget is training time: it
    /// starts once the store's apps are loaded (their examples read, their candidates' costs
    /// estimated), so a first run never finds it spent on loading.
    pub fn train(
        &mut self,
        budget: Option<Duration>,
        events: &mut dyn FnMut(Event),
    ) -> Result<TrainSummary> {
        if self.config.coordinate {
            return self.coordinate(budget, events);
        }
        self.sync(events)?;
        let deadline = budget.map(|budget| Instant::now() + budget);
        let mut summary = TrainSummary::default();
        loop {
            if deadline.is_some_and(|deadline| {
                deadline.saturating_duration_since(Instant::now()) < Duration::from_secs(1)
            }) {
                return Ok(summary);
            }
            match self.step(deadline, events)? {
                Some(Step::Run(run)) if run.state == RunState::Done => summary.finished += 1,
                Some(Step::Run(_)) => summary.failed += 1,
                Some(Step::Dropped(_)) => summary.dropped += 1,
                None => {
                    summary.exhausted = true;
                    return Ok(summary);
                }
            }
        }
    }
}
