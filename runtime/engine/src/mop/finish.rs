//! A MOP run's end: its shape (partitions, epochs, ranks), its failure, the finish that evaluates
//! the best epoch's state and records the run (with that model's validation answers, for
//! ensembles, and their confusion, for the per-class view), and the replay of its visit log into
//! one checkpoint.

use super::*;

/// What a MOP run trains ([`mop_shape`]).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MopShape {
    /// Its partitions.
    pub partitions: u64,
    /// Its epochs.
    pub epochs: u64,
    /// Adam's learning rate.
    pub learning_rate: f64,
    /// Whether it trains by data parallelism (each epoch a gang of `partitions` ranks).
    pub gang: bool,
}

/// What a MOP run trains; `None` for a run without sub-epoch units (a whole run).
pub fn mop_shape(store: &Store, run: RunId) -> Result<Option<MopShape>> {
    let log = store.sub_epochs(run)?;
    if log.is_empty() {
        return Ok(None);
    }
    let spec = run_spec(store, &log)?;
    Ok(Some(MopShape {
        partitions: spec.partitions,
        epochs: spec.epochs,
        learning_rate: spec.setup.learning_rate,
        gang: spec.gang_steps.is_some(),
    }))
}

/// Fails an open MOP run from its coordinator (a step of its own failed, `reason` says how),
/// with the seconds its committed sub-epochs took: its units not committed yet are closed (never
/// leased again; a worker holding one finds its lease gone) and the failure is its outcome.
pub fn fail_run(store: &mut Store, run: RunId, reason: &str) -> Result<()> {
    store.close_sub_epochs(run)?;
    let cost: f64 = store
        .sub_epochs(run)?
        .iter()
        .filter_map(|unit| unit.seconds)
        .sum();
    store.finish_sub_epoch_run(
        run,
        &UnitResult::Failed {
            reason,
            cost_seconds: Some(cost),
            infer_latency_seconds: None,
        },
    )?;
    Ok(())
}

/// Evaluates each complete epoch's end state (those `progress` has not), records the best as
/// the run's model.
pub(super) fn finish(
    store: &mut Store,
    run: RunId,
    spec: &SubEpochSpec,
    log: &[SubEpochRecord],
    progress: &mut MopProgress,
    stopped_by: Option<&str>,
) -> Result<MopStatus> {
    let app = store.run(run)?.app;
    let cost: f64 = log.iter().filter_map(|unit| unit.seconds).sum();
    let complete = complete_epochs(log, spec.partitions);
    progress.evaluate(store, app, spec, &complete)?;
    let epochs: Vec<serde_json::Value> = progress
        .qualities
        .iter()
        .map(|(epoch, evaluation)| {
            serde_json::json!({
                "epoch": epoch + 1,
                "validation_quality": evaluation.map(|evaluation| evaluation.quality),
                "validation_loss": evaluation.and_then(|evaluation| evaluation.loss),
            })
        })
        .collect();
    let best = progress.best().and_then(|(epoch, quality)| {
        complete
            .iter()
            .find(|(complete, _)| *complete == epoch)
            .map(|(_, hash)| (quality, hash.clone()))
    });
    let Some((quality, hash)) = best else {
        let reason = "every epoch's model gives non-finite outputs on the validation rows";
        fail_run(store, run, reason)?;
        return Ok(MopStatus::Failed(reason.to_owned()));
    };
    let state = store.blob(&hash)?;
    let checkpoint = checkpoint_of_state(&spec.setup, &state)?;
    let validation = progress.validation(store, app, spec.validation_fraction)?;
    let validated = validation.len();
    let latency = measure_latency(
        &Predictor::new(&checkpoint, Device::Cpu)?,
        &validation.inputs,
        &LATENCY,
    )?;
    let blob = store.put_blob(&checkpoint_blob::encode(&checkpoint)?)?;
    // The best epoch's validation answers, kept as a run of the trainer keeps them: for
    // ensembles and, for classes, the per-class view (both bounded; either one that cannot be
    // kept leaves it out, never fails the run).
    let rows: Vec<usize> = (0..validated).collect();
    let (answers, confusion) = match easeml_trainer::mop::answers_of_state(
        &spec.setup,
        &state,
        validation,
        &rows,
        Device::Cpu,
    ) {
        Ok((answers, confusion)) => (Some(answers), confusion),
        Err(_) => (None, None),
    };
    let confusion = confusion
        .map(|confusion| easeml_object::Confusion::from_cells(confusion.cells()).to_json())
        .filter(|json| json.len() <= easeml_store::MAX_CONFUSION_BYTES);
    let oof = answers
        .as_ref()
        .and_then(|answers| crate::ensemble::answers::Answers::of(answers, validation))
        .and_then(|answers| store.put_blob(&answers.encode()).ok());
    let quality = quality.clamp(0.0, 1.0);
    let trained = complete.len() as u64;
    // The trainer's trial shape (`status` reads learning rate, epochs and best quality), with
    // the hops' details beside it.
    let trials = serde_json::json!([{
        "learning_rate": spec.setup.learning_rate,
        "epochs": trained,
        "best_quality": quality,
        "seed": spec.setup.seed,
        "mop": {
            "data_parallel": spec.gang_steps.is_some(),
            "partitions": spec.partitions,
            "epochs": epochs,
            "epochs_planned": spec.epochs,
            "stopped_early": trained < spec.epochs,
        },
    }])
    .to_string();
    let stopped = match stopped_by {
        Some(why) => format!(", stopped after {trained} of {} epochs: {why}", spec.epochs),
        None => String::new(),
    };
    store.finish_sub_epoch_run(
        run,
        &UnitResult::Finished {
            quality,
            cost_seconds: cost,
            checkpoint: &blob,
            validation: &RunValidation {
                protocol: Some(format!(
                    "split {:.0}% by id ({}, {} partitions{stopped})",
                    spec.validation_fraction * 100.0,
                    if spec.gang_steps.is_some() {
                        "data parallelism"
                    } else {
                        "model hopper parallelism"
                    },
                    spec.partitions
                )),
                quality_std: None,
                validated_examples: Some(validated as u64),
                confusion,
                oof,
            },
            infer_latency_seconds: latency,
            trials: Some(&trials),
        },
    )?;
    Ok(MopStatus::Done(quality))
}

/// Trains the run's committed visit log again, in order, in this thread, from its initial state:
/// returns the final state's bytes (compare them with the last committed result to check that
/// hopping equals sequential training). A data-parallel run's epochs are trained again by a gang
/// of threads of this process over local rings (the same ranks, rows, seeds and reduction
/// order as the workers').
pub fn replay(store: &Store, run: RunId) -> Result<Vec<u8>> {
    let log = store.sub_epochs(run)?;
    let spec = run_spec(store, &log)?;
    let app = store.run(run)?.app;
    let (examples, train, _) = load(store, app, spec.validation_fraction)?;
    let mut state = store.blob(&BlobHash::parse(&spec.initial)?)?;
    let parts: Vec<Vec<usize>> = (0..spec.partitions)
        .map(|partition| partition_rows(&examples, &train, spec.partitions, partition))
        .collect();
    for unit in log.iter().filter(|unit| unit.seq.is_some()) {
        if let (Some(steps), Some(_)) = (spec.gang_steps, unit.gang) {
            state = crate::gang::train_gang_in_process(
                &spec.setup,
                &state,
                &examples,
                &parts,
                unit.epoch,
                steps as usize,
                unit.epoch,
            )?;
            continue;
        }
        let rows = parts.get(unit.partition as usize).ok_or_else(|| {
            Error::Input(format!(
                "the log names partition {} of a run with {}",
                unit.partition, spec.partitions
            ))
        })?;
        let at = SubEpoch {
            epoch: unit.epoch,
            partition: unit.partition,
        };
        state = match train_sub_epoch(&spec.setup, &state, &examples, rows, at, Device::Cpu)? {
            SubEpochOutcome::Trained { state, .. } => state,
            SubEpochOutcome::Diverged(reason) => return Err(Error::Input(reason)),
        };
    }
    Ok(state)
}
