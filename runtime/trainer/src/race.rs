//! Racing a network's k-fold against the app's best run (issue 48, item 3: a budget spent where it
//! can still win): Hoeffding races (Maron and Moore, "Hoeffding races: accelerating model
//! selection search for classification and function approximation", NIPS 1993).
//!
//! **Why**: on a small series task every network family gets a first run, and each of its folds
//! trains for the run's whole share: on ACSF1 (100 series) the GRU took 62 s for 0.25 while
//! MultiRocket already had 0.737. Its first fold (20 answers, 0.25 right) already says it cannot
//! catch up.
//!
//! **The rule**: an accuracy is a mean of per-answer scores in `[0, 1]`, so by Hoeffding's
//! inequality the true accuracy lies within [`margin`]`(n)` of one measured on `n` answers with
//! probability at least `1 - `[`DELTA`]. The engine passes the highest lower bound among the app's
//! runs on the data version ([`floor`]: `quality - margin(answers)`, `Budget::race_floor`); after
//! each fold of a learning rate, when the folds so far put even its upper bound
//! (`mean + margin(answers so far)`) below that floor ([`outrun`]), the rate's folds stop. Both
//! bounds hold together with probability at least `1 - 2 DELTA`: a rate stopped is below the best
//! with at least 90% confidence, and in practice far more (Hoeffding's bound is loose; the fold
//! qualities are each fold's best epoch, an optimistic score).
//!
//! Only accuracies (R² is not a mean of bounded per-answer scores), only a network's k-fold (a
//! classic model's fold costs milliseconds to seconds; under the split a network's learning rates
//! each train on the same rows, and the grid's later rates may win), and never a rate's last fold
//! (nothing left to save). What a stopped rate leaves is `train_k_fold`'s; the run records
//! `..., 1 fold trained, raced` (`easeml_stats::protocol::KFold::raced`).

/// The chance, per bound, that a true accuracy lies outside its Hoeffding interval.
pub const DELTA: f64 = 0.05;

/// Hoeffding's margin for an accuracy measured on `answers` answers: `sqrt(ln(2 / DELTA) / 2n)`
/// (0.30 on 20 answers, 0.14 on 100); infinite for none.
pub fn margin(answers: usize) -> f64 {
    if answers == 0 {
        return f64::INFINITY;
    }
    ((2.0 / DELTA).ln() / (2.0 * answers as f64)).sqrt()
}

/// The lower bound of a run's accuracy `quality` measured on `answers` answers: what another
/// run must be able to reach to stay in the race.
pub fn floor(quality: f64, answers: usize) -> f64 {
    quality - margin(answers)
}

/// Whether a learning rate whose folds so far scored `mean` on `answers` answers is out of the
/// race against `floor`: even its upper bound is below it.
pub fn outrun(mean: f64, answers: usize, floor: f64) -> bool {
    mean + margin(answers) < floor
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_margin_is_hoeffdings_and_shrinks_with_the_answers() {
        assert!((margin(20) - 0.3037).abs() < 1e-3);
        assert!((margin(100) - 0.1358).abs() < 1e-3);
        assert!(margin(0).is_infinite());
        assert!(margin(40) < margin(20));
    }

    #[test]
    fn a_rate_is_out_only_when_even_its_upper_bound_is_below_the_floor() {
        // MultiRocket's 0.737 on ACSF1's 100 answers: a floor of 0.601.
        let floor = floor(0.737, 100);
        assert!((floor - 0.601).abs() < 1e-3);
        // The GRU's first fold, 0.25 on 20 answers: 0.55 at best.
        assert!(outrun(0.25, 20, floor));
        // The LSTM's 0.40 on 20: up to 0.70, still in; 0.325 on 40 (two folds): out.
        assert!(!outrun(0.40, 20, floor));
        assert!(outrun(0.325, 40, floor));
        // No answers: never out; no floor (a run of none): never out.
        assert!(!outrun(0.0, 0, floor));
        assert!(!outrun(0.0, 20, self::floor(1.0, 0)));
    }
}
