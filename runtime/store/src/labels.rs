//! Label maps: the class names of an app whose output is one `[D]` tensor, and their indices.
//!
//! With declared labels (`labels = [...]` in the program) the map is fixed at registration. Without,
//! indices are assigned in first-seen order, up to D (LANGUAGE.md section 1d). The same pure
//! [`LabelMap`] is used by the client to check a batch before storing it and by the store inside
//! the batch's transaction, so both agree.

/// What is wrong with a label.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LabelError {
    /// A label not among the declared ones.
    #[error("unknown label `{label}`; the declared labels are: {known}")]
    Undeclared {
        /// The label given.
        label: String,
        /// The declared labels, comma-separated.
        known: String,
    },
    /// A new label when the map already holds D labels.
    #[error(
        "label `{label}` would be label number {next}, but the output [{capacity}] holds at most {capacity}; the labels so far are: {known}"
    )]
    Full {
        /// The label given.
        label: String,
        /// 1-based number the label would get.
        next: u64,
        /// D.
        capacity: u64,
        /// The labels so far, in index order.
        known: String,
    },
    /// An empty label.
    #[error("an empty label")]
    Empty,
}

/// One app's label map, in index order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LabelMap {
    /// The labels; a label's index is its position.
    pub labels: Vec<String>,
    /// D: the most labels the map can hold.
    pub capacity: u64,
    /// Whether the labels were declared by the program (then no label can be added).
    pub declared: bool,
}

impl LabelMap {
    /// The index of `label`, adding it at the end when the map allows.
    pub fn resolve(&mut self, label: &str) -> Result<u32, LabelError> {
        if label.is_empty() {
            return Err(LabelError::Empty);
        }
        if let Some(index) = self.index_of(label) {
            return Ok(index);
        }
        if self.declared {
            return Err(LabelError::Undeclared {
                label: label.to_owned(),
                known: self.labels.join(", "),
            });
        }
        if self.labels.len() as u64 >= self.capacity {
            return Err(LabelError::Full {
                label: label.to_owned(),
                next: self.labels.len() as u64 + 1,
                capacity: self.capacity,
                known: self.labels.join(", "),
            });
        }
        self.labels.push(label.to_owned());
        Ok((self.labels.len() - 1) as u32)
    }

    /// The index of a known label.
    pub fn index_of(&self, label: &str) -> Option<u32> {
        self.labels
            .iter()
            .position(|known| known == label)
            .map(|index| index as u32)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn first_seen_order_up_to_capacity() {
        let mut map = LabelMap {
            labels: Vec::new(),
            capacity: 2,
            declared: false,
        };
        assert_eq!(map.resolve("cat"), Ok(0));
        assert_eq!(map.resolve("dog"), Ok(1));
        assert_eq!(map.resolve("cat"), Ok(0));
        assert_eq!(
            map.resolve("bird").unwrap_err().to_string(),
            "label `bird` would be label number 3, but the output [2] holds at most 2; the labels so far are: cat, dog"
        );
    }

    #[test]
    fn declared_labels_are_fixed() {
        let mut map = LabelMap {
            labels: vec!["dog".to_owned(), "sea lion".to_owned()],
            capacity: 2,
            declared: true,
        };
        assert_eq!(map.resolve("sea lion"), Ok(1));
        assert_eq!(
            map.resolve("cat").unwrap_err().to_string(),
            "unknown label `cat`; the declared labels are: dog, sea lion"
        );
    }
}
