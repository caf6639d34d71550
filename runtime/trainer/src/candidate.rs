//! Candidate model ids: `model` or `model+norm_kK` (LANGUAGE.md sections 4-5).

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::task::Task;

/// Every candidate model of the template registry.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum ModelKind {
    /// AlexNet (Krizhevsky et al. 2012).
    AlexNet,
    /// AlexNet with batch normalization after every convolution.
    BnAlexNet,
    /// ResNet-18 (basic blocks `[2,2,2,2]`).
    ResNet18,
    /// ResNet-50 (bottleneck blocks `[3,4,6,3]`).
    ResNet50,
    /// GoogLeNet (Inception v1, nine inception modules).
    GoogLeNet,
    /// SqueezeNet 1.1 (fire modules).
    SqueezeNet,
    /// VGG-16 (configuration D, 13 convolutions + 3 dense layers).
    Vgg16,
    /// Network in Network (mlpconv blocks, global average pooling).
    Nin,
    /// A small batch-normalized CNN (three conv + BN + ReLU blocks, pooled to 2x2, a dense layer;
    /// not from the paper).
    SmallCnn,
    /// Convolutional auto-encoder (image recovery).
    Autoencoder,
    /// Convolutional generator trained against a discriminator (image recovery).
    Gan,
    /// pix2pix: U-Net generator + patch discriminator (image recovery).
    Pix2Pix,
    /// Elman RNN (tanh).
    Rnn,
    /// LSTM.
    Lstm,
    /// Bidirectional LSTM.
    BiLstm,
    /// GRU.
    Gru,
    /// Fully convolutional network over time (Wang et al. 2017; Fawaz et al. 2019's form).
    Fcn,
    /// 1-D residual network over time (Wang et al. 2017; Fawaz et al. 2019's form).
    ResNet1d,
    /// InceptionTime, one network of depth 6 (Ismail Fawaz et al. 2020).
    InceptionTime,
    /// GRU encoder-decoder (time-series translation).
    Seq2Seq,
    /// Child-sum recursive network over the tree.
    TreeRnn,
    /// Support vector machine with a tree kernel.
    TreeKernelSvm,
    /// MiniRocket features and a ridge classifier (time series).
    MiniRocket,
    /// MultiRocket features (MiniRocket's kernels over the series and its differences, four
    /// pooling operators) and a ridge classifier (time series).
    MultiRocket,
    /// 1-nearest-neighbour under dynamic time warping (time series).
    DtwKnn,
    /// Multi-layer perceptron, small (one hidden layer).
    MlpSmall,
    /// Multi-layer perceptron, large (three hidden layers).
    MlpLarge,
    /// Logistic regression (tabular classification).
    Logistic,
    /// Linear regression (tabular regression).
    Linear,
    /// GRU over the bits of the serialized input (general classification).
    BitRnn,
    /// Auto-encoder over the bits of the serialized input (general auto-encoder).
    BitAutoencoder,
    /// Gradient-boosted decision trees (tabular tasks).
    Gbdt,
    /// Random forest (tabular tasks).
    RandomForest,
    /// k-nearest neighbours (tables and images).
    Knn,
    /// Kernel ridge with a Gaussian kernel (tables and images).
    KernelRidge,
}

/// Every model kind with its id, in registry order.
pub const ALL_MODELS: [(ModelKind, &str); 35] = [
    (ModelKind::AlexNet, "alexnet"),
    (ModelKind::BnAlexNet, "bn_alexnet"),
    (ModelKind::ResNet18, "resnet18"),
    (ModelKind::ResNet50, "resnet50"),
    (ModelKind::GoogLeNet, "googlenet"),
    (ModelKind::SqueezeNet, "squeezenet"),
    (ModelKind::Vgg16, "vgg16"),
    (ModelKind::Nin, "nin"),
    (ModelKind::SmallCnn, "small_cnn"),
    (ModelKind::Autoencoder, "autoencoder"),
    (ModelKind::Gan, "gan"),
    (ModelKind::Pix2Pix, "pix2pix"),
    (ModelKind::Rnn, "rnn"),
    (ModelKind::Lstm, "lstm"),
    (ModelKind::BiLstm, "bilstm"),
    (ModelKind::Gru, "gru"),
    (ModelKind::Fcn, "fcn"),
    (ModelKind::ResNet1d, "resnet1d"),
    (ModelKind::InceptionTime, "inception_time"),
    (ModelKind::Seq2Seq, "seq2seq"),
    (ModelKind::TreeRnn, "tree_rnn"),
    (ModelKind::TreeKernelSvm, "tree_kernel_svm"),
    (ModelKind::MiniRocket, "minirocket"),
    (ModelKind::MultiRocket, "multirocket"),
    (ModelKind::DtwKnn, "dtw_knn"),
    (ModelKind::MlpSmall, "mlp_small"),
    (ModelKind::MlpLarge, "mlp_large"),
    (ModelKind::Logistic, "logistic"),
    (ModelKind::Linear, "linear"),
    (ModelKind::BitRnn, "bit_rnn"),
    (ModelKind::BitAutoencoder, "bit_autoencoder"),
    (ModelKind::Gbdt, "gbdt"),
    (ModelKind::RandomForest, "random_forest"),
    (ModelKind::Knn, "knn"),
    (ModelKind::KernelRidge, "kernel_ridge"),
];

impl ModelKind {
    /// The stable id (`resnet18`).
    pub fn id(self) -> &'static str {
        ALL_MODELS
            .iter()
            .find(|(kind, _)| *kind == self)
            .map(|(_, id)| *id)
            .unwrap_or("unknown")
    }

    /// The kind of an id.
    pub fn from_id(id: &str) -> Option<Self> {
        ALL_MODELS
            .iter()
            .find(|(_, model_id)| *model_id == id)
            .map(|(kind, _)| *kind)
    }

    /// True when the model fits the task.
    pub fn fits(self, task: &Task) -> bool {
        use ModelKind::*;
        match task {
            Task::ImageClassification { .. } => matches!(
                self,
                AlexNet
                    | BnAlexNet
                    | ResNet18
                    | ResNet50
                    | GoogLeNet
                    | SqueezeNet
                    | Vgg16
                    | Nin
                    | Knn
                    | KernelRidge
                    | SmallCnn
            ),
            Task::ImageRecovery { .. } => matches!(self, Autoencoder | Gan | Pix2Pix),
            Task::TabularClassification { .. } => matches!(
                self,
                MlpSmall | MlpLarge | Logistic | Gbdt | RandomForest | Knn | KernelRidge
            ),
            Task::TabularRegression { .. } => {
                matches!(
                    self,
                    MlpSmall | MlpLarge | Linear | Gbdt | RandomForest | Knn | KernelRidge
                )
            }
            Task::SequenceClassification { .. } => {
                matches!(
                    self,
                    Rnn | Lstm
                        | BiLstm
                        | Gru
                        | Fcn
                        | ResNet1d
                        | InceptionTime
                        | MiniRocket
                        | MultiRocket
                        | DtwKnn
                )
            }
            Task::SequenceTranslation { .. } => self == Seq2Seq,
            Task::TreeClassification { .. } => matches!(self, TreeRnn | TreeKernelSvm),
            Task::BytesClassification { .. } => self == BitRnn,
            Task::BytesAutoencoder => self == BitAutoencoder,
        }
    }

    /// The model's kin: models of one kin are expected to do alike on a data set (the scheduler's
    /// no-history prior correlates them, the scheduler's `kernel::KIN_CORRELATION`), so a poor
    /// result of one sends the search to another kind of model before its siblings.
    pub fn kin(self) -> &'static str {
        use ModelKind::*;
        match self {
            AlexNet | BnAlexNet | ResNet18 | ResNet50 | GoogLeNet | SqueezeNet | Vgg16 | Nin
            | SmallCnn => "image_cnn",
            Fcn | ResNet1d | InceptionTime => "temporal_cnn",
            MiniRocket | MultiRocket => "random_kernels",
            DtwKnn => "nearest_neighbours",
            Autoencoder | Gan | Pix2Pix | BitAutoencoder => "generator",
            Rnn | Lstm | BiLstm | Gru | Seq2Seq | TreeRnn | BitRnn => "recurrent",
            TreeKernelSvm | KernelRidge => "kernel_machine",
            MlpSmall | MlpLarge => "mlp",
            Gbdt | RandomForest => "tree_ensemble",
            Knn => "nearest_neighbours",
            Logistic | Linear => "linear",
        }
    }
}

/// Every model's kin by id (see [`ModelKind::kin`]), for the scheduler's prior.
pub fn kin_by_model() -> impl Iterator<Item = (String, String)> {
    ALL_MODELS
        .iter()
        .map(|(kind, id)| ((*id).to_owned(), kind.kin().to_owned()))
}

/// A candidate: a model and an optional f_k input normalization.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Candidate {
    /// The model.
    pub model: ModelKind,
    /// `Some(k)` for `+norm_kK`: inputs min-max scaled per channel, then `f_k(x) = -x^(2k) + x^k`.
    pub norm_k: Option<u32>,
}

impl Candidate {
    /// A candidate without normalization.
    pub fn new(model: ModelKind) -> Self {
        Self {
            model,
            norm_k: None,
        }
    }

    /// Parses `resnet18` or `resnet18+norm_k2`.
    pub fn parse(id: &str) -> Result<Self> {
        let unknown = || Error::UnknownCandidate(id.to_owned());
        let (model_id, norm) = match id.split_once('+') {
            Some((model_id, norm)) => (model_id, Some(norm)),
            None => (id, None),
        };
        let model = ModelKind::from_id(model_id).ok_or_else(unknown)?;
        let norm_k = match norm {
            None => None,
            Some(norm) => {
                let k: u32 = norm
                    .strip_prefix("norm_k")
                    .and_then(|k| k.parse().ok())
                    .ok_or_else(unknown)?;
                if k == 0 {
                    return Err(unknown());
                }
                Some(k)
            }
        };
        Ok(Self { model, norm_k })
    }

    /// The stable id.
    pub fn id(&self) -> String {
        self.to_string()
    }

    /// Checks that the candidate fits the task (normalization needs dense inputs).
    pub fn check_fits(&self, task: &Task) -> Result<()> {
        let dense_input = matches!(
            task,
            Task::ImageClassification { .. }
                | Task::ImageRecovery { .. }
                | Task::TabularClassification { .. }
                | Task::TabularRegression { .. }
        );
        if !self.model.fits(task) || (self.norm_k.is_some() && !dense_input) {
            return Err(Error::CandidateDoesNotFit {
                candidate: self.id(),
                task: task.name().to_owned(),
            });
        }
        Ok(())
    }
}

impl fmt::Display for Candidate {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str(self.model.id())?;
        if let Some(k) = self.norm_k {
            write!(formatter, "+norm_k{k}")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_round_trip() {
        for (kind, id) in ALL_MODELS {
            assert_eq!(Candidate::parse(id).unwrap(), Candidate::new(kind));
            assert_eq!(Candidate::new(kind).id(), id);
        }
        let candidate = Candidate::parse("resnet18+norm_k2").unwrap();
        assert_eq!(candidate.norm_k, Some(2));
        assert_eq!(candidate.id(), "resnet18+norm_k2");
        for bad in [
            "resnet19",
            "resnet18+norm_k0",
            "resnet18+norm",
            "resnet18+k2",
            "",
        ] {
            assert!(Candidate::parse(bad).is_err(), "{bad}");
        }
    }
}
