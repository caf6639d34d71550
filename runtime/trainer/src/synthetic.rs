//! Small synthetic tasks, easy but not trivial, for tests, examples and benchmarks: made on the fly
//! from a seed, never read from disk.

use crate::data::{Examples, Inputs, Sequences, Targets, Tree};

/// A small deterministic generator (xorshift64*).
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    /// A generator from a seed.
    pub fn new(seed: u64) -> Self {
        Self(crate::data::mix64(seed) | 1)
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// Uniform in [0, 1).
    pub fn uniform(&mut self) -> f32 {
        (self.next_u64() >> 40) as f32 / (1u64 << 24) as f32
    }

    /// Uniform in `0..n`.
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n.max(1)
    }
}

/// Images of `shape` `[H,W,C]` with noise in [0, 0.5) and one quadrant brightened by 0.5; the label
/// is that quadrant (4 classes; for images of height or width 1 the halves stand in for quadrants).
pub fn quadrant_images(n: usize, shape: [i64; 3], seed: u64) -> Examples {
    let [height, width, channels] = shape.map(|dim| dim as usize);
    let mut rng = Rng::new(seed);
    let mut values = Vec::with_capacity(n * height * width * channels);
    let mut labels = Vec::with_capacity(n);
    for _ in 0..n {
        let label = rng.below(4) as i64;
        for row in 0..height {
            for column in 0..width {
                let quadrant = usize::from(row * 2 >= height.max(2)) * 2
                    + usize::from(column * 2 >= width.max(2));
                for _ in 0..channels {
                    let bright = if quadrant as i64 == label { 0.5 } else { 0.0 };
                    values.push(rng.uniform() * 0.5 + bright);
                }
            }
        }
        labels.push(label);
    }
    Examples {
        ids: Examples::sequential_ids(n),
        inputs: Inputs::Dense {
            shape: shape.to_vec(),
            values,
        },
        targets: Targets::Classes {
            n_classes: 4,
            labels,
        },
    }
}

/// Rows of `features` values in [-1, 1); the class is the sign of `x0 + x1` (2 classes).
pub fn tabular_sign(n: usize, features: i64, seed: u64) -> Examples {
    let mut rng = Rng::new(seed);
    let mut values = Vec::new();
    let mut labels = Vec::new();
    for _ in 0..n {
        let row: Vec<f32> = (0..features).map(|_| rng.uniform() * 2.0 - 1.0).collect();
        labels.push(i64::from(row[0] + row.get(1).copied().unwrap_or(0.0) > 0.0));
        values.extend(row);
    }
    Examples {
        ids: Examples::sequential_ids(n),
        inputs: Inputs::Dense {
            shape: vec![features],
            values,
        },
        targets: Targets::Classes {
            n_classes: 2,
            labels,
        },
    }
}

/// Rows of `features` values in [-1, 1); the target is `2 x0 - x1 + 0.5`.
pub fn tabular_linear(n: usize, features: i64, seed: u64) -> Examples {
    let mut rng = Rng::new(seed);
    let mut values = Vec::new();
    let mut targets = Vec::new();
    for _ in 0..n {
        let row: Vec<f32> = (0..features).map(|_| rng.uniform() * 2.0 - 1.0).collect();
        targets.push(2.0 * row[0] - row.get(1).copied().unwrap_or(0.0) + 0.5);
        values.extend(row);
    }
    Examples {
        ids: Examples::sequential_ids(n),
        inputs: Inputs::Dense {
            shape: vec![features],
            values,
        },
        targets: Targets::Dense {
            shape: vec![1],
            values: targets,
        },
    }
}

fn random_sequences(rng: &mut Rng, n: usize, step: i64) -> Vec<Vec<Vec<f32>>> {
    (0..n)
        .map(|_| {
            let length = 3 + rng.below(6) as usize;
            (0..length)
                .map(|_| (0..step).map(|_| rng.uniform() * 2.0 - 1.0).collect())
                .collect()
        })
        .collect()
}

/// Sequences of 3 to 8 steps of `step` values in [-1, 1); the class is the sign of the sum of the
/// first value of every step (2 classes).
pub fn sequence_sign(n: usize, step: i64, seed: u64) -> Examples {
    let mut rng = Rng::new(seed);
    let sequences = random_sequences(&mut rng, n, step);
    let labels = sequences
        .iter()
        .map(|sequence| i64::from(sequence.iter().map(|item| item[0]).sum::<f32>() > 0.0))
        .collect();
    Examples {
        ids: Examples::sequential_ids(n),
        inputs: Inputs::Sequences(
            Sequences::from_nested(step, &sequences).unwrap_or_else(|_| unreachable_sequences()),
        ),
        targets: Targets::Classes {
            n_classes: 2,
            labels,
        },
    }
}

fn unreachable_sequences() -> Sequences {
    Sequences {
        step: 1,
        values: Vec::new(),
        offsets: vec![0],
    }
}

/// Time series of 20 to 40 steps of `step` values with noise in [-0.25, 0.25); the first channel
/// carries one shape of width 6 at a random position, its class: a bump up (class 0), a dip
/// (class 1) or a rise that stays up (class 2). The classic time-series classifiers' easy task.
pub fn sequence_shapes(n: usize, step: i64, seed: u64) -> Examples {
    let mut rng = Rng::new(seed);
    let mut labels = Vec::with_capacity(n);
    let sequences: Vec<Vec<Vec<f32>>> = (0..n)
        .map(|_| {
            let length = 20 + rng.below(21) as usize;
            let class = rng.below(3) as i64;
            labels.push(class);
            let start = rng.below((length - 6) as u64) as usize;
            (0..length)
                .map(|t| {
                    let inside = (start..start + 6).contains(&t);
                    let shape = match class {
                        0 if inside => 1.0,
                        1 if inside => -1.0,
                        2 if t >= start => 1.0,
                        _ => 0.0,
                    };
                    (0..step)
                        .map(|c| {
                            let noise = (rng.uniform() - 0.5) * 0.5;
                            if c == 0 { shape + noise } else { noise }
                        })
                        .collect()
                })
                .collect()
        })
        .collect();
    Examples {
        ids: Examples::sequential_ids(n),
        inputs: Inputs::Sequences(
            Sequences::from_nested(step, &sequences).unwrap_or_else(|_| unreachable_sequences()),
        ),
        targets: Targets::Classes {
            n_classes: 3,
            labels,
        },
    }
}

/// Sequences of 3 to 8 steps of `step` values; the output sequence has the same length and each step
/// is the running mean of the first input value (one value per step).
pub fn sequence_running_mean(n: usize, step: i64, seed: u64) -> Examples {
    let mut rng = Rng::new(seed);
    let sequences = random_sequences(&mut rng, n, step);
    let outputs: Vec<Vec<Vec<f32>>> = sequences
        .iter()
        .map(|sequence| {
            let mut sum = 0.0;
            sequence
                .iter()
                .enumerate()
                .map(|(index, item)| {
                    sum += item[0];
                    vec![sum / (index + 1) as f32]
                })
                .collect()
        })
        .collect();
    Examples {
        ids: Examples::sequential_ids(n),
        inputs: Inputs::Sequences(
            Sequences::from_nested(step, &sequences).unwrap_or_else(|_| unreachable_sequences()),
        ),
        targets: Targets::Sequences(
            Sequences::from_nested(1, &outputs).unwrap_or_else(|_| unreachable_sequences()),
        ),
    }
}

/// Images `[H,W,C]` of smooth random blobs; the target is the image itself with its brightness
/// doubled and clipped (a recovery task whose output shape equals the input's).
pub fn recovery_images(n: usize, shape: [i64; 3], seed: u64) -> Examples {
    let [height, width, channels] = shape.map(|dim| dim as usize);
    let mut rng = Rng::new(seed);
    let mut inputs = Vec::new();
    let mut outputs = Vec::new();
    for _ in 0..n {
        let (center_row, center_column) =
            (rng.uniform() * height as f32, rng.uniform() * width as f32);
        for row in 0..height {
            for column in 0..width {
                let distance =
                    (row as f32 - center_row).powi(2) + (column as f32 - center_column).powi(2);
                let value = (-distance / 4.0).exp() * 0.5;
                for _ in 0..channels {
                    inputs.push(value);
                    outputs.push((value * 2.0).min(1.0));
                }
            }
        }
    }
    Examples {
        ids: Examples::sequential_ids(n),
        inputs: Inputs::Dense {
            shape: shape.to_vec(),
            values: inputs,
        },
        targets: Targets::Dense {
            shape: shape.to_vec(),
            values: outputs,
        },
    }
}

fn random_tree(rng: &mut Rng, node: i64, height: usize) -> Tree {
    let value = (0..node).map(|_| rng.uniform()).collect();
    if height == 0 {
        return Tree::leaf(value);
    }
    let n_children = 1 + rng.below(2) as usize;
    let mut children: Vec<Tree> = (0..n_children)
        .map(|index| {
            let child_height = if index == 0 {
                height - 1
            } else {
                rng.below(height as u64) as usize
            };
            random_tree(rng, node, child_height)
        })
        .collect();
    children.rotate_left(rng.below(n_children as u64) as usize);
    Tree::node(value, children)
}

/// Random trees of height 0 to 3 with `node` random values per node; the class is whether the height
/// is at least 2 (2 classes).
pub fn tree_depth(n: usize, node: i64, seed: u64) -> Examples {
    let mut rng = Rng::new(seed);
    let mut trees = Vec::new();
    let mut labels = Vec::new();
    for _ in 0..n {
        let height = rng.below(4) as usize;
        trees.push(random_tree(&mut rng, node, height));
        labels.push(i64::from(height >= 2));
    }
    Examples {
        ids: Examples::sequential_ids(n),
        inputs: Inputs::Trees { node, trees },
        targets: Targets::Classes {
            n_classes: 2,
            labels,
        },
    }
}

/// Byte strings of 2 to 8 characters, lowercase letters (class 0) or digits (class 1).
pub fn bytes_letters_or_digits(n: usize, seed: u64) -> Examples {
    bytes_letters_or_digits_of(n, 2..9, seed)
}

/// Byte strings with lengths drawn from `lengths`, lowercase letters (class 0) or digits (class 1).
pub fn bytes_letters_or_digits_of(
    n: usize,
    lengths: std::ops::Range<usize>,
    seed: u64,
) -> Examples {
    let mut rng = Rng::new(seed);
    let mut strings = Vec::new();
    let mut labels = Vec::new();
    let spread = lengths.end.saturating_sub(lengths.start).max(1) as u64;
    for _ in 0..n {
        let digits = rng.below(2) == 1;
        let length = lengths.start + rng.below(spread) as usize;
        let string = (0..length)
            .map(|_| {
                if digits {
                    b'0' + rng.below(10) as u8
                } else {
                    b'a' + rng.below(26) as u8
                }
            })
            .collect();
        strings.push(string);
        labels.push(i64::from(digits));
    }
    Examples {
        ids: Examples::sequential_ids(n),
        inputs: Inputs::Bytes(strings),
        targets: Targets::Classes {
            n_classes: 2,
            labels,
        },
    }
}

/// Byte strings of 4 lowercase letters, to be reconstructed (the targets are the inputs).
pub fn bytes_to_reconstruct(n: usize, seed: u64) -> Examples {
    let mut rng = Rng::new(seed);
    let strings: Vec<Vec<u8>> = (0..n)
        .map(|_| (0..4).map(|_| b'a' + rng.below(26) as u8).collect())
        .collect();
    Examples {
        ids: Examples::sequential_ids(n),
        inputs: Inputs::Bytes(strings.clone()),
        targets: Targets::Bytes(strings),
    }
}

/// Byte strings of 4 lowercase letters mapped to 2 bytes of another form: the first letter in
/// upper case and the last letter (the input and output types of a general auto-encoder differ).
pub fn bytes_to_translate(n: usize, seed: u64) -> Examples {
    let mut rng = Rng::new(seed);
    let strings: Vec<Vec<u8>> = (0..n)
        .map(|_| (0..4).map(|_| b'a' + rng.below(26) as u8).collect())
        .collect();
    let targets = strings
        .iter()
        .map(|string| vec![string[0].to_ascii_uppercase(), string[3]])
        .collect();
    Examples {
        ids: Examples::sequential_ids(n),
        inputs: Inputs::Bytes(strings),
        targets: Targets::Bytes(targets),
    }
}
