use easeml_macros::easeml_schema;

#[easeml_schema(file = "no/such/file.eml")]
mod app {}

fn main() {}
