//! Quality (and cost) tables for the replay benchmark: the shared data sets, any user matrix, and
//! the synthetic generator of the paper (section 5.1 / appendix B).
//!
//! A [`Dataset`] is `quality[user][model]` in [0, 1] (`None` where unknown) and, optionally, real
//! costs for some users. Matrix files are CSV or whitespace separated; a header row and an index
//! column are detected (a first row / first column that does not parse as numbers); `--`, `NA`,
//! `nan`, `?` and empty cells are missing; a table whose qualities lie in [0, 100] and are mostly
//! above 1 is read as percent (a value above 1 in a table of fractions is an error).
//! A cost matrix is matched to the quality matrix by its row and column names where both have
//! them, else by position. Costs must be finite and non-negative; the unknown ones a replay needs
//! are filled at load ([`Dataset::fill_unknown_costs`]).

use std::path::Path;

use nalgebra::DMatrix;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use easeml_scheduler::{Result, SchedulerError};

/// A replay table.
#[derive(Debug, Clone)]
pub struct Dataset {
    /// A short name for reports.
    pub name: String,
    /// One id per user (row).
    pub user_ids: Vec<String>,
    /// One id per model (column).
    pub model_ids: Vec<String>,
    /// `quality[user][model]` in [0, 1].
    pub quality: Vec<Vec<Option<f64>>>,
    /// Real costs per user where known (`None` for a user without costs). Users with a cost row are
    /// the only possible test users in cost-aware mode when any cost row exists; with no cost row
    /// at all, costs are drawn from U(0, 1) per repetition as in the paper.
    pub cost: Vec<Option<Vec<Option<f64>>>>,
    /// How many cost cells of known qualities were empty or 0 and were filled at load
    /// ([`Dataset::fill_unknown_costs`]).
    pub imputed_costs: usize,
}

impl Dataset {
    /// Whether the table has any real cost.
    pub fn has_real_costs(&self) -> bool {
        self.cost.iter().any(Option::is_some)
    }

    /// Fills the cost cells that a replay would need and the table leaves out, in the rows that
    /// have costs: an empty cell where the quality is known takes the median of its user's positive
    /// costs (of the whole table's where the user has none), a 0 the table's smallest positive cost
    /// (a run too short to time is among the cheapest, and a cost of 0 would make it infinitely
    /// attractive per unit cost). Returns how many cells were filled. Costs must be finite and
    /// non-negative (loading refuses others first).
    pub fn fill_unknown_costs(&mut self) -> usize {
        let positive: Vec<f64> = self
            .cost
            .iter()
            .flatten()
            .flatten()
            .flatten()
            .copied()
            .filter(|&c| c > 0.0)
            .collect();
        let (Some(table_median), Some(smallest)) =
            (median(&positive), positive.iter().copied().reduce(f64::min))
        else {
            return 0;
        };
        let mut filled = 0;
        for (user, row) in self.cost.iter_mut().enumerate() {
            let Some(row) = row else { continue };
            let own: Vec<f64> = row.iter().flatten().copied().filter(|&c| c > 0.0).collect();
            let user_median = median(&own).unwrap_or(table_median);
            for (model, cell) in row.iter_mut().enumerate() {
                if self.quality[user][model].is_none() {
                    continue;
                }
                match *cell {
                    None => *cell = Some(user_median),
                    Some(0.0) => *cell = Some(smallest),
                    Some(_) => continue,
                }
                filled += 1;
            }
        }
        filled
    }

    /// Checks that every quality is finite and reads a table in percent as fractions: a table with
    /// a quality above 1 is in percent when every quality lies in [0, 100] and at least half are
    /// above 1 (accuracies in percent); otherwise the values above 1 are errors (a fraction table
    /// with one bad cell must not be divided by 100 whole), and so is a quality above 100.
    fn qualities_to_fractions(&mut self) -> Result<()> {
        let cell = |user: usize, model: usize| {
            format!(
                "the quality of user `{}` for model `{}`",
                self.user_ids.get(user).map_or("?", String::as_str),
                self.model_ids.get(model).map_or("?", String::as_str)
            )
        };
        let mut known = 0usize;
        let mut above_one = 0usize;
        let mut outside_percent = None;
        for (user, row) in self.quality.iter().enumerate() {
            for (model, value) in row.iter().enumerate() {
                let Some(value) = *value else { continue };
                if !value.is_finite() {
                    return Err(SchedulerError::Dataset(format!(
                        "`{}`: {} is {value}; qualities are finite numbers (accuracies as \
                         fractions or percent): correct the cell, or leave it empty where unknown",
                        self.name,
                        cell(user, model)
                    )));
                }
                known += 1;
                if value > 1.0 {
                    above_one += 1;
                }
                if outside_percent.is_none() && !(0.0..=100.0).contains(&value) {
                    outside_percent = Some((user, model, value));
                }
            }
        }
        if above_one == 0 {
            return Ok(());
        }
        if outside_percent.is_none() && 2 * above_one >= known {
            for value in self.quality.iter_mut().flatten().flatten() {
                *value /= 100.0;
            }
            return Ok(());
        }
        let (user, model, value) = outside_percent.unwrap_or_else(|| {
            self.quality
                .iter()
                .enumerate()
                .flat_map(|(u, row)| row.iter().enumerate().map(move |(m, v)| (u, m, *v)))
                .find_map(|(u, m, v)| v.filter(|&v| v > 1.0).map(|v| (u, m, v)))
                .expect("a quality above 1 was counted")
        });
        Err(SchedulerError::Dataset(format!(
            "`{}`: {} is {value}, but {} of the table's {known} qualities are above 1; qualities \
             are fractions in [0, 1], or percent in [0, 100] throughout: correct the cell",
            self.name,
            cell(user, model),
            above_one
        )))
    }

    fn check(mut self) -> Result<Self> {
        if self.quality.is_empty() || self.model_ids.is_empty() {
            return Err(SchedulerError::Dataset(format!(
                "`{}` has no users or no models",
                self.name
            )));
        }
        self.qualities_to_fractions()?;
        let n_models = self.model_ids.len();
        let short_row = |what: &str, user: usize, len: usize| {
            SchedulerError::Dataset(format!(
                "`{}`: {what} {user} has {len} values, expected {n_models}",
                self.name
            ))
        };
        for (user, row) in self.quality.iter().enumerate() {
            if row.len() != n_models {
                return Err(short_row("user row", user, row.len()));
            }
        }
        for (user, row) in self.cost.iter().enumerate() {
            if let Some(row) = row
                && row.len() != n_models
            {
                return Err(short_row("cost row of user", user, row.len()));
            }
        }
        if self.cost.len() != self.quality.len() {
            return Err(SchedulerError::Dataset(format!(
                "`{}`: {} cost rows for {} users",
                self.name,
                self.cost.len(),
                self.quality.len()
            )));
        }
        for (user, row) in self.cost.iter().enumerate() {
            for (model, &value) in row.iter().flatten().enumerate() {
                if let Some(value) = value.filter(|c| !c.is_finite() || *c < 0.0) {
                    return Err(SchedulerError::Dataset(format!(
                        "`{}`: the cost of user `{}` for model `{}` is {value}; costs are \
                         runtimes or prices, finite numbers >= 0: correct the cell, or leave it \
                         empty where the cost is unknown",
                        self.name,
                        self.user_ids.get(user).map_or("?", String::as_str),
                        self.model_ids.get(model).map_or("?", String::as_str),
                    )));
                }
            }
        }
        if self.has_real_costs()
            && !self
                .cost
                .iter()
                .flatten()
                .flatten()
                .flatten()
                .any(|&c| c > 0.0)
        {
            return Err(SchedulerError::Dataset(format!(
                "`{}`: the cost matrix has no positive cost; give the runtimes (or prices) of the \
                 runs, or leave the cost file out to draw costs from U(0, 1)",
                self.name
            )));
        }
        self.imputed_costs = self.fill_unknown_costs();
        Ok(self)
    }
}

/// A parsed text matrix.
#[derive(Debug, Clone)]
pub struct TextMatrix {
    /// Column names (from the header, or `m0, m1, ...`).
    pub column_names: Vec<String>,
    /// Row names (from the index column, or `u0, u1, ...`).
    pub row_names: Vec<String>,
    /// The values.
    pub values: Vec<Vec<Option<f64>>>,
    /// Whether the column names come from a header row (else generated).
    pub named_columns: bool,
    /// Whether the row names come from an index column (else generated).
    pub named_rows: bool,
}

impl TextMatrix {
    /// This matrix's values in the row and column order of `reference` (the quality matrix; this one
    /// is the cost matrix read from `path`): by name where both name their rows (their columns),
    /// else by position. Names must then be the same set, each once; positions the same count.
    fn aligned_to(self, reference: &TextMatrix, path: &Path) -> Result<Vec<Vec<Option<f64>>>> {
        let order = |mine: &[String], theirs: &[String], named: bool, what: &str| {
            if !named || mine == theirs {
                return if mine.len() == theirs.len() {
                    Ok((0..mine.len()).collect::<Vec<usize>>())
                } else {
                    Err(SchedulerError::Dataset(format!(
                        "cost matrix `{}` has {} {what}s, the quality matrix {}; give one cost per \
                         quality",
                        path.display(),
                        mine.len(),
                        theirs.len()
                    )))
                };
            }
            let mut index = std::collections::HashMap::new();
            for (i, name) in mine.iter().enumerate() {
                if index.insert(name.as_str(), i).is_some() {
                    return Err(SchedulerError::Dataset(format!(
                        "cost matrix `{}` names the {what} `{name}` twice",
                        path.display()
                    )));
                }
            }
            let order: Vec<usize> = theirs
                .iter()
                .map(|name| {
                    index.get(name.as_str()).copied().ok_or_else(|| {
                        SchedulerError::Dataset(format!(
                            "cost matrix `{}` has no {what} `{name}`, which the quality matrix \
                             has; name the same {what}s in both (in any order)",
                            path.display()
                        ))
                    })
                })
                .collect::<Result<_>>()?;
            let mut seen = vec![false; mine.len()];
            if let Some(twice) = order
                .iter()
                .position(|&i| std::mem::replace(&mut seen[i], true))
            {
                return Err(SchedulerError::Dataset(format!(
                    "the quality matrix names the {what} `{}` twice; name each once",
                    theirs[twice]
                )));
            }
            if mine.len() != theirs.len() {
                let extra = mine
                    .iter()
                    .find(|name| !theirs.contains(name))
                    .map_or("", String::as_str);
                return Err(SchedulerError::Dataset(format!(
                    "cost matrix `{}` has the {what} `{extra}`, which the quality matrix has not; \
                     name the same {what}s in both (in any order)",
                    path.display()
                )));
            }
            Ok(order)
        };
        let named_rows = self.named_rows && reference.named_rows;
        let named_columns = self.named_columns && reference.named_columns;
        let rows = order(&self.row_names, &reference.row_names, named_rows, "row")?;
        let columns = order(
            &self.column_names,
            &reference.column_names,
            named_columns,
            "column",
        )?;
        Ok(rows
            .iter()
            .map(|&r| columns.iter().map(|&c| self.values[r][c]).collect())
            .collect())
    }
}

fn parse_cell(cell: &str) -> std::result::Result<Option<f64>, ()> {
    let cell = cell.trim().trim_matches('"');
    match cell {
        "" | "--" | "NA" | "na" | "nan" | "NaN" | "?" => Ok(None),
        _ => cell.parse::<f64>().map(Some).map_err(|_| ()),
    }
}

/// Parses CSV or whitespace-separated text; `stop_at_dash_line` ends the table at a `-----` line.
pub fn parse_text_matrix(text: &str, stop_at_dash_line: bool) -> Result<TextMatrix> {
    let comma = text.lines().take(3).any(|line| line.contains(','));
    let mut rows: Vec<Vec<String>> = Vec::new();
    for line in text.lines() {
        let trimmed = line.trim();
        if trimmed.is_empty() {
            continue;
        }
        if stop_at_dash_line && trimmed.starts_with("---") {
            break;
        }
        let cells: Vec<String> = if comma {
            trimmed.split(',').map(|c| c.trim().to_owned()).collect()
        } else {
            trimmed.split_whitespace().map(str::to_owned).collect()
        };
        rows.push(cells);
    }
    if rows.is_empty() {
        return Err(SchedulerError::Dataset("empty matrix".into()));
    }
    let numeric_from =
        |row: &[String], start: usize| row.iter().skip(start).all(|cell| parse_cell(cell).is_ok());
    // Index column: the first cell of data rows does not parse (check the last row).
    let last = rows.last().cloned().unwrap_or_default();
    let has_index = !last.is_empty() && parse_cell(&last[0]).is_err();
    let start = usize::from(has_index);
    let has_header = !numeric_from(&rows[0], start)
        || (has_index && rows.len() > 1 && {
            // A header row with one name fewer than data cells (no name over the index column).
            !numeric_from(&rows[0], 0) && rows[0].len() + 1 == rows[1].len()
        });
    let (header, data) = if has_header {
        (Some(rows[0].clone()), &rows[1..])
    } else {
        (None, &rows[..])
    };
    let n_values = data
        .iter()
        .map(|row| row.len().saturating_sub(start))
        .max()
        .unwrap_or(0);
    let column_names = match header {
        Some(header) => {
            let names: Vec<String> = if header.len() == n_values + start {
                header[start..].to_vec()
            } else {
                header.clone()
            };
            (0..n_values)
                .map(|c| names.get(c).cloned().unwrap_or_else(|| format!("m{c}")))
                .collect()
        }
        None => (0..n_values).map(|c| format!("m{c}")).collect(),
    };
    let mut row_names = Vec::new();
    let mut values = Vec::new();
    for (row_index, row) in data.iter().enumerate() {
        row_names.push(if has_index {
            row[0].clone()
        } else {
            format!("u{row_index}")
        });
        let mut parsed = Vec::with_capacity(n_values);
        for column in 0..n_values {
            let cell = row.get(column + start).map(String::as_str).unwrap_or("");
            parsed.push(parse_cell(cell).map_err(|_| {
                SchedulerError::Dataset(format!(
                    "row {} column {}: `{cell}` is not a number",
                    row_index + 1 + usize::from(has_header),
                    column + 1 + start
                ))
            })?);
        }
        values.push(parsed);
    }
    Ok(TextMatrix {
        column_names,
        row_names,
        values,
        named_columns: has_header,
        named_rows: has_index,
    })
}

fn read(path: &Path) -> Result<String> {
    std::fs::read_to_string(path).map_err(|source| SchedulerError::Io {
        path: path.display().to_string(),
        source,
    })
}

/// `delgado179`: `DATA_DIR/delgado179/results.txt` (121 UCI data sets x 179 classifiers, percent,
/// summary columns `min max mean std` and the rows after the `-----` line dropped).
pub fn load_delgado179(data_dir: &Path) -> Result<Dataset> {
    let path = data_dir.join("delgado179").join("results.txt");
    let matrix = parse_text_matrix(&read(&path)?, true)?;
    let keep: Vec<usize> = (0..matrix.column_names.len())
        .filter(|&c| !["min", "max", "mean", "std"].contains(&matrix.column_names[c].as_str()))
        .collect();
    let model_ids = keep
        .iter()
        .map(|&c| matrix.column_names[c].clone())
        .collect();
    let quality: Vec<Vec<Option<f64>>> = matrix
        .values
        .iter()
        .map(|row| keep.iter().map(|&c| row[c]).collect())
        .collect();
    let n_users = quality.len();
    Dataset {
        name: "delgado179".into(),
        user_ids: matrix.row_names,
        model_ids,
        quality,
        cost: vec![None; n_users],
        imputed_costs: 0,
    }
    .check()
}

/// `easeml-dl`: `DATA_DIR/easeml-deeplearning/` — `prior.txt` (10 users, kernel only: no costs)
/// and `test.txt` with `test_time.txt` (8 users with real runtimes), 9 CNN models (column 1 is
/// GoogLeNet; the other names are not published).
pub fn load_easeml_deeplearning(data_dir: &Path) -> Result<Dataset> {
    let folder = data_dir.join("easeml-deeplearning");
    let prior = parse_text_matrix(&read(&folder.join("prior.txt"))?, false)?;
    let test = parse_text_matrix(&read(&folder.join("test.txt"))?, false)?;
    let time = parse_text_matrix(&read(&folder.join("test_time.txt"))?, false)?;
    if prior.column_names.len() != test.column_names.len()
        || time.column_names.len() != test.column_names.len()
        || time.values.len() != test.values.len()
    {
        return Err(SchedulerError::Dataset(
            "easeml-deeplearning: prior/test/test_time shapes differ".into(),
        ));
    }
    let n_models = test.column_names.len();
    let model_ids = (0..n_models)
        .map(|c| {
            if c == 1 {
                "m1_googlenet".to_owned()
            } else {
                format!("m{c}")
            }
        })
        .collect();
    let mut user_ids = Vec::new();
    let mut quality = Vec::new();
    let mut cost = Vec::new();
    for (row, values) in prior.values.iter().enumerate() {
        user_ids.push(format!("prior{row}"));
        quality.push(values.clone());
        cost.push(None);
    }
    for (row, values) in test.values.iter().enumerate() {
        user_ids.push(format!("test{row}"));
        quality.push(values.clone());
        cost.push(Some(time.values[row].clone()));
    }
    Dataset {
        name: "easeml-dl".into(),
        user_ids,
        model_ids,
        quality,
        cost,
        imputed_costs: 0,
    }
    .check()
}

/// The files of a `matrix:QUALITY_FILE[,COST_FILE]` spec (`files` is what follows `matrix:`).
pub fn load_matrix_spec(files: &str) -> Result<Dataset> {
    let (quality, cost) = match files.split_once(',') {
        Some((quality, cost)) => (quality, Some(Path::new(cost))),
        None => (files, None),
    };
    if quality.is_empty() || cost.is_some_and(|c| c.as_os_str().is_empty()) {
        return Err(SchedulerError::Dataset(format!(
            "`matrix:{files}`: expected matrix:QUALITY_FILE[,COST_FILE], e.g. \
             matrix:quality.csv,cost.csv"
        )));
    }
    load_matrix(Path::new(quality), cost)
}

/// `matrix:QUALITY_FILE[,COST_FILE]`: any table, rows = users, columns = models.
pub fn load_matrix(quality_path: &Path, cost_path: Option<&Path>) -> Result<Dataset> {
    let matrix = parse_text_matrix(&read(quality_path)?, false)?;
    let n_users = matrix.values.len();
    let cost = match cost_path {
        None => vec![None; n_users],
        Some(path) => parse_text_matrix(&read(path)?, false)?
            .aligned_to(&matrix, path)?
            .into_iter()
            .map(Some)
            .collect(),
    };
    Dataset {
        name: quality_path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| "matrix".into()),
        user_ids: matrix.row_names,
        model_ids: matrix.column_names,
        quality: matrix.values,
        cost,
        imputed_costs: 0,
    }
    .check()
}

/// The median of `values` (`None` when empty).
fn median(values: &[f64]) -> Option<f64> {
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    let n = sorted.len();
    match n {
        0 => None,
        _ if n % 2 == 1 => Some(sorted[n / 2]),
        _ => Some(0.5 * (sorted[n / 2 - 1] + sorted[n / 2])),
    }
}

/// A standard normal draw (Box-Muller).
pub fn standard_normal(rng: &mut ChaCha8Rng) -> f64 {
    let u1: f64 = rng.r#gen::<f64>().max(f64::MIN_POSITIVE);
    let u2: f64 = rng.r#gen::<f64>();
    (-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos()
}

/// Parameters of the synthetic generator `SYN(sigma_M, alpha)`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SyntheticSpec {
    /// Correlation length of models' hidden features (0.01: nearly independent, 0.5: strong).
    pub sigma_m: f64,
    /// Weight of the model term.
    pub alpha: f64,
    /// Users (the paper: 200, half in an easy and half in a hard baseline group).
    pub n_users: usize,
    /// Models (the paper: 100).
    pub n_models: usize,
    /// Spread of the users' baseline quality within a group (not given by the paper; 0.1 here).
    pub sigma_b: f64,
}

impl SyntheticSpec {
    /// The paper's shape: 200 users x 100 models, sigma_B = 0.1.
    pub fn paper(sigma_m: f64, alpha: f64) -> Self {
        SyntheticSpec {
            sigma_m,
            alpha,
            n_users: 200,
            n_models: 100,
            sigma_b: 0.1,
        }
    }
}

/// The generator of section 5.1: `x_ij = clip(b_i + alpha m_ij, 0, 1)` with `b_i ~ N(0.75, sigma_B^2)`
/// for the first half of the users and `N(0.25, sigma_B^2)` for the second, hidden model features
/// `f(j) ~ U(0, 1)`, and per user `m_i ~ N(0, Sigma_M)`, `Sigma_M[j,j'] = exp(-(f(j)-f(j'))^2 / sigma_M^2)`.
pub fn generate_synthetic(spec: SyntheticSpec, seed: u64) -> Result<Dataset> {
    if spec.n_users < 3
        || spec.n_models < 1
        || spec.sigma_m.is_nan()
        || spec.sigma_m <= 0.0
        || !spec.alpha.is_finite()
    {
        return Err(SchedulerError::Config(format!(
            "synthetic: need sigma_M > 0, a finite alpha, >= 3 users and >= 1 model; got {spec:?}"
        )));
    }
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let features: Vec<f64> = (0..spec.n_models).map(|_| rng.r#gen::<f64>()).collect();
    let mut covariance = DMatrix::from_fn(spec.n_models, spec.n_models, |a, b| {
        (-(features[a] - features[b]).powi(2) / (spec.sigma_m * spec.sigma_m)).exp()
    });
    let mut jitter = 1e-10;
    let factor = loop {
        let attempt = covariance.clone().cholesky();
        if let Some(cholesky) = attempt {
            break cholesky.l();
        }
        for i in 0..spec.n_models {
            covariance[(i, i)] += jitter;
        }
        jitter *= 10.0;
        if jitter > 1.0 {
            return Err(SchedulerError::Dataset(
                "synthetic covariance is not usable".into(),
            ));
        }
    };
    let mut quality = Vec::with_capacity(spec.n_users);
    for user in 0..spec.n_users {
        let group_mean = if user < spec.n_users / 2 { 0.75 } else { 0.25 };
        let baseline = group_mean + spec.sigma_b * standard_normal(&mut rng);
        let white: nalgebra::DVector<f64> =
            nalgebra::DVector::from_fn(spec.n_models, |_, _| standard_normal(&mut rng));
        let model_terms = &factor * white;
        quality.push(
            model_terms
                .iter()
                .map(|m| Some((baseline + spec.alpha * m).clamp(0.0, 1.0)))
                .collect(),
        );
    }
    Dataset {
        name: format!("synthetic:{},{}", spec.sigma_m, spec.alpha),
        user_ids: (0..spec.n_users).map(|u| format!("u{u}")).collect(),
        model_ids: (0..spec.n_models).map(|m| format!("m{m}")).collect(),
        quality,
        cost: vec![None; spec.n_users],
        imputed_costs: 0,
    }
    .check()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with_costs(cost: Vec<Option<Vec<Option<f64>>>>) -> Result<Dataset> {
        Dataset {
            name: "t".into(),
            user_ids: vec!["x".into(), "y".into(), "z".into()],
            model_ids: vec!["a".into(), "b".into(), "c".into()],
            quality: vec![
                vec![Some(0.5), Some(0.6), None],
                vec![Some(0.4), Some(0.8), Some(0.2)],
                vec![Some(0.3), Some(0.9), Some(0.1)],
            ],
            cost,
            imputed_costs: 0,
        }
        .check()
    }

    #[test]
    fn a_cost_matrix_is_read_by_its_names_in_any_order_and_by_position_without() {
        let dir = std::env::temp_dir().join(format!("easeml-align-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let write = |name: &str, text: &str| {
            let path = dir.join(name);
            std::fs::write(&path, text).unwrap();
            path
        };
        let quality = write("q.csv", "user,a,b,c\nx,0.5,0.6,0.7\ny,0.4,0.8,0.2\n");
        let load = |cost: &str| load_matrix(&quality, Some(&write("c.csv", cost)));
        // Rows and columns in another order: each cost lands on its (user, model).
        let data = load("user,c,a,b\ny,3,1,2\nx,30,10,20\n").unwrap();
        assert_eq!(
            data.cost,
            vec![
                Some(vec![Some(10.0), Some(20.0), Some(30.0)]),
                Some(vec![Some(1.0), Some(2.0), Some(3.0)])
            ]
        );
        // No names: by position.
        let data = load("10 20 30\n1 2 3\n").unwrap();
        assert_eq!(data.cost[1], Some(vec![Some(1.0), Some(2.0), Some(3.0)]));
        for (cost, expected) in [
            ("user,a,b,d\nx,1,2,3\ny,1,2,3\n", "has no column `c`"),
            ("user,a,b,c,d\nx,1,2,3,4\ny,1,2,3,4\n", "has the column `d`"),
            ("user,a,b,c\nx,1,2,3\nz,1,2,3\n", "has no row `y`"),
            (
                "user,a,a,c\nx,1,2,3\ny,1,2,3\n",
                "names the column `a` twice",
            ),
            ("1 2 3\n", "has 1 rows, the quality matrix 2"),
        ] {
            let error = load(cost).unwrap_err().to_string();
            assert!(error.contains(expected), "{cost:?}: {error}");
        }
        let _ = std::fs::remove_dir_all(&dir);
    }

    fn with_qualities(quality: Vec<Vec<Option<f64>>>) -> Result<Dataset> {
        Dataset {
            name: "t".into(),
            user_ids: (0..quality.len()).map(|u| format!("u{u}")).collect(),
            model_ids: vec!["a".into(), "b".into()],
            cost: vec![None; quality.len()],
            quality,
            imputed_costs: 0,
        }
        .check()
    }

    #[test]
    fn a_table_in_percent_is_read_as_fractions_and_a_stray_value_above_one_is_an_error() {
        let data =
            with_qualities(vec![vec![Some(85.0), Some(0.5)], vec![Some(40.0), None]]).unwrap();
        assert_eq!(data.quality[0], vec![Some(0.85), Some(0.005)]);
        for (rows, expected) in [
            // One bad cell in a table of fractions: not divided by 100 whole.
            (
                vec![vec![Some(0.5), Some(1.02)], vec![Some(0.4), Some(0.3)]],
                "the quality of user `u0` for model `b` is 1.02, but 1 of the table's 4",
            ),
            (
                vec![vec![Some(85.0), Some(120.0)], vec![Some(40.0), Some(30.0)]],
                "model `b` is 120",
            ),
            (
                vec![vec![Some(0.5), Some(f64::INFINITY)], vec![Some(0.4), None]],
                "the quality of user `u0` for model `b` is inf; qualities are finite",
            ),
        ] {
            let error = with_qualities(rows).unwrap_err().to_string();
            assert!(error.contains(expected), "{error}");
        }
        // Fractions, R^2 below 0 included, stay as they are.
        let data =
            with_qualities(vec![vec![Some(-0.2), Some(1.0)], vec![Some(0.4), None]]).unwrap();
        assert_eq!(data.quality[0], vec![Some(-0.2), Some(1.0)]);
    }

    #[test]
    fn a_matrix_spec_names_its_files() {
        for files in ["", ",cost.csv", "quality.csv,"] {
            let error = load_matrix_spec(files).unwrap_err().to_string();
            assert!(
                error.contains("expected matrix:QUALITY_FILE[,COST_FILE]"),
                "{error}"
            );
        }
        let error = load_matrix_spec("/nonexistent/q.csv")
            .unwrap_err()
            .to_string();
        assert!(error.contains("/nonexistent/q.csv"), "{error}");
    }

    #[test]
    fn costs_must_be_finite_and_non_negative_and_unknown_ones_are_filled() {
        for (bad, shown) in [(f64::INFINITY, "inf"), (-2.0, "-2")] {
            let error = with_costs(vec![
                Some(vec![Some(1.0), Some(2.0), Some(3.0)]),
                Some(vec![Some(1.0), Some(bad), Some(3.0)]),
                None,
            ])
            .unwrap_err()
            .to_string();
            assert!(
                error.contains("user `y` for model `b` is ")
                    && error.contains(shown)
                    && error.contains("finite numbers >= 0")
                    && error.contains("leave it empty"),
                "{error}"
            );
        }
        // A cost row of the wrong length is an error, not an index out of bounds.
        let error = with_costs(vec![Some(vec![Some(1.0), Some(2.0)]), None, None])
            .unwrap_err()
            .to_string();
        assert!(
            error.contains("cost row of user 0 has 2 values, expected 3"),
            "{error}"
        );
        let error = with_costs(vec![Some(vec![Some(0.0), None, None]), None, None])
            .unwrap_err()
            .to_string();
        assert!(error.contains("no positive cost"), "{error}");
        // x: an unknown cost of a known quality takes x's median (2 and 4: 3); c's stays unknown
        // (no quality). y: a 0 takes the table's smallest positive cost (0.5). z: no row, no costs.
        let data = with_costs(vec![
            Some(vec![Some(2.0), None, None]),
            Some(vec![Some(0.0), Some(4.0), Some(0.5)]),
            None,
        ])
        .unwrap();
        assert_eq!(data.cost[0], Some(vec![Some(2.0), Some(2.0), None]));
        assert_eq!(data.cost[1], Some(vec![Some(0.5), Some(4.0), Some(0.5)]));
        assert_eq!(data.cost[2], None);
        assert_eq!(data.imputed_costs, 2);
        // A user without any positive cost takes the table's median (2, 4, 0.5: 2).
        let data = with_costs(vec![
            Some(vec![Some(2.0), Some(4.0), None]),
            Some(vec![None, None, Some(0.5)]),
            Some(vec![None, None, None]),
        ])
        .unwrap();
        assert_eq!(data.cost[1], Some(vec![Some(0.5), Some(0.5), Some(0.5)]));
        assert_eq!(data.cost[2], Some(vec![Some(2.0), Some(2.0), Some(2.0)]));
        assert_eq!(data.imputed_costs, 5);
    }

    #[test]
    fn detects_header_index_column_and_missing_cells() {
        let text = "name,a,b,c\nx,0.5,--,0.7\ny,0.1,0.2,\n";
        let matrix = parse_text_matrix(text, false).unwrap();
        assert_eq!(matrix.column_names, vec!["a", "b", "c"]);
        assert_eq!(matrix.row_names, vec!["x", "y"]);
        assert_eq!(matrix.values[0], vec![Some(0.5), None, Some(0.7)]);
        assert_eq!(matrix.values[1], vec![Some(0.1), Some(0.2), None]);
    }

    #[test]
    fn whitespace_without_header_or_index() {
        let matrix = parse_text_matrix("0.1 0.2\t0.3\n0.4   0.5 0.6\n", false).unwrap();
        assert_eq!(matrix.column_names, vec!["m0", "m1", "m2"]);
        assert_eq!(matrix.row_names, vec!["u0", "u1"]);
        assert_eq!(matrix.values[1][2], Some(0.6));
    }

    #[test]
    fn header_without_a_name_over_the_index_column() {
        let text = "   a   b\nx  50  60\ny  70  80\n-----\nmean 60 70\n";
        let matrix = parse_text_matrix(text, true).unwrap();
        assert_eq!(matrix.column_names, vec!["a", "b"]);
        assert_eq!(matrix.row_names, vec!["x", "y"]);
        assert_eq!(matrix.values.len(), 2);
    }

    #[test]
    fn synthetic_is_deterministic_and_in_range() {
        let spec = SyntheticSpec {
            n_users: 6,
            n_models: 5,
            ..SyntheticSpec::paper(0.5, 0.1)
        };
        let a = generate_synthetic(spec, 3).unwrap();
        let b = generate_synthetic(spec, 3).unwrap();
        assert_eq!(a.quality, b.quality);
        assert!(
            a.quality
                .iter()
                .flatten()
                .flatten()
                .all(|q| (0.0..=1.0).contains(q))
        );
    }
}
