//! `Schema`: a checked program, i.e. the paper's system data type plus our optional items, and its
//! canonical printer.
//!
//! Every stage after checking consumes this type, never the AST, so two programs with the same
//! canonical system type ([`Schema::system_type`]) are the same program to the rest of easeml.

use std::fmt;

use serde::{Deserialize, Serialize};

/// A checked `.eml` program.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Schema {
    /// The application's name (`[a-z][a-z0-9_]*`).
    pub app: String,
    /// The input object's type.
    pub input: DataType,
    /// The output object's type.
    pub output: DataType,
    /// The output class names, when declared (then the output is one `[D]` tensor and there are D).
    pub labels: Option<Vec<String>>,
    /// Per-run limits, in declaration order, at most one per metric.
    pub constraints: Vec<Constraint>,
}

/// One object type: its fields in declaration order.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct DataType {
    /// All fields, non-recursive and recursive, in declaration order.
    pub fields: Vec<Field>,
}

/// A named field.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Field {
    /// The field's name: as declared, or `fieldN` for an unnamed tensor.
    pub name: String,
    /// What it holds.
    pub kind: FieldKind,
}

/// What a field holds.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FieldKind {
    /// A tensor of a fixed shape.
    Tensor(Tensor),
    /// A nullable pointer to another object of the same type.
    Recursive,
}

/// A tensor shape: every dimension is at least 1 and the product is at most 2^31 - 1.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Tensor {
    /// The dimensions, outermost first.
    pub dims: Vec<u64>,
}

impl Tensor {
    /// The number of elements.
    pub fn element_count(&self) -> u64 {
        self.dims.iter().product()
    }
}

impl DataType {
    /// The non-recursive (tensor) fields, in declaration order.
    pub fn tensors(&self) -> impl Iterator<Item = &Tensor> {
        self.fields.iter().filter_map(|field| match &field.kind {
            FieldKind::Tensor(tensor) => Some(tensor),
            FieldKind::Recursive => None,
        })
    }

    /// The names of the recursive fields, in declaration order.
    pub fn recursive_names(&self) -> impl Iterator<Item = &str> {
        self.fields
            .iter()
            .filter(|field| field.kind == FieldKind::Recursive)
            .map(|field| field.name.as_str())
    }

    /// Whether the type is exactly one rank-1 tensor `[D]`; returns D.
    pub fn single_vector(&self) -> Option<u64> {
        match self.fields.as_slice() {
            [
                Field {
                    kind: FieldKind::Tensor(Tensor { dims }),
                    ..
                },
            ] if dims.len() == 1 => Some(dims[0]),
            _ => None,
        }
    }
}

/// The canonical form of a data type: `{[Tensor[10],Tensor[3]], [left,right]}`.
impl fmt::Display for DataType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("{[")?;
        for (index, tensor) in self.tensors().enumerate() {
            if index > 0 {
                f.write_str(",")?;
            }
            f.write_str("Tensor[")?;
            for (dim_index, dim) in tensor.dims.iter().enumerate() {
                if dim_index > 0 {
                    f.write_str(",")?;
                }
                write!(f, "{dim}")?;
            }
            f.write_str("]")?;
        }
        f.write_str("], [")?;
        for (index, name) in self.recursive_names().enumerate() {
            if index > 0 {
                f.write_str(",")?;
            }
            f.write_str(name)?;
        }
        f.write_str("]}")
    }
}

impl Schema {
    /// The canonical system data type of LANGUAGE.md section 3, e.g.
    /// `{input: {[Tensor[256,256,3]], []}, output: {[Tensor[3]], []}}`.
    pub fn system_type(&self) -> String {
        format!("{{input: {}, output: {}}}", self.input, self.output)
    }

    /// The limit of `metric` in seconds, when the program constrains it.
    pub fn limit(&self, metric: Metric) -> Option<f64> {
        self.constraints
            .iter()
            .find(|constraint| constraint.metric == metric)
            .map(|constraint| constraint.seconds)
    }

    /// The `train_time` limit of one training run in seconds, if any.
    pub fn train_time_limit(&self) -> Option<f64> {
        self.limit(Metric::TrainTime)
    }

    /// The `infer_latency` limit of one example in seconds, if any.
    pub fn infer_latency_limit(&self) -> Option<f64> {
        self.limit(Metric::InferLatency)
    }

    /// D when the output can be a label: the declared labels' count, or D of an output `[D]` with
    /// D >= 2 (D = 1 is regression).
    pub fn label_capacity(&self) -> Option<u64> {
        match (&self.labels, self.output.single_vector()) {
            (Some(labels), _) => Some(labels.len() as u64),
            (None, Some(dimension)) if dimension >= 2 => Some(dimension),
            _ => None,
        }
    }
}

/// A metric a constraint can limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Metric {
    /// Wall time of one training run.
    TrainTime,
    /// Inference time of one example.
    InferLatency,
}

impl Metric {
    /// Every metric, in the order they are documented.
    pub const ALL: [Metric; 2] = [Metric::TrainTime, Metric::InferLatency];

    /// The name used in `.eml` files.
    pub fn name(self) -> &'static str {
        match self {
            Metric::TrainTime => "train_time",
            Metric::InferLatency => "infer_latency",
        }
    }
}

/// `constraint METRIC <= LIMIT`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Constraint {
    /// What is limited.
    pub metric: Metric,
    /// The limit as written, e.g. `30m`.
    pub limit: String,
    /// The limit in seconds (always > 0).
    pub seconds: f64,
}
