//! easemlc.
fn main() {}
