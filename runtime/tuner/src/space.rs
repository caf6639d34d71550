//! The search space: configurations `x` times sub-sampling levels `s`, and the model inputs.
//!
//! A point is one `(x, s)` pair, indexed `configuration * levels + level`. Configurations are given
//! as feature vectors; the space scales each feature linearly to [0, 1] over its range (as
//! TrimTuner's code normalises by its lower and upper bounds). The level enters the models as
//! TrimTuner's code feeds it: `log2(s / s_min) / log2(1 / s_min)`, so the smallest level is 0 and
//! the full data set is 1.

/// Configurations x sub-sampling levels, with the model inputs of every point.
#[derive(Debug, Clone)]
pub struct Space {
    /// Scaled features per configuration (each in [0, 1]).
    configurations: Vec<Vec<f64>>,
    /// Sub-sampling rates, ascending, the last one 1.
    levels: Vec<f64>,
    /// The model feature of each level (log-scaled to [0, 1]).
    level_features: Vec<f64>,
}

impl Space {
    /// A space over `configurations` (raw feature vectors of one length) and the sub-sampling
    /// `levels` (rates in (0, 1]; sorted here, and 1 is added if absent). Panics on an empty space,
    /// ragged features or a rate outside (0, 1].
    pub fn new(configurations: &[Vec<f64>], levels: &[f64]) -> Self {
        assert!(!configurations.is_empty(), "a space needs a configuration");
        let dimension = configurations[0].len();
        assert!(
            configurations.iter().all(|c| c.len() == dimension),
            "every configuration needs the same features"
        );
        let mut levels: Vec<f64> = levels.to_vec();
        assert!(
            levels.iter().all(|s| *s > 0.0 && *s <= 1.0),
            "sub-sampling rates must lie in (0, 1]"
        );
        if !levels.contains(&1.0) {
            levels.push(1.0);
        }
        levels.sort_by(f64::total_cmp);
        levels.dedup();
        let smallest = levels[0];
        let level_features = levels
            .iter()
            .map(|s| {
                if smallest < 1.0 {
                    (s / smallest).log2() / (1.0 / smallest).log2()
                } else {
                    1.0
                }
            })
            .collect();
        let mut scaled = configurations.to_vec();
        for feature in 0..dimension {
            let low = configurations
                .iter()
                .map(|c| c[feature])
                .fold(f64::INFINITY, f64::min);
            let high = configurations
                .iter()
                .map(|c| c[feature])
                .fold(f64::NEG_INFINITY, f64::max);
            for (row, raw) in scaled.iter_mut().zip(configurations) {
                row[feature] = if high > low {
                    (raw[feature] - low) / (high - low)
                } else {
                    0.0
                };
            }
        }
        Space {
            configurations: scaled,
            levels,
            level_features,
        }
    }

    /// Number of configurations `x`.
    pub fn n_configurations(&self) -> usize {
        self.configurations.len()
    }

    /// The sub-sampling rates, ascending (the last is 1).
    pub fn levels(&self) -> &[f64] {
        &self.levels
    }

    /// Number of points `(x, s)`.
    pub fn n_points(&self) -> usize {
        self.configurations.len() * self.levels.len()
    }

    /// The index of the full-data level.
    pub fn full_level(&self) -> usize {
        self.levels.len() - 1
    }

    /// The point of `configuration` at `level`.
    pub fn point(&self, configuration: usize, level: usize) -> usize {
        configuration * self.levels.len() + level
    }

    /// The point of `configuration` on the full data set.
    pub fn full_point(&self, configuration: usize) -> usize {
        self.point(configuration, self.full_level())
    }

    /// The configuration of a point.
    pub fn configuration_of(&self, point: usize) -> usize {
        point / self.levels.len()
    }

    /// The level index of a point.
    pub fn level_of(&self, point: usize) -> usize {
        point % self.levels.len()
    }

    /// The sub-sampling rate of a point.
    pub fn rate_of(&self, point: usize) -> f64 {
        self.levels[self.level_of(point)]
    }

    /// Whether a point uses the full data set.
    pub fn is_full(&self, point: usize) -> bool {
        self.level_of(point) == self.full_level()
    }

    /// The scaled features of a configuration.
    pub fn features(&self, configuration: usize) -> &[f64] {
        &self.configurations[configuration]
    }

    /// The model input of a point: the scaled features, then the level feature.
    pub fn input(&self, point: usize) -> Vec<f64> {
        let mut input = self.configurations[self.configuration_of(point)].clone();
        input.push(self.level_features[self.level_of(point)]);
        input
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn points_inputs_and_levels_follow_the_code() {
        let space = Space::new(
            &[vec![8.0, 0.1], vec![16.0, 0.1], vec![80.0, 0.3]],
            &[1.0 / 60.0, 0.5, 0.1, 0.25],
        );
        assert_eq!(space.levels().len(), 5);
        assert_eq!(space.n_points(), 15);
        let point = space.point(2, 4);
        assert!(space.is_full(point));
        assert_eq!(space.configuration_of(point), 2);
        assert_eq!(space.input(point), vec![1.0, 1.0, 1.0]);
        let smallest = space.input(space.point(1, 0));
        assert!((smallest[0] - 8.0 / 72.0).abs() < 1e-12);
        assert_eq!(smallest[2], 0.0);
        // log2(0.5 * 60) / log2(60)
        let half = space.input(space.point(0, 3))[2];
        assert!((half - 30f64.log2() / 60f64.log2()).abs() < 1e-12);
    }
}
