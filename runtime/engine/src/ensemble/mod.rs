//! Ensembles of an app's runs (issue 48): greedy ensemble selection with replacement
//! ([`select()`](select::select), Caruana et al. 2004) over the runs' stored validation answers ([`answers`]),
//! recomputed by the engine after every committed run of an app ([`refresh`]: only arithmetic
//! over stored answers, so the "ensemble of the runs so far" is a candidate that costs nothing to
//! train), and recorded in the store per data version. Whether it is served is the store's one
//! rule (`easeml_store::served`); [`crate::ServedModel`] loads every member and averages their
//! answers (probabilities for classes, values otherwise) with the weights.
//!
//! **The members' models** are the runs' checkpoints, trained as each run's protocol trains its
//! served model: under k-fold (apps below 200 examples, 1,000 rows of a table) every member is refit on all the examples
//! and its answers are out-of-fold; under the split the classic models are refit on all the
//! examples when the time allows and the networks keep the training part's model (as a single
//! run is served), and the weights are selected on the held-out rows every run shares.

pub mod answers;
pub mod estimate;
pub mod select;

use easeml_store::{
    AppId, ConstraintLimits, EnsembleMember, EnsembleRecord, EstimateRecord, RunId, RunRecord,
    RunState, Served, Store, best_run, broken_constraints,
};

use crate::error::Result;
use answers::Answers;
use select::{Truth, select};

/// The most runs an ensemble is selected from: the best by quality (each run's answers are up to
/// [`answers::MAX_ANSWER_VALUES`] values, so this bounds the memory of a recomputation).
pub const MAX_CANDIDATES: usize = 32;

/// Recomputes the ensemble of `app`'s current served data version (the best run's) from its
/// eligible runs' answers and records it, or removes the recorded one when no ensemble of two or
/// more runs beats the best single run (a higher quality, or the same and a lower cross-entropy);
/// then records the served model's expected quality (`record_estimate`: [`estimate::estimate`]); returns the recorded
/// ensemble. Without `ensembles` (the engine's `--no-ensembles`) only the expected quality is
/// recomputed.
pub fn refresh(
    store: &mut Store,
    app: AppId,
    limits: &ConstraintLimits,
    ensembles: bool,
) -> Result<Option<EnsembleRecord>> {
    let runs = store.runs(app)?;
    let Some(best) = best_run(&runs, limits) else {
        return Ok(None);
    };
    let version = best.data_version;
    let mut candidates: Vec<&RunRecord> = runs
        .iter()
        .filter(|run| {
            run.state == RunState::Done
                && run.data_version == version
                && run.checkpoint.is_some()
                && run.validation.oof.is_some()
                && broken_constraints(run, limits).is_empty()
        })
        .collect();
    candidates.sort_by(|a, b| {
        b.quality
            .unwrap_or(0.0)
            .total_cmp(&a.quality.unwrap_or(0.0))
            .then(a.id.0.cmp(&b.id.0))
    });
    candidates.truncate(MAX_CANDIDATES);
    let mut loaded: Vec<(&RunRecord, Answers)> = Vec::new();
    for run in candidates {
        let Some(hash) = &run.validation.oof else {
            continue;
        };
        // A blob that does not read leaves its run out, never the app without a model.
        let Ok(answers) = store
            .blob(hash)
            .map_err(crate::Error::from)
            .and_then(|bytes| Answers::decode(&bytes))
        else {
            continue;
        };
        let fits = loaded.first().is_none_or(|(_, first)| {
            first.ids == answers.ids && first.width == answers.width && first.truth == answers.truth
        });
        if fits {
            loaded.push((run, answers));
        }
    }
    let ensemble = if ensembles {
        let ensemble = choose(app, version, &loaded);
        match &ensemble {
            Some(ensemble) => store.put_ensemble(ensemble)?,
            None => {
                store.remove_ensemble(app, version)?;
            }
        }
        ensemble
    } else {
        None
    };
    record_estimate(store, app, version, (&runs, limits), &loaded)?;
    Ok(ensemble)
}

/// Records the expected quality of what the store now serves for `app` ([`estimate::estimate`]
/// over `loaded`, the candidates' answers of data version `version`), or removes the recorded one
/// when the served model's answers are not all among them (a run recorded before answers were
/// kept, or past [`MAX_CANDIDATES`]) or the answers give no estimate.
fn record_estimate(
    store: &mut Store,
    app: AppId,
    version: u64,
    (runs, limits): (&[RunRecord], &ConstraintLimits),
    loaded: &[(&RunRecord, Answers)],
) -> Result<()> {
    let ensembles = store.ensembles(app)?;
    let loaded_run = |run: RunId| loaded.iter().any(|(candidate, _)| candidate.id == run);
    // What is served, when every part of it is among `loaded`: `Some(None)` a single run,
    // `Some(Some(weights))` an ensemble with its weights over `loaded`.
    let served_weights: Option<Option<Vec<f64>>> =
        match easeml_store::served(runs, &ensembles, limits) {
            Some(Served::Run(run)) if run.data_version == version && loaded_run(run.id) => {
                Some(None)
            }
            Some(Served::Ensemble { ensemble, .. })
                if ensemble.data_version == version
                    && ensemble.members.iter().all(|member| loaded_run(member.run)) =>
            {
                Some(Some(
                    loaded
                        .iter()
                        .map(|(run, _)| {
                            ensemble
                                .members
                                .iter()
                                .filter(|member| member.run == run.id)
                                .map(|member| member.weight)
                                .sum()
                        })
                        .collect(),
                ))
            }
            _ => None,
        };
    let kind = served_weights.as_ref().map(|weights| match weights {
        None => estimate::Kind::Single,
        Some(weights) => estimate::Kind::Ensemble(weights),
    });
    let runs_seen = runs_seen(loaded);
    let measured = kind.zip(loaded.first()).and_then(|(kind, (_, first))| {
        let slices: Vec<&[f32]> = loaded
            .iter()
            .map(|(_, answers)| answers.values.as_slice())
            .collect();
        // The same runs give the same estimate: the seed is the app and the last run seen.
        let seed = (app.0 as u64) << 32 ^ runs_seen.0 as u64;
        estimate::estimate(&slices, &first.truth, first.width, kind, seed).map(|e| (kind, e))
    });
    match measured {
        Some((kind, measured)) => store.put_estimate(&EstimateRecord {
            app,
            data_version: version,
            ensemble: matches!(kind, estimate::Kind::Ensemble(_)),
            quality: measured.quality,
            low: measured.low,
            high: measured.high,
            resamples: measured.resamples as u64,
            runs_seen,
            created_ms: 0,
        })?,
        None => {
            store.remove_estimate(app, version)?;
        }
    }
    Ok(())
}

/// The ensemble of `loaded` (runs of one data version with answers on the same rows), when it
/// has two or more members and beats the best single run ([`select::Selection::beats_single_run`]).
fn choose(app: AppId, version: u64, loaded: &[(&RunRecord, Answers)]) -> Option<EnsembleRecord> {
    let (_, first) = loaded.first()?;
    let slices: Vec<&[f32]> = loaded
        .iter()
        .map(|(_, answers)| answers.values.as_slice())
        .collect();
    let selection = select(&slices, &first.truth)?;
    let members: Vec<EnsembleMember> = loaded
        .iter()
        .zip(selection.weights())
        .filter(|(_, weight)| *weight > 0.0)
        .map(|((run, _), weight)| EnsembleMember {
            run: run.id,
            weight,
        })
        .collect();
    if members.len() < 2 || !selection.beats_single_run() {
        return None;
    }
    let confusion = match &first.truth {
        Truth::Classes(labels) => Some(confusion_json(&selection, loaded, labels, first.width)),
        Truth::Values(_) => None,
    };
    Some(EnsembleRecord {
        app,
        data_version: version,
        members,
        quality: selection.quality,
        single_quality: selection.single_quality,
        loss: selection.loss,
        single_loss: selection.single_loss,
        validated_examples: first.ids.len() as u64,
        confusion,
        runs_seen: runs_seen(loaded),
        created_ms: 0,
    })
}

/// The newest run whose answers `loaded` holds: what an ensemble or an estimate was computed
/// from (recorded with it, and the estimate's seed).
fn runs_seen(loaded: &[(&RunRecord, Answers)]) -> RunId {
    RunId(loaded.iter().map(|(run, _)| run.id.0).max().unwrap_or(0))
}

/// How the ensemble's averaged answers fell, by (true class, predicted class), in the JSON form
/// runs keep (`easeml_object::Confusion`).
fn confusion_json(
    selection: &select::Selection,
    loaded: &[(&RunRecord, Answers)],
    labels: &[i64],
    width: usize,
) -> String {
    let weights = selection.weights();
    let mut cells = std::collections::BTreeMap::<(i64, i64), u64>::new();
    for (row, &label) in labels.iter().enumerate() {
        let mut average = vec![0.0f64; width];
        for ((_, answers), weight) in loaded.iter().zip(&weights) {
            for (slot, &value) in average
                .iter_mut()
                .zip(&answers.values[row * width..(row + 1) * width])
            {
                *slot += weight * f64::from(value);
            }
        }
        let predicted = argmax(&average) as i64;
        *cells.entry((label, predicted)).or_default() += 1;
    }
    easeml_object::Confusion::from_cells(cells.into_iter().map(|((a, p), c)| (a, p, c))).to_json()
}

/// The index of the largest value, the first on ties (as inference answers).
pub fn argmax<T: PartialOrd>(values: &[T]) -> usize {
    let mut best = 0;
    for (index, value) in values.iter().enumerate() {
        if *value > values[best] {
            best = index;
        }
    }
    best
}
