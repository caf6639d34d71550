//! The Tree-RNN: a child-sum recursive network, `h(n) = tanh(W x(n) + U sum(h(children)) + b)`, read
//! at the root. A batch of trees is flattened once into node arrays grouped by height, so the network
//! runs one batched step per tree level instead of one per node.

use tch::{Device, Kind, Tensor, nn, nn::Module};

use super::{BatchInput, Linear, ModelConfig, Network, Scripted, linear, linear_script};
use crate::data::Tree;

/// A batch of trees flattened by level.
#[derive(Debug)]
pub struct FlatTrees {
    /// Node values `[N, A]`.
    pub values: Tensor,
    /// For each height from the leaves up: the nodes of that height and the row of each one's parent
    /// (roots point at the spare row `N`).
    pub levels: Vec<(Tensor, Tensor)>,
    /// The root row of each tree, in batch order.
    pub roots: Tensor,
    /// `N`.
    pub n_nodes: i64,
}

impl FlatTrees {
    /// Flattens `trees` (each node with `node` values) onto `device`.
    pub fn new(trees: &[&Tree], node: i64, device: Device) -> Self {
        let mut values = Vec::new();
        let mut heights = Vec::new();
        let mut parents = Vec::new();
        let mut roots = Vec::new();
        for tree in trees {
            roots.push(heights.len() as i64);
            flatten(tree, None, &mut values, &mut heights, &mut parents);
        }
        let n_nodes = heights.len() as i64;
        let max_height = heights.iter().copied().max().unwrap_or(0);
        let levels = (0..=max_height)
            .map(|height| {
                let (nodes, node_parents): (Vec<i64>, Vec<i64>) = (0..heights.len())
                    .filter(|&row| heights[row] == height)
                    .map(|row| (row as i64, parents[row].unwrap_or(n_nodes)))
                    .unzip();
                (
                    Tensor::from_slice(&nodes).to_device(device),
                    Tensor::from_slice(&node_parents).to_device(device),
                )
            })
            .collect();
        Self {
            values: Tensor::from_slice(&values)
                .view([n_nodes, node])
                .to_device(device),
            levels,
            roots: Tensor::from_slice(&roots).to_device(device),
            n_nodes,
        }
    }
}

/// Appends `tree` in pre-order; returns its height.
fn flatten(
    tree: &Tree,
    parent: Option<i64>,
    values: &mut Vec<f32>,
    heights: &mut Vec<usize>,
    parents: &mut Vec<Option<i64>>,
) -> usize {
    let row = heights.len();
    values.extend_from_slice(&tree.value);
    heights.push(0);
    parents.push(parent);
    let height = tree
        .children
        .iter()
        .map(|child| flatten(child, Some(row as i64), values, heights, parents) + 1)
        .max()
        .unwrap_or(0);
    heights[row] = height;
    height
}

/// The child-sum Tree-RNN classifier.
#[derive(Debug)]
pub struct TreeRnn {
    input: Linear,
    children: Linear,
    head: Linear,
    hidden: i64,
}

impl TreeRnn {
    /// `node` values per node, `n_classes` logits out, hidden size 128 (width-scaled).
    pub fn new(path: &nn::Path<'_>, node: i64, n_classes: i64, config: &ModelConfig) -> Self {
        let path = path / "tree_rnn";
        let hidden = config.scale(128);
        Self {
            input: linear(&path / "input", node, hidden),
            children: linear(&path / "children", hidden, hidden),
            head: linear(&path / "head", hidden, n_classes),
            hidden,
        }
    }
}

impl Network for TreeRnn {
    fn forward(&self, input: &BatchInput, _train: bool) -> Tensor {
        let BatchInput::Trees(trees) = input else {
            panic!("the Tree-RNN got a batch that is not trees: {input:?}");
        };
        let device = trees.values.device();
        let projected = self.input.forward(&trees.values);
        let rows = trees.n_nodes + 1;
        let mut hidden = Tensor::zeros([rows, self.hidden], (Kind::Float, device));
        let mut child_sums = Tensor::zeros([rows, self.hidden], (Kind::Float, device));
        for (nodes, parents) in &trees.levels {
            // The sums stay float32 under mixed precision (`index_add` takes one type).
            let h = (projected.index_select(0, nodes)
                + self.children.forward(&child_sums.index_select(0, nodes)))
            .tanh()
            .to_kind(Kind::Float);
            hidden = hidden.index_add(0, nodes, &h);
            child_sums = child_sums.index_add(0, parents, &h);
        }
        self.head.forward(&hidden.index_select(0, &trees.roots))
    }

    /// `network(self, values: Tensor, parents: Tensor) -> Tensor`: the nodes of a batch of trees,
    /// `values` `[N, A]` with every node after its parent (pre-order, tree after tree), `parents`
    /// int64 `[N]` each node's parent row (-1 for a root); the logits `[roots, D]` in root order.
    /// One node at a time from the last (its children are done by then), where `forward` does a
    /// level at a time: the same sums.
    fn scripted(&self) -> Option<Scripted> {
        let mut scripted = Scripted::default();
        scripted.linear("input", &self.input);
        scripted.linear("children", &self.children);
        scripted.linear("head", &self.head);
        scripted.source.push_str(&format!(
            "    def network(self, values: Tensor, parents: Tensor) -> Tensor:\n\
             \x20       n = values.size(0)\n\
             \x20       projected = {projected}\n\
             \x20       hidden = torch.zeros([n + 1, {width}], dtype=projected.dtype, device=projected.device)\n\
             \x20       sums = torch.zeros([n + 1, {width}], dtype=projected.dtype, device=projected.device)\n\
             \x20       for i in range(n - 1, -1, -1):\n\
             \x20           h = torch.tanh(projected[i] + {children})\n\
             \x20           hidden[i] = h\n\
             \x20           parent = int(parents[i])\n\
             \x20           assert parent < i, \"node \" + str(i) + \" has the parent \" + str(parent) + \": give every node after its parent (pre-order), and -1 as a root's parent\"\n\
             \x20           if parent < 0:\n\
             \x20               parent = n\n\
             \x20           sums[parent] = sums[parent] + h\n\
             \x20       roots = torch.nonzero(parents.to(values.device) < 0).squeeze(1)\n\
             \x20       return {head}\n",
            width = self.hidden,
            projected = linear_script("input", "values"),
            children = linear_script("children", "sums[i]"),
            head = linear_script("head", "hidden.index_select(0, roots)"),
        ));
        Some(scripted)
    }
}
