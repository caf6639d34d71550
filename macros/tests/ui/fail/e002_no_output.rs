use easeml_macros::easeml_schema;

#[easeml_schema]
mod app {
    pub struct Input(Tensor<3>);
}

fn main() {}
