//! easemlc's library: checks, canonical system data types, template matching, candidates.
pub mod schema;
