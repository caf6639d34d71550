//! End-to-end tests of the easeml pipeline; the tests live in `tests/tests/*.rs`.
