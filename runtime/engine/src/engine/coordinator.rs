//! The coordinator ([`Engine::coordinate`]): each decision becomes a unit for the store's live
//! workers, or MOP runs ([`super::mop_runs`]); committed units are reported to the scheduler as
//! they come, units of a previous coordinator are adopted, and the live workers are counted.

use super::*;

impl Engine {
    /// Coordinates the workers of the store (in other processes, on other hosts) until `budget`
    /// has passed or nothing is left to train: each decision becomes a queued unit while live
    /// workers outnumber the units in flight; committed units are reported to the scheduler as
    /// they come. Units that no worker took by the deadline are cancelled; leased ones are waited
    /// for (their time limit ends by the deadline). A unit lost with its worker is leased again by
    /// another and reported when it commits.
    pub fn coordinate(
        &mut self,
        budget: Option<Duration>,
        events: &mut dyn FnMut(Event),
    ) -> Result<TrainSummary> {
        self.coordinate_until(budget, &AtomicBool::new(false), events)
    }

    /// [`Engine::coordinate`] that also ends, as at its deadline, once `stop` is set (a server
    /// shutting down): nothing new starts, units no worker took are cancelled, leased ones are
    /// waited for.
    pub fn coordinate_until(
        &mut self,
        budget: Option<Duration>,
        stop: &AtomicBool,
        events: &mut dyn FnMut(Event),
    ) -> Result<TrainSummary> {
        // As in `train`, the budget starts once the apps are loaded.
        self.sync(events)?;
        self.adopt_mop_runs(events)?;
        let deadline = budget.map(|budget| Instant::now() + budget);
        let mut summary = TrainSummary::default();
        let mut live_before = usize::MAX;
        let mut decided_everything = false;
        loop {
            self.sync(events)?;
            self.give_queued_runs_units()?;
            self.adopt_open_units()?;
            if self.advance_mop_runs(&mut summary, events)? {
                decided_everything = false;
            }
            // Commits and starts since the last look.
            let units: Vec<UnitId> = self.in_flight.keys().copied().collect();
            for unit in units {
                let record = match self.store.unit(unit) {
                    Ok(record) => record,
                    Err(easeml_store::Error::NoSuchUnit(_)) => {
                        // Gone with its app, or dropped by its worker because the session's end
                        // cut it before it had a model (its candidate stays in flight: this
                        // session has no time for it).
                        if let Some(InFlight {
                            decision: Some(decision),
                            run,
                            number,
                            ..
                        }) = self.in_flight.remove(&unit)
                            && self.apps.contains_key(&decision.user_id)
                        {
                            events(Event::RunDropped {
                                app: decision.user_id,
                                candidate: decision.model_id,
                                run,
                                number,
                                reason: "the session ended before it had a model".to_owned(),
                            });
                            summary.dropped += 1;
                        }
                        continue;
                    }
                    Err(error) => return Err(error.into()),
                };
                if record.state == UnitState::Committed {
                    let decision = self
                        .in_flight
                        .remove(&unit)
                        .and_then(|entry| entry.decision);
                    let run = self.observe(record.run, decision.as_ref(), events)?;
                    if run.state == RunState::Done {
                        summary.finished += 1;
                    } else {
                        summary.failed += 1;
                    }
                    decided_everything = false;
                    continue;
                }
                let Some(entry) = self.in_flight.get_mut(&unit) else {
                    continue;
                };
                if record.state == UnitState::Leased && record.attempt > entry.seen_attempt {
                    entry.seen_attempt = record.attempt;
                    events(Event::RunStarted {
                        app: self.app_name(record.app),
                        candidate: record.candidate.clone(),
                        run: record.run,
                        number: record.run_number,
                        max_seconds: self.max_seconds(&record.spec),
                    });
                }
            }
            let ending = stop.load(Ordering::SeqCst)
                || deadline.is_some_and(|deadline| {
                    deadline.saturating_duration_since(Instant::now()) < Duration::from_secs(1)
                });
            if ending {
                // Nothing new starts: units no worker took are cancelled, leased ones waited for.
                let queued: Vec<UnitId> = self.in_flight.keys().copied().collect();
                for unit in queued {
                    if self.store.cancel_queued_unit(unit)?
                        && let Some(decision) = self
                            .in_flight
                            .remove(&unit)
                            .and_then(|entry| entry.decision)
                    {
                        self.scheduler.cancel(&decision)?;
                    }
                }
                summary.unfinished += self.leave_mop_runs_open()?;
                if self.in_flight.is_empty() {
                    return Ok(summary);
                }
                std::thread::sleep(COORDINATOR_POLL);
                continue;
            }
            let live_ids = self.live_worker_ids()?;
            let live = live_ids.len();
            if live != live_before {
                events(Event::WorkersChanged { live });
                live_before = live;
            }
            // A unit or a hopping run trains on one worker at a time: each holds one worker's
            // place; a data-parallel run holds one per rank.
            while live > self.in_flight.len() + self.mop_places() {
                let Some(decision) = self.scheduler.next_decision() else {
                    decided_everything = true;
                    break;
                };
                if self.start_mop_run(&decision, &live_ids, events)? {
                    continue;
                }
                let state = &self.apps[&decision.user_id];
                let spec = self.unit_spec(state, deadline).to_json();
                let (run, unit) = self.store.queue_unit(state.id, &decision.model_id, &spec)?;
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
            if decided_everything && self.in_flight.is_empty() && self.mop_flights.is_empty() {
                summary.exhausted = true;
                return Ok(summary);
            }
            std::thread::sleep(COORDINATOR_POLL);
        }
    }

    /// Takes over the open units this engine did not queue (a previous coordinator's, or runs
    /// queued by store clients): their candidates are in flight for the scheduler, and they are
    /// reported when they commit.
    pub(super) fn adopt_open_units(&mut self) -> Result<()> {
        for unit in self.store.open_units()? {
            // A MOP run's sub-epochs are its MOP coordinator's (`crate::mop`).
            if self.in_flight.contains_key(&unit.id) || unit.kind != UnitKind::Run {
                continue;
            }
            let lease_like = Lease {
                unit: unit.id,
                run: unit.run,
                run_number: unit.run_number,
                app: unit.app,
                candidate: unit.candidate.clone(),
                data_version: self.store.run(unit.run)?.data_version,
                attempt: unit.attempt,
                owner: String::new(),
                spec: unit.spec.clone(),
                sub_epoch: None,
            };
            let decision = self.decision_for(&lease_like);
            if let Some(decision) = &decision {
                self.scheduler.mark_in_flight(decision)?;
            }
            self.in_flight.insert(
                unit.id,
                InFlight {
                    decision,
                    seen_attempt: 0,
                    run: unit.run,
                    number: unit.run_number,
                },
            );
        }
        Ok(())
    }

    /// The store's live workers: registered, not stopped, heard from within two lease lifetimes
    /// (the engine's own in-process worker is not counted: it does not lease while the engine
    /// coordinates).
    pub fn live_workers(&self) -> Result<usize> {
        Ok(self.live_worker_ids()?.len())
    }

    /// How long a worker may be silent and still count as live: twice a lease's time to live.
    pub(super) fn worker_silence(&self) -> Duration {
        self.config.lease_ttl.saturating_mul(2)
    }

    /// The ids of [`Engine::live_workers`], in the store's order (a MOP run's partition `j` goes
    /// to the `j`-th).
    pub(super) fn live_worker_ids(&self) -> Result<Vec<String>> {
        crate::worker::live_worker_ids(&self.store, self.worker_silence())
    }
}
