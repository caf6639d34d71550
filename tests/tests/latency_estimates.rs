//! `easeml_schema::latency` kept true: its FLOPs table is the trainer's counted forward FLOPs (at
//! the CPU widths) within 25% on a grid of shapes and on held-out shapes, and it covers exactly the
//! networks of image classification and tabular apps.
//!
//! When a model changes, the failure prints the least-squares fit of every entry: paste it into
//! `FORWARD_FLOPS`.

use easeml_schema::Workload;
use easeml_schema::latency::{FORWARD_FLOPS, ForwardFlops};
use easeml_schema::models::{MODELS, is_classic};
use easeml_trainer::data::{Inputs, Targets};
use easeml_trainer::{Budget, Candidate, Examples, estimate_cost};
use tch::Device;

/// A shape: positions P, channels C (image), outputs D.
#[derive(Debug, Clone, Copy)]
struct Shape {
    height: i64,
    width: i64,
    channels: i64,
    outputs: i64,
}

impl Shape {
    fn positions(&self) -> f64 {
        (self.height * self.width) as f64
    }
}

/// Two examples of `shape` (an image when `channels > 0`, else a vector of `width` features),
/// classes or values.
fn examples(shape: Shape, regression: bool) -> Examples {
    let (dims, numel) = if shape.channels > 0 {
        (
            vec![shape.height, shape.width, shape.channels],
            shape.height * shape.width * shape.channels,
        )
    } else {
        (vec![shape.width], shape.width)
    };
    let targets = if regression {
        Targets::Dense {
            shape: vec![shape.outputs],
            values: vec![0.5; 2 * shape.outputs as usize],
        }
    } else {
        Targets::Classes {
            n_classes: shape.outputs,
            labels: vec![0, 1],
        }
    };
    Examples {
        ids: Examples::sequential_ids(2),
        inputs: Inputs::Dense {
            shape: dims,
            values: (0..2 * numel).map(|i| (i % 7) as f32 / 7.0).collect(),
        },
        targets,
    }
}

fn counted_flops(model: &str, shape: Shape, regression: bool) -> f64 {
    let budget = Budget::new(Device::Cpu);
    estimate_cost(
        &Candidate::parse(model).unwrap(),
        &examples(shape, regression),
        &budget,
    )
    .unwrap()
    .forward_flops_per_example
}

fn features(shape: Shape, image: bool) -> [f64; 5] {
    let channels = if image { shape.channels as f64 } else { 1.0 };
    let p = shape.positions();
    let d = shape.outputs as f64;
    // A linear model's P x D term, or an image network's P x C term: not both (tabular P x C is
    // P, which would make the fit singular).
    if image {
        [p, p * channels, d, 0.0, 1.0]
    } else {
        [p, 0.0, d, p * d, 1.0]
    }
}

/// Least squares `argmin |X b - y|` by the normal equations (columns that are all zero get 0).
// Gauss-Jordan elimination reads best with the matrix indices of its textbook form.
#[allow(clippy::needless_range_loop)]
fn least_squares(rows: &[[f64; 5]], y: &[f64]) -> [f64; 5] {
    let mut a = [[0.0; 6]; 5];
    for (row, &target) in rows.iter().zip(y) {
        for i in 0..5 {
            for j in 0..5 {
                a[i][j] += row[i] * row[j];
            }
            a[i][5] += row[i] * target;
        }
    }
    for i in 0..5 {
        if a[i][i] == 0.0 {
            a[i][i] = 1.0;
        }
    }
    for column in 0..5 {
        let pivot = (column..5)
            .max_by(|&p, &q| a[p][column].abs().total_cmp(&a[q][column].abs()))
            .unwrap();
        a.swap(column, pivot);
        for row in 0..5 {
            if row != column {
                let factor = a[row][column] / a[column][column];
                for k in column..6 {
                    a[row][k] -= factor * a[column][k];
                }
            }
        }
    }
    std::array::from_fn(|i| a[i][5] / a[i][i])
}

fn image_shapes() -> (Vec<Shape>, Vec<Shape>) {
    let mut grid = Vec::new();
    for side in [32, 64] {
        for channels in [1, 3] {
            for outputs in [2, 10] {
                grid.push(Shape {
                    height: side,
                    width: side,
                    channels,
                    outputs,
                });
            }
        }
    }
    let held_out = vec![
        Shape {
            height: 80,
            width: 48,
            channels: 3,
            outputs: 5,
        },
        Shape {
            height: 128,
            width: 128,
            channels: 1,
            outputs: 3,
        },
    ];
    (grid, held_out)
}

fn tabular_shapes() -> (Vec<Shape>, Vec<Shape>) {
    let shape = |width, outputs| Shape {
        height: 1,
        width,
        channels: 0,
        outputs,
    };
    let mut grid = Vec::new();
    for width in [4, 32, 128] {
        for outputs in [2, 10] {
            grid.push(shape(width, outputs));
        }
    }
    (grid, vec![shape(50, 5), shape(300, 2)])
}

#[test]
fn the_flops_table_is_the_trainers_count() {
    tch::set_num_threads(1);
    // Every network of an image or tabular app, and nothing else.
    let covered: Vec<&str> = MODELS
        .iter()
        .filter(|(id, workloads)| {
            !is_classic(id)
                && workloads.iter().any(|workload| {
                    matches!(
                        workload,
                        Workload::ImageClassification
                            | Workload::TabularClassification
                            | Workload::TabularRegression
                    )
                })
        })
        .map(|(id, _)| *id)
        .collect();
    let table: Vec<&str> = FORWARD_FLOPS.iter().map(|(id, _)| *id).collect();
    let mut problems = Vec::new();
    let mut fits = Vec::new();
    for model in &covered {
        let workloads = MODELS.iter().find(|(id, _)| id == model).unwrap().1;
        let image = workloads.contains(&Workload::ImageClassification);
        let regression = !workloads.contains(&Workload::TabularClassification) && !image;
        let (grid, held_out) = if image {
            image_shapes()
        } else {
            tabular_shapes()
        };
        let rows: Vec<[f64; 5]> = grid.iter().map(|shape| features(*shape, image)).collect();
        let counted: Vec<f64> = grid
            .iter()
            .map(|shape| counted_flops(model, *shape, regression))
            .collect();
        let fit = least_squares(&rows, &counted);
        fits.push(format!(
            "    (\"{model}\", flops({:.1}, {:.1}, {:.1}, {:.1}, {:.1})),",
            fit[0], fit[1], fit[2], fit[3], fit[4]
        ));
        let Some((_, entry)) = FORWARD_FLOPS.iter().find(|(id, _)| id == model) else {
            problems.push(format!("{model}: not in FORWARD_FLOPS"));
            continue;
        };
        for shape in grid.iter().chain(&held_out) {
            let counted = counted_flops(model, *shape, regression);
            let channels = if image { shape.channels as f64 } else { 1.0 };
            let predicted = entry.at(shape.positions(), channels, shape.outputs as f64);
            if (predicted / counted - 1.0).abs() > 0.25 {
                problems.push(format!(
                    "{model} at {shape:?}: the table says {predicted:.3e} FLOPs, the trainer counts {counted:.3e}"
                ));
            }
        }
    }
    for model in &table {
        if !covered.contains(model) {
            problems.push(format!(
                "{model}: in FORWARD_FLOPS but not a network of an image or tabular app"
            ));
        }
    }
    assert!(
        problems.is_empty(),
        "{}\n\nthe fitted table:\n{}",
        problems.join("\n"),
        fits.join("\n")
    );
}

#[test]
fn an_entry_is_linear_in_each_shape() {
    let entry = ForwardFlops {
        per_input: 1.0,
        per_input_channel: 2.0,
        per_output: 3.0,
        per_input_output: 4.0,
        fixed: 5.0,
    };
    assert_eq!(entry.at(10.0, 3.0, 2.0), 10.0 + 60.0 + 6.0 + 80.0 + 5.0);
}
