//! The typed `Schema`: the system data type every later stage consumes.

/// A compiled program.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Schema;
